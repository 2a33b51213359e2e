"""Every exception Nodmix raises on purpose.

```
NodmixError                      base; `str(err)` is one readable line
├── ConfigError                  bad or missing configuration (names the file and key)
├── PluginError                  a plugin failed to load or broke its contract
├── ProviderError                a model provider call failed
│   ├── ProviderAuthError        401/403, missing key: the user must fix it
│   ├── ProviderRequestError     400-class request problems (bad model id, bad payload)
│   ├── RateLimitedError         429; retried with backoff
│   ├── ProviderUnavailableError 5xx, resets, connection errors; retried, then fallbacks
│   │   └── ProviderTimeoutError no connection or no stream event in time; retried
│   ├── ProviderUnreachableError connection refused by a local server; not retried
│   ├── ProviderProtocolError    a malformed stream; not retried
│   └── ContextOverflowError     the request does not fit the model's context window
├── ToolError                    raised by a tool; becomes an error result for the model
│   └── WorkspaceEscapeError     a path points outside the agent workspace
├── SessionError                 unknown session, bad session key
├── TranscriptError              a transcript file cannot be read
├── StateUnavailableError        the shared state database cannot be reached (postgres backend)
├── SandboxError                 the code-mode sandbox runtime failed (not a guest error)
│   └── RuntimeUnavailableError  quickjs.wasm missing, corrupt, or failed to load
├── MCPError                     an MCP server failed to start or answer
├── SkillError                   a skill cannot be installed, removed or found
└── TurnError                    a turn could not complete (step cap, every model failed)
    └── PromptTooLargeError      the user's message alone cannot fit the model's window
```

User mistakes (config, keys, unknown models) end the CLI with one line and a non-zero exit;
`--verbose` adds the traceback. So does running out of a system resource (open files, disk
space): `resource_exhaustion` finds such a cause behind any error and says what to do.
"""

from __future__ import annotations

import errno

_RESOURCE_ADVICE = {
    errno.EMFILE: "this process has too many open files; raise the limit (`ulimit -n`)",
    errno.ENFILE: "the system has too many open files; close some programs or raise fs.file-max",
    errno.ENOSPC: "the disk is full; free some space",
    errno.EDQUOT: "the disk quota is used up; free some space",
}


class NodmixError(Exception):
    """Base class of all Nodmix errors. The message is one readable, actionable line."""


class ConfigError(NodmixError):
    """The configuration is invalid or incomplete."""

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None) -> None:
        self.file = file
        self.key = key
        self.detail = message
        where = ": ".join(part for part in (file, key) if part)
        super().__init__(f"{where}: {message}" if where else message)


class PluginError(NodmixError):
    """A plugin could not be loaded or registered something invalid."""


class ProviderError(NodmixError):
    """A model provider request failed.

    `retryable` errors are retried with backoff and then handed to the fallback chain;
    the others are the user's to fix (bad key, unknown model) and end the turn at once.
    """

    retryable: bool = False
    fallback_eligible: bool = False

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        status: int | None = None,
        body: str | None = None,
    ) -> None:
        self.provider = provider
        self.status = status
        self.body = body
        super().__init__(message)


class ProviderAuthError(ProviderError):
    """The provider rejected the credentials, or none were configured."""


class ProviderRequestError(ProviderError):
    """The provider rejected the request itself (unknown model, invalid payload)."""


class RateLimitedError(ProviderError):
    """HTTP 429: slow down. `retry_after` is in seconds when the provider said so."""

    retryable = True
    fallback_eligible = True

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: object) -> None:
        self.retry_after = retry_after
        super().__init__(message, **kwargs)  # type: ignore[arg-type]


class ProviderUnavailableError(ProviderError):
    """5xx responses, timeouts and connection failures."""

    retryable = True
    fallback_eligible = True


class ProviderTimeoutError(ProviderUnavailableError):
    """The provider did not connect, or sent no stream event, within the configured time."""


class ProviderUnreachableError(ProviderError):
    """A local model server refused the connection: retrying will not start it."""

    fallback_eligible = True


class ProviderProtocolError(ProviderError):
    """The provider answered with something that is not the API's stream format."""

    fallback_eligible = True


class ContextOverflowError(ProviderError):
    """The prompt does not fit the model's context window; compaction can recover it."""


class ToolError(NodmixError):
    """Raised by a tool to report a failure to the model (not a crash of the turn)."""


class WorkspaceEscapeError(ToolError):
    """A tool path resolves outside the agent workspace."""


class SessionError(NodmixError):
    """A session key is malformed or names no session."""


class TranscriptError(NodmixError):
    """A transcript file cannot be parsed (beyond a repairable torn last line)."""


class StateUnavailableError(NodmixError):
    """The state database (`state.backend: "postgres"`) cannot be reached or refused a write."""


class SandboxError(NodmixError):
    """The sandbox runtime itself failed. Guest errors are results, not exceptions."""


class RuntimeUnavailableError(SandboxError):
    """The QuickJS-WASI runtime cannot be loaded; code mode fails closed."""


class MCPError(NodmixError):
    """An MCP server could not be started, reached, or understood."""


class SkillError(NodmixError):
    """A skill cannot be installed, removed or found (`nodmix skills ...`)."""


class TurnError(NodmixError):
    """A turn could not be completed."""


class PromptTooLargeError(TurnError):
    """The user's message cannot fit the model's context window; nothing was sent."""

    def __init__(self, message: str, *, tokens: int, context_window: int) -> None:
        self.tokens = tokens
        self.context_window = context_window
        super().__init__(message)


def resource_exhaustion(exc: BaseException) -> str | None:
    """One line for an error caused by running out of open files or disk space, else None.

    Looks through the exception's causes and context (an error raised `from None` while
    handling an `OSError` still records it), so a `TranscriptError` that hit `EMFILE` counts.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _RESOURCE_ADVICE:
            return f"{str(exc) or type(exc).__name__} ({_RESOURCE_ADVICE[current.errno]})"
        current = current.__cause__ or current.__context__
    return None
