"""``cogate <command> --help``: one plain-sentence description, every option's default shown
the same way, ``--log-level`` and ``--log-format`` shown and accepted alike in controller, webhook and certs;
bad flag values end in a usage error (exit 2), never a traceback; ``--gate-name`` follows
one rule (``cogate.api.validate_gate_name``) in the controller and the webhook."""

from __future__ import annotations

import re

import pytest

from cogate import api, ungate
from cogate.certs import bootstrap
from cogate import explain as explain_cli
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
    ("explain",): explain_cli.main,
    ("ungate",): ungate.main,
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


@pytest.mark.parametrize("command", [("controller",), ("webhook",), ("certs",)], ids=" ".join)
def test_log_format_displayed_alike(command, capsys):
    text = _help(command, capsys)
    assert "[--log-format {text,json}]" in " ".join(text.split())
    assert _option_entries(text)["--log-format"].endswith("(default: text)")


@pytest.mark.parametrize("build, extra", [(controller_main.build_parser, []),
                                          (webhook_main.build_parser, ["--insecure-http"]),
                                          (bootstrap.build_parser, ["generate", "--out", "x", "--dns", "a"])])
def test_log_format_parsed_alike(build, extra, capsys):
    assert build().parse_args(extra).log_format == "text"
    assert build().parse_args(["--log-format", "json", *extra]).log_format == "json"
    with pytest.raises(SystemExit) as exc:
        build().parse_args(["--log-format", "yaml", *extra])
    assert exc.value.code == 2
    assert "invalid choice: 'yaml' (choose from 'text', 'json')" in capsys.readouterr().err


def test_log_level_any_case():
    assert controller_main.build_parser().parse_args(["--log-level", "Debug"]).log_level == "debug"
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


# --------------------------------------------------------------------------- bad flag values: usage error, exit 2


