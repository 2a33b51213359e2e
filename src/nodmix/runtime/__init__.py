"""The composition root: `Runtime` builds every part from config and runs turns."""

from nodmix.runtime.core import CommandOutcome, Runtime, TurnOutcome

__all__ = ["CommandOutcome", "Runtime", "TurnOutcome"]
