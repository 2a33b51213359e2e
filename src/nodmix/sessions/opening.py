"""Opening sessions: where their transcripts live, and creating or loading them with their store
entries.

The session manager decides which sessions to cache; this module does the file work: a new
session is a store entry plus a fresh transcript (created inside the store update, so another
process creating the same key at the same moment is noticed), a reset or successor swaps the
entry to a new transcript, and loading re-creates a transcript deleted by hand.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from nodmix.config.paths import sessions_dir
from nodmix.errors import SessionError
from nodmix.sessions.descriptors import DescriptorPool
from nodmix.sessions.entries import Entry
from nodmix.sessions.index import SessionIndex
from nodmix.sessions.keys import SessionKey
from nodmix.sessions.session import Session
from nodmix.sessions.store import SessionEntry, StoreData, new_session_entry
from nodmix.sessions.successors import missing_seed, restore_seed
from nodmix.sessions.transcript import Transcript, transcript_file_name

logger = logging.getLogger(__name__)

EntryMaker = Callable[[SessionEntry | None, str, str], SessionEntry]
"""`(old entry, new session id, new file name) -> new entry` for a reset or a successor."""


class Openings:
    """What every backend's opener shares: transcripts are named under the sessions directory
    of `state_dir` (a database names its rows the same way), `workspace` is the default `cwd`
    of new headers, and a `read_only` opener never creates one."""

    def __init__(self, state_dir: Path, *, workspace: Path, read_only: bool) -> None:
        self.state_dir = state_dir
        self.workspace = workspace
        self.read_only = read_only

    def path(self, key: SessionKey, file_name: str) -> Path:
        """The transcript path of an index entry's `sessionFile`.

        Raises:
            SessionError: the name would leave the sessions directory.
        """
        # sessions.json is user-editable: never let it point a transcript outside the directory.
        if Path(file_name).name != file_name or file_name in ("", ".", ".."):
            raise SessionError(f"session {key} has an invalid sessionFile {file_name!r}")
        return sessions_dir(self.state_dir, key.agent_id) / file_name


class SessionOpener(Openings):
    """Creates and loads the transcripts of one state directory."""

    def __init__(
        self,
        state_dir: Path,
        *,
        workspace: Path,
        read_only: bool,
        descriptors: DescriptorPool,
    ) -> None:
        """Files under `state_dir`, opened through the process's descriptor pool."""
        super().__init__(state_dir, workspace=workspace, read_only=read_only)
        self.descriptors = descriptors

    def new(
        self,
        key: SessionKey,
        path: Path,
        session_id: str,
        cwd: Path,
        parent: str | None = None,
        seed: Sequence[Entry] = (),
    ) -> Transcript:
        """A new transcript file holding its header (which records `key`) and `seed`; a seeded
        one is on disk in full (fsynced) before this returns."""
        return Transcript.create(
            path,
            session_id=session_id,
            cwd=cwd,
            parent_session=parent,
            session_key=str(key),
            descriptors=self.descriptors,
            entries=seed,
            durable=bool(seed),
        )

    def create(self, key: SessionKey, store: SessionIndex, workspace: Path | None) -> Session:
        """A new session under `key` (or the one another process created meanwhile)."""
        cwd = workspace or self.workspace

        def create(data: StoreData) -> tuple[SessionEntry, Transcript | None]:
            existing = data.get(str(key))
            if existing is not None:  # another process created it since we looked
                return existing, None
            session_id = str(uuid.uuid4())
            file_name = transcript_file_name(session_id)
            transcript = self.new(key, self.path(key, file_name), session_id, cwd)
            data[str(key)] = new_session_entry(session_id, file_name)
            return data[str(key)], transcript

        # No fsync for a new entry: transcript appends are not fsynced either, and a power cut
        # that loses this entry only means the next open starts a session (the file stays).
        entry, transcript = store.update(create, sync=False)
        if transcript is None:
            return self.load(key, store, entry, create=True, workspace=workspace)
        return Session(session_key=key, entry=entry, transcript=transcript, store=store)

    def load(
        self,
        key: SessionKey,
        store: SessionIndex,
        entry: SessionEntry,
        *,
        create: bool,
        workspace: Path | None,
    ) -> Session:
        """The session of an existing store entry, its transcript read from disk."""
        path = self.path(key, entry.session_file)
        if not path.exists():
            if not create or self.read_only:
                raise SessionError(f"session {key}: transcript {path} is missing")
            # The store survived but the file did not (deleted by hand): start it again under
            # the same id rather than failing every turn.
            logger.warning("session %s: transcript %s is missing; starting it afresh", key, path)
            transcript = self.new(key, path, entry.session_id, workspace or self.workspace)
        else:
            transcript = Transcript.load(
                path, read_only=self.read_only, descriptors=self.descriptors
            )
            if not self.read_only and missing_seed(transcript):
                # A successor left without its summary by a crash (see `successors.py`).
                transcript.close()
                restore_seed(path)
                transcript = Transcript.load(path, descriptors=self.descriptors)
        return Session(session_key=key, entry=entry, transcript=transcript, store=store)

    def swap(
        self,
        key: SessionKey,
        store: SessionIndex,
        make_entry: EntryMaker,
        *,
        workspace: Path | None,
        successor: bool,
        seed: Sequence[Entry] = (),
    ) -> Session:
        """Point `key` at a new transcript (a reset, or a successor naming the old file).

        The new file, `seed` included, is complete on disk before the index names it: a crash
        at any moment leaves the key on the old transcript or on the whole new one.
        """
        cwd = workspace or self.workspace

        def swap(data: StoreData) -> tuple[SessionEntry, Transcript]:
            old = data.get(str(key))
            session_id = str(uuid.uuid4())
            file_name = transcript_file_name(session_id)
            entry = make_entry(old, session_id, file_name)  # may refuse before any file exists
            parent = old.session_file if successor and old else None
            path = self.path(key, file_name)
            transcript = self.new(key, path, session_id, cwd, parent, seed)
            data[str(key)] = entry
            return entry, transcript

        entry, transcript = store.update(swap)
        return Session(session_key=key, entry=entry, transcript=transcript, store=store)
