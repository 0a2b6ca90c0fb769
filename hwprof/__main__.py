import sys

try:  # a Ctrl-C before hwprof.cli.entry has installed its handlers (its own import: a few ms)
    from hwprof.cli.entry import main
except KeyboardInterrupt:
    sys.stdout.write("interrupted (SIGINT) while hwprof was starting: nothing was run\n")
    sys.exit(130)

sys.exit(main())
