"""Rebuilding a preemption in flight after a restart (issue 15, H3 hole b): ``inflight.rebuild``.

What is rebuilt from which objects (cogate's nominations on gated members, victims marked
``PreemptionByCogate`` naming the group), what is ignored and why, the times (start, deadline from
the victims' grace periods), and that a rebuilt record holds the room and ends as the earlier
process's would have (``inflight.judge``). The shell: tests/unit/controller/preemption/test_preempting.py (``resume``);
end to end: tests/e2e/test_preemption.py (the controller restarted mid-preemption).
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.api import POD_GROUP_LABEL
from cogate.controller.preemption import inflight
from cogate.controller.status import notices
from cogate.controller.model import records
from cogate.controller.preemption.inflight import Step
from cogate.controller.model.records import PodInfo

NOW = 10_000.0
REASON = "PreemptionByCogate"
MANAGER = "cogate-controller"


def member(group: str, i: int, *, nominated: str = "", by: str = MANAGER, gated: bool = True, priority: int = 1000,
           node_name: str = "", ns: str = "team") -> PodInfo:
    return PodInfo(ns, f"{group}-{i}", f"uid-{ns}-{group}-{i}", labels={POD_GROUP_LABEL: group}, node_name=node_name,
                   phase="Running" if node_name else "Pending", requests={"cpu": 2000},
                   gates=(GATE,) if gated else (), priority=priority, nominated_node=nominated,
                   nominated_by=by if nominated else "")


def victim(name: str, node: str, *, group: str = "team/g", priority: int = 100, marked: float = NOW - 20,
           deleting_until: float | None = NOW + 10, reason: str = REASON, message: str | None = None,
           phase: str = "Running", ns: str = "team") -> PodInfo:
    return PodInfo(ns, name, f"uid-{ns}-{name}", node_name=node, phase=phase, requests={"cpu": 2000},
                   priority=priority, deleting=deleting_until is not None, deletion_at=deleting_until or 0.0,
                   disruption=reason, disruption_since=marked,
                   disruption_message=notices.disruption_message(group, 1000) if message is None else message)


def rebuild(members, pods, now=NOW) -> inflight.Rebuilt:
    by_group: dict[tuple[str, str], list[PodInfo]] = {}
    for m in members:
        by_group.setdefault((m.namespace, m.group), []).append(m)
    return inflight.rebuild(by_group, pods, GATE, REASON, MANAGER, now)


# -- what is rebuilt ------------------------------------------------------------------------------
def test_a_preemption_in_flight_is_rebuilt_from_nominations_and_marked_victims():
    ms = [member("g", 0, nominated="n1"), member("g", 1, nominated="n2")]
    vs = [victim("low-b", "n2", marked=NOW - 15, deleting_until=NOW + 40), victim("low-a", "n1")]
    out = rebuild(ms, vs)
    assert out.ignored == () and out.to_delete == ()
    (rec,) = out.records
    assert (rec.namespace, rec.name, rec.priority) == ("team", "g", 1000)
    assert rec.plan == {"uid-team-g-0": "n1", "uid-team-g-1": "n2"}
    assert rec.requests == {"uid-team-g-0": {"cpu": 2000}, "uid-team-g-1": {"cpu": 2000}}
    assert [v.name for v in rec.victims] == ["low-a", "low-b"]  # by node, as inflight.start sorts them
    assert rec.started == NOW - 20  # the earliest mark
    assert rec.deadline == NOW + 40 + inflight.STUCK_SLACK_SECONDS  # the latest deletionTimestamp + slack
    assert rec.nominated == frozenset(rec.plan)  # seen: a later change is someone else's
    assert rec.gone_at is None
    assert rec.message == ("preempting 2 pods (team/low-a, team/low-b) of priority <= 100 on 2 nodes n1, n2 to place "
                           "PodGroup team/g, priority 1000 (resumed after a controller restart)")


def test_the_rebuilt_record_holds_the_room_and_waits_for_the_victims_then_is_placed():
    ms = [member("g", 0, nominated="n1")]
    vs = [victim("low", "n1")]
    (rec,) = rebuild(ms, vs).records
    (promise,) = inflight.holds(rec, ms, GATE)
    assert (promise.node_name, promise.kind, promise.holder) == ("n1", "preempting", "PodGroup team/g")
    j = inflight.judge(rec, ms, False, {v.uid: v for v in vs}, NOW, GATE)
    assert j.step is Step.WAITING and [v.name for v in j.remaining] == ["low"]
    j = inflight.judge(j.record, ms, False, {}, NOW + 5, GATE)
    assert j.step is Step.VICTIMS_GONE
    assert inflight.judge(j.record, ms, True, {}, NOW + 6, GATE).step is Step.PLACED


def test_victims_still_there_at_the_rebuilt_deadline_are_stuck():
    ms = [member("g", 0, nominated="n1")]
    vs = [victim("low", "n1", deleting_until=NOW + 10)]
    (rec,) = rebuild(ms, vs).records
    j = inflight.judge(rec, ms, False, {vs[0].uid: vs[0]}, NOW + 10 + inflight.STUCK_SLACK_SECONDS, GATE)
    assert j.step is Step.VICTIMS_STUCK and j.nominated == ("uid-team-g-0",)


def test_a_victim_marked_but_not_deleted_is_to_be_deleted_with_the_default_grace_until_answered():
    ms = [member("g", 0, nominated="n1")]
    vs = [victim("low", "n1", deleting_until=None, marked=NOW - 5)]
    out = rebuild(ms, vs)
    (rec,) = out.records
    assert out.to_delete == ("uid-team-low",)
    assert rec.victims[0].grace == inflight.DEFAULT_GRACE_SECONDS
    again = inflight.regraced(rec, {"uid-team-low": 60.0}, NOW)  # the DELETE at NOW answered 60 s
    assert again.victims[0].grace == 65.0 and again.deadline == NOW + 60 + inflight.STUCK_SLACK_SECONDS
    assert inflight.regraced(rec, {}, NOW) is rec


def test_without_a_mark_time_the_start_is_now():
    ms = [member("g", 0, nominated="n1")]
    (rec,) = rebuild(ms, [victim("low", "n1", marked=0.0, deleting_until=NOW + 30)]).records
    assert rec.started == NOW and rec.deadline == NOW + 30 + inflight.STUCK_SLACK_SECONDS


def test_every_victim_gone_still_holds_the_nominated_room_for_one_recheck():
    ms = [member("g", 0, nominated="n1"), member("g", 1, nominated="n1")]
    (rec,) = rebuild(ms, []).records
    assert rec.victims == () and rec.started == NOW
    assert rec.message == ("preempting to place PodGroup team/g, priority 1000: every victim is gone; holding its "
                           "members' nominated room on 1 node n1 (resumed after a controller restart)")
    assert len(inflight.holds(rec, ms, GATE)) == 2
    j = inflight.judge(rec, ms, False, {}, NOW, GATE)
    assert j.step is Step.VICTIMS_GONE
    end = inflight.judge(j.record, ms, False, {}, NOW + inflight.GONE_RECHECK_SECONDS, GATE)
    assert end.step is Step.DOES_NOT_FIT_AFTER_PREEMPTION and set(end.nominated) == set(rec.plan)


def test_only_gated_unbound_members_nominated_by_cogate_are_planned_and_the_priority_is_the_lowest_gated():
    ms = [member("g", 0, nominated="n1"), member("g", 1), member("g", 2, nominated="n1", gated=False),
          member("g", 3, priority=900), member("g", 4, nominated="n2", node_name="n2", gated=False, priority=1)]
    (rec,) = rebuild(ms, [victim("low", "n1")]).records
    assert rec.plan == {"uid-team-g-0": "n1"} and rec.priority == 900


# -- what is ignored, and why ---------------------------------------------------------------------
def test_a_nomination_of_another_manager_or_of_an_unknown_one_is_not_cogates():
    ms = [member("g", 0, nominated="n1", by="cluster-autoscaler"), member("g", 1, nominated="n1", by="")]
    out = rebuild(ms, [victim("low", "n1")])
    assert out.records == ()
    reasons = {i.ref: i.reason for i in out.ignored}
    assert "set by cluster-autoscaler, not by cogate-controller" in reasons["team/g-0"]
    assert "an unknown writer (no managedFields)" in reasons["team/g-1"]
    assert "which has no member nominated by cogate" in reasons["team/low"]


def test_odd_victims_are_ignored_with_a_reason():
    ms = [member("g", 0, nominated="n1", priority=500)]
    vs = [victim("garbage", "n1", message="someone: preempting"),
          victim("other-group", "n1", group="team/nope"),
          victim("too-high", "n1", priority=500),
          dataclasses.replace(victim("own", "n1"), labels={POD_GROUP_LABEL: "g"}, priority=1),
          victim("ok", "n1")]
    out = rebuild(ms, vs)
    (rec,) = out.records
    assert [v.name for v in rec.victims] == ["ok"]
    reasons = {i.ref: i.reason for i in out.ignored}
    assert set(reasons) == {"team/garbage", "team/other-group", "team/too-high", "team/own"}
    assert "names no PodGroup" in reasons["team/garbage"]
    assert "PodGroup team/nope, which has no member nominated by cogate" in reasons["team/other-group"]
    assert "priority 500 is not below the group's 500" in reasons["team/too-high"]
    assert "its own PodGroup" in reasons["team/own"]


def test_pods_not_marked_by_cogate_or_gone_are_not_victims_and_not_reported():
    ms = [member("g", 0, nominated="n1")]
    vs = [victim("kube", "n1", reason="PreemptionByScheduler"), victim("done", "n1", phase="Succeeded"),
          dataclasses.replace(victim("unbound", "n1"), node_name="")]
    out = rebuild(ms, vs)
    assert out.records[0].victims == () and out.ignored == ()


def test_the_disruption_message_reads_back():
    assert notices.disruption_group(notices.disruption_message("ns-1/my.group", -5)) == ("ns-1", "my.group", -5)
    assert notices.disruption_group("cogate: preempting to place PodGroup a/b (priority x)") is None
    assert notices.disruption_group("") is None


def test_the_records_parser_reads_the_fields_the_rebuild_needs():
    raw = {"metadata": {"namespace": "team", "name": "m", "uid": "u", "labels": {POD_GROUP_LABEL: "g"},
                        "deletionTimestamp": "2024-01-01T00:01:00Z",
                        "managedFields": [
                            {"manager": "kube-scheduler", "subresource": "status",
                             "fieldsV1": {"f:status": {"f:conditions": {}}}},
                            {"manager": MANAGER, "subresource": "status",
                             "fieldsV1": {"f:status": {"f:nominatedNodeName": {}}}}]},
           "spec": {"schedulingGates": [{"name": GATE}], "containers": [{"name": "c"}]},
           "status": {"nominatedNodeName": "n1", "conditions": [
               {"type": "DisruptionTarget", "status": "True", "reason": REASON, "message": "x",
                "lastTransitionTime": "2024-01-01T00:00:30Z"}]}}
    p = records.pod_info(raw)
    assert (p.nominated_by, p.deletion_at, p.disruption_since) == (MANAGER, 1704067260.0, 1704067230.0)
    raw["spec"]["schedulingGates"] = []  # read only for gated pods
    assert records.pod_info(raw).nominated_by == ""
    raw["spec"]["schedulingGates"] = [{"name": GATE}]
    raw["metadata"]["managedFields"] = "garbage"  # never makes the pod unreadable
    raw["status"]["conditions"][0]["lastTransitionTime"] = "not a time"
    p = records.pod_info(raw)
    assert (p.nominated_by, p.disruption_since) == ("", 0.0)


# -- property: every marked victim and every nomination is accounted for -----------------------------
GROUPS = ("a", "b", "c")
NODES = ("n1", "n2", "n3")


@st.composite
def worlds(draw):
    ms, vs = [], []
    for g in GROUPS:
        for i in range(draw(st.integers(0, 3))):
            nominated = draw(st.sampled_from(("",) + NODES))
            by = draw(st.sampled_from((MANAGER, MANAGER, "other", "")))
            ms.append(member(g, i, nominated=nominated, by=by, gated=draw(st.booleans()),
                             priority=draw(st.sampled_from((500, 1000)))))
    for i in range(draw(st.integers(0, 6))):
        group = f"team/{draw(st.sampled_from(GROUPS + ('gone',)))}"
        vs.append(victim(f"v{i}", draw(st.sampled_from(NODES)), group=group,
                         priority=draw(st.sampled_from((100, 1000))),
                         marked=draw(st.sampled_from((0.0, NOW - 30, NOW - 10))),
                         deleting_until=draw(st.sampled_from((None, NOW, NOW + 30))),
                         reason=draw(st.sampled_from((REASON, REASON, "PreemptionByScheduler"))),
                         message=draw(st.sampled_from((None, None, "odd"))),
                         phase=draw(st.sampled_from(("Running", "Running", "Failed")))))
    return ms, vs


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_property_rebuild_accounts_for_every_nomination_and_every_marked_victim(world):
    ms, vs = world
    out = rebuild(ms, vs)
    ignored = {i.ref for i in out.ignored}
    assert all(i.reason for i in out.ignored)
    by_key = {(r.namespace, r.name): r for r in out.records}
    assert len(by_key) == len(out.records)
    in_records = {v.uid for r in out.records for v in r.victims}
    assert sum(len(r.victims) for r in out.records) == len(in_records)  # a victim in one record at most
    for m in ms:
        planned = m.gated_by(GATE) and not m.bound and m.nominated_node
        rec = by_key.get((m.namespace, m.group))
        if planned and m.nominated_by == MANAGER:
            assert rec is not None and rec.plan[m.uid] == m.nominated_node and m.uid in rec.nominated
        else:
            assert rec is None or m.uid not in rec.plan
            assert (f"{m.namespace}/{m.name}" in ignored) == bool(planned)
    for r in out.records:
        gated = [m for m in ms if m.group == r.name and m.gated_by(GATE) and not m.bound]
        assert r.priority == min(m.priority for m in gated)
        assert r.deadline == inflight.deadline(r.started, r.victims)
        assert len(inflight.holds(r, ms, GATE)) == len(r.plan)
    for v in vs:
        ours = v.disruption == REASON and v.bound and not v.terminal
        if not ours:
            assert v.uid not in in_records and f"{v.namespace}/{v.name}" not in ignored
            continue
        assert (v.uid in in_records) != (f"{v.namespace}/{v.name}" in ignored)  # one or the other, never silent
        if v.uid in in_records:
            r = next(r for r in out.records if any(x.uid == v.uid for x in r.victims))
            assert notices.disruption_group(v.disruption_message)[:2] == (r.namespace, r.name)
            assert v.priority < r.priority
            assert (v.uid in out.to_delete) == (not v.deleting)
            if v.deleting:
                assert r.deadline >= v.deletion_at + inflight.STUCK_SLACK_SECONDS
    assert set(out.to_delete) <= in_records


# -- kube-scheduler's leader: when the nominations are refreshed (hole a) ---------------------------
def test_the_scheduler_lease_reads_holder_and_transitions_and_never_raises():
    lease = {"metadata": {"name": "kube-scheduler"}, "spec": {"holderIdentity": "cp-1_ab12", "leaseTransitions": 3}}
    assert inflight.scheduler_lease(lease) == inflight.SchedulerLease("cp-1_ab12", 3)
    assert inflight.scheduler_lease({"spec": {"holderIdentity": 5, "leaseTransitions": True}}) == \
        inflight.SchedulerLease()
    assert inflight.scheduler_lease({"spec": None}) == inflight.SchedulerLease()


def test_a_new_scheduler_leader_is_a_new_holder_or_a_transition_never_a_renewal_or_a_release():
    L = inflight.SchedulerLease
    new = inflight.new_scheduler_leader
    assert new(None, L("a", 0))  # first seen
    assert not new(L("a", 0), L("a", 0))  # renewed
    assert new(L("a", 0), L("b", 1))  # a restarted kube-scheduler (new identity)
    assert new(L("a", 1), L("a", 2))  # the same identity after a transition
    assert not new(L("a", 0), L("", 0))  # released (ReleaseOnCancel): no leader yet
    assert new(L("", 0), L("b", 1))
    assert not new(L("a", 0), None) and not new(None, None)


def test_the_refresh_condition_is_cogates_and_says_why():
    (rec,) = rebuild([member("g", 0, nominated="n1")], []).records
    c = inflight.refresh_condition(rec, "n1", "cp-1_ab12", "2026-01-01T00:00:00Z")
    assert (c["type"], c["status"], c["reason"]) == (inflight.ROOM_HELD_CONDITION, "True", "NominatedByCogate")
    assert c["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert "room on node n1 for PodGroup team/g" in c["message"] and "kube-scheduler cp-1_ab12" in c["message"]
    assert "a controller restart" in inflight.refresh_condition(rec, "n1", "", "t")["message"]
