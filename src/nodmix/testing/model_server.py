"""A scripted model behind a real HTTP socket, speaking OpenAI and Anthropic.

`ScriptedModelServer(respond)` serves, on 127.0.0.1 and a free port:

- `POST /v1/chat/completions`: OpenAI chat completions, streamed (SSE) or not;
- `POST /v1/messages`: Anthropic Messages, streamed or not;
- `GET /v1/models`: the model list (OpenAI shape, Anthropic shape if `anthropic-version`);
- `POST /v1/embeddings`: deterministic test-double vectors (`nodmix.testing.embeddings`);
- `POST /v1/audio/transcriptions` and `/v1/audio/speech`: a scripted transcript, and real
  audio (a tone, OGG/Opus and the other formats through ffmpeg; `nodmix.testing.audio_wire`).

Requests are mapped to `ModelRequest` and answered by the same respond function that
scripts `nodmix.providers.fake.FunctionProvider`; a `ModelError` becomes a real HTTP error
status with a vendor-shaped body (and `Retry-After`), or an error event inside the stream
when it has `partial` text. Every request is recorded in `server.requests` (the images each
model request carried in `server.images()`), audio requests in `server.audio_calls`.

In async code::

    async with ScriptedModelServer(respond) as server:
        provider = OpenAIProvider(base_url=server.base_url)

From sync code or another thread (a CLI subprocess test pointing its config at it)::

    with ScriptedModelServer(respond) as server:   # runs on a background thread
        subprocess.run([...], env={..., "BASE_URL": server.base_url})

From a shell, with a script module or file that defines `respond` (or a built-in script,
see `nodmix.testing.scripts`)::

    python -m nodmix.testing.model_server --port 8765 --script echo
    listening on http://127.0.0.1:8765/v1
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import signal
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.from_thread
from anyio.abc import TaskGroup, TaskStatus

from nodmix.messages import AssistantMessage, ImageBlock, JsonObject
from nodmix.providers.fake import Respond
from nodmix.testing.audio_wire import AudioCall, AudioState, Transcribe, default_transcribe
from nodmix.testing.http_thread import start_uvicorn
from nodmix.testing.scripts import BUILTIN_SCRIPTS
from nodmix.testing.wire import RecordedRequest, WireState, build_app

_DRAIN_SECONDS = 2.0


class ScriptedModelServer:
    """A real HTTP model server whose answers come from a respond function.

    Args:
        respond: Decides each reply (see `nodmix.providers.fake`); may be replaced later
            through the `respond` attribute.
        host: Interface to bind (loopback by default).
        port: Port to bind; 0 picks a free one (read it from `port` once started).
        api_key: When set, requests must carry it (`Authorization: Bearer` for OpenAI,
            `x-api-key` for Anthropic) or get a 401.
        models: Ids listed by `GET /v1/models` (requests may name any model).
        event_seconds: Pause between the events of a streamed reply (a slow model).
        transcribe: Answers transcription requests: `(audio bytes, file name) -> text`, sync
            or async (default: a fixed sentence).
    """

    def __init__(
        self,
        respond: Respond,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        models: Sequence[str] = ("scripted",),
        event_seconds: float = 0.0,
        transcribe: Transcribe = default_transcribe,
    ) -> None:
        self._state = WireState(
            respond=respond,
            api_key=api_key,
            models=tuple(models),
            event_seconds=event_seconds,
            audio=AudioState(transcribe=transcribe),
        )
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._stop: anyio.Event | None = None
        self._task_group: TaskGroup | None = None
        self._portal_cm: AbstractContextManager[anyio.from_thread.BlockingPortal] | None = None
        self._thread_cm: AbstractContextManager[ScriptedModelServer] | None = None

    # ---- addresses and recordings --------------------------------------------------------

    @property
    def respond(self) -> Respond:
        """The respond function answering requests."""
        return self._state.respond

    @respond.setter
    def respond(self, respond: Respond) -> None:
        self._state.respond = respond

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in order (raw JSON and mapped `ModelRequest`)."""
        return self._state.requests

    @property
    def embedding_requests(self) -> list[JsonObject]:
        """Bodies of `POST /v1/embeddings` requests, in order (deterministic test vectors,
        `nodmix.testing.embeddings`)."""
        return self._state.embedding_requests

    @property
    def audio_calls(self) -> list[AudioCall]:
        """Transcription and speech requests, in order (uploaded files included)."""
        return self._state.audio.calls

    def images(self, index: int = -1) -> list[ImageBlock]:
        """The images the model request at `index` (default: the latest) carried, in order,
        whichever API it came in (`[]` when it carried none)."""
        mapped = self.requests[index].request
        if mapped is None:
            return []
        return [
            block
            for message in mapped.messages
            if not isinstance(message, AssistantMessage)
            for block in message.content
            if isinstance(block, ImageBlock)
        ]

    @property
    def port(self) -> int:
        """The bound port.

        Raises:
            RuntimeError: The server is not running.
        """
        if self._port is None:
            raise RuntimeError("the scripted model server is not running")
        return self._port

    @property
    def url(self) -> str:
        """`http://host:port`, the Anthropic-style base URL."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        """`http://host:port/v1`, the OpenAI-style base URL."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The base URL to give an Anthropic client (it appends `/v1/messages`)."""
        return self.url

    # ---- async lifecycle -----------------------------------------------------------------

    async def __aenter__(self) -> Self:
        self._stop = anyio.Event()
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        try:
            await task_group.start(self._serve)
        except BaseException:
            await self._close_task_group(*sys.exc_info())
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._close_task_group(exc_type, exc, tb)

    async def _close_task_group(self, *exc_info: Any) -> None:
        if self._stop is not None:
            self._stop.set()
        task_group, self._task_group = self._task_group, None
        if task_group is not None:
            await task_group.__aexit__(*exc_info)
        self._port = None

    async def _serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        server, sock = await start_uvicorn(build_app(self._state), self._host, self._requested_port)
        self._port = sock.getsockname()[1]
        task_status.started()
        try:
            assert self._stop is not None
            await self._stop.wait()
        finally:
            with anyio.CancelScope(shield=True):
                await _shutdown(server)
            sock.close()

    # ---- thread lifecycle ----------------------------------------------------------------

    def start_in_thread(self) -> Self:
        """Run the server on a background thread (for sync code); `stop()` ends it."""
        portal_cm = anyio.from_thread.start_blocking_portal()
        portal = portal_cm.__enter__()
        try:
            thread_cm = portal.wrap_async_context_manager(self)
            thread_cm.__enter__()
        except BaseException:
            portal_cm.__exit__(*sys.exc_info())
            raise
        self._portal_cm, self._thread_cm = portal_cm, thread_cm
        return self

    def stop(self) -> None:
        """Stop a server started with `start_in_thread()`."""
        thread_cm, self._thread_cm = self._thread_cm, None
        portal_cm, self._portal_cm = self._portal_cm, None
        try:
            if thread_cm is not None:
                thread_cm.__exit__(None, None, None)
        finally:
            if portal_cm is not None:
                portal_cm.__exit__(None, None, None)

    def __enter__(self) -> Self:
        return self.start_in_thread()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


