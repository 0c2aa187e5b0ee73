"""argparse types shared by cogate's commands: one place for each flag rule.

Each raises ``argparse.ArgumentTypeError`` (argparse turns it into a usage error, exit 2).
"""

from __future__ import annotations

import argparse
import math
import re

from cogate import api, logs


def seconds(text: str) -> float:
    """A finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds, got {text}")
    return value


def positive_days(text: str) -> float:
    """A finite number of days > 0 (fractions allowed, e.g. short-lived certificates)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of days: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of days > 0, got {text}")
    return value


def positive_seconds(text: str) -> float:
    """Seconds > 0."""
    value = seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def non_negative_seconds(text: str) -> float:
    """Seconds >= 0."""
    value = seconds(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def port(text: str) -> int:
    """A TCP port 0-65535; 0 picks a free port."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, got {text}")
    return value


def gate_name(text: str) -> str:
    """``--gate-name``: a Kubernetes qualified name (:func:`cogate.api.validate_gate_name`)."""
    try:
        return api.validate_gate_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: A namespace name: an RFC 1123 label (Kubernetes ``ValidateNamespaceName``: lower-case
#: letters, digits and inner hyphens, at most 63 characters).
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def namespace_name(text: str) -> str:
    """A namespace name (RFC 1123 label, as Kubernetes validates it)."""
    if not _NAMESPACE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not a namespace name (RFC 1123 label: lower-case letters, digits and "
                                         f"inner hyphens, at most 63 characters): {text!r}")
    return text


LOG_LEVELS = logs.LEVELS


def add_log_flags(parser: argparse.ArgumentParser, detail: str = "") -> None:
    """Add ``--log-level`` (any case, parsed to lower case; default ``info``) and ``--log-format``
    (``text``, default, or ``json``: :mod:`cogate.logs`) to ``parser``: the same flags, display and
    errors for every command. ``detail``: extra help text for ``--log-level``. Pass the parsed
    ``args.log_level`` and ``args.log_format`` to :func:`cogate.logs.configure`."""
    parser.add_argument("--log-level", default="info", type=str.lower, choices=LOG_LEVELS,
                        metavar="{" + ",".join(LOG_LEVELS) + "}",
                        help=f"log level, any case{'; ' + detail if detail else ''} (default: %(default)s)")
    parser.add_argument("--log-format", default="text", choices=logs.FORMATS,
                        help="log line format on stderr: text, or one JSON object per line (default: %(default)s)")
