"""``cogate <command> --help``: one plain-sentence description, every option's default shown
the same way, ``--log-level`` shown and accepted alike in controller, webhook and certs."""

from __future__ import annotations

import re

import pytest

from cogate.certs import bootstrap
from cogate.controller import main as controller_main
from cogate.localcluster import demo, dev
from cogate.webhook import main as webhook_main

#: argv prefix -> entry point taking argv (each prints help and exits 0 on --help)
COMMANDS = {
    ("controller",): controller_main.main,
    ("webhook",): webhook_main.main,
    ("certs",): bootstrap.main,
    ("certs", "bootstrap"): bootstrap.main,
    ("certs", "generate"): bootstrap.main,
    ("demo",): demo.main,
    ("dev",): dev.main,
    ("dev", "up"): dev.main,
}


def _help(command: tuple[str, ...], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        COMMANDS[command]([*command[1:], "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def _option_entries(text: str) -> dict[str, str]:
    """``{"--flag": "its help text, continuation lines joined"}`` from the options section."""
    section = text.split("\noptions:\n", 1)[1]
    entries: dict[str, str] = {}
    current = None
    for line in section.splitlines():
        m = re.match(r"^  (-\S.*?)(?:\s{2,}(.*))?$", line)
        if m:
            current = m.group(1).split(",")[0].split()[0]
            entries[current] = m.group(2) or ""
        elif current and line.startswith("    "):
            entries[current] += " " + line.strip()
    return entries


@pytest.mark.parametrize("command", list(COMMANDS), ids=" ".join)
def test_description_is_plain_text(command, capsys):
    text = _help(command, capsys)
    description = text.split("\n\n", 2)[1]
    assert "``" not in description and "`cogate" not in description
    assert description[0].isupper() and description.rstrip().endswith("."), description


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != ("dev",)], ids=" ".join)  # `dev`: -h only
def test_every_option_states_its_default(command, capsys):
    entries = _option_entries(_help(command, capsys))
    entries.pop("-h")
    assert entries, "no options parsed"
    missing = {flag: help_ for flag, help_ in entries.items()
               if "(default: " not in help_ and "(required)" not in help_
               and "required unless" not in help_}
    assert not missing


@pytest.mark.parametrize("command", [("controller",), ("webhook",), ("certs",)], ids=" ".join)
def test_log_level_displayed_alike(command, capsys):
    text = _help(command, capsys)
    assert "[--log-level {debug,info,warning,error}]" in " ".join(text.split())
    assert _option_entries(text)["--log-level"].endswith("(default: info)")


def test_log_level_any_case():
    assert controller_main.build_parser().parse_args(["--log-level", "Debug"]).log_level == "DEBUG"
    assert webhook_main.build_parser().parse_args(["--log-level", "Debug", "--insecure-http"]).log_level == "debug"
    assert bootstrap.build_parser().parse_args(["--log-level", "WARNING", "generate", "--out", "x", "--dns", "a"]
                                               ).log_level == "warning"


@pytest.mark.parametrize("build", [controller_main.build_parser, webhook_main.build_parser, bootstrap.build_parser])
def test_log_level_rejects_unknown(build, capsys):
    with pytest.raises(SystemExit) as exc:
        build().parse_args(["--log-level", "verbose"])
    assert exc.value.code == 2
    assert "invalid choice: 'verbose' (choose from 'debug', 'info', 'warning', 'error')" in capsys.readouterr().err


def test_certs_bootstrap_shows_real_defaults(capsys):
    entries = _option_entries(_help(("certs", "bootstrap"), capsys))
    assert entries["--secret-name"].endswith("(default: cogate-webhook-cert)")
    assert entries["--service-name"].endswith("(default: cogate-webhook)")
    assert entries["--cert-dir"].endswith(f"(default: {bootstrap.build_parser().parse_args(['bootstrap']).cert_dir})")
    assert entries["--rotate-before-days"].endswith(f"(default: {bootstrap.DEFAULT_ROTATE_BEFORE_DAYS})")
