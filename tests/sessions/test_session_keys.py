from __future__ import annotations

import pytest

from nodmix.errors import SessionError
from nodmix.sessions.keys import (
    DEFAULT_SESSION_KEY,
    SessionKey,
    format_session_key,
    parse_session_key,
    resolve_session_key,
)


def test_full_key_parses_into_agent_and_name() -> None:
    key = parse_session_key("agent:ops:work")
    assert (key.agent_id, key.name) == ("ops", "work")
    assert str(key) == "agent:ops:work"


def test_name_keeps_its_further_colon_segments() -> None:
    key = parse_session_key("agent:main:telegram:group:-100123")
    assert key.agent_id == "main"
    assert key.name == "telegram:group:-100123"


def test_bare_name_means_a_session_of_the_default_agent() -> None:
    assert str(resolve_session_key("work")) == "agent:main:work"
    assert str(resolve_session_key("work", default_agent_id="ops")) == "agent:ops:work"
    assert str(resolve_session_key("cron:nightly")) == "agent:main:cron:nightly"


def test_missing_or_blank_key_means_the_default_session() -> None:
    assert str(resolve_session_key(None)) == DEFAULT_SESSION_KEY == "agent:main:main"
    assert str(resolve_session_key("  ")) == DEFAULT_SESSION_KEY


def test_resolving_a_parsed_key_returns_it_unchanged() -> None:
    key = SessionKey(agent_id="ops", name="x")
    assert resolve_session_key(key) is key


def test_format_builds_the_key_string() -> None:
    assert format_session_key("ops") == "agent:ops:main"
    assert format_session_key("ops", "a:b") == "agent:ops:a:b"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("agent:", "missing the session name"),
        ("agent:main", "missing the session name"),
        ("agent:main:", "missing the session name"),
        ("agent:Main:x", "lowercase"),
        ("agent:../x:y", "lowercase"),
        ("agent::x", "lowercase"),
        ("agent:main:a::b", "empty segment"),
        ("agent:main:has space", "whitespace"),
        ("session:main:x", "expected 'agent:<agentId>:<name>'"),
    ],
)
def test_malformed_keys_raise_session_error_naming_the_key(text: str, problem: str) -> None:
    with pytest.raises(SessionError) as info:
        parse_session_key(text)
    assert repr(text) in str(info.value)
    assert problem in str(info.value)


def test_malformed_bare_name_is_reported_as_a_name() -> None:
    with pytest.raises(SessionError) as info:
        resolve_session_key("two words")
    assert "invalid session name 'two words'" in str(info.value)


def test_overlong_names_are_rejected() -> None:
    with pytest.raises(SessionError):
        format_session_key("main", "x" * 257)


@pytest.mark.parametrize("text", ["a" * 5000, "agent:main:" + "b c" * 3000, "agent:" + "X" * 900])
def test_a_huge_key_is_cut_short_in_its_error_line(text: str) -> None:
    with pytest.raises(SessionError) as info:
        resolve_session_key(text)
    assert len(str(info.value)) < 300
    assert "characters" in str(info.value)
