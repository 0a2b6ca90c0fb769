"""PAPI counters: preset events per layer of the model's thread, read through python-papi in-process at every
marker, so each reading is on the markers' clock.
"""
