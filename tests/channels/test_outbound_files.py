"""Files the agent sends to a chat: what goes out is the workspace file that was checked.

A sandboxed command shares the workspace and can swap a file (or a folder on its path) for a
symlink to a host secret between the check and the upload.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.channels.outbound import MAX_ATTACHMENT_BYTES, attachment_paths


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    (path / "out").mkdir(parents=True)
    (path / "out" / "report.txt").write_text("quarterly numbers")
    (tmp_path / "id_rsa").write_text("PRIVATE KEY")
    return path


def test_the_bytes_sent_are_the_ones_checked_even_if_the_file_is_swapped_later(
    workspace: Path, tmp_path: Path
) -> None:
    (files,) = attachment_paths(["out/report.txt"], workspace)
    report = workspace / "out" / "report.txt"
    report.unlink()
    report.symlink_to(tmp_path / "id_rsa")  # swapped in before the adapter uploads
    assert files.data == b"quarterly numbers"


def test_a_link_out_of_the_workspace_is_refused(workspace: Path, tmp_path: Path) -> None:
    (workspace / "key").symlink_to(tmp_path / "id_rsa")
    with pytest.raises(ValueError, match="not a file in the workspace"):
        attachment_paths(["key"], workspace)


def test_a_file_over_the_upload_limit_is_refused_without_reading_it_all(
    workspace: Path,
) -> None:
    big = workspace / "big.bin"
    with big.open("wb") as f:
        f.truncate(MAX_ATTACHMENT_BYTES + 10)
    with pytest.raises(ValueError, match="larger than 50 MB"):
        attachment_paths(["big.bin"], workspace)
