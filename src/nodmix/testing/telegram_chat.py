"""Chat with a bot through the scripted Bot API from a shell, as one Telegram user would.

`python -m nodmix.testing.telegram_server` runs this: each line typed on stdin arrives as a
private message from user 42 (`--chat-id`), and what the bot sends to any chat is printed as
`bot -> <chat id>: <text>` (`[edit] <text>` as a streamed reply grows). Without a terminal or
with stdin closed it only prints.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TextIO

POLL_SECONDS = 0.1


class SentCall(Protocol):
    """A Bot API call the bot made."""

    @property
    def method(self) -> str: ...

    @property
    def params(self) -> dict[str, Any]: ...


class ChatServer(Protocol):
    """What the shell uses of the scripted Bot API (`telegram_server.ScriptedBotAPI`)."""

    @property
    def token(self) -> str: ...

    @property
    def url(self) -> str: ...

    @property
    def username(self) -> str: ...

    @property
    def calls(self) -> Sequence[SentCall]: ...

    def inject_text(self, *, chat_id: int, sender_id: int, text: str) -> int: ...


def setup_lines(api: ChatServer, nodmix: str = ".venv/bin/nodmix") -> list[str]:
    """What to paste in another shell to point a gateway's Telegram channel at `api`."""
    section = f'{{botToken: "{api.token}", apiBaseUrl: "{api.url}"}}'
    return [
        f"Bot API on {api.url} (bot @{api.username}, token {api.token})",
        "point nodmix at it (paste in another shell), then start the gateway:",
        f"  {nodmix} config set channels.telegram '{section}'",
        f"  {nodmix} gateway",
    ]


class ChatPrinter:
    """Prints each message the bot sends, once, in order."""

    def __init__(self, api: ChatServer, out: TextIO) -> None:
        self._api = api
        self._out = out
        self._seen = 0

    def print_new(self) -> int:
        """Print the bot's messages sent since the last call; how many were printed."""
        calls = list(self._api.calls)  # appended to by the server thread, never reordered
        sent = [c for c in calls if c.method in ("sendMessage", "sendDocument", "editMessageText")]
        fresh = sent[self._seen :]
        for call in fresh:
            text = call.params.get("text") or call.params.get("caption") or ""
            if call.method == "sendDocument":
                text = f"[document] {text}".rstrip()
            elif call.method == "editMessageText":  # a streamed reply growing
                text = f"[edit] {text}"
            self._out.write(f"bot -> {call.params.get('chat_id')}: {text}\n")
        self._seen += len(fresh)
        self._out.flush()
        return len(fresh)


def send_lines(api: ChatServer, lines: Iterable[str], chat_id: int) -> int:
    """Queue each non-empty line as a private message from user `chat_id`; how many."""
    count = 0
    for line in lines:
        text = line.rstrip("\n")
        if text.strip():
            api.inject_text(chat_id=chat_id, sender_id=chat_id, text=text)
            count += 1
    return count


def run_shell(api: ChatServer, stdin: TextIO, out: TextIO, chat_id: int) -> None:
    """Send stdin's lines as messages and print the bot's replies until interrupted."""
    out.write(f"type a line to send it as user {chat_id}; the bot's messages appear below\n")
    out.flush()
    reader = threading.Thread(target=send_lines, args=(api, stdin, chat_id), daemon=True)
    reader.start()
    printer = ChatPrinter(api, out)
    stop = threading.Event()
    while not stop.wait(POLL_SECONDS):
        printer.print_new()


def serve_and_chat(
    server_class: Callable[..., AbstractContextManager[ChatServer]],
    argv: Sequence[str] | None,
    *,
    description: str,
) -> int:
    """Parse `--port`, `--token`, `--chat-id`; serve a scripted Bot API until Ctrl-C, sending
    stdin's lines as messages and printing the bot's replies."""
    from nodmix.invocation import nodmix_command

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, default=8081, help="0 picks a free port")
    parser.add_argument("--token", default="123456:TEST-token")
    parser.add_argument(
        "--chat-id", type=int, default=42, help="the Telegram user id your typed lines come from"
    )
    args = parser.parse_args(argv)
    with server_class(token=args.token, port=args.port, max_poll_seconds=25) as server:
        print("\n".join(setup_lines(server, nodmix_command())), flush=True)
        try:
            run_shell(server, sys.stdin, sys.stdout, args.chat_id)
        except KeyboardInterrupt:
            pass
    return 0
