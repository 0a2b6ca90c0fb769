import sys

from hwprof.cli.entry import main

sys.exit(main())
