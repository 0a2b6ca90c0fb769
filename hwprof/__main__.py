import sys

from hwprof.cli import main

sys.exit(main())
