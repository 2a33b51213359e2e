"""Files in the scripted Bot API (`telegram_server`): photos, voice notes, audio files and
documents injected with their bytes, `getFile` and the download path, and the voice and audio
messages a bot sends (their bytes kept for the test to check)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from nodmix.testing.telegram_payloads import media_message


class BotFiles:
    """The file half of `ScriptedBotAPI` (a mixin: the server supplies the rest)."""

    token: str
    files: dict[str, bytes]
    file_paths: dict[str, str]
    file_sizes: dict[str, int]
    downloads: list[str]
    _lock: threading.Lock
    inject: Callable[[dict[str, Any]], int]
    calls_of: Callable[[str], list[Any]]
    _sent: Callable[..., dict[str, Any]]

    def inject_media(
        self,
        *,
        chat_id: int,
        sender_id: int,
        kind: str,
        data: bytes,
        caption: str = "",
        file_name: str | None = None,
        mime_type: str | None = None,
        declared_size: int | None = None,
    ) -> int:
        """Queue a photo, voice note, audio file or document (`kind`) with `data` as its file
        (`declared_size`: the size the update and getFile claim, default the real one)."""
        file_id = f"{kind}-{len(self.files) + 1}"
        suffix = {"photo": ".jpg", "voice": ".oga", "audio": ".mp3"}.get(kind, ".bin")
        self.files[file_id] = data
        self.file_paths[file_id] = f"{kind}s/{file_id}{suffix}"
        size = len(data) if declared_size is None else declared_size
        self.file_sizes[file_id] = size
        message = media_message(
            chat=(chat_id, "private"),
            sender=(sender_id, "Test User"),
            kind=kind,
            file_id=file_id,
            size=size,
            caption=caption,
            file_name=file_name,
            mime_type=mime_type,
        )
        return self.inject(message)

    def sent_files(self, method: str) -> list[tuple[str, bytes]]:
        """`(file name, bytes)` of each file sent with `method` (`sendVoice`, ...)."""
        return [
            (str(value.get("filename")), bytes(value["data"]))
            for call in self.calls_of(method)
            for value in call.params.values()
            if isinstance(value, dict) and "data" in value
        ]

    async def _m_sendVoice(self, params: dict[str, Any]) -> Any:
        return self._sent(params, voice={**_uploaded(params, "voice"), "duration": 1})

    async def _m_sendAudio(self, params: dict[str, Any]) -> Any:
        return self._sent(params, audio={**_uploaded(params, "audio"), "duration": 1})

    async def _m_getFile(self, params: dict[str, Any]) -> Any:
        file_id = str(params.get("file_id"))
        data = self.files.get(file_id, b"")
        return {
            "file_id": file_id,
            "file_unique_id": file_id,
            "file_size": self.file_sizes.get(file_id, len(data)),
            "file_path": self.file_paths.get(file_id, f"documents/{file_id}.bin"),
        }

    async def _file(self, request: Request) -> Response:
        path = request.path_params["path"]
        file_id = path.rsplit("/", 1)[-1].rpartition(".")[0]
        if request.path_params["token"] != self.token or file_id not in self.files:
            return Response(status_code=404)
        with self._lock:
            self.downloads.append(file_id)
        return Response(self.files[file_id], media_type="application/octet-stream")


def _uploaded(params: dict[str, Any], field: str) -> dict[str, Any]:
    upload = params.get(field) or {}
    size = upload.get("size", 0) if isinstance(upload, dict) else 0
    return {"file_id": f"sent-{field}", "file_unique_id": f"sent-{field}", "file_size": size}
