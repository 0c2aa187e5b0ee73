"""The Preempting room (issue 15 item 2): a reconciler with the real planner against a fake API.

Each test runs passes of :class:`~cogate.controller.reconciler.Reconciler` (``--preemption``)
in the kit's real-planner :class:`tests.builders.World` over its :class:`tests.builders.StatusCluster`,
the informers relisted from the fake between passes (as the watch would deliver), and checks the calls made (their order: nominate, mark, delete),
the PodGroup status (``Preempting``), the Events and the metrics. The pure parts are tested in
tests/unit/controller/preemption/test_inflight.py; end to end: tests/e2e/test_preemption.py.
"""

from __future__ import annotations

import threading
import time

from cogate.controller.preemption import inflight
from tests.builders import GATE, T0, ApiError, StatusCluster, World, pod, raw_pg, ready_node


def assert_nominated_then_preempted(calls, nominations, victims) -> None:
    """``calls`` are exactly the ``nominations`` ("member=node"), every one before any victim is
    touched, then each of ``victims`` marked and deleted, its mark before its DELETE (the members'
    nominations, and the victims, go concurrently: no order among them)."""
    n = len(nominations)
    assert sorted(calls[:n]) == sorted(("nominate", x) for x in nominations), calls
    rest = calls[n:]
    assert sorted(rest) == sorted([("delete", v) for v in victims] + [("mark", v) for v in victims]), calls
    for v in victims:
        assert rest.index(("mark", v)) < rest.index(("delete", v)), calls


def full_node_world(**kw) -> World:
    """n1 (4 cpu) full of two low-priority pods (2 cpu each, priority 100); PodGroup pg (minMember 2,
    priority 1000) with two gated members of 2 cpu."""
    pods = [pod("low-a").req(cpu="2").on("n1").priority(100).raw(),
            pod("low-b").req(cpu="2").on("n1").priority(100).raw(),
            pod("m-0").req(cpu="2").group("pg").gated().priority(1000).raw(),
            pod("m-1").req(cpu="2").group("pg").gated().priority(1000).raw()]
    return World(pods, [raw_pg("pg", 2)], **kw)


def test_victims_go_after_the_nominations_then_the_gang_is_released_on_their_room():
    w = full_node_world()
    w.run()
    assert_nominated_then_preempted(w.cluster.calls, ["m-0=n1", "m-1=n1"], ["low-a", "low-b"])
    assert all(w.cluster.pods[m]["status"]["nominatedNodeName"] == "n1" for m in ("m-0", "m-1"))
    cond = w.condition()
    assert cond["status"] == "True" and cond["reason"] == "Preempting"
    assert cond["message"].startswith("preempting 2 pods (team/low-a, team/low-b) of priority <= 100 on 1 node n1")
    assert "priority 1000" in cond["message"]
    assert ("Normal", "Preempting", "pg", cond["message"].split("; waiting")[0]) in w.events
    preempted = [e for e in w.events if e[1] == "Preempted"]
    assert [e[2] for e in preempted] == ["low-a", "low-b"]
    assert all("PodGroup team/pg (priority 1000)" in e[3] for e in preempted)
    assert w.metric("cogate_controller_preemptions_total", result="Started") == 1
    assert w.metric("cogate_controller_preemption_victims_total", result="deleted") == 2
    assert all(GATE in [g["name"] for g in w.cluster.pods[m]["spec"]["schedulingGates"]] for m in ("m-0", "m-1"))

    w.run(1.0)  # the victims are gone: the held room is lent to pg, which is released pinned to n1
    for m in ("m-0", "m-1"):
        spec = w.cluster.pods[m]["spec"]
        assert not spec.get("schedulingGates")
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms[0]["matchFields"][0]["values"] == ["n1"]
    cond = w.condition()
    assert (cond["status"], cond["reason"]) == ("False", "Placed")
    assert w.metric("cogate_controller_preemptions_total", result="Placed") == 1
    assert w.rec.memory.recall("pg-uid-pg").preemption.in_flight is None


