"""Reconciler shell (its pure helpers: test_inputs.py, test_wakeups.py; leader election:
tests/unit/controller/kube/test_leader.py; events: test_events.py; notices: test_notices.py; API writes:
test_writer.py; patches: test_patches.py; after-release duties: test_aftercare.py, test_lifecycle.py).

The pass itself runs against the in-memory fakes of ``tests/builders/`` (pods patched
with real JSON Patch semantics, scripted HTTP errors) and a scripted
``decide`` so that the order of writes (status before gates), retries and event
de-duplication are checked without an API server.
"""

from __future__ import annotations

import threading

import pytest

from cogate.controller.model import records
from cogate.controller.planning.patches import pin_target
from cogate.controller.model.wakeups import Debouncer
from tests.builders import GATE, NS, ApiError, Harness, raw_pg, raw_pod, ready_node, verdict


def test_pass_builds_group_requests_from_caches():
    pods = [raw_pod("a"), raw_pod("b"), raw_pod("x", group="other"), raw_pod("w", group=None, node="n1"),
            raw_pod("c", node="n1", gates=())]
    h = Harness(pods, [raw_pg()], [verdict("WaitingForMembers")])
    h.run()
    call = h.decide_calls[0]
    (g,) = call["groups"]
    assert (g.namespace, g.name, g.min_member, g.released) == (NS, "pg", 2, False)
    assert sorted(m.name for m in g.members) == ["a", "b", "c"]
    assert sorted(p.name for p in call["pods"]) == ["c", "w"]
    assert [n.name for n in call["nodes"]] == ["n1", "n2", "n3"]


def test_release_writes_status_before_any_gate_and_pins_members():
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
    pods = [raw_pod("a"), raw_pod("b", affinity=aff)]
    h = Harness(pods, [raw_pg()], [verdict("Released", {"uid-a": "n1", "uid-b": "n2"}, 2, "fits 2 of 2")])
    res = h.run()
    # every release patch validated (dry run) first, then the status, then the gates
    assert sorted(h.cluster.log[:2]) == [("dry-run", "a"), ("dry-run", "b")]
    assert h.cluster.log[2] == ("status", "pg")
    assert sorted(h.cluster.log[3:]) == [("pod", "a"), ("pod", "b")]
    assert h.cluster.reads == {}, "dry run and patch are built from the informer's records: no read"
    assert res.ungated == 2 and res.status_writes == 1
    st = h.cluster.pgs["pg"]["status"]
    assert st["phase"] == "Scheduling" and st["scheduleStartTime"]
    a, b = h.cluster.pods["a"]["spec"], h.cluster.pods["b"]["spec"]
    assert "schedulingGates" not in a or a["schedulingGates"] == []
    assert a["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    assert b["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}],
         "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]
    assert ("Normal", "Released", "released 2 members pinned to planned nodes: n1 x1, n2 x1") in h.events
    # the caches saw our writes: the next pass reports the group released and no gates
    h.run()
    g = h.decide_calls[1]["groups"][0]
    assert g.released and all(not m.gates for m in g.members)


def test_failed_status_write_means_no_gate_is_touched():
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], [verdict("Released", {"uid-a": "n1", "uid-b": "n1"}, 2)])
    h.cluster.status_errors = [ApiError(403)]
    res = h.run()
    assert [e for e in h.cluster.log if e[0] != "dry-run"] == []
    assert res.ungated == 0
    assert all(p["spec"].get("schedulingGates") for p in h.cluster.pods.values())


def test_free_placement_removes_only_the_gate():
    h = Harness([raw_pod("a", gates=("other", GATE))], [raw_pg(min_member=1)],
                [verdict("Released", {"uid-a": "n1"}, 1)], placement="free")
    h.run()
    spec = h.cluster.pods["a"]["spec"]
    assert spec["schedulingGates"] == [{"name": "other"}]
    assert "affinity" not in spec


def test_events_only_on_change():
    msgs = iter(["fits 1 of 2: cpu short by 1", "fits 1 of 2: cpu short by 1", "fits 1 of 2: memory short by 1Gi"])
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()],
                lambda groups: [verdict("InsufficientCapacity", fits=1, message=next(msgs))])
    h.run()
    h.run()
    assert h.events == [("Warning", "InsufficientCapacity", "fits 1 of 2: cpu short by 1")]
    h.now += 1  # another situation of the same reason: news at once
    h.run()
    assert h.events[-1] == ("Warning", "InsufficientCapacity", "fits 1 of 2: memory short by 1Gi")
    assert len(h.events) == 2
    # status written only when it changed: pass 1 (new condition) and pass 3 (new message)
    assert h.cluster.log == [("status", "pg"), ("status", "pg")]


