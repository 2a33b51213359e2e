"""The base of every `nodmix.json` section: strict, camelCase in the file, unset keys left out."""

from __future__ import annotations

import msgspec


class Section(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    rename="camel",
    forbid_unknown_fields=True,
    omit_defaults=True,
):
    """Base of every config section."""
