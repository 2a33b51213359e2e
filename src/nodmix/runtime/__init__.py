"""The composition root: `Runtime` builds every part from config and runs turns."""

from nodmix.runtime.core import Runtime
from nodmix.runtime.outcomes import CommandOutcome, TurnOutcome

__all__ = ["CommandOutcome", "Runtime", "TurnOutcome"]