def test_no_new_event_when_only_the_counts_of_a_waiting_situation_change():
    """Issue 9 item 9: a waiting group re-emitted InsufficientCapacity each time a node was
    added, because the message embeds counts. The situation is unchanged: the condition is
    kept current, the event is brought up to date at most once per refresh interval."""
    nodes = iter(range(1, 100))

    def verdicts(groups):
        n = next(nodes)
        return [verdict("InsufficientCapacity", fits=1,
                        message=f"fits 1 of 2: cpu short by 2 on eligible nodes (at most 1 free on one node, "
                                f"a member requests 2); {n} node{'s' if n != 1 else ''} excluded by taint")]

    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], verdicts)
    for _ in range(8):  # a node added every 70 s (each beyond the 60 s min interval)
        h.run()
        h.now += 70
    warnings = [e for e in h.events if e[1] == "InsufficientCapacity"]
    assert len(warnings) == 1, warnings
    assert "1 node excluded by taint" in warnings[0][2]
    cond = next(c for c in h.cluster.pgs["pg"]["status"]["conditions"] if c["type"] == "Released")
    assert cond["message"].endswith("8 nodes excluded by taint")  # the condition is current
    h.run()  # 560 s after the first event: still within the refresh interval
    h.now += 70
    h.run()  # 630 s: the event message is brought up to date once
    warnings = [e for e in h.events if e[1] == "InsufficientCapacity"]
    assert len(warnings) == 2 and warnings[-1][2].endswith("10 nodes excluded by taint"), warnings


def test_mixed_priorities_warning():
    a, b = raw_pod("a"), raw_pod("b")
    b["spec"]["priority"] = 100
    h = Harness([a, b], [raw_pg()], [verdict("WaitingForMembers")])
    h.run()
    h.run()
    assert [e for e in h.events if e[1] == "MixedPriorities"] == [
        ("Warning", "MixedPriorities", "members have priorities 0..100; the group is ordered by the highest")]


@pytest.mark.parametrize("evict", [False, True])
def test_timeout_event_and_opt_in_eviction(evict):
    start = "2024-01-01T00:00:00Z"  # release time; timeout 60 s; now is far later
    pods = [raw_pod("a", gates=(), node="n1", phase="Running", owner=True),
            raw_pod("b", gates=(), node="n1", phase="Running", owner=False),
            raw_pod("c", gates=())]
    status = {"phase": "Scheduling", "scheduleStartTime": start}
    h = Harness(pods, [raw_pg(min_member=3, status=status, timeout=60)], [verdict("AlreadyReleased", fits=2)],
                evict=evict)
    h.run()  # first sight (a restart): c may be binding this instant, so the window counts from now
    assert not [e for e in h.events if e[1] == "Timeout"]
    h.now += 60  # no member bound since
    h.run()
    h.run()
    assert [e for e in h.events if e[1] == "Timeout"][0][0] == "Warning"
    assert len([e for e in h.events if e[1] == "Timeout"]) == (2 if evict else 1)
    assert h.cluster.evicted == (["a"] if evict else [])  # only bound members with a controller owner, once
    assert h.cluster.pgs["pg"]["status"]["conditions"][-1]["type"] == "TimedOut"


def test_invalid_member_is_reported_on_its_podgroup():
    h = Harness([raw_pod("a")], [raw_pg()], [])
    bad = raw_pod("bad", cpu="lots")
    with pytest.raises(records.InvalidObject) as err:
        records.pod_info(bad)
    h.rec.strays.invalid_member(bad, err.value)
    h.rec.strays.invalid_member(bad, err.value)  # same problem again: one event
    h.recorder.flush()
    assert len(h.events) == 1
    type_, reason, message = h.events[0]
    assert (type_, reason) == ("Warning", "InvalidObject") and message.startswith("pod bad:")


def test_run_loop_only_reconciles_while_leading():
    h = Harness([raw_pod("a")], [raw_pg()], [verdict("WaitingForMembers")])
    stop = threading.Event()
    leading = threading.Event()
    h.rec.debouncer = Debouncer(0.0, 3600.0, 0.0)
    h.rec.enqueue()
    t = threading.Thread(target=h.rec.run, args=(stop, leading.is_set))
    t.start()
    try:
        # not leading: the pending pass is consumed without deciding
        for _ in range(200):
            if h.rec.debouncer.pending_since is None:
                break
            stop.wait(0.01)
        assert h.decide_calls == []
        leading.set()
        h.rec.enqueue()
        for _ in range(500):
            if h.decide_calls:
                break
            stop.wait(0.01)
        assert len(h.decide_calls) == 1
    finally:
        stop.set()
        h.rec.close()
        t.join(5)
    assert not t.is_alive()


