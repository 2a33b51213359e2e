"""The host half of the guest bridge: the two host functions the prelude closes over.

See `prelude.py` for the wire protocol. The bridge turns guest `call`/`request` crossings into
`HostHandler` calls and keeps the set of requests that are still outstanding. It holds no
reference to its VM or cell (the VM reaches it, not the other way round), so dropping a cell
frees its VM immediately instead of waiting for the cycle collector.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Final

from nodmix.errors import SandboxError
from nodmix.sandbox.base import HostCallError, HostHandler, TrustedScript
from nodmix.sandbox.vm import VM
from nodmix.sandbox.vmcode import eval_cached
from nodmix.sandbox.vmstate import HostFunction

CALL_FUNCTION: Final = "nodmix.call"
REQUEST_FUNCTION: Final = "nodmix.request"
OK: Final = "\x00"
ERR: Final = "\x01"
#: At most this many `settle` result boxes are kept for reuse (see `Bridge.recycle`).
_SPARE_CAP: Final = 8


class Bridge:
    """Dispatches one VM's bridge crossings to a `HostHandler`.

    Attributes:
        handler: The embedding's handler.
        outstanding: Request ids the handler left pending and nobody has delivered yet.
    """

    def __init__(self, handler: HostHandler, outstanding: tuple[int, ...] = ()) -> None:
        self.handler = handler
        self.outstanding: set[int] = set(outstanding)
        self.spare: list[int] = []
        """Boxes of booleans the prelude's `settle` returned, kept to answer "no result"
        (the prelude reads any non-string reply that way): a host function must return a box
        the trampoline then frees, and reusing one saves making and freeing one per call."""

    def recycle(self, vm: VM, box: int) -> None:
        """Keep `box`, a `settle` result (a boolean), to answer a later crossing."""
        if len(self.spare) < _SPARE_CAP:
            self.spare.append(box)
        else:
            vm.free(box)

    def release_spare(self, vm: VM) -> None:
        """Free the kept boxes (before a snapshot, which should not carry them)."""
        spare, self.spare = self.spare, []
        vm.free(*spare)

    def _no_result(self, vm: VM) -> int:
        return self.spare.pop() if self.spare else vm.new_undefined()

    def attach(self, vm: VM) -> None:
        """Register the host functions on `vm` under their stable names (also after restore)."""
        vm.host_functions[CALL_FUNCTION.encode()] = _bind(vm, self._call)
        vm.host_functions[REQUEST_FUNCTION.encode()] = _bind(vm, self._request)

    def settle_message(self, request_id: int, ok: bool, value: str) -> str:
        """The argument of the prelude's `settle` for a delivery; forgets the request.

        Raises:
            SandboxError: The id is not outstanding.
        """
        if request_id not in self.outstanding:
            raise SandboxError(f"request {request_id} is not outstanding")
        self.outstanding.discard(request_id)
        return f"{request_id}\0{OK if ok else ERR}{value}"

    def settle_messages(self, items: list[tuple[int, bool, str]]) -> list[str]:
        """`settle_message` for several deliveries, all checked before any is forgotten.

        Raises:
            SandboxError: An id is not outstanding or appears twice.
        """
        if len(items) == 1:  # the usual round: one awaited call
            return [self.settle_message(*items[0])]
        ids = {request_id for request_id, _, _ in items}
        if len(ids) != len(items):
            raise SandboxError("a request is delivered twice")
        for request_id in sorted(ids - self.outstanding):
            raise SandboxError(f"request {request_id} is not outstanding")
        return [self.settle_message(*item) for item in items]

    def _call(self, vm: VM, args: list[int]) -> int:
        op, _, payload = vm.to_str(args[0]).partition("\0")
        try:
            reply = self.handler.on_call(op, payload)
        except HostCallError as exc:
            return vm.new_string(ERR + exc.message)
        if isinstance(reply, TrustedScript):
            return eval_cached(vm, reply.source, reply.filename)
        return self._no_result(vm) if reply is None else vm.new_string(OK + reply)

    def _request(self, vm: VM, args: list[int]) -> int:
        raw_id, op, payload = vm.to_str(args[0]).split("\0", 2)
        request_id = int(raw_id)
        try:
            reply = self.handler.on_request(request_id, op, payload)
        except HostCallError as exc:
            return vm.new_string(ERR + exc.message)
        if reply is None:
            self.outstanding.add(request_id)
            return self._no_result(vm)
        ok, text = reply
        return vm.new_string((OK if ok else ERR) + text)


def _bind(vm: VM, method: Callable[[VM, list[int]], int]) -> HostFunction:
    ref = weakref.ref(vm)  # the VM owns this function: a strong reference would be a cycle

    def host_function(args: list[int]) -> int:
        target = ref()
        if target is None:  # pragma: no cover - a VM cannot run after being collected
            raise SandboxError("the VM is gone")
        return method(target, args)

    return host_function
