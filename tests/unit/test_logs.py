"""cogate.logs: one logging setup for every entry point; JSON and text lines carry the same fields,
``podgroup`` included, and exceptions; ``configure`` replaces only its own handler."""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys

import pytest

from cogate import logs


def record(msg: str = "released %s", args: tuple = ("3 members",), exc_info=None, **extra) -> logging.LogRecord:
    rec = logging.LogRecord("cogate.controller", logging.INFO, __file__, 7, msg, args, exc_info)
    rec.created = 1738324800.25  # 2025-01-31T12:00:00.250Z
    rec.msecs = 250.0
    for key, value in extra.items():
        setattr(rec, key, value)
    return rec


def failing_exc_info():
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        return sys.exc_info()


# ---------------------------------------------------------------- JSON


def test_json_line_parses_with_the_standard_fields():
    line = logs.JsonFormatter().format(record())
    assert "\n" not in line
    assert json.loads(line) == {"ts": 1738324800.25, "level": "info", "logger": "cogate.controller",
                                "msg": "released 3 members"}


def test_json_podgroup_present_when_given():
    data = json.loads(logs.JsonFormatter().format(record(**logs.podgroup("research", "llm"))))
    assert data["podgroup"] == "research/llm"
    assert list(data)[:5] == ["ts", "level", "logger", "msg", "podgroup"]


def test_json_other_extras_are_keys_and_unencodable_values_become_text():
    data = json.loads(logs.JsonFormatter().format(record(event="tls_reloaded", path=re.compile("x"), seconds=0.5)))
    assert data["event"] == "tls_reloaded" and data["seconds"] == 0.5
    assert data["path"] == str(re.compile("x"))
    assert "podgroup" not in data


def test_json_exception_in_one_line():
    line = logs.JsonFormatter().format(record(exc_info=failing_exc_info()))
    assert "\n" not in line
    exc = json.loads(line)["exc"]
    assert exc.startswith("Traceback (most recent call last):") and exc.endswith("RuntimeError: boom")


# ---------------------------------------------------------------- text


def test_text_line_layout():
    line = logs.TextFormatter().format(record())
    assert line == "2025-01-31T12:00:00.250Z INFO cogate.controller: released 3 members"


def test_text_podgroup_present_when_given_and_first():
    line = logs.TextFormatter().format(record(event="released", **logs.podgroup("research", "llm")))
    assert line.endswith(": released 3 members podgroup=research/llm event=released")


def test_text_quotes_values_that_would_split():
    line = logs.TextFormatter().format(record(reason='bad "uid" field', empty="", count=3, tls=True, at=None,
                                              path=re.compile("a b")))
    assert line.endswith(' reason="bad \\"uid\\" field" empty="" count=3 tls=true at=null path="re.compile(\'a b\')"')


def test_text_exception_follows_the_line():
    text = logs.TextFormatter().format(record(exc_info=failing_exc_info(), **logs.podgroup("ns", "g")))
    first, *rest = text.splitlines()
    assert first.endswith("released 3 members podgroup=ns/g")
    assert rest[0] == "Traceback (most recent call last):" and rest[-1] == "RuntimeError: boom"


# ---------------------------------------------------------------- configure


@pytest.fixture
def root_logger():
    """The root logger, restored (level and handlers) afterwards."""
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    yield root
    root.setLevel(saved[0])
    root.handlers[:] = saved[1]


@pytest.mark.parametrize("fmt, check", [
    ("json", lambda line: json.loads(line)["podgroup"] == "ns/g"),
    ("text", lambda line: line.endswith("WARNING cogate.test: short podgroup=ns/g")),
])
def test_configure_writes_the_chosen_format(root_logger, fmt, check):
    out = io.StringIO()
    logs.configure("Warning", fmt, stream=out)
    logging.getLogger("cogate.test").info("not at info")
    logging.getLogger("cogate.test").warning("short", extra=logs.podgroup("ns", "g"))
    (line,) = out.getvalue().splitlines()
    assert check(line), line
    assert root_logger.level == logging.WARNING


def test_configure_replaces_only_its_own_handler(root_logger):
    other = logging.NullHandler()
    root_logger.addHandler(other)
    first, second = io.StringIO(), io.StringIO()
    logs.configure("info", "text", stream=first)
    logs.configure("info", "json", stream=second)
    logging.getLogger("cogate.test").info("once")
    assert first.getvalue() == "" and json.loads(second.getvalue())["msg"] == "once"
    assert other in root_logger.handlers


@pytest.mark.parametrize("level, fmt, message", [("verbose", "text", "unknown log level"),
                                                 ("info", "yaml", "unknown log format")])
def test_configure_rejects_unknown_values(root_logger, level, fmt, message):
    with pytest.raises(ValueError, match=message):
        logs.configure(level, fmt)


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_controller_process_logs_in_the_chosen_format(tmp_path, fmt):
    """The real entry point: a bad kubeconfig is reported on one line in ``--log-format``."""
    proc = subprocess.run(
        [sys.executable, "-m", "cogate.controller.main", "--kubeconfig", str(tmp_path / "missing"),
         "--log-format", fmt],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if "Kubernetes client configuration" in x]
    if fmt == "json":
        data = json.loads(line)
        assert (data["level"], data["logger"]) == ("error", "cogate.controller")
    else:
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ERROR cogate\.controller: cannot load", line), line
