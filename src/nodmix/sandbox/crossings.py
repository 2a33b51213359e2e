"""The synchronous calls a setup script makes while it boots, and a handler that replays them.

A boot template is keyed by these crossings (`templates.py`): a cell may use a template only if
its handler answers the setup's questions exactly as the template's did. `Replay` answers what
was already asked without asking the embedding's handler again.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodmix.sandbox.base import HostCallError, HostHandler, TrustedScript


@dataclass(frozen=True, slots=True)
class Failure:
    """A setup call that raised `HostCallError` (its message is part of the answer)."""

    message: str


Reply = str | TrustedScript | Failure | None


@dataclass(frozen=True, slots=True)
class Crossing:
    """One synchronous call the setup made, with the handler's answer."""

    op: str
    payload: str
    reply: Reply


def ask(handler: HostHandler, op: str, payload: str) -> Reply:
    """The handler's answer to a setup call."""
    try:
        return handler.on_call(op, payload)
    except HostCallError as exc:
        return Failure(exc.message)


class Replay:
    """A handler that answers the setup's calls from `known` first, then from `handler`.

    While a template boots (`templating`), later answers are recorded, and a request or a call
    that differs from `known` marks the boot `unfit` (the guest's call fails; the template is
    then discarded). Otherwise (a cell booting without a template) it only saves asking
    `handler` the questions already asked, and forwards everything else.
    """

    def __init__(
        self, known: list[Crossing], handler: HostHandler | None, *, templating: bool = True
    ) -> None:
        self.crossings = list(known)
        self.handler = handler
        self.templating = templating
        self.unfit = False
        self.next = 0

    def on_call(self, op: str, payload: str) -> str | TrustedScript | None:
        reply: Reply
        if self.next < len(self.crossings) and self._matches(op, payload):
            reply = self.crossings[self.next].reply
            self.next += 1
        elif self.templating and (self.handler is None or self.next < len(self.crossings)):
            self.unfit = True
            raise HostCallError("the setup changed between boots")
        else:
            assert self.handler is not None
            self.next = len(self.crossings) + 1  # no more replaying
            reply = ask(self.handler, op, payload)
            if self.templating:
                self.crossings.append(Crossing(op, payload, reply))
                self.next = len(self.crossings)
        if isinstance(reply, Failure):
            raise HostCallError(reply.message)
        return reply

    def _matches(self, op: str, payload: str) -> bool:
        known = self.crossings[self.next]
        return (known.op, known.payload) == (op, payload)

    def on_request(self, request_id: int, op: str, payload_json: str) -> tuple[bool, str] | None:
        if self.templating or self.handler is None:
            self.unfit = True
            raise HostCallError("requests are not allowed while a template boots")
        return self.handler.on_request(request_id, op, payload_json)
