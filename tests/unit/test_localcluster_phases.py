"""localcluster/phases.py: the per-phase table `.ci/run` prints, and the warning before CI's limit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cogate.localcluster import phases

SCRIPT = Path(phases.__file__)


def test_record_appends_one_line_per_phase_and_parse_reads_them_back(tmp_path):
    f = tmp_path / "phases"
    phases.record("build kubernetes v1.36.3", 533.04, f)
    phases.record("tests:\tfull\nsuite", 1884.6, f)
    f.write_text(f.read_text() + "garbage line\n12.0\t\n")
    assert phases.parse(f.read_text()) == [("build kubernetes v1.36.3", 533.0), ("tests: full suite", 1884.6)]


def test_record_without_a_file_records_nothing(monkeypatch, tmp_path):
    monkeypatch.delenv(phases.PHASES_ENV, raising=False)
    phases.record("anything", 1.0)  # no error, nowhere written
    monkeypatch.setenv(phases.PHASES_ENV, str(tmp_path / "p"))
    phases.record("x", 2.0)
    assert (tmp_path / "p").read_text() == "2.0\tx\n"


def test_report_sums_the_phases_and_warns_only_within_the_margin():
    rows = [("build a", 600.0), ("tests", 1200.0)]
    quiet = phases.report(rows, total=1900.0)
    assert [l.split()[-2:] for l in quiet.splitlines()[3:]] == [["1800", "30:00"], ["1900", "31:40"]]
    assert "whole run" in quiet and "31:40" in quiet
    assert "WARNING" not in quiet
    # 70 minutes is within 20 of 90: warned, with the table above the warning
    close = phases.report(rows, total=70 * 60)
    assert close.splitlines()[-1].startswith("WARNING: this run took 70:00, within 20:00 of CI's limit of 90:00")
    assert phases.report(rows, total=70 * 60 - 1).count("WARNING") == 0
    # without the whole run's time the sum decides
    assert "WARNING" in phases.report([("x", 4200.0)])


def test_run_records_the_command_and_keeps_its_exit_code(tmp_path):
    f = tmp_path / "phases"
    env = {phases.PHASES_ENV: str(f), "PATH": "/usr/bin:/bin"}
    ok = subprocess.run([sys.executable, str(SCRIPT), "run", "pass", "--", "true"], env=env)
    bad = subprocess.run([sys.executable, str(SCRIPT), "run", "fail", "--", "sh", "-c", "exit 3"], env=env)
    assert (ok.returncode, bad.returncode) == (0, 3)
    assert [p for p, _ in phases.parse(f.read_text())] == ["pass", "fail"]
    shown = subprocess.run([sys.executable, str(SCRIPT), "report", str(f)], env=env, capture_output=True, text=True)
    assert shown.returncode == 0 and "pass" in shown.stdout and "fail" in shown.stdout
    usage = subprocess.run([sys.executable, str(SCRIPT), "run", "x"], env=env, capture_output=True, text=True)
    assert usage.returncode == 2 and "usage" in usage.stderr


def test_background_phases_are_listed_but_not_summed(monkeypatch, tmp_path):
    f = tmp_path / "phases"
    monkeypatch.setenv(phases.PREFIX_ENV, phases.BACKGROUND + " ")
    phases.record("build kubernetes v1.37.2", 500.0, f)
    monkeypatch.delenv(phases.PREFIX_ENV)
    phases.record("tests", 600.0, f)
    rows = phases.parse(f.read_text())
    assert rows == [("(background) build kubernetes v1.37.2", 500.0), ("tests", 600.0)]
    table = phases.report(rows).splitlines()
    assert table[1].startswith("(background) build kubernetes v1.37.2")
    assert table[3].split()[-2:] == ["600", "10:00"]  # the sum: the foreground phase only
