"""`MediaWrites`: a refused request removes the files it created, never one an earlier request
saved or a concurrent request still uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.errors import PromptTooLargeError
from nodmix.gateway.media_writes import InboxClaims, MediaWrites, removed_if_refused
from nodmix.media.files import save_unique

pytestmark = pytest.mark.anyio


def _save(writes: MediaWrites, data: bytes) -> str:
    created: list[str] = []
    path = save_unique(writes.workspace, data, "api-image", ".jpg", created)
    writes.use(path)
    writes.created_prompt.extend(created)
    return path


async def test_a_refused_request_keeps_a_file_a_concurrent_request_reuses(tmp_path: Path) -> None:
    claims = InboxClaims()
    first, second = MediaWrites(tmp_path, claims), MediaWrites(tmp_path, claims)
    path = _save(first, b"same picture")
    assert _save(second, b"same picture") == path and second.created_prompt == []
    with pytest.raises(PromptTooLargeError):
        async with removed_if_refused(first):
            raise PromptTooLargeError("too long", tokens=2, context_window=1)
    assert (tmp_path / path).exists(), "the second request still uses it"
    async with removed_if_refused(second):
        pass
    assert (tmp_path / path).exists(), "an accepted request keeps its files"


async def test_a_refused_request_removes_only_what_it_created(tmp_path: Path) -> None:
    claims = InboxClaims()
    earlier = MediaWrites(tmp_path, claims)
    kept = _save(earlier, b"old picture")
    async with removed_if_refused(earlier):
        pass
    refused = MediaWrites(tmp_path, claims)
    assert _save(refused, b"old picture") == kept
    new = _save(refused, b"new picture")
    with pytest.raises(PromptTooLargeError):
        async with removed_if_refused(refused):
            raise PromptTooLargeError("too long", tokens=2, context_window=1)
    assert (tmp_path / kept).exists() and not (tmp_path / new).exists()