def _usage_error(parse, argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        parse(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" in err and "Traceback" not in err
    return err


@pytest.mark.parametrize("argv, flag", [
    (["--resync", "0"], "--resync"),
    (["--resync", "-5"], "--resync"),
    (["--resync", "nan"], "--resync"),
    (["--resync", "soon"], "--resync"),
    (["--workers", "0"], "--workers"),
    (["--workers", "-1"], "--workers"),
    (["--workers", "2.5"], "--workers"),
    (["--reservation-ttl", "0"], "--reservation-ttl"),
    (["--reservation-ttl", "inf"], "--reservation-ttl"),
    (["--debounce", "-0.1"], "--debounce"),
    (["--starvation-seconds", "-1"], "--starvation-seconds"),
    (["--metrics-port", "70000"], "--metrics-port"),
    (["--gate-name", "Bad Gate"], "--gate-name"),
])
def test_controller_rejects_bad_values_with_a_usage_error(argv, flag, capsys):
    err = _usage_error(controller_main.main, argv, capsys)
    assert f"argument {flag}" in err


@pytest.mark.parametrize("argv, attr, value", [
    (["--resync", "0.5"], "resync", 0.5),
    (["--workers", "1"], "workers", 1),
    (["--debounce", "0"], "debounce", 0.0),  # 0: no coalescing
    (["--starvation-seconds", "0"], "starvation_seconds", 0.0),  # 0: strict order
    (["--metrics-port", "0"], "metrics_port", 0),  # 0: a free port
    (["--gate-name", "example.com/gang"], "gate_name", "example.com/gang"),
])
def test_controller_accepts_boundary_values(argv, attr, value):
    assert getattr(controller_main.build_parser().parse_args(argv), attr) == value


# --------------------------------------------------------------------------- --gate-name: one rule in cogate.api

VALID_GATE_NAMES = [api.DEFAULT_GATE_NAME, "gang", "example.com/gang", "a", "x.y-z/A_b.c-9", "a" * 63,
                    ("s" * 253) + "/n", "a.b/c"]
INVALID_GATE_NAMES = ["", "/gang", "example.com/", "Example.com/gang", "-gang", "gang-", "a" * 64,
                      ("s" * 254) + "/n", "a/b/c", "sp ace", "ex_ample.com/gang", "gang/"]


@pytest.mark.parametrize("name", VALID_GATE_NAMES)
def test_valid_gate_names(name):
    assert api.validate_gate_name(name) == name
    assert controller_main.build_parser().parse_args(["--gate-name", name]).gate_name == name
    assert webhook_main.build_parser().parse_args(["--gate-name", name, "--insecure-http"]).gate_name == name


@pytest.mark.parametrize("name", INVALID_GATE_NAMES)
def test_invalid_gate_names_rejected_alike_by_both_components(name, capsys):
    with pytest.raises(ValueError, match="gate name") as info:
        api.validate_gate_name(name)
    message = str(info.value)
    for parse in (controller_main.main, lambda argv: webhook_main.main([*argv, "--insecure-http"])):
        err = _usage_error(parse, [f"--gate-name={name}"], capsys)
        assert "argument --gate-name" in err and message in err


@pytest.mark.parametrize("value", [None, 3, b"gang"])
def test_gate_name_must_be_a_string(value):
    with pytest.raises(ValueError, match="non-empty string"):
        api.validate_gate_name(value)


# --------------------------------------------------------------------------- the container image: no local cluster


@pytest.mark.parametrize("argv", [["demo"], ["dev", "up"], ["dev", "--help"]])
def test_local_cluster_commands_say_when_it_is_not_installed(argv, monkeypatch, capsys):
    """In the image (built without ``cogate.localcluster``) ``cogate demo|dev`` explain, exit 1, no traceback."""
    import importlib.util

    from cogate import cli

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(cli.importlib.util, "find_spec",
                        lambda name, *a: None if name == cli.LOCAL_CLUSTER else real_find_spec(name, *a))
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"cogate {argv[0]}: the local control plane is not installed in this image; ")
    assert "Traceback" not in err
    assert cli.main(["--help"]) == 0
    listed = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    assert listed["demo"].endswith("(not installed here)") and listed["dev"].endswith("(not installed here)")
    assert not listed["webhook"].endswith("(not installed here)")


def test_controller_connection_pool_holds_every_request_in_flight():
    # Issue 19: a release sends --workers patches at once while the status workers (half as many),
    # the long watches (up to 11) and the recorder and lease hold connections too; a pool smaller
    # than that throws connections away and opens new ones (TLS handshakes) under a release.
    from cogate.controller.release import refusers

    watches = 7 + len(refusers.ADMISSION_RESOURCES)
    for workers in (1, 8, controller_main.DEFAULT_WORKERS, 100):
        assert controller_main.connection_pool_size(workers) >= workers + max(1, workers // 2) + watches + 2
    assert controller_main.build_parser().parse_args([]).workers == controller_main.DEFAULT_WORKERS


# --------------------------------------------------------------------------- --adopt-scheduler-name (issue 20)


def test_webhook_help_explains_adoption(capsys):
    entry = _option_entries(_help(("webhook",), capsys))["--adopt-scheduler-name"]
    assert "repeatable" in entry and "scheduler-plugins-scheduler" in entry
    assert "'default-scheduler'" in entry and entry.endswith("(default: none)")


@pytest.mark.parametrize("argv, message", [
    (["--adopt-scheduler-name", "default-scheduler"], "it is the scheduler adopted pods are rewritten to"),
    (["--scheduler-name", "sps", "--adopt-scheduler-name", "sps"], "is also a --scheduler-name"),
])
def test_contradictory_adoption_is_a_usage_error(argv, message, capsys):
    err = _usage_error(lambda a: webhook_main.main([*a, "--insecure-http"]), argv, capsys)
    assert message in err and "Traceback" not in err


def test_adoption_flag_is_repeatable():
    args = webhook_main.build_parser().parse_args(
        ["--insecure-http", "--adopt-scheduler-name", "a", "--adopt-scheduler-name", "b"])
    assert args.adopt_scheduler_names == ["a", "b"]
