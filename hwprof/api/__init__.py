"""hwprof as a library: the implementation of the public names of `hwprof` (hwprof/__init__.py re-exports them,
importing this package only when one is first used). The top layer beside the command line: it reuses the
reader (RunData), the analysis and the renderers, and the command line's own commands."""
