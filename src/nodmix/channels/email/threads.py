"""Which thread a reply belongs to: the subject and references of recent inbound mail, kept
on disk (bounded) so replies after a restart still thread under the right message."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from nodmix.channels.email.mapping import ThreadInfo
from nodmix.channels.files import read_json, write_json

KEPT = 500


class ThreadBook:
    """Message-ID -> ThreadInfo of the last `KEPT` inbound messages."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._book: OrderedDict[str, ThreadInfo] = OrderedDict()
        for mid, entry in read_json(path, {}).get("threads", {}).items():
            if isinstance(entry, dict):
                self._book[mid] = ThreadInfo(
                    message_id=mid,
                    subject=str(entry.get("subject", "")),
                    references=tuple(str(r) for r in entry.get("references", [])),
                )

    def remember(self, info: ThreadInfo) -> None:
        self._book[info.message_id] = info
        self._book.move_to_end(info.message_id)
        while len(self._book) > KEPT:
            self._book.popitem(last=False)
        write_json(
            self.path,
            {
                "threads": {
                    mid: {"subject": t.subject, "references": list(t.references)}
                    for mid, t in self._book.items()
                }
            },
        )

    def get(self, message_id: str) -> ThreadInfo | None:
        return self._book.get(message_id)
