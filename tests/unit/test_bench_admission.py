"""The admission-rate benchmark's pure parts (bench/bench_admission_rate.py): where a py-spy sample's
time goes, the report from made-up runs (ratios to the no-webhook baseline, the 100-creator target),
the policy set-up's objects. No cluster, no timing."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the test extra installs matplotlib (pip install -e '.[test]')")

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def mod():
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("bench_admission_rate")
    finally:
        sys.path.remove(str(BENCH))


def test_each_sample_goes_to_the_first_bucket_its_innermost_frames_name(mod, tmp_path):
    raw = tmp_path / "p.txt"
    raw.write_text("\n".join([
        "run (asyncio/base_events.py:1);_mutate (webhook/server.py:1);evaluate (webhook/admission.py:10) 6",
        "run (asyncio/base_events.py:1);do_handshake (ssl.py:1) 3",
        "run (asyncio/base_events.py:1);select (selectors.py:1) 1",
        "not a sample line",
    ]))
    assert mod.summarise_profile(raw) == [["admission rules (evaluate)", 60.0], ["TLS handshake", 30.0],
                                          ["event loop and idle (asyncio, select)", 10.0]]
    empty = tmp_path / "e.txt"
    empty.write_text("")
    assert mod.summarise_profile(empty) == []


def run_(rate, calls=1.0):
    return {"created": 10, "errors": {}, "seconds": 1.0, "rate": rate, "p50_ms": 1.0, "p99_ms": 2.0,
            "webhook calls per create": calls, "cpu ms per create": {"kube-apiserver": 2.0, "cogate-webhook": 0.5}}


@pytest.mark.parametrize("rate,met", [(90.0, True), (89.0, False)])
def test_the_target_is_the_webhook_rate_against_no_webhook_at_100_creators(mod, tmp_path, rate, met):
    res = {label: {c: [run_(100.0, 0.0)] * 3 for c in mod.CONCURRENCY} for label, _, _ in mod.SETUPS}
    res["webhook, labelled"][100] = [run_(rate), run_(rate - 50), run_(rate + 1)]  # the median counts
    out = mod._result(res, [["TLS handshake", 1.0]], 3, {1: 10, 16: 10, 100: 10}, tmp_path)
    target = out["targets"][0]
    assert target["met"] is met and target["measured"] == f"{round(rate / 100, 3)}x"
    assert (tmp_path / out["plots"][0]["file"]).exists()
    rows = out["tables"][0]["rows"]
    assert len(rows) == len(mod.SETUPS) * len(mod.CONCURRENCY)
    assert out["tables"][1]["rows"] == [["TLS handshake", 1.0]]
    sys.path.insert(0, str(BENCH))
    try:
        run = importlib.import_module("run")
    finally:
        sys.path.remove(str(BENCH))
    assert run.validate(out, tmp_path) == [], "the result follows bench/run.py's contract"


def test_the_policy_set_up_installs_what_the_chart_installs(mod):
    """The policy set-up is admission_policies (no late-label policy, as the chart's default)."""
    objs = mod.gate_policy("example.com/gate")
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objs if not o["kind"].endswith("Binding"))
    assert kinds == [("MutatingAdmissionPolicy", "bench-cogate-gate"), ("ValidatingAdmissionPolicy", "bench-cogate-refuse"),
                     ("ValidatingAdmissionPolicy", "bench-cogate-warn")]
    assert "example.com/gate" in objs[0]["spec"]["mutations"][0]["jsonPatch"]["expression"]
