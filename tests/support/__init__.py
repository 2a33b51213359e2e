"""Helpers shared by tests (and benchmarks) of every area: a config for the scripted model and
the `nodmix` command run as a user runs it."""
