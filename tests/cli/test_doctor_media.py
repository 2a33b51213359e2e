"""`nodmix doctor` checks speech to text (`tools.media.audio`) and text to speech
(`messages.tts`) as it checks the model: the provider they name, its API, its key, and an
authenticated probe of the scripted model server with a deadline; one line per problem."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.cli import doctor_media
from nodmix.cli.main import main
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(lambda request: ModelReply.text("ok"), api_key="sekret") as server:
        yield server


def _config(state: Path, server: ScriptedModelServer, **top: Any) -> None:
    providers: dict[str, Any] = {
        "local": {
            "api": "openai-completions",
            "baseUrl": server.base_url,
            "apiKey": "sekret",
            "models": [{"id": "m"}],
        },
        "claude": {
            "api": "anthropic-messages",
            "baseUrl": server.anthropic_base_url,
            "apiKey": "sekret",
            "models": [{"id": "c"}],
        },
        "wrongkey": {
            "api": "openai-completions",
            "baseUrl": server.base_url,
            "apiKey": "wrong",
            "models": [{"id": "m"}],
        },
        "fromenv": {
            "api": "openai-completions",
            "baseUrl": server.base_url,
            "apiKey": "${VOICE_TEST_KEY}",
            "models": [{"id": "m"}],
        },
    }
    config = {
        "models": {"providers": providers},
        "agents": {"defaults": {"model": {"primary": "local/m"}}},
        **top,
    }
    (state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")


def _doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, str]]]:
    code = main(["doctor", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def _named(findings: list[dict[str, str]], name: str) -> list[dict[str, str]]:
    return [f for f in findings if f["name"] == name]


def _voice(stt: str, tts: str, **tts_more: Any) -> dict[str, Any]:
    return {
        "tools": {"media": {"audio": {"provider": stt}}},
        "messages": {"tts": {"auto": "always", "provider": tts, **tts_more}},
    }


def test_working_speech_providers_are_reported_reachable(
    isolated_state: Path, model_server: ScriptedModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(isolated_state, model_server, **_voice("local", "local"))
    code, findings = _doctor(capsys)
    assert code == 0
    (stt,) = _named(findings, "speech to text")
    (tts,) = _named(findings, "text to speech")
    assert stt["level"] == tts["level"] == "ok"
    assert stt["detail"] == f"local reachable at {model_server.base_url}"
    code, findings = _doctor(capsys, "--offline")
    assert "not contacted" in _named(findings, "speech to text")[0]["detail"]


def test_no_voice_config_means_no_voice_findings(
    isolated_state: Path, model_server: ScriptedModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(isolated_state, model_server)
    _, findings = _doctor(capsys)
    assert not _named(findings, "speech to text") and not _named(findings, "text to speech")


@pytest.mark.parametrize(
    ("stt", "tts", "stt_says", "tts_says"),
    [
        ("wrongkey", "claude", "rejected the API key (401)", "speaks anthropic-messages"),
        ("nosuch", "fromenv", "unknown provider 'nosuch'", "VOICE_TEST_KEY"),
    ],
    ids=["key-and-api", "unknown-and-unset-key"],
)
def test_each_voice_problem_is_one_error_line_with_a_fix(
    isolated_state: Path,
    model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    stt: str,
    tts: str,
    stt_says: str,
    tts_says: str,
) -> None:
    monkeypatch.delenv("VOICE_TEST_KEY", raising=False)
    _config(isolated_state, model_server, **_voice(stt, tts))
    code, findings = _doctor(capsys)
    (stt_finding,) = _named(findings, "speech to text")
    (tts_finding,) = _named(findings, "text to speech")
    assert code == 1
    assert stt_finding["level"] == "error" and stt_says in stt_finding["detail"]
    assert tts_finding["level"] == "error" and tts_says in tts_finding["detail"]
    assert stt_finding["fix"] and tts_finding["fix"]
    if stt == "nosuch":
        assert "one of models.providers" in stt_finding["fix"]

    assert main(["doctor"]) == 1
    lines = capsys.readouterr().out.splitlines()
    problems = [line for line in lines if line.startswith("✗ ")]
    assert [line for line in problems if "speech" in line] == [
        f"✗ speech to text: {stt_finding['detail']}",
        f"✗ text to speech: {tts_finding['detail']}",
    ]


def test_half_configured_voice_is_an_error(
    isolated_state: Path, model_server: ScriptedModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    voice = {
        "tools": {"media": {"audio": {"enabled": True}}},
        "messages": {"tts": {"auto": "inbound"}},
    }
    _config(isolated_state, model_server, **voice)
    code, findings = _doctor(capsys)
    assert code == 1
    assert "no provider is named" in _named(findings, "speech to text")[0]["detail"]
    assert "messages.tts.provider is not set" in _named(findings, "text to speech")[0]["detail"]


def test_an_unreachable_or_silent_provider_is_an_error_within_the_deadline(
    isolated_state: Path,
    model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(doctor_media, "PROBE_SECONDS", 0.5)
    with socket.socket() as closed, socket.socket() as silent:
        closed.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel accepts; nothing ever answers
        _config(isolated_state, model_server, **_voice("down", "mute"))
        config = json.loads((isolated_state / "nodmix.json").read_text())
        for name, sock in (("down", closed), ("mute", silent)):
            config["models"]["providers"][name] = {
                "api": "openai-completions",
                "baseUrl": f"http://127.0.0.1:{sock.getsockname()[1]}/v1",
                "apiKey": "sekret",
                "models": [{"id": "m"}],
            }
        (isolated_state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")
        code, findings = _doctor(capsys)
    assert code == 1
    assert "is not reachable" in _named(findings, "speech to text")[0]["detail"]
    assert "no answer from" in _named(findings, "text to speech")[0]["detail"]
    assert "within 0.5 s" in _named(findings, "text to speech")[0]["detail"]


def test_spoken_replies_needing_conversion_warn_when_ffmpeg_is_missing(
    isolated_state: Path,
    model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    _config(isolated_state, model_server, **_voice("local", "local", format="mp3"))
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, findings = _doctor(capsys)
    (ffmpeg,) = _named(findings, "ffmpeg")
    assert ffmpeg["level"] == "warn" and "spoken replies in mp3" in ffmpeg["detail"]
    assert "apt-get install ffmpeg" in ffmpeg["fix"]


def test_damaged_code_mode_run_files_are_listed_with_what_to_do(
    isolated_state: Path, model_server: ScriptedModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(isolated_state, model_server)
    damaged = isolated_state / "codemode" / "runs" / "damaged"
    damaged.mkdir(parents=True)
    (damaged / "0001-cm_x.run").write_bytes(b"not a run")
    _, findings = _doctor(capsys)
    (runs,) = _named(findings, "code mode runs")
    assert runs["level"] == "warn" and f"1 damaged run file(s) kept in {damaged}" in runs["detail"]
    assert "delete them" in runs["fix"]
