"""hwprof as a library: the implementation of the public names of `hwprof` (hwprof/__init__.py re-exports them,
importing this package only when one is first used), and the front door the command line uses too: the typed
requests of a collect, an advise and a gate (requests.py) and the functions that run them (collecting.py,
advising.py). It reuses the reader (RunData), the analysis, the renderers and the session; it never reads the
command line's parser (hwprof.cli is a client of it)."""
