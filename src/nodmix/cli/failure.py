"""How a failed command ends: one line on stderr, never a traceback (unless `--verbose`).

Task groups wrap what they raise in `ExceptionGroup`s, sometimes several levels deep; the user
needs the one error that caused it, not the wrapping. `leaf_error` digs it out (a Nodmix error
first, since its message is written for the user), and `one_line` renders any exception as the
single line the CLI prints.
"""

from __future__ import annotations

from collections.abc import Iterator

from nodmix.errors import NodmixError, ProviderUnreachableError, resource_exhaustion
from nodmix.invocation import command

VERBOSE_HINT = "run again with --verbose for details"


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def leaf_error(exc: BaseException) -> BaseException:
    """The error to report: the first Nodmix error inside `exc`, else its first leaf."""
    leaves = list(_leaves(exc))
    if not leaves:
        return exc
    for leaf in leaves:
        if isinstance(leaf, NodmixError):
            return leaf
    for leaf in leaves:
        if not isinstance(leaf, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            return leaf
    return leaves[0]


def is_interrupt(exc: BaseException) -> bool:
    """True if every leaf of `exc` is a Ctrl-C."""
    return all(isinstance(leaf, KeyboardInterrupt) for leaf in _leaves(exc))


def exhaustion_line(exc: BaseException) -> str | None:
    """The line for the first out-of-files or out-of-disk error among `exc`'s leaves, if any."""
    for leaf in _leaves(exc):
        found = resource_exhaustion(leaf)
        if found is not None:
            return found
    return None


def one_line(exc: BaseException) -> str:
    """The single line printed for `exc` (without the `nodmix: error:` prefix)."""
    if isinstance(exc, NodmixError):
        text = str(exc)
        if isinstance(exc, ProviderUnreachableError) and "pick a model" not in text:
            # The built-in fallback is a local Ollama a newcomer may not have.
            hint = command("config set agents.defaults.model.primary <provider/model>")
            text = f"{text} (or pick a model with `{hint}`)"
    elif isinstance(exc, ModuleNotFoundError):
        name = exc.name or "a module"
        text = (
            f"the Python package providing {name!r} is missing from this install; "
            f"reinstall nodmix (`pip install --force-reinstall nodmix`), or `pip install {name}`"
        )
    elif isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        text = f"{exc.strerror}{where} ({VERBOSE_HINT})"
    else:
        detail = str(exc)
        name = type(exc).__name__
        text = f"{name}: {detail} ({VERBOSE_HINT})" if detail else f"{name} ({VERBOSE_HINT})"
    return " ".join(text.split()) if "\n" in text else text