@pytest.mark.parametrize("extra_spec,unplanned", [
    ({}, ()),
    ({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}, ("volume claims",)),
    ({"volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]}, ("volume claims",)),
    ({"volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}]}, ()),
    # hard topology spread is modelled by the planner now (controller/planning/spread.py): pinned like any member
    ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                     "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}]}, ()),
    ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                     "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}}]}, ()),
    ({"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}]}, ("resource claims",)),
])
def test_unplanned_constraints_of_a_spec_and_pin_target(extra_spec, unplanned):
    raw = raw_pod("a")
    raw["spec"].update(extra_spec)
    p = records.pod_info(raw)
    assert p.unplanned == unplanned
    # the planner decides who is pinned (planning.members.pins); pin_target only applies the placement mode
    assert pin_target(p, "n1", "pinned") == "n1"
    assert pin_target(p, "n1", "free") == ""
    assert pin_target(p, "", "pinned") == ""


def test_release_patch_of_a_member_the_planner_left_unpinned_only_removes_the_gate():
    raw = raw_pod("a")
    raw["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    h = Harness([raw, raw_pod("b")], [raw_pg()], [verdict("Released", {"uid-a": "", "uid-b": "n1"}, fits=2)])
    h.run()
    a, b = h.cluster.pods["a"], h.cluster.pods["b"]
    assert not a["spec"].get("schedulingGates") and "affinity" not in a["spec"]
    assert not b["spec"].get("schedulingGates") and b["spec"]["affinity"]["nodeAffinity"]
    assert any("n1 x1, 1 placed by kube-scheduler" in m for _, _, m in h.events)


def test_log_lines_about_a_group_carry_its_name(caplog):
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], [verdict("Released", {"uid-a": "n1", "uid-b": "n1"}, 2)])
    h.cluster.pod_errors["b"] = [ApiError(403)] * 5
    with caplog.at_level("INFO", logger="cogate.controller"):
        h.run()
    about = [r for r in caplog.records if "PodGroup team/pg" in r.getMessage() or "pod team/b" in r.getMessage()]
    # b's patch refused (writer), the refusal and the release (reconciler)
    assert len(about) == 3, [r.getMessage() for r in caplog.records]
    assert all(getattr(r, "podgroup", None) == f"{NS}/pg" for r in about)


def test_progress_is_written_at_most_every_period_and_then_brought_up_to_date():
    """Members arriving change only the numbers of a message ("3 of 8 members present"): written
    at once the first time, then ARRIVING_WRITE_SECONDS after a change first appeared and at most
    every ARRIVING_WRITE_SECONDS (the pass in between wakes up for it; PROGRESS_WRITE_SECONDS for
    other numbers: tests/unit/controller/status/test_status_writes.py); a change of words, and a
    release, are written at once."""
    from cogate.controller.status.writes import ARRIVING_WRITE_SECONDS as PROGRESS_WRITE_SECONDS

    script = iter([verdict("WaitingForMembers", message="3 of 8 members present"),
                   verdict("WaitingForMembers", message="4 of 8 members present"),
                   verdict("WaitingForMembers", message="5 of 8 members present"),
                   verdict("WaitingForMembers", message="6 of 8 members present"),
                   verdict("WaitingForMembers", message="6 of 8 members present, 2 held by other scheduling gates"),
                   verdict("Released", {"uid-a": "n1", "uid-b": "n2"}, 2, "fits 2 of 2")])
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], lambda groups: [next(script)])

    def message():
        return next(c for c in h.cluster.pgs["pg"]["status"]["conditions"] if c["type"] == "Released")["message"]

    h.run()
    assert message() == "3 of 8 members present"
    h.now += 0.3
    h.run()
    assert message() == "3 of 8 members present"  # held back
    # due N after it was first held back (and after the last write), the wake-up margin after that
    assert h.rec.debouncer.deadline() == pytest.approx(h.now + PROGRESS_WRITE_SECONDS + 0.01, abs=1e-6)
    h.now += PROGRESS_WRITE_SECONDS
    h.run()
    assert message() == "5 of 8 members present"  # brought up to date
    h.now += 0.1
    h.run()
    assert message() == "5 of 8 members present"
    h.now += 0.1
    h.run()
    assert message().endswith("held by other scheduling gates")  # new words: at once
    h.now += 0.1
    h.run()
    assert message() == "fits 2 of 2"  # a release: at once
    assert [e for e in h.cluster.log if e[0] == "status"] == [("status", "pg")] * 4


def test_a_pass_wakes_up_for_the_earliest_duty_that_waits():
    """What waits (a stuck pin's grace, a refused release's back-off; progress writes: above) sets
    the next pass: the earliest of them, just after it (monotonic seconds)."""
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}
    released = {"phase": "Scheduling", "scheduleStartTime": "2024-01-01T00:00:00Z"}
    h = Harness([raw_pod("k-0", gates=(), affinity=aff, owner=True, cpu="4")], [raw_pg(min_member=1, status=released)],
                [verdict("AlreadyReleased", fits=1)])
    h.caches.nodes.apply_local(ready_node("n1", taints=[{"key": "maint", "effect": "NoSchedule"}]))
    h.run()
    assert h.rec.debouncer.deadline() == pytest.approx(h.now + 3.0 + 0.01)  # the stuck pin's grace

    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], [verdict("Released", {"uid-a": "n1", "uid-b": "n1"}, 2)])
    h.cluster.dry_errors["b"] = [ApiError(403)] * 5
    h.run()
    assert h.rec.debouncer.deadline() == pytest.approx(h.now + 5.0 + 0.01)  # the refusal's back-off
    h.now += 1
    h.rec.debouncer.started(h.now)
    h.run()  # a pass inside the back-off wakes up for its end again
    assert h.rec.debouncer.deadline() == pytest.approx(h.now + 4.0 + 0.01)


