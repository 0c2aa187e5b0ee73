"""Leftovers of a migration from scheduler-plugins (issue 21 item 8): the pure rules of
controller/model/leftovers.py, the writer's handling of pruned status fields (no write loop) and of a
second status writer (held back, never its phase for a release), and the PodGroup's events."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from cogate.controller.status import inputs
from cogate.controller.model import leftovers

from tests.builders import NS, FakeCluster, Harness, raw_pg, raw_pod, verdict

ROOT = Path(__file__).resolve().parents[4]
from tests.e2e.test_scheduler_plugins_leftovers import SP_CRD, sp_file  # noqa: E402 - the same snapshot as the e2e test
COGATE_CRD = ROOT / "charts" / "cogate" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"
#: Status fields scheduler-plugins v0.34.7's CRD schema has (manifests/coscheduling/crd.yaml).
SP_STATUS = ("failed", "occupiedBy", "phase", "running", "scheduleStartTime", "succeeded")
COND = {"type": "Released", "status": "True", "reason": "Released", "message": "m",
        "lastTransitionTime": "2024-01-01T00:00:00Z"}


def managed(*entries):
    """metadata.managedFields entries: (manager, subresource, status fields)."""
    return [{"manager": m, "operation": "Update", "apiVersion": "scheduling.x-k8s.io/v1alpha1",
             "time": "2024-01-01T00:00:00Z", "fieldsType": "FieldsV1", "subresource": sub,
             "fieldsV1": {"f:status": {f"f:{f}": {} for f in fields}} if sub == "status" else {"f:spec": {}}}
            for m, sub, fields in entries]


# -- pure rules ---------------------------------------------------------------------------------

@pytest.mark.parametrize("sent,stored,expected", [
    ({"phase": "Pending", "conditions": [COND]}, {"phase": "Pending"}, ("conditions",)),
    ({"phase": "Running", "scheduled": 3, "running": 3, "conditions": [COND]}, {"phase": "Running", "running": 3},
     ("scheduled", "conditions")),
    ({"phase": "Running", "conditions": [COND]}, {"phase": "Scheduling", "conditions": [COND]}, ()),  # changed, kept
    ({"scheduleStartTime": None, "conditions": []}, {}, ()),        # deletions are not drops
    ({"conditions": [COND]}, None, ("conditions",)),
    ({}, {"phase": "Pending"}, ()),
    ({"zz": 1, "phase": "X"}, {}, ("phase", "zz")),
])
def test_dropped_status_fields(sent, stored, expected):
    assert leftovers.dropped_status_fields(sent, stored) == expected


@pytest.mark.parametrize("body,fields,expected", [
    ({"status": {"phase": "Pending", "conditions": [COND]}}, ("conditions",), {"status": {"phase": "Pending"}}),
    ({"status": {"conditions": [COND]}}, ("conditions",), None),
    ({"status": {"scheduled": 1, "conditions": [COND]}}, ("scheduled", "conditions"), None),
    ({"status": {"running": 1}}, ("conditions",), {"status": {"running": 1}}),
])
def test_without(body, fields, expected):
    assert leftovers.without(body, fields) == expected


def test_the_real_scheduler_plugins_crd_has_no_field_for_what_is_dropped():
    """The input of the tests below is the real one: scheduler-plugins v0.34.7's CRD has exactly
    ``SP_STATUS``; cogate's has every field cogate writes."""
    sp = yaml.safe_load(sp_file(SP_CRD).read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert tuple(sorted(sp["properties"]["status"]["properties"])) == SP_STATUS
    ours = yaml.safe_load(COGATE_CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert set(leftovers.STATUS_FIELDS) <= set(ours["properties"]["status"]["properties"])


@pytest.mark.parametrize("entries,expected", [
    ([], {}),
    ([("cogate-controller", "status", ("phase", "conditions"))], {}),
    ([("OpenAPI-Generator", "status", ("phase",))], {}),                          # cogate before it named itself
    ([("controller", "status", ("phase", "running", "occupiedBy"))], {"controller": ("phase", "running")}),
    ([("kubectl", None, ()), ("controller", "status", ("succeeded",))], {"controller": ("succeeded",)}),
    ([("controller", "status", ("occupiedBy",))], {}),                            # cogate does not write it
    ([("a", "status", ("phase",)), ("b", "status", ("failed",)), ("cogate-controller", "status", ("conditions",))],
     {"a": ("phase",), "b": ("failed",)}),
])
def test_foreign_status_writers(entries, expected):
    raw = raw_pg(status={"phase": "Pending"})
    raw["metadata"]["managedFields"] = managed(*entries)
    assert leftovers.foreign_status_writers(raw) == expected


def test_malformed_managed_fields_read_as_no_writer():
    """managedFields are the API server's bookkeeping: a malformed entry is skipped, never an error,
    by both readers (``managedfields.status_writers`` for each)."""
    good = managed(("controller", "status", ("phase",)))[0]
    odd = [None, "x", {"subresource": "status"}, {"subresource": "status", "fieldsV1": []},
           {"subresource": "status", "manager": 7, "fieldsV1": {"f:status": {"f:phase": {}}}},
           {"subresource": "status", "manager": "m", "fieldsV1": {"f:status": "phase"}},
           {"subresource": "status", "manager": "k", "fieldsV1": {"f:status": {7: {}, "phase": {}}}}]
    for entries, writers, phase in [(odd, {}, None), (odd + [good], {"controller": ("phase",)}, "controller"),
                                    ("not a list", {}, None)]:
        raw = raw_pg(status={"phase": "Scheduling"})
        raw["metadata"]["managedFields"] = entries
        assert leftovers.foreign_status_writers(raw) == writers
        assert leftovers.phase_writer(raw) == phase
    assert leftovers.phase_writer({"metadata": None}) is None


@pytest.mark.parametrize("writer,phase,conds,expected", [
    ("controller", "Scheduling", [], "Pending"),              # scheduler-plugins: minMember pods exist (gated)
    ("controller", "Running", [], "Pending"),
    ("controller", "Scheduling", [COND], "Scheduling"),       # cogate's own record says released
    ("controller", "Running", [dict(COND, status="False")], "Pending"),
    ("controller", "Finished", [], None),                     # ends a release in both readings
    ("cogate-controller", "Scheduling", [], None),            # our own phase: as it is
    (None, "Scheduling", [], None),                           # no managedFields: as it is
])
def test_phase_for_release(writer, phase, conds, expected):
    raw = raw_pg(status={"phase": phase, "scheduleStartTime": "2024-01-01T00:00:00Z", "conditions": conds})
    if writer:
        raw["metadata"]["managedFields"] = managed((writer, "status", ("phase",)))
    assert leftovers.phase_for_release(raw) == expected


@pytest.mark.parametrize("body,contested,last,now,expected", [
    # the other writer's fields wait; the rest goes now
    ({"status": {"phase": "Pending", "conditions": [COND]}}, ["phase", "running"], 100.0, 105.0,
     {"status": {"conditions": [COND]}}),
    ({"status": {"phase": "Pending", "running": 0}}, ["phase", "running"], 100.0, 105.0, None),
    # ... for FOREIGN_WRITE_SECONDS after the last time cogate took them back
    ({"status": {"phase": "Pending", "conditions": [COND]}}, ["phase"], 100.0, 110.0,
     {"status": {"phase": "Pending", "conditions": [COND]}}),
    # a release goes whole at once
    ({"status": {"phase": "Scheduling", "scheduleStartTime": "t"}}, ["phase"], 100.0, 101.0,
     {"status": {"phase": "Scheduling", "scheduleStartTime": "t"}}),
    # no other writer, or never taken back yet: as it is
    ({"status": {"phase": "Pending"}}, [], 100.0, 101.0, {"status": {"phase": "Pending"}}),
    ({"status": {"phase": "Pending"}}, ["phase"], None, 101.0, {"status": {"phase": "Pending"}}),
])
def test_to_write_now(body, contested, last, now, expected):
    assert leftovers.to_write_now(body, contested, last, now) == expected


def test_group_object_never_takes_another_writers_phase_for_a_release():
    raw = raw_pg(min_member=2, status={"phase": "Scheduling", "scheduleStartTime": "2024-01-01T00:00:00Z"})
    raw["metadata"]["managedFields"] = managed(("controller", "status", ("phase", "running")))
    g = inputs.group_object(raw)
    assert g.pg.status.phase == "Pending" and g.raw_status["phase"] == "Scheduling"
    assert g.status_writers == {"controller": ("phase", "running")}
    gated = [__import__("cogate.controller.model.records", fromlist=["pod_info"]).pod_info(raw_pod(n, group="pg"))
             for n in ("a", "b")]
    (req,) = inputs.build_group_requests([g], {(NS, "pg"): gated}, "scheduling.x-k8s.io/pod-group")
    assert req.released is False
    # the same status written by cogate: the release stands
    raw["metadata"]["managedFields"] = managed(("cogate-controller", "status", ("phase",)))
    (req,) = inputs.build_group_requests([inputs.group_object(raw)], {(NS, "pg"): gated},
                                         "scheduling.x-k8s.io/pod-group")
    assert req.released is True


# -- the shell: writer and events ---------------------------------------------------------------

class PruningCluster(FakeCluster):
    """A FakeCluster whose PodGroup CRD is scheduler-plugins': its structural schema keeps only
    ``SP_STATUS`` (the API server prunes the rest, without an error). ``prune = False``: the CRD
    was replaced by cogate's."""

    prune = True
    field_managers: list

    def patch_namespaced_custom_object_status(self, group, version, namespace, plural, name, body, **kw):
        self.__dict__.setdefault("field_managers", []).append(kw.get("field_manager"))
        if self.prune:
            body = {"status": {k: v for k, v in body["status"].items() if k in SP_STATUS}}
        return super().patch_namespaced_custom_object_status(group, version, namespace, plural, name, body, **kw)


def pruning_harness(pods, verdicts, status=None):
    h = Harness(pods, [raw_pg(min_member=2, status=status)], verdicts)
    cluster = PruningCluster.__new__(PruningCluster)
    cluster.__dict__.update(h.cluster.__dict__)
    h.cluster = cluster
    h.rec.writer.custom = cluster
    return h


def writes(h):
    return len([e for e in h.cluster.log if e[0] == "status"])


def test_pruned_conditions_are_reported_once_and_never_make_a_write_loop():
    h = pruning_harness([raw_pod("a", group="pg")], [verdict("WaitingForMembers", message="1 of 2 members present")])
    h.run()
    st = h.cluster.pgs["pg"]["status"]
    assert st == {"phase": "Pending", "running": 0, "succeeded": 0, "failed": 0}, st  # what the API server kept
    assert h.cluster.field_managers == ["cogate-controller"]
    assert writes(h) == 1
    dropped = [e for e in h.events if e[1] == "StatusFieldsDropped"]
    assert len(dropped) == 1 and dropped[0][0] == "Warning"
    assert "status.scheduled, status.conditions" in dropped[0][2] and "charts/cogate/crds/scheduling.x-k8s.io_podgroups.yaml" in dropped[0][2]
    assert h.rec.writer.dropped == {(NS, "pg"): ("scheduled", "conditions")}
    metric = h.rec.metrics.status_fields_dropped.labels("conditions")._value.get()
    assert metric == 1
    for _ in range(5):  # passes with only conditions to change: nothing written, no new event
        h.now += 1
        h.run()
    assert writes(h) == 1 and len([e for e in h.events if e[1] == "StatusFieldsDropped"]) == 1
    # a change the CRD keeps (a member bound: counts) is written, without the dropped field
    h.verdicts = [verdict("AlreadyReleased", fits=2)]
    h.now += 1
    h.run()
    assert writes(h) == 2
    # after RECHECK_SECONDS the whole status is sent again: still dropped, still the same situation
    h.now += leftovers.RECHECK_SECONDS + 1
    h.verdicts = [verdict("WaitingForMembers", message="1 of 2 members present, again")]
    h.run()
    assert writes(h) == 3 and h.rec.writer.dropped == {(NS, "pg"): ("scheduled", "conditions")}
    # cogate's CRD installed: the next full write is stored whole; the writer forgets the drop
    h.cluster.prune = False
    h.now += leftovers.RECHECK_SECONDS + 1
    h.verdicts = [verdict("WaitingForMembers", message="1 of 2 members present, once more")]
    h.run()
    assert h.rec.writer.dropped == {}
    assert [c["type"] for c in h.cluster.pgs["pg"]["status"]["conditions"]]


def test_scheduled_is_dropped_too_when_members_bind():
    pods = [raw_pod(n, group="pg", gates=(), node="n1", phase="Running") for n in ("a", "b")]
    h = pruning_harness(pods, [verdict("AlreadyReleased", fits=2)],
                        status={"phase": "Scheduling", "scheduleStartTime": "2024-01-01T00:00:00Z"})
    h.run()
    assert h.rec.writer.dropped == {(NS, "pg"): ("scheduled", "conditions")}
    st = h.cluster.pgs["pg"]["status"]
    assert st["phase"] == "Running" and st["running"] == 2 and "scheduled" not in st


def _foreign_pg(phase="Scheduling", **status):
    raw = raw_pg(min_member=2, status={"phase": phase, **status})
    raw["metadata"]["managedFields"] = managed(("controller", "status", ("phase", "running", "succeeded")))
    return raw


@pytest.mark.parametrize("status", [
    {},                                                     # scheduler-plugins: "Scheduling" once 2 pods exist
    {"scheduleStartTime": "2024-01-01T00:00:00Z"},          # ... over a start time left from an earlier release
])
def test_another_writers_phase_is_never_a_release_and_it_is_named(status):
    pods = [raw_pod(n, group="pg") for n in ("a", "b")]
    h = Harness(pods, [_foreign_pg(**status)], [verdict("InsufficientCapacity", fits=1, message="fits 1 of 2")])
    h.run()
    (req,) = h.decide_calls[-1]["groups"]
    assert req.released is False                            # decided as a whole, never one by one
    assert all(p["spec"]["schedulingGates"] for p in h.cluster.pods.values())
    st = h.cluster.pgs["pg"]["status"]
    assert st["phase"] == "Pending", st                     # cogate writes its own phase
    (rel,) = [c for c in st["conditions"] if c["type"] == "Released"]
    assert rel["status"] == "False" and rel["reason"] == "InsufficientCapacity"
    warn = [e for e in h.events if e[1] == "ForeignStatusWriter"]
    assert len(warn) == 1 and warn[0][0] == "Warning"
    assert "controller (status.phase, status.running, status.succeeded)" in warn[0][2]
    assert h.rec.metrics.foreign_status_writers._value.get() == 1


def test_beside_another_writer_its_fields_are_taken_back_slowly_the_rest_at_once_a_release_whole():
    pods = [raw_pod(n, group="pg") for n in ("a", "b")]
    h = Harness(pods, [_foreign_pg()], [verdict("InsufficientCapacity", fits=1, message="fits 1 of 2")])
    h.run()
    assert writes(h) == 1

    def overwrite(phase):  # the other controller writes its phase again (and owns it)
        pg = copy.deepcopy(h.cluster.pgs["pg"])
        pg["status"]["phase"] = phase
        pg["metadata"]["managedFields"] = managed(("controller", "status", ("phase",)))
        h.cluster._bump(pg)
        h.cluster.pgs["pg"] = pg
        h.caches.podgroups.apply_local(pg)

    overwrite("Scheduling")
    for _ in range(3):  # cogate's correction of the phase waits: no hot loop between the two
        h.now += 1
        h.run()
    assert writes(h) == 1 and h.cluster.pgs["pg"]["status"]["phase"] == "Scheduling"
    # a new message is written at once, without the other writer's field
    h.verdicts = [verdict("InsufficientCapacity", fits=1, message="fits 1 of 2: cpu short by 2")]
    h.now += 1
    h.run()
    st = h.cluster.pgs["pg"]["status"]
    assert writes(h) == 2 and st["phase"] == "Scheduling"
    assert [c["message"] for c in st["conditions"] if c["type"] == "Released"] == ["fits 1 of 2: cpu short by 2"]
    h.now += leftovers.FOREIGN_WRITE_SECONDS
    h.run()
    assert writes(h) == 3 and h.cluster.pgs["pg"]["status"]["phase"] == "Pending"
    overwrite("Scheduling")
    # room appears: the release decision is written whole at once, then the gates go
    h.verdicts = [verdict("Released", release={"uid-a": "n1", "uid-b": "n2"}, fits=2)]
    h.now += 1
    h.run()
    assert writes(h) == 4
    st = h.cluster.pgs["pg"]["status"]
    assert st["phase"] == "Scheduling" and st["scheduleStartTime"]
    (rel,) = [c for c in st["conditions"] if c["type"] == "Released"]
    assert rel["status"] == "True"
    assert not any(p["spec"].get("schedulingGates") for p in h.cluster.pods.values())
