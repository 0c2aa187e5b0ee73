"""API writes against in-memory fakes (controller/writer.py): gate removal retries and races."""

from __future__ import annotations

import pytest

from .test_reconciler import NS, ApiError, Harness, raw_pg, raw_pod


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
    assert h.cluster.reads["a"] == 2
