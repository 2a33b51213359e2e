"""Promise rejections nothing handled, as QuickJS's rejection tracker reports them.

The tracker (enabled at boot, so templates and snapshots carry it) calls the host when a
promise is rejected with no handler attached, and again if a handler is attached later. A
rejection is kept until that second call or the end of the program; what is left then is
reported with the outcome (`Completed.unhandled`). A promise is known by its JSValue bits,
which stay its own while the box the tracker handed over keeps it alive; the boxes live in the
VM's memory, so a snapshot carries them (`CellState.rejections`).
"""

from __future__ import annotations

import logging
from typing import Final, Protocol

from nodmix.sandbox import hostio

log = logging.getLogger("nodmix.sandbox")

KEPT: Final = 16
"""Unhandled rejections kept (with their reasons) per VM; more are only counted."""
JSVALUE_BYTES: Final = 8
"""Bytes of a JSValue in its box: payload and tag."""


class Boxes(Protocol):
    """What the tracker uses of its VM (`sandbox.vm.VM`): its memory and freeing boxes."""

    @property
    def mem(self) -> hostio.LinearMemory: ...

    def free(self, *handles: int) -> None: ...


class Rejections:
    """The unhandled rejections of one VM: JSValue bits -> (promise box, reason box)."""

    __slots__ = ("dropped", "kept")

    def __init__(self) -> None:
        self.kept: dict[bytes, tuple[int, int]] = {}
        self.dropped = 0
        """Unhandled rejections past `KEPT`, only counted."""

    def track(self, vm: Boxes, promise: int, reason: int, handled: int) -> None:
        """The tracker's callback (inside wasm: raises only a trap, which the VM handles)."""
        try:
            key = vm.mem.read(promise, JSVALUE_BYTES)
            kept = self.kept
            if handled:
                pair = kept.pop(key, None)
                if pair is not None:
                    vm.free(*pair)
                elif self.dropped:
                    self.dropped -= 1
                vm.free(promise, reason)
            elif key in kept or len(kept) >= KEPT:
                self.dropped += key not in kept
                vm.free(promise, reason)
            else:
                kept[key] = (promise, reason)
        except hostio.OutOfBounds:
            log.warning("sandbox: a promise rejection pointed outside the VM's memory")

    def restore(self, vm: Boxes, pairs: tuple[tuple[int, int], ...], dropped: int) -> None:
        """Take the rejections a snapshot kept (their boxes are in the restored memory)."""
        for promise, reason in pairs:
            self.kept[vm.mem.read(promise, JSVALUE_BYTES)] = (promise, reason)
        self.dropped = dropped

    def take(self) -> tuple[dict[bytes, tuple[int, int]], int]:
        """The kept rejections and the dropped count, leaving none."""
        kept, dropped = self.kept, self.dropped
        self.kept, self.dropped = {}, 0
        return kept, dropped
