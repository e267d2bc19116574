"""The host's log, attributed to the plugin and to the key being reconciled.

`log.info(f"copied {name} to {namespace}")`. The host's log filter decides what is shown, and
each line carries the plugin and the key. `print()` and the standard `logging` module work too,
through WASI stdout and stderr (the host logs their lines at info and warn, without the level
`logging` assigned); this module's levels are the host's own.
"""

from __future__ import annotations

from wit_world.imports import log as host
from wit_world.imports.log import Level

__all__ = ["Level", "write", "trace", "debug", "info", "warn", "error"]


def write(level: Level, message: str) -> None:
    """Logs `message` at `level`."""
    host.log(level, message)


def trace(message: str) -> None:
    """Logs at trace level."""
    host.log(Level.TRACE, message)


def debug(message: str) -> None:
    """Logs at debug level."""
    host.log(Level.DEBUG, message)


def info(message: str) -> None:
    """Logs at info level."""
    host.log(Level.INFO, message)


def warn(message: str) -> None:
    """Logs at warn level."""
    host.log(Level.WARN, message)


def error(message: str) -> None:
    """Logs at error level."""
    host.log(Level.ERROR, message)
