"""The admission-rate benchmark's pure parts (bench/bench_admission_rate.py): where a py-spy sample's
time goes, the report from made-up runs (ratios to the no-webhook baseline, the 100-creator target),
the policy set-up's objects. No cluster, no timing."""

from __future__ import annotations

import pytest

from tests.builders.bench import bench_module

pytest.importorskip("matplotlib", reason="the test extra installs matplotlib (pip install -e '.[test]')")


@pytest.fixture(scope="module")
def mod():
    return bench_module("bench_admission_rate")


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


def run_(rate, calls=1.0, connections=0.0):
    return {"created": 10, "errors": {}, "seconds": 1.0, "rate": rate, "p50_ms": 1.0, "p99_ms": 2.0,
            "webhook calls per create": calls, "webhook connections per create": connections,
            "cpu ms per create": {"kube-apiserver": 2.0, "cogate-webhook": 0.5, "bare-webhook": 0.25}}


@pytest.mark.parametrize("rate,met", [(90.0, True), (89.0, False)])
def test_the_target_is_the_webhook_rate_against_no_webhook_at_100_creators(mod, tmp_path, rate, met):
    res = {label: {c: [run_(100.0, 0.0)] * 3 for c in mod.CONCURRENCY} for label, _, _ in mod.SETUPS}
    res["webhook, labelled"][100] = [run_(rate), run_(rate - 50), run_(rate + 1)]  # the median counts
    res[mod.BARE_SETUP][100] = [run_(95.0, 1.0, 0.2)] * 3
    out = mod._result(res, [["TLS handshake", 1.0]], 3, {1: 10, 16: 10, 100: 10}, tmp_path)
    target = out["targets"][0]
    assert target["met"] is met and target["measured"] == f"{round(rate / 100, 3)}x (the floor, a bare webhook: 0.95x)"
    floor, own = out["targets"][1:3]
    assert floor["met"] is None and floor["measured"] == "0.95x without a webhook"
    assert own["met"] is None and own["measured"] == f"{round(rate / 95, 3)}x"
    assert "100 creators: bare 0.95x of no webhook" in out["notes"][0]
    bare_row = next(r for r in out["tables"][0]["rows"] if r[0] == mod.BARE_SETUP and r[1] == 100)
    assert bare_row[8] == 0.2 and bare_row[11] == 0.25, "connections per create; the bare webhook's own CPU"
    assert (tmp_path / out["plots"][0]["file"]).exists()
    rows = out["tables"][0]["rows"]
    assert len(rows) == len(mod.SETUPS) * len(mod.CONCURRENCY)
    assert out["tables"][1]["rows"] == [["TLS handshake", 1.0]]
    run = bench_module("run")
    assert run.validate(out, tmp_path) == [], "the result follows bench/run.py's contract"


def test_the_policy_set_up_installs_what_the_chart_installs(mod):
    """The policy set-up is admission_policies (no late-label policy, as the chart's default)."""
    objs = mod.gate_policy("example.com/gate")
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objs if not o["kind"].endswith("Binding"))
    assert kinds == [("MutatingAdmissionPolicy", "bench-cogate-gate"), ("ValidatingAdmissionPolicy", "bench-cogate-refuse"),
                     ("ValidatingAdmissionPolicy", "bench-cogate-warn")]
    assert "example.com/gate" in objs[0]["spec"]["mutations"][0]["jsonPatch"]["expression"]


@pytest.fixture(scope="module")
def bare():
    return bench_module("_bare_webhook")


@pytest.mark.parametrize("body", [
    b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"7d2b-11","kind":{}}}',
    b'{"request": {"kind": {}, "uid": "7d2b-11"}}',  # not kube-apiserver's order: decoded
], ids=["kube-apiserver order", "other order"])
def test_the_bare_webhook_answers_with_the_request_uid(bare, body):
    """kube-apiserver refuses an answer whose uid is not its request's: the bare webhook's fixed
    answer gets each request's uid, the rest of it byte for byte (the patch cogate would send)."""
    import json

    fixed = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
             "response": {"uid": "old", "allowed": True, "patchType": "JSONPatch", "patch": "W10="}}
    head, tail = bare.split_at_uid(json.dumps(fixed).encode())
    answer = json.loads(head + bare.request_uid(body) + tail)
    assert answer == {**fixed, "response": {**fixed["response"], "uid": "7d2b-11"}}


def test_an_escaped_uid_is_decoded_not_cut(bare):
    body = b'{"request":{"uid":"a\\"b","kind":{}}}'
    assert bare.request_uid(body) == b'a\\"b'
