"""A user's own program run under hwprof: the model found, its stages and iterations marked."""
