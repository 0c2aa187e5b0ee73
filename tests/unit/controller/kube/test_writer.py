"""API writes against in-memory fakes (controller/kube/writer.py): gate removal retries and races."""

from __future__ import annotations

import pytest

import copy
import itertools

from cogate.controller.model import records
from cogate.controller.planning.patches import release_patch
from cogate.controller.kube.writer import cached_release_ops

from tests.unit.controller.planning.test_patches import AFFINITY_SHAPES
from tests.builders import GATE, NS, ApiError, Harness, raw_pg, raw_pod


@pytest.mark.parametrize("errors,expected,gates_left", [
    ([ApiError(409)], "removed", False),
    ([ApiError(429), ApiError(503)], "removed", False),
    ([ApiError(500)] * 4, "failed", True),
    ([ApiError(403)], "refused", True),
    ([ApiError(404)], "not_found", True),
])
def test_gate_removal_retries(errors, expected, gates_left):
    h = Harness([raw_pod("a")], [raw_pg(min_member=1)], [])
    h.cluster.pod_errors["a"] = list(errors)
    assert h.rec.writer.ungate(NS, "a", "uid-a", "n1") == expected
    assert bool(h.cluster.pods["a"]["spec"].get("schedulingGates")) == gates_left


def test_gate_already_gone_is_fine():
    h = Harness([raw_pod("a")], [raw_pg(min_member=1)], [])
    h.cluster.pods["a"]["spec"]["schedulingGates"] = []
    assert h.rec.writer.ungate(NS, "a", "uid-a", "n1") == "absent"
    assert h.cluster.log == []


def test_failed_test_op_rereads_and_finds_gate_gone():
    h = Harness([raw_pod("a")], [raw_pg(min_member=1)], [])
    real_patch = h.cluster.patch_namespaced_pod

    def racing_patch(name, namespace, body, **kw):
        # someone else removes the gate just before our patch lands
        h.cluster.pods[name]["spec"]["schedulingGates"] = [{"name": "x"}]
        h.cluster._bump(h.cluster.pods[name])
        h.cluster.patch_namespaced_pod = real_patch
        return real_patch(name, namespace, body, **kw)

    h.cluster.patch_namespaced_pod = racing_patch
    assert h.rec.writer.ungate(NS, "a", "uid-a", "") == "absent"


def test_recreated_pod_with_same_name_is_not_touched():
    h = Harness([raw_pod("a")], [raw_pg(min_member=1)], [])
    assert h.rec.writer.ungate(NS, "a", "uid-old", "n1") == "not_found"
    assert h.cluster.log == []


def test_validated_patch_of_a_pod_changed_since_the_dry_run_is_rebuilt():
    """The patch a dry run accepted is sent guarded by the resourceVersion it was built from; a pod
    changed in between (here: another gate added) fails that test and is read and patched afresh."""
    h = Harness([raw_pod("a")], [raw_pg(min_member=1)], [])
    w = h.rec.writer
    assert w.check_release({"uid-a": "n1"}) == {"uid-a": "ok"}
    h.cluster.pods["a"]["spec"]["schedulingGates"].insert(0, {"name": "example.com/other"})
    h.cluster._bump(h.cluster.pods["a"])
    assert w.ungate_members({"uid-a": "n1"}) == {"uid-a": "removed"}
    assert [g["name"] for g in h.cluster.pods["a"]["spec"]["schedulingGates"]] == ["example.com/other"]
    assert h.cluster.reads["a"] == 1  # the dry run was built from the informer's record; the rebuild reads


# -- the release patch built from the informer's record (no read) ------------------------------

GATE_ORDERS = [[GATE], ["other/gate", GATE], [GATE, "third"], ["a", "b", GATE, "c"]]


@pytest.mark.parametrize("shape,gates,node", list(itertools.product(sorted(AFFINITY_SHAPES), range(len(GATE_ORDERS)),
                                                                    ["n1", ""])))
