"""Without the `postgres` extra, choosing the PostgreSQL backend is one clear line naming the
key and the install command."""

from __future__ import annotations

import sys

import pytest

from nodmix.errors import ConfigError
from nodmix.state.extras import INSTALL_HINT, require_driver


@pytest.mark.parametrize("module", ["psycopg", "psycopg_pool"])
def test_a_missing_driver_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # what an install without the extra gives
    with pytest.raises(ConfigError) as caught:
        require_driver()
    assert INSTALL_HINT in str(caught.value) and module in str(caught.value)
    assert caught.value.key == "state.backend"
