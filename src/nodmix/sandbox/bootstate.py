"""Boot-time state derived from the clock or from entropy, found by booting twice.

A VM copied from a booted template would otherwise share what QuickJS derived from the clock and
from `random_get` while it booted. In this build that is (measured, see the tests):

- the monotonic time origin of `performance.now()` (a double in the context), and its copy as
  the `performance.timeOrigin` property (a NaN-boxed JS number in the global object's storage);
- the `Math.random()` generator state, seeded from the realtime clock in microseconds and
  advanced once, whose first output's low 32 bits became the Map/Set hash seed;
- 4 bytes from `random_get` next to the runtime.

Rather than trusting fixed offsets, a template is booted twice with different clocks and
different entropy (`Probe`), and every byte where the two memories differ must be explained by
one of the `Kind`s below from the readings each boot took (`explain`). Anything else makes the
template unusable. After copying a template, `refresh` writes fresh values: the time origin is
the current monotonic time (so `performance.now()` starts near 0) and the generator state comes
from `os.urandom` (so `Math.random()` differs between cells). The hash seed and the runtime's
entropy bytes are kept: existing Map/Set records were hashed with that seed, and the entropy's
use is not visible in memory; a restored snapshot keeps them the same way.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final

REALTIME: Final = 0
MONOTONIC: Final = 1
_MASK64: Final = (1 << 64) - 1
#: QuickJS NaN-boxing on wasm32 stores a double as its bits minus this (JS_FLOAT64_TAG_ADDEND).
_NANBOX_ADDEND: Final = 0x7FF8000A << 32
_F64: Final = struct.Struct("<d")
_U64: Final = struct.Struct("<Q")
_U32: Final = struct.Struct("<I")


class Kind(IntEnum):
    """What a clock- or entropy-derived location holds."""

    TIME_ORIGIN = 1  # f64: milliseconds of a monotonic reading
    TIME_ORIGIN_VALUE = 2  # the same as a NaN-boxed JS number
    RANDOM_STATE = 3  # u64: xorshift64* state seeded from a realtime reading in microseconds
    HASH_SEED = 4  # u32: low half of that generator's first output (kept)
    ENTROPY = 5  # bytes returned by `random_get` (kept)


#: Kinds whose template value stays in every copy.
KEPT: Final = frozenset({Kind.HASH_SEED, Kind.ENTROPY})


@dataclass(frozen=True, slots=True)
class Fixup:
    """One explained location of a template's memory."""

    offset: int
    size: int
    kind: Kind


@dataclass(slots=True)
class Probe:
    """Clocks and entropy of one probe boot: the real clocks moved by `shift_ns`, recorded."""

    shift_ns: int = 0
    readings: list[tuple[int, int]] = field(default_factory=list)
    entropy: list[bytes] = field(default_factory=list)

    def clock_ns(self, clock_id: int) -> int:
        """A reading of clock `clock_id`, remembered."""
        now = time.time_ns() if clock_id == REALTIME else time.monotonic_ns()
        value = now + self.shift_ns
        self.readings.append((clock_id, value))
        return value

    def random_bytes(self, size: int) -> bytes:
        """Fresh entropy, remembered."""
        data = os.urandom(size)
        self.entropy.append(data)
        return data


def _xorshift(state: int) -> tuple[int, int]:
    x = state or 1
    x ^= x >> 12
    x ^= (x << 25) & _MASK64
    x ^= x >> 27
    return x, (x * 0x2545F4914F6CDD1D) & _MASK64


def time_origin_bytes(monotonic_ns: int) -> bytes:
    """A time origin as QuickJS stores it in the context."""
    return _F64.pack(monotonic_ns / 1e6)


def js_number_bytes(value: float) -> bytes:
    """A double as a NaN-boxed JS value of this build."""
    bits = _U64.unpack(_F64.pack(value))[0]
    return _U64.pack((bits - _NANBOX_ADDEND) & _MASK64)


def _expected(probe: Probe) -> list[tuple[Kind, bytes]]:
    # Every (kind, bytes) a boot's readings can leave in memory, in reading order.
    out: list[tuple[Kind, bytes]] = []
    for clock_id, value in probe.readings:
        if clock_id == MONOTONIC:
            out.append((Kind.TIME_ORIGIN, time_origin_bytes(value)))
            out.append((Kind.TIME_ORIGIN_VALUE, js_number_bytes(value / 1e6)))
        else:
            state, first = _xorshift(value // 1000)
            out.append((Kind.RANDOM_STATE, _U64.pack(state)))
            out.append((Kind.HASH_SEED, _U32.pack(first & 0xFFFFFFFF)))
    out.extend((Kind.ENTROPY, chunk) for chunk in probe.entropy)
    return out


def differing_bytes(a: bytes, b: bytes, page: int = 4096) -> list[int]:
    """Offsets where `a` and `b` (of equal length) differ."""
    found: list[int] = []
    for start in range(0, len(a), page):
        end = start + page
        if a[start:end] != b[start:end]:
            found.extend(i for i in range(start, min(end, len(a))) if a[i] != b[i])
    return found


def explain(
    a: bytes, b: bytes, probe_a: Probe, probe_b: Probe, *, floor: int = 0
) -> tuple[list[Fixup], int | None]:
    """Explain every difference between two boots' memories (ignoring offsets below `floor`).

    Returns:
        The fixups, and None; or the fixups found so far and the first offset that no reading
        explains (the template must then not be used).
    """
    pairs = list(zip(_expected(probe_a), _expected(probe_b), strict=False))
    fixups: list[Fixup] = []
    covered = -1
    for offset in differing_bytes(a, b):
        if offset < floor or offset <= covered:
            continue
        fixup = _match(a, b, offset, pairs)
        if fixup is None:
            return fixups, offset
        fixups.append(fixup)
        covered = fixup.offset + fixup.size - 1
    return fixups, None


def _match(
    a: bytes, b: bytes, offset: int, pairs: list[tuple[tuple[Kind, bytes], tuple[Kind, bytes]]]
) -> Fixup | None:
    for (kind, want_a), (kind_b, want_b) in pairs:
        size = len(want_a)
        if kind != kind_b or size != len(want_b):
            continue
        starts = (
            range(offset - size + 1, offset + 1)
            if kind == Kind.ENTROPY
            else (offset & ~(size - 1),)
        )
        for start in starts:
            if (
                start >= 0
                and a[start : start + size] == want_a
                and b[start : start + size] == want_b
            ):
                return Fixup(start, size, kind)
    return None


def refresh(fixups: tuple[Fixup, ...], monotonic_ns: int) -> list[tuple[int, bytes]]:
    """The writes that give a copied template its own clock origin and generator state."""
    origin = monotonic_ns / 1e6
    writes: list[tuple[int, bytes]] = []
    for fixup in fixups:
        if fixup.kind == Kind.TIME_ORIGIN:
            writes.append((fixup.offset, _F64.pack(origin)))
        elif fixup.kind == Kind.TIME_ORIGIN_VALUE:
            writes.append((fixup.offset, js_number_bytes(origin)))
        elif fixup.kind == Kind.RANDOM_STATE:
            state = 0
            while state == 0:  # xorshift64* must never hold 0
                state = int.from_bytes(os.urandom(8), "little")
            writes.append((fixup.offset, _U64.pack(state)))
    return writes
