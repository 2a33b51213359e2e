"""`python -m nodmix.testing.telegram_server` from a shell: lines typed on stdin reach the bot
as messages from one user, and what the bot sends is printed."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time

import httpx2
import pytest

pytestmark = pytest.mark.integration

DEADLINE = 10.0


class Lines:
    """The process's stdout lines, read on a thread, each awaited with a deadline."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self._queue: queue.Queue[str] = queue.Queue()
        stdout = proc.stdout
        threading.Thread(target=lambda: [self._queue.put(x) for x in stdout], daemon=True).start()

    def next(self) -> str:
        try:
            return self._queue.get(timeout=DEADLINE)
        except queue.Empty:
            raise AssertionError("the server printed nothing in time") from None


def test_typed_lines_reach_the_bot_and_its_replies_are_printed() -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "nodmix.testing.telegram_server", "--port", "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdin is not None
        lines = Lines(proc)
        try:
            banner = [lines.next() for _ in range(5)]
            url = banner[0].split()[3]
            token = banner[0].rstrip(")\n").split()[-1]
            assert banner[0].startswith("Bot API on http://127.0.0.1:")
            setup = banner[2].strip()  # pasted as is: the gateway then talks to this server
            assert setup.endswith(
                f'config set channels.telegram \'{{botToken: "{token}", apiBaseUrl: "{url}"}}\''
            )
            proc.stdin.write("hello bot\n")
            proc.stdin.flush()
            bot = f"{url}/bot{token}"
            deadline = time.monotonic() + DEADLINE
            updates: list[dict[str, object]] = []
            while not updates:  # the bot's long poll, as the gateway does it
                assert time.monotonic() < deadline, "the typed line never arrived"
                updates = httpx2.post(f"{bot}/getUpdates", json={"timeout": 1}).json()["result"]
            message = updates[0]["message"]
            assert isinstance(message, dict) and message["text"] == "hello bot"
            assert message["chat"] == {"id": 42, "type": "private", "title": "chat 42"}
            httpx2.post(f"{bot}/sendMessage", json={"chat_id": 42, "text": "hi, who are you?"})
            assert lines.next() == "bot -> 42: hi, who are you?\n"
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                proc.kill()
    assert proc.returncode == 0


def test_a_streamed_reply_prints_its_first_words_then_each_edit() -> None:
    import io

    from nodmix.testing.telegram_chat import ChatPrinter
    from nodmix.testing.telegram_server import BotCall, ScriptedBotAPI

    api = ScriptedBotAPI()
    out = io.StringIO()
    printer = ChatPrinter(api, out)
    api.calls.append(BotCall("sendMessage", {"chat_id": 42, "text": "The answer"}))
    api.calls.append(BotCall("sendChatAction", {"chat_id": 42, "action": "typing"}))
    api.calls.append(BotCall("editMessageText", {"chat_id": 42, "text": "The answer is 42."}))
    assert printer.print_new() == 2 and printer.print_new() == 0
    assert out.getvalue().splitlines() == [
        "bot -> 42: The answer",
        "bot -> 42: [edit] The answer is 42.",
    ]