def test_patch_from_the_record_is_the_patch_from_the_pod(shape, gates, node):
    """For every affinity shape, gate position and placement, the ops built from the cached record
    are exactly the ops the read path builds from the pod itself, guarded by the record's
    resourceVersion."""
    raw = raw_pod("a", gates=GATE_ORDERS[gates], affinity=copy.deepcopy(AFFINITY_SHAPES[shape].get("affinity")),
                  rv="42")
    p = records.pod_info(raw)
    assert cached_release_ops(p, GATE, node) == ("42", release_patch(raw, GATE, node))


@pytest.mark.parametrize("case", ["bound", "no gate", "other gates only", "no resourceVersion"])
def test_no_patch_from_a_record_that_cannot_stand_for_the_pod(case):
    raw = {"bound": lambda: raw_pod("a", node="n1"),
           "no gate": lambda: raw_pod("a", gates=()),
           "other gates only": lambda: raw_pod("a", gates=("other/gate",)),
           "no resourceVersion": lambda: raw_pod("a", rv="")}[case]()
    assert cached_release_ops(records.pod_info(raw), GATE, "n1") is None


def test_record_keeps_the_affinity_only_while_gated():
    aff = AFFINITY_SHAPES["one term with matchExpressions"]["affinity"]
    assert records.pod_info(raw_pod("a", affinity=aff)).affinity == aff
    assert records.pod_info(raw_pod("a", gates=(), affinity=aff)).affinity is None
    assert records.pod_info(raw_pod("a", node="n1", gates=(), affinity=aff)).affinity is None


def _stale(h: Harness) -> None:
    """The pod changes on the server (another gate is added in front) after the informer's record."""
    h.cluster.pods["a"]["spec"]["schedulingGates"].insert(0, {"name": "example.com/other"})
    h.cluster._bump(h.cluster.pods["a"])


@pytest.mark.parametrize("dry_run", [False, True])
def test_release_from_the_record_sends_one_request(dry_run):
    h = Harness([raw_pod("a")], [raw_pg(min_member=1)], [])
    w = h.rec.writer
    call = w.check_release if dry_run else w.ungate_members
    assert call({"uid-a": "n1"}) == {"uid-a": "ok" if dry_run else "removed"}
    assert h.cluster.reads == {}
    assert h.cluster.log == [("dry-run" if dry_run else "pod", "a")]


@pytest.mark.parametrize("dry_run", [False, True])
def test_stale_record_is_read_and_patched_afresh(dry_run):
    """The guarded patch from an outdated record fails its test (422, nothing changed); the pod is
    read and the patch rebuilt: the other gate stays, ours goes, pinned to the planned node."""
    h = Harness([raw_pod("a")], [raw_pg(min_member=1)], [])
    _stale(h)
    w = h.rec.writer
    if dry_run:
        assert w.check_release({"uid-a": "n1"}) == {"uid-a": "ok"}
        assert h.cluster.log == [("dry-run", "a")] and h.cluster.reads == {"a": 1}
        assert w.ungate_members({"uid-a": "n1"}) == {"uid-a": "removed"}  # the validated patch, fresh version
        assert h.cluster.reads == {"a": 1}
    else:
        assert w.ungate_members({"uid-a": "n1"}) == {"uid-a": "removed"}
        assert h.cluster.reads == {"a": 1}
    spec = h.cluster.pods["a"]["spec"]
    assert [g["name"] for g in spec["schedulingGates"]] == ["example.com/other"]
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] \
        == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]


