"""The `nodmix` command line."""

from nodmix.cli.main import main

__all__ = ["main"]
