"""A user's program: the facts of its run, its command, and the candidates advise may try on it."""
