"""A sweep's table extras: its advice, attempts and plot."""