@pytest.mark.parametrize("errors,expected,gates_left,reads", [
    ([ApiError(409)], "removed", False, 1),                     # fast attempt fails, the read path patches
    ([ApiError(503), ApiError(503)], "removed", False, 2),     # each attempt of the read path reads
    ([ApiError(403)] * 2, "refused", True, 1),                  # refused twice: an admission policy
    ([ApiError(404)] * 2, "not_found", True, 1),
    ([ApiError(500)] * 5, "failed", True, 4),                   # 1 fast + 4 attempts
])
def test_release_from_the_record_falls_back_on_any_error(errors, expected, gates_left, reads):
    h = Harness([raw_pod("a")], [raw_pg(min_member=1)], [])
    h.cluster.pod_errors["a"] = list(errors)
    assert h.rec.writer.ungate_members({"uid-a": "n1"}) == {"uid-a": expected}
    assert bool(h.cluster.pods["a"]["spec"].get("schedulingGates")) == gates_left
    assert h.cluster.reads.get("a", 0) == reads
    if expected == "refused":
        assert "HTTP 403" in h.rec.writer.answers["uid-a"]


def test_dry_run_refusal_from_the_record_is_confirmed_by_the_read_path():
    h = Harness([raw_pod("a")], [raw_pg(min_member=1)], [])
    h.cluster.dry_errors["a"] = [ApiError(403, "denied by policy"), ApiError(403, "denied by policy")]
    assert h.rec.writer.check_release({"uid-a": "n1"}) == {"uid-a": "refused"}
    assert "denied by policy" in h.rec.writer.answers["uid-a"]
    assert h.cluster.pods["a"]["spec"]["schedulingGates"] == [{"name": GATE}]


def test_after_stop_releasing_no_gate_patch_is_sent_and_dry_runs_still_answer():
    """SIGTERM (controller/main.py ``run``): the pass in flight sends no more gate patches, so it ends
    within one patch per worker and the Lease is given up; the members stay gated for the next leader."""
    pods = [raw_pod(n) for n in ("a", "b", "c")]
    h = Harness(pods, [raw_pg(min_member=3)], [])
    w = h.rec.writer
    assert w.ungate_members({"uid-a": "n1"}) == {"uid-a": "removed"}
    h.rec.stop_releasing()
    assert w.ungate_members({"uid-b": "n1", "uid-c": "n1"}) == {"uid-b": "stopped", "uid-c": "stopped"}
    assert w.ungate(NS, "b", "uid-b", "n1") == "stopped"
    assert [h.cluster.pods[n]["spec"].get("schedulingGates") for n in ("b", "c")] == [[{"name": GATE}]] * 2
    assert h.cluster.log == [("pod", "a")]
    assert w.check_release({"uid-b": "n1"}) == {"uid-b": "ok"}  # a dry run changes nothing: still sent
    assert h.rec.metrics.gate_removals.labels("stopped")._value.get() == 2


def test_write_results_equal_their_old_strings():
    from cogate.controller.kube.writer import UNGATE_RESULTS, WriteResult

    assert UNGATE_RESULTS == ("removed", "absent", "not_found", "skipped", "refused", "failed", "stopped")
    assert {r: str(r) for r in WriteResult} == {r: r.value for r in WriteResult}
    assert f"{WriteResult.NOT_FOUND}" == "not_found" and {WriteResult.GONE: 1}["gone"] == 1


def test_preempt_all_and_nominate_all_answer_in_order_and_an_odd_error_fails_only_its_pod(monkeypatch):
    pods = [records.pod_info(raw_pod(n, node="n1", phase="Running")) for n in ("a", "b", "c")]
    h = Harness([raw_pod(n, node="n1", phase="Running") for n in ("a", "b", "c")], [raw_pg(min_member=1)], [])
    w = h.rec.writer

    def preempt(p, message, now):
        if p.name == "b":
            raise RuntimeError("odd answer")
        return ("deleted", float(ord(p.name)))

    monkeypatch.setattr(w, "preempt", preempt)
    assert w.preempt_all(pods, "m", "t") == [("deleted", 97.0), ("failed", None), ("deleted", 99.0)]
    monkeypatch.setattr(w, "nominate", lambda p, node: "ok" if p.name != "c" else 1 / 0)
    assert w.nominate_all([(p, "n1") for p in pods]) == ["ok", "ok", "failed"]