class InFlightCluster(StatusCluster):
    """A StatusCluster whose nominations and DELETEs take ``delay`` seconds each and that counts the
    requests in flight: the most at once (``peak``) and which DELETE began while a nomination was
    still unanswered (``early``)."""

    delay = 0.05

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.lock = threading.Lock()
        self.flying = self.peak = self.nominating = 0
        self.early: list[str] = []

    def _timed(self, call, *, nomination=False):
        with self.lock:
            self.flying += 1
            self.nominating += nomination
            self.peak = max(self.peak, self.flying)
        try:
            time.sleep(self.delay)
            return call()
        finally:
            with self.lock:
                self.flying -= 1
                self.nominating -= nomination

    def patch_namespaced_pod_status(self, name, namespace, body, **kw):
        nomination = "nominatedNodeName" in body["status"]
        return self._timed(lambda: super(InFlightCluster, self).patch_namespaced_pod_status(name, namespace, body,
                                                                                             **kw),
                           nomination=nomination)

    def delete_namespaced_pod(self, name, namespace, body=None, **kw):
        with self.lock:
            if self.nominating:
                self.early.append(name)
        return self._timed(lambda: super(InFlightCluster, self).delete_namespaced_pod(name, namespace, body, **kw))


def wide_world(members: int, workers: int) -> World:
    """PodGroup pg (priority 1000) of ``members`` gated members of 2 cpu; ``members`` / 2 nodes of
    4 cpu, each full of two low-priority pods of 2 cpu: one victim per member."""
    names = [f"n{i}" for i in range(1, members // 2 + 1)]
    nodes = [ready_node(n, "4") for n in names]
    pods = [pod(f"low-{i}-{k}").req(cpu="2").on(n).priority(100).raw() for i, n in enumerate(names) for k in range(2)]
    pods += [pod(f"m-{i}").req(cpu="2").group("pg").gated().priority(1000).raw() for i in range(members)]
    return World(pods, [raw_pg("pg", members)], nodes=nodes, workers=workers, cluster=InFlightCluster)


def test_victims_are_deleted_concurrently_bounded_by_the_workers_after_every_nomination():
    w = wide_world(8, workers=4)
    w.run()
    assert sorted(w.cluster.deleted) == sorted(f"low-{i}-{k}" for i in range(4) for k in range(2))
    nominations = [c for c in w.cluster.calls if c[0] == "nominate"]
    assert len(nominations) == 8 and w.cluster.calls[:8] == nominations  # every nomination before any mark
    assert w.cluster.early == []  # no DELETE while a nomination was in flight
    # concurrent (4 requests were in flight at once: each holds its slot for InFlightCluster.delay),
    # never more than --workers in flight; stated as the events seen, not as a wall-clock bound
    assert w.cluster.peak == 4
    assert w.metric("cogate_controller_preemption_victims_total", result="deleted") == 8
    w.run(1.0)  # every victim gone: the whole gang released on their room
    assert all(not w.cluster.pods[f"m-{i}"]["spec"].get("schedulingGates") for i in range(8))


def test_a_failed_nomination_deletes_no_victim_and_clears_the_others():
    class Refusing(StatusCluster):
        def patch_namespaced_pod_status(self, name, namespace, body, **kw):
            if name == "m-1" and body["status"].get("nominatedNodeName"):
                raise ApiError(403)
            return super().patch_namespaced_pod_status(name, namespace, body, **kw)

    pods = [pod("low-a").req(cpu="2").on("n1").priority(100).raw(),
            pod("low-b").req(cpu="2").on("n1").priority(100).raw(),
            pod("m-0").req(cpu="2").group("pg").gated().priority(1000).raw(),
            pod("m-1").req(cpu="2").group("pg").gated().priority(1000).raw()]
    w = World(pods, [raw_pg("pg", 2)], cluster=Refusing)
    w.run()
    assert w.cluster.deleted == [] and not [c for c in w.cluster.calls if c[0] in ("mark", "delete")]
    assert "nominatedNodeName" not in w.cluster.pods["m-0"]["status"]  # the one that was set is cleared
    assert w.condition()["reason"] == "PlanChanged" and "m-1" in w.condition()["message"]
    assert w.rec.memory.recall("pg-uid-pg").preemption.in_flight is None


def test_victims_are_marked_disruption_target_with_cogates_reason_before_the_delete():
    w = full_node_world()
    w.cluster.keep_deleted = True
    w.run()
    for name in ("low-a", "low-b"):
        c = next(c for c in w.cluster.pods[name]["status"]["conditions"] if c["type"] == "DisruptionTarget")
        assert (c["status"], c["reason"]) == ("True", "PreemptionByCogate")
        assert c["message"] == "cogate: preempting to place PodGroup team/pg (priority 1000)"
        assert c["lastTransitionTime"]  # without it the disruption controller resets the mark at once


def test_the_held_room_is_not_released_to_a_lower_priority_group_meanwhile():
    w = full_node_world()
    w.run()
    w.cluster.pods["o-0"] = pod("o-0").req(cpu="2").group("other").gated().priority(100).raw()
    w.cluster.pgs["other"] = raw_pg("other", 1)
    w.run(1.0)
    assert GATE in [g["name"] for g in w.cluster.pods["o-0"]["spec"]["schedulingGates"]]
    assert not w.cluster.pods["m-0"]["spec"].get("schedulingGates")


def test_stuck_victims_end_it_at_the_deadline_clear_the_nominations_and_back_off():
    w = full_node_world()
    w.cluster.keep_deleted = True  # terminating for ever (a finalizer, a NotReady node)
    w.run()
    rec = w.rec.memory.recall("pg-uid-pg").preemption.in_flight
    assert rec is not None and rec.deadline == T0 + 5 + inflight.STUCK_SLACK_SECONDS  # grace from the DELETE answer
    w.run(10.0)
    assert "still" not in w.condition()["message"] and w.condition()["status"] == "True"
    assert "waiting for 2 victims to terminate (team/low-a, team/low-b)" in w.condition()["message"]
    w.cluster.calls.clear()
    w.run(rec.deadline - w.now)
    assert w.cluster.calls == [("nominate", "m-0=None"), ("nominate", "m-1=None")]
    assert all("nominatedNodeName" not in w.cluster.pods[m]["status"] for m in ("m-0", "m-1"))
    cond = w.condition()
    assert (cond["status"], cond["reason"]) == ("False", "VictimsStuck")
    assert "team/low-a" in cond["message"] and "team/low-b" in cond["message"]
    warn = [e for e in w.events if e[1] == "PreemptionEnded"]
    assert warn and warn[-1][0] == "Warning" and "VictimsStuck" in warn[-1][3]
    w.cluster.calls.clear()
    w.run(1.0)  # backing off: nothing preempted again
    assert w.cluster.calls == []
    assert w.rec.memory.recall("pg-uid-pg").preemption.until == rec.deadline + inflight.BACKOFF_INITIAL_SECONDS


def test_equal_priority_preempts_nothing_and_says_why():
    pods = [pod("low-a").req(cpu="2").on("n1").priority(1000).raw(),
            pod("low-b").req(cpu="2").on("n1").priority(1000).raw(),
            pod("m-0").req(cpu="2").group("pg").gated().priority(1000).raw(),
            pod("m-1").req(cpu="2").group("pg").gated().priority(1000).raw()]
    w = World(pods, [raw_pg("pg", 2)])
    w.run()
    assert w.cluster.calls == [] and w.cluster.deleted == []
    cond = w.condition()
    assert (cond["status"], cond["reason"]) == ("False", "NoLowerPriorityPods")


def test_preemption_policy_never_preempts_nothing():
    pods = [pod("low-a").req(cpu="2").on("n1").priority(100).raw(),
            pod("low-b").req(cpu="2").on("n1").priority(100).raw(),
            pod("m-0").req(cpu="2").group("pg").gated().priority(1000).policy("Never").raw(),
            pod("m-1").req(cpu="2").group("pg").gated().priority(1000).raw()]
    w = World(pods, [raw_pg("pg", 2)])
    w.run()
    assert w.cluster.deleted == []
    assert w.condition()["reason"] == "PreemptionPolicyNever"


def test_a_gang_that_does_not_fit_even_with_preemption_deletes_nothing():
    pods = [pod("low-a").req(cpu="2").on("n1").priority(100).raw(),
            pod("high").req(cpu="2").on("n1").priority(5000).raw(),
            pod("m-0").req(cpu="2").group("pg").gated().priority(1000).raw(),
            pod("m-1").req(cpu="2").group("pg").gated().priority(1000).raw()]
    w = World(pods, [raw_pg("pg", 2)])
    w.run()
    assert w.cluster.deleted == []
    assert w.condition()["reason"] == "DoesNotFitEvenWithPreemption"


def test_without_the_flag_nothing_is_preempted_and_no_condition_is_written():
    w = full_node_world(preemption=False)
    w.run()
    assert w.cluster.calls == [] and w.cluster.deleted == []
    assert w.condition() is None
    assert w.condition(type_="Released")["reason"] == "InsufficientCapacity"


def test_a_nomination_cleared_by_someone_else_ends_it_and_clears_cogates_others():
    w = full_node_world()
    w.cluster.keep_deleted = True
    w.run()
    w.run(1.0)  # cogate's nominations seen
    w.cluster.pods["m-0"]["status"].pop("nominatedNodeName")  # a higher-priority preemptor on n1
    w.cluster.calls.clear()
    w.run(1.0)
    assert w.cluster.calls == [("nominate", "m-1=None")]
    cond = w.condition()
    assert (cond["status"], cond["reason"]) == ("False", "NominationLost")
    assert "m-0" in cond["message"]


def test_a_victim_gangs_disrupted_condition_names_the_preemptor():
    victims = [pod(f"v-{i}").req(cpu="2").group("victim").on("n1").priority(100).raw() for i in range(2)]
    pods = victims + [pod("m-0").req(cpu="2").group("pg").gated().priority(1000).raw(),
                      pod("m-1").req(cpu="2").group("pg").gated().priority(1000).raw()]
    done = {"phase": "Running", "conditions": [{"type": "Released", "status": "True", "reason": "Released",
                                                "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}],
            "scheduleStartTime": "2024-01-01T00:00:00Z"}
    w = World(pods, [raw_pg("pg", 2), raw_pg("victim", 2, status=done)])
    w.run()  # the victim gang's members are seen as a standing release (its last pass)
    assert sorted(w.cluster.deleted) == ["v-0", "v-1"]
    w.run(1.0)
    cond = w.condition("victim", "Disrupted")
    assert cond is not None and cond["status"] == "True", w.cluster.pgs["victim"]["status"]
    assert "preempted by cogate (preempting to place PodGroup team/pg (priority 1000))" in cond["message"]


def test_a_group_released_after_preempting_nothing_says_so():
    pods = [pod("high").req(cpu="4").on("n1").priority(5000).raw(),
            pod("m-0").req(cpu="2").group("pg").gated().priority(1000).raw(),
            pod("m-1").req(cpu="2").group("pg").gated().priority(1000).raw()]
    w = World(pods, [raw_pg("pg", 2)])
    w.run()
    assert w.condition()["reason"] == "NoLowerPriorityPods"
    del w.cluster.pods["high"]  # room frees on its own
    w.run(1.0)
    assert not w.cluster.pods["m-0"]["spec"].get("schedulingGates")
    c = w.condition()
    assert (c["status"], c["reason"]) == ("False", "ReleasedWithoutPreemption") and "earlier:" in c["message"]
    assert w.cluster.deleted == []


def test_a_lost_record_never_leaves_preempting_true_nor_deletes_more():
    w = full_node_world()
    w.cluster.keep_deleted = True
    w.run()
    assert w.condition()["status"] == "True"
    deleted = list(w.cluster.deleted)
    w.rec.memory.forget(())  # what a new process starts with: no record
    w.run(1.0)
    c = w.condition()
    # the new process selects again: the terminating victims are no candidates, nothing else is lower
    assert (c["status"], c["reason"]) == ("False", "NoLowerPriorityPods")
    assert w.cluster.deleted == deleted
    w.rec.memory.forget(())
    w.rec.memory.recall("pg-uid-pg").preemption.checked = w.now + 1  # no selection in the next pass
    w.run(0.5)
    w.cluster.pgs["pg"]["status"]["conditions"] = [
        dict(c, status="True", reason="Preempting") if c["type"] == "Preempting" else c
        for c in w.cluster.pgs["pg"]["status"]["conditions"]]  # as an earlier process left it
    w.rec.memory.forget(())
    w.rec.memory.recall("pg-uid-pg").preemption.checked = w.now + 1
    w.run(0.1)
    c = w.condition()
    assert (c["status"], c["reason"]) == ("False", "Interrupted")


def test_a_nomination_whose_record_is_lost_is_cleared():
    w = full_node_world()
    w.cluster.keep_deleted = True
    w.run()
    assert w.cluster.pods["m-0"]["status"]["nominatedNodeName"] == "n1"
    w.rec.memory.forget(())  # a new process: no record of the preemption
    w.rec.memory.recall("pg-uid-pg").preemption.checked = w.now + 10  # and no new selection in this pass
    w.cluster.calls.clear()
    w.run(1.0)
    assert sorted(w.cluster.calls) == [("nominate", "m-0=None"), ("nominate", "m-1=None")]
    assert all("nominatedNodeName" not in w.cluster.pods[m]["status"] for m in ("m-0", "m-1"))
    w.cluster.calls.clear()
    w.run(1.0)
    assert w.cluster.calls == []  # once


def test_a_restarted_process_resumes_the_preemption_in_flight_and_places_the_gang_on_its_room():
    w = full_node_world()
    w.cluster.keep_deleted = True  # the victims terminate for a while
    w.run()
    before = w.condition()
    w2 = w.restarted()
    w2.cluster.calls.clear()
    w2.cluster.pods["o-0"] = pod("o-0").req(cpu="2").group("other").gated().priority(100).raw()  # would fit the freed room
    w2.cluster.pgs["other"] = raw_pg("other", 1)
    w2.run(1.0)
    rec = w2.rec.memory.recall("pg-uid-pg").preemption.in_flight
    assert rec is not None and rec.plan == {"uid-m-0": "n1", "uid-m-1": "n1"}
    assert [v.name for v in rec.victims] == ["low-a", "low-b"] and rec.started == T0
    assert w2.cluster.calls == [("mark", "m-0"), ("mark", "m-1")]  # refreshed; nothing cleared, nothing deleted
    c = w2.condition()
    assert (c["status"], c["reason"]) == ("True", "Preempting"), c
    assert "(resumed after a controller restart); waiting for 2 victims to terminate" in c["message"]
    assert c["lastTransitionTime"] == before["lastTransitionTime"]  # still the same preemption
    assert w2.metric("cogate_controller_preemptions_total", result="Resumed") == 1
    assert any(e[1] == "Preempting" and "resumed" in e[3] for e in w2.events)
    assert GATE in [g["name"] for g in w2.cluster.pods["o-0"]["spec"]["schedulingGates"]]  # the room is held
    for v in ("low-a", "low-b"):
        del w2.cluster.pods[v]
    w2.run(1.0)
    for m in ("m-0", "m-1"):
        spec = w2.cluster.pods[m]["spec"]
        assert not spec.get("schedulingGates")
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms[0]["matchFields"][0]["values"] == ["n1"]
    assert GATE in [g["name"] for g in w2.cluster.pods["o-0"]["spec"]["schedulingGates"]]
    assert (w2.condition()["status"], w2.condition()["reason"]) == ("False", "Placed")
    assert w2.metric("cogate_controller_preemptions_total", result="Placed") == 1


def test_a_restart_between_the_mark_and_the_delete_deletes_the_marked_victim():
    w = full_node_world()
    w.cluster.keep_deleted = True
    w.run()
    low_b = w.cluster.pods["low-b"]["metadata"]
    del low_b["deletionTimestamp"], low_b["deletionGracePeriodSeconds"]  # as if the DELETE never went out
    w2 = w.restarted()
    w2.cluster.calls.clear()
    w2.run(2.0)
    assert w2.cluster.calls == [("mark", "low-b"), ("delete", "low-b"), ("mark", "m-0"), ("mark", "m-1")]
    rec = w2.rec.memory.recall("pg-uid-pg").preemption.in_flight
    assert rec.deadline == w2.now + 5 + inflight.STUCK_SLACK_SECONDS  # from the grace the DELETE answered
    assert [e[2] for e in w2.events if e[1] == "Preempted"] == ["low-b"]


def test_a_restart_keeps_another_managers_nomination():
    w = full_node_world()
    w.cluster.pods["m-0"]["status"]["nominatedNodeName"] = "n1"
    w.cluster.pods["m-0"]["metadata"]["managedFields"] = [
        {"manager": "someone-else", "subresource": "status", "fieldsV1": {"f:status": {"f:nominatedNodeName": {}}}}]
    w.rec.memory.recall("pg-uid-pg").preemption.checked = w.now + 10  # no selection in this pass
    w.run()
    assert w.cluster.calls == [] and w.rec.memory.recall("pg-uid-pg").preemption.in_flight is None
    assert w.cluster.pods["m-0"]["status"]["nominatedNodeName"] == "n1"


def refreshes(w) -> list[str]:
    """Members whose RoomHeld condition was written (status patches that are not nominations)."""
    return [name for what, name in w.cluster.calls if what == "mark" and name.startswith("m-")]


def test_a_new_kube_scheduler_leader_gets_the_nominations_in_flight_refreshed_now_and_once_more():
    L = inflight.SchedulerLease
    w = full_node_world()
    w.cluster.keep_deleted = True
    p = w.rec.preempting
    assert p.on_scheduler_lease("ADDED", None, L("a", 0))  # first sight, no preemption yet
    w.run()  # nothing in flight to refresh; the preemption starts (its nominations are updates already)
    w.run(0.1)
    assert refreshes(w) == []
    w.run(inflight.REFRESH_AGAIN_SECONDS)
    assert refreshes(w) == ["m-0", "m-1"]  # the second refresh finds it in flight
    w.cluster.calls.clear()
    assert not p.on_scheduler_lease("MODIFIED", L("a", 0), L("a", 0))  # a renewal
    assert not p.on_scheduler_lease("MODIFIED", L("a", 0), L("", 0))  # released on kube-scheduler's shutdown
    w.run(1.0)
    assert refreshes(w) == []
    assert p.on_scheduler_lease("MODIFIED", L("", 0), L("b", 1))  # a new process took it
    w.run(0.1)
    assert refreshes(w) == ["m-0", "m-1"]
    cond = next(c for c in w.cluster.pods["m-0"]["status"]["conditions"] if c["type"] == inflight.ROOM_HELD_CONDITION)
    assert "kube-scheduler b took its Lease" in cond["message"] and "node n1 for PodGroup team/pg" in cond["message"]
    assert w.cluster.pods["m-0"]["status"]["nominatedNodeName"] == "n1"  # the nomination itself is untouched
    assert w.metric("cogate_controller_preemption_nomination_refreshes_total", result="ok") == 4
    assert w.condition()["status"] == "True"  # still the same preemption


def test_without_a_preemption_in_flight_a_new_leader_writes_nothing():
    w = full_node_world(preemption=True)
    w.rec.memory.recall("pg-uid-pg").preemption.checked = w.now + 100  # no selection
    w.rec.preempting.on_scheduler_lease("MODIFIED", inflight.SchedulerLease("a", 0), inflight.SchedulerLease("b", 1))
    w.run()
    w.run(inflight.REFRESH_AGAIN_SECONDS)
    assert w.cluster.calls == []


def test_a_resumed_preemption_refreshes_its_nominations_once():
    w = full_node_world()
    w.cluster.keep_deleted = True
    w.run()
    w2 = w.restarted()
    w2.cluster.calls.clear()
    w2.run(1.0)
    assert refreshes(w2) == ["m-0", "m-1"]
    held = next(c for c in w2.cluster.pods["m-1"]["status"]["conditions"] if c["type"] == inflight.ROOM_HELD_CONDITION)
    assert "after a controller restart" in held["message"]


def test_with_the_planning_state_the_selection_reads_its_view_and_acts_the_same(monkeypatch):
    from cogate.controller.preemption import room as preempting_mod

    seen = []
    real = preempting_mod.select_victims

    def spy(*a, **kw):
        seen.append(kw.get("view"))
        return real(*a, **kw)

    monkeypatch.setattr(preempting_mod, "select_victims", spy)
    w = full_node_world(nodes=(ready_node("n1", "4"), ready_node("n2", "1")))
    w.rec.preempting.planning, w.rec.preempting.planning_lock = w.rec.planning, w.rec._planning_lock
    w.run()
    assert seen and all(v is not None for v in seen)  # the planning state's view, not the pod list
    assert_nominated_then_preempted(w.cluster.calls, ["m-0=n1", "m-1=n1"], ["low-a", "low-b"])
    w.run(1.0)  # the victims went through the informer deltas: the gang is released on their room
    assert all(not w.cluster.pods[m]["spec"].get("schedulingGates") for m in ("m-0", "m-1"))
    assert w.metric("cogate_controller_preemptions_total", result="Placed") == 1
