"""One logging setup for every cogate process: ``cogate controller``, ``cogate webhook``, ``cogate certs``.

Each entry point takes ``--log-level`` and ``--log-format`` (:func:`cogate.cliargs.add_log_flags`)
and calls :func:`configure` once, before it logs. Both formats write one line per record to
stderr and carry the same fields:

* ``text`` (the command line's default)::

      2025-01-31T12:00:00.123Z INFO cogate.controller: released podgroup=research/llm

  UTC time (milliseconds), level, logger, message, then ``key=value`` for the PodGroup and every
  other ``extra=`` field (values with spaces or quotes are JSON-quoted), then the traceback.
* ``json`` (the Helm chart's default)::

      {"ts": 1738324800.123, "level": "info", "logger": "cogate.controller", "msg": "released",
       "podgroup": "research/llm"}

  ``ts`` in epoch seconds, ``level`` in lower case, every ``extra=`` field as a key, ``exc``
  with the traceback, if any.

``podgroup``: every line about one PodGroup passes ``extra={"podgroup": "<namespace>/<name>"}``
(:func:`podgroup`), so the lines of one group can be found in either format.

Like kopf's ``loggers.configure``; the standard library only (no logging dependency).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

__all__ = ["FORMATS", "LEVELS", "PODGROUP", "JsonFormatter", "TextFormatter", "configure", "podgroup"]

#: ``--log-format`` values.
FORMATS = ("text", "json")
#: ``--log-level`` values.
LEVELS = ("debug", "info", "warning", "error")
#: The LogRecord attribute naming the PodGroup a line is about ("<namespace>/<name>").
PODGROUP = "podgroup"

#: Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}


def podgroup(namespace: str, name: str) -> dict[str, str]:
    """``extra=`` for a line about one PodGroup: ``{"podgroup": "<namespace>/<name>"}``."""
    return {PODGROUP: f"{namespace}/{name}"}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    """The record's ``extra=`` fields, ``podgroup`` first, the rest in the order given."""
    out: dict[str, Any] = {}
    if getattr(record, PODGROUP, None) is not None:
        out[PODGROUP] = getattr(record, PODGROUP)
    for key, value in record.__dict__.items():
        if key not in _STANDARD_ATTRS and not key.startswith("_") and key != PODGROUP:
            out[key] = value
    return out


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (epoch seconds), ``level``, ``logger``, ``msg``,
    ``podgroup`` when set, every other ``extra=`` field, ``exc`` with the traceback if any.
    Values JSON cannot encode are written as ``str(value)``."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update(_extras(record))
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str)


def _logfmt_value(value: Any) -> str:
    """``value`` as one ``key=value`` token: numbers, booleans and null as in JSON, other values
    as text, JSON-quoted when empty or holding spaces, quotes or ``=``."""
    text = json.dumps(value) if value is None or isinstance(value, (bool, int, float)) else str(value)
    if not text or any(c.isspace() or c in '"=' for c in text):
        return json.dumps(text)
    return text


class TextFormatter(logging.Formatter):
    """``<UTC time> <LEVEL> <logger>: <message> podgroup=<ns>/<name> key=value ...``, then
    the traceback on the following lines, if any."""

    converter = time.gmtime

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - stdlib name
        return time.strftime("%Y-%m-%dT%H:%M:%S", self.converter(record.created)) + f".{int(record.msecs):03d}Z"

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - stdlib name
        line = super().formatMessage(record)
        fields = " ".join(f"{k}={_logfmt_value(v)}" for k, v in _extras(record).items())
        return f"{line} {fields}" if fields else line


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler :func:`configure` installs (and a later call replaces)."""


def configure(level: str, fmt: str = "text", stream: TextIO | None = None) -> logging.Handler:
    """Send every log record at ``level`` or above to ``stream`` (default stderr) in ``fmt``.

    ``level``: one of :data:`LEVELS`, any case; ``fmt``: one of :data:`FORMATS`. Sets the root
    logger's level and replaces the handler an earlier call installed (handlers others added,
    such as a test runner's, stay). Returns the new handler. Raises ``ValueError`` on an
    unknown level or format.
    """
    if level.lower() not in LEVELS:
        raise ValueError(f"unknown log level {level!r}; one of {', '.join(LEVELS)}")
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r}; one of {', '.join(FORMATS)}")
    handler = _Handler(sys.stderr if stream is None else stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    return handler
