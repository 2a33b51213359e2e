"""Media files in the workspace: saved once by content, never through a symlink; per-chat
spoken replies kept durably."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.errors import WorkspaceEscapeError
from nodmix.media.files import inbox_path, read_media, save_unique
from nodmix.media.prefs import FileSpeechPrefs


def test_the_same_bytes_are_saved_once_and_different_bytes_apart(tmp_path: Path) -> None:
    first = save_unique(tmp_path, b"picture", "api-image", ".png")
    again = save_unique(tmp_path, b"picture", "api-image", ".png")
    other = save_unique(tmp_path, b"another", "api-image", ".png")
    assert first == again != other
    assert first.startswith("inbox/api-image-") and first.endswith(".png")
    assert len(list((tmp_path / "inbox").iterdir())) == 2


def test_a_planted_inbox_symlink_makes_the_save_fail_instead_of_writing_elsewhere(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "inbox").symlink_to(elsewhere)
    with pytest.raises(WorkspaceEscapeError):
        save_unique(workspace, b"x", "upload", ".png")
    assert list(elsewhere.iterdir()) == []


def test_reading_refuses_symlinks_dot_dot_and_files_over_the_cap(tmp_path: Path) -> None:
    (tmp_path / "inbox").mkdir()
    (tmp_path / "inbox" / "a.png").write_bytes(b"1234")
    (tmp_path / "inbox" / "link.png").symlink_to(tmp_path / "inbox" / "a.png")
    assert read_media(tmp_path, "inbox/a.png")[0] == b"1234"
    with pytest.raises(WorkspaceEscapeError):
        read_media(tmp_path, "inbox/link.png")
    with pytest.raises(WorkspaceEscapeError):
        read_media(tmp_path, "inbox/../inbox/a.png")
    with pytest.raises(OSError, match="larger than"):
        read_media(tmp_path, "inbox/a.png", max_bytes=3)


@pytest.mark.parametrize(
    "text", ["../x.png", "inbox/../../x", "/etc/passwd", "inbox/sub/x.png", "notes.md", "inbox/a b"]
)
def test_client_attachment_paths_must_name_a_saved_inbox_file(text: str) -> None:
    with pytest.raises(ValueError):
        inbox_path(Path("/w"), text)
    assert inbox_path(Path("/w"), "inbox/upload-x-1.png") == "inbox/upload-x-1.png"


def test_tts_preferences_survive_a_new_store_and_default_clears_them(tmp_path: Path) -> None:
    prefs = FileSpeechPrefs(tmp_path)
    prefs.set("telegram", "42", True)
    prefs.set("matrix", "!room:x", False)
    again = FileSpeechPrefs(tmp_path)
    assert again.get("telegram", "42") is True and again.get("matrix", "!room:x") is False
    again.set("telegram", "42", None)
    assert FileSpeechPrefs(tmp_path).get("telegram", "42") is None
    assert oct(prefs.path.stat().st_mode & 0o777) == "0o600"


def test_an_unreadable_preferences_file_means_no_preferences(tmp_path: Path) -> None:
    prefs = FileSpeechPrefs(tmp_path)
    prefs.path.parent.mkdir(parents=True)
    prefs.path.write_text("{not json", encoding="utf-8")
    assert prefs.get("telegram", "42") is None
    prefs.set("telegram", "42", True)
    assert prefs.get("telegram", "42") is True
