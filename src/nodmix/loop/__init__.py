"""The agent loop: `run_turn` and the types around it."""

from nodmix.loop.turn import RunTools, TurnDeps, TurnRequest, TurnResult, run_turn

__all__ = ["RunTools", "TurnDeps", "TurnRequest", "TurnResult", "run_turn"]