def test_the_member_that_completes_its_group_makes_the_pass_due_at_once():
    """Issue 40: no debounce wait for a group whose last member just arrived; other events still wait."""
    h = Harness([], [raw_pg(min_member=2)], [verdict("WaitingForMembers")])
    h.rec.debouncer = Debouncer(0.05, 3600.0, h.now)
    h.rec.debouncer.started(h.now)
    a, b, c = (records.pod_info(raw_pod(n)) for n in ("a", "b", "c"))
    h.rec.on_member_event("ADDED", None, a)
    assert h.rec.debouncer.deadline() == pytest.approx(h.now + 0.05)  # incomplete: debounced
    h.rec.on_member_event("ADDED", None, b)
    assert h.rec.debouncer.due(h.now), "the second of minMember 2: the pass is due now"
    h.rec.debouncer.started(h.now)
    h.rec.on_member_event("ADDED", None, c)  # a third member of a complete group: debounced
    assert not h.rec.debouncer.due(h.now)


def test_gates_of_a_release_go_before_the_status_work_of_the_other_groups():
    """Issue 40: verdicts with gates to remove are applied first, whatever the planner's order, so a group
    released in a busy pass does not wait for every other group's status write (one worker: in order)."""
    import concurrent.futures
    pods = [raw_pod("a", group="rel"), raw_pod("w", group="wait")]
    h = Harness(pods, [raw_pg("wait", min_member=2), raw_pg("rel", min_member=1)],
                [verdict("WaitingForMembers", message="1 of 2", name="wait"),
                 verdict("Released", {"uid-a": "n1"}, 1, name="rel")])
    h.rec._groups_pool = concurrent.futures.ThreadPoolExecutor(1)
    h.run()
    order = [entry for entry in h.cluster.log if entry[0] in ("status", "pod")]
    assert order[:2] == [("status", "rel"), ("pod", "a")], order
    assert ("status", "wait") in order[2:]


def test_the_path_from_the_last_member_to_the_release_is_measured():
    """``cogate_controller_arrival_to_release_seconds``: from the member event that completed the group to the
    pass's start, its verdict and the group's gates sent (monotonic seconds of the harness)."""
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], [verdict("Released", {"uid-a": "n1", "uid-b": "n1"}, 2)])
    t0 = h.now
    for name in ("a", "b"):
        h.rec.on_member_event("ADDED", None, records.pod_info(raw_pod(name)))
    h.now = t0 + 0.3
    h.run()
    hist = h.rec.metrics.arrival_to_release
    for step in ("pass_started", "planned", "released"):
        assert hist.labels(step)._sum.get() == pytest.approx(0.3), step
    h.run()  # the next pass (AlreadyReleased) observes nothing more
    assert hist.labels("released")._sum.get() == pytest.approx(0.3)
