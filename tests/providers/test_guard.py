"""The code-mode payload guard fails closed on any tool surface but the expected one."""

from __future__ import annotations

import pytest

from nodmix.errors import ProviderRequestError
from nodmix.providers.guard import check_tool_surface

CODE_MODE = frozenset({"exec", "wait"})


def test_exact_surface_passes_in_any_order() -> None:
    check_tool_surface(["wait", "exec"], CODE_MODE, provider="openai")


def test_no_expectation_means_no_check() -> None:
    check_tool_surface(["read", "write"], None, provider="openai")


@pytest.mark.parametrize(
    ("names", "got"),
    [
        (["exec", "wait", "read"], "exec,read,wait"),
        (["exec"], "exec"),
        ([], "none"),
        (["exec", "exec", "wait"], "exec,exec,wait"),
    ],
)
def test_any_other_surface_is_refused_with_the_names(names: list[str], got: str) -> None:
    with pytest.raises(ProviderRequestError) as info:
        check_tool_surface(names, CODE_MODE, provider="anthropic")
    assert str(info.value) == (
        f"code mode payload tool surface violation: expected exec,wait; got {got}"
    )
    assert info.value.provider == "anthropic"
