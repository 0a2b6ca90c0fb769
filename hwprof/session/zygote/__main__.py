"""`python -P -m hwprof.session.zygote FD IMPORTS MODULES...`: the zygote process (hwprof.session.zygote.process)."""

import sys

from hwprof.session.zygote.process import main

if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), tuple(filter(None, sys.argv[2].split(","))), tuple(sys.argv[3:])))
