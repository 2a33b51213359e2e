"""Built-in script `hang`: open the event stream, then send nothing more."""

from nodmix.testing.scripts.stalls import hang as respond

__all__ = ["respond"]
