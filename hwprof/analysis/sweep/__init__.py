"""A sweep's rows and the advice across its points."""
