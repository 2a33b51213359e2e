"""Built-in scripts `hang` and `trickle`: a model that never finishes its reply.

`hang` opens the event stream and then sends nothing; `trickle` sends only keep-alive
comments (`: ping`) and blank lines, forever. Both try Nodmix's idle timeout
(`models.providers.<id>.timeouts.idleSeconds`) and the turn timeout.
"""

from __future__ import annotations

from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelStall


def hang(request: ModelRequest) -> ModelStall:
    """Open the stream, then send nothing more."""
    return ModelStall(mode="hang")


def trickle(request: ModelRequest) -> ModelStall:
    """Open the stream, then send keep-alive comments and blank lines forever."""
    return ModelStall(mode="trickle", interval=0.2)
