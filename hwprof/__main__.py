import sys

from hwprof.cli.main import main

sys.exit(main())
