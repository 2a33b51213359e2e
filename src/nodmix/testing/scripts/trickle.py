"""Built-in script `trickle`: open the event stream, then only keep-alive bytes, forever."""

from nodmix.testing.scripts.stalls import trickle as respond

__all__ = ["respond"]