async def _shutdown(server: Any) -> None:
    """Close uvicorn's listeners and connections, waiting (bounded) for responses to finish."""
    for listener in server.servers:
        listener.close()
    for connection in list(server.server_state.connections):
        connection.shutdown()
    with anyio.move_on_after(_DRAIN_SECONDS):
        while server.server_state.connections:
            await anyio.sleep(0.005)
    for task in list(server.server_state.tasks):
        task.cancel()
    for connection in list(server.server_state.connections):
        transport = getattr(connection, "transport", None)
        if transport is not None:
            transport.close()
    for listener in server.servers:
        await listener.wait_closed()


# ---- command line -------------------------------------------------------------------------


def load_script(spec: str) -> Respond:
    """The `respond` function of a built-in script name, a `.py` file, or a module name.

    Raises:
        ValueError: The script cannot be found or defines no callable `respond`.
    """
    if spec in BUILTIN_SCRIPTS:
        module: Any = importlib.import_module(BUILTIN_SCRIPTS[spec])
    elif spec.endswith(".py") or Path(spec).is_file():
        path = Path(spec)
        if not path.is_file():
            raise ValueError(f"script file not found: {spec}")
        module_spec = importlib.util.spec_from_file_location(f"_nodmix_script_{path.stem}", path)
        if module_spec is None or module_spec.loader is None:
            raise ValueError(f"cannot load script file: {spec}")
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(spec)
        except ImportError as exc:
            builtins = ", ".join(sorted(BUILTIN_SCRIPTS))
            raise ValueError(
                f"unknown script {spec!r}: not a built-in ({builtins}), file or module ({exc})"
            ) from None
    respond = getattr(module, "respond", None)
    if not callable(respond):
        raise ValueError(f"script {spec!r} defines no respond(request) function")
    return respond  # type: ignore[no-any-return]


def setup_lines(base_url: str, model: str, api_key: str | None) -> list[str]:
    """The commands that point Nodmix's default agent at this server (printed at start)."""
    from nodmix.invocation import command

    provider = (
        f'{{api: "openai-completions", baseUrl: "{base_url}", apiKey: "{api_key or "none"}", '
        f'models: [{{id: "{model}", contextWindow: 32000}}]}}'
    )
    return [
        "point nodmix at it (paste in another shell):",
        f"  {command('config set models.providers.scripted')} '{provider}'",
        f"  {command('config set agents.defaults.model.primary')} scripted/{model}",
    ]


async def _serve_until_signal(server: ScriptedModelServer, model: str, key: str | None) -> None:
    async with server:
        print(f"listening on {server.base_url}", flush=True)
        print("\n".join(setup_lines(server.base_url, model, key)), flush=True)
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                return


def main(argv: Sequence[str] | None = None) -> int:
    """Run the scripted model server until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="python -m nodmix.testing.model_server",
        description="A scripted OpenAI/Anthropic-compatible model server for trying Nodmix.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument(
        "--script",
        default="echo",
        help=f"built-in ({', '.join(sorted(BUILTIN_SCRIPTS))}), a .py file or a module"
        " defining respond(request)",
    )
    parser.add_argument("--api-key", default=None, help="require this API key")
    parser.add_argument("--model", action="append", default=None, help="listed model id")
    parser.add_argument(
        "--event-seconds",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="pause between the events of a streamed reply (a slow model, to watch replies"
        " stream); default 0",
    )
    args = parser.parse_args(argv)
    if args.event_seconds < 0:
        parser.error("--event-seconds must be 0 or more")
    try:
        respond = load_script(args.script)
    except ValueError as exc:
        print(f"model_server: error: {exc}", file=sys.stderr)
        return 2
    server = ScriptedModelServer(
        respond,
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        models=args.model or ("scripted",),
        event_seconds=args.event_seconds,
    )
    model = (args.model or ["scripted"])[0]
    anyio.run(_serve_until_signal, server, model, args.api_key)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
