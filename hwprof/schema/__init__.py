"""The run directory's typed schema: what each file and each collector's summary holds, checked on read."""
