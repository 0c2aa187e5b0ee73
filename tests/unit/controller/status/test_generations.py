"""Generations of a gang (issue 21 items 1, 6, 7, 10): in which release a member is, when a
release still stands, how Succeeded members count, adoption by a recreated PodGroup, and the
timeout clock that measures lack of progress (docs/semantics.md "Generations").

Pure rules: ``status.release_stands``/``release_end``/``generation_quorum``/``again_text``,
``status.track_progress``/``timeout_deadline``/``compute_all``, ``lifecycle.adopted``/
``ungated_without_release`` and the planner's accounting, with unit and property tests."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.api import POD_GROUP_LABEL
from cogate.controller.status import lifecycle
from cogate.controller.planning.planner import GroupRequest, GroupVerdict, PlannerConfig, decide
from cogate.controller.model.records import NodeInfo, PodInfo
from cogate.controller.status.status import (
    BindProgress,
    again_text,
    compute_all,
    generation_quorum,
    release_end,
    release_stands,
    timeout_deadline,
    track_progress,
)
from cogate.models import PodGroup, format_time, parse_time

NS, NAME = "ml", "train"
T0 = parse_time("2024-05-01T10:00:00Z")
START = format_time(T0)

#: shorthand -> (node_name, phase, gated)
STATES = {
    "G": ("", "Pending", True),     # gated, created after the release (recreated, replacement, new)
    "W": ("", "Pending", True),     # gated, created before the release: not reached yet, or waiting for room
    "U": ("", "Pending", False),    # released, waiting for kube-scheduler to bind it
    "B": ("n1", "Pending", False),  # bound
    "R": ("n1", "Running", False),
    "S": ("n1", "Succeeded", False),
    "F": ("n1", "Failed", False),
}


def member(state: str, i: int = 0, created: float | None = None) -> PodInfo:
    node, phase, gated = STATES[state]
    if created is None:
        created = T0 + 60 if state == "G" else T0 - 3600
    return PodInfo(namespace=NS, name=f"{NAME}-{i}", uid=f"uid-{NAME}-{i}-{state}", labels={POD_GROUP_LABEL: NAME},
                   node_name=node, phase=phase, gates=(GATE,) if gated else (), created=created,
                   requests={"cpu": 1000}, has_controller=True)


def members(spec: str) -> list[PodInfo]:
    return [member(s, i) for i, s in enumerate(spec)]


def cond(type_: str, status: str, reason: str) -> dict:
    return {"type": type_, "status": status, "reason": reason, "message": "x", "lastTransitionTime": START}


LOST = cond("Disrupted", "True", "MemberLost")
QUORUM_LOST = cond("Disrupted", "True", "QuorumLost")
TIMED_OUT = cond("TimedOut", "True", "TimedOut")


def podgroup(m: int, status: dict | None = None, timeout: int | None = None, created: float = T0 - 7200) -> PodGroup:
    spec: dict = {"minMember": m}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return PodGroup.from_api({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                              "metadata": {"name": NAME, "namespace": NS, "generation": 1,
                                           "creationTimestamp": format_time(created)},
                              "spec": spec, "status": status or {}})


def released(phase: str = "Running", *conds: dict) -> dict:
    return {"phase": phase, "scheduleStartTime": START, "conditions": list(conds)}


# ------------------------------------------------------------------ when a release stands (item 1)

@pytest.mark.parametrize("what,m,status,spec,stands,why", [
    # the whole gang is gone and comes back gated: scale to 0 and back, pods recreated by an operator
    ("scale to 0 and back", 4, released("Running", LOST), "GGGG", False, "members left it and 0 of minMember 4"),
    ("recreated, loss not seen yet", 4, released("Running"), "GGGG", False, "0 of minMember 4 members are left"),
    ("recreated one by one", 3, released("Running", LOST), "G", False, "members left it and 0 of minMember 3"),
    # Job suspend (active pods deleted) then resume, even after more than minMember completions
    ("suspend/resume, 3 done", 3, released("Finished", LOST), "SSSGGG", False, "members left it and 0 of"),
    ("suspend/resume, none done", 3, released("Running", LOST), "GGG", False, "members left it"),
    # partial recreation: two survive, two recreated
    ("partial recreation", 4, released("Running", LOST), "RRGG", False, "members left it and 2 of minMember 4"),
    ("partial, loss not seen yet", 4, released("Running"), "RRGG", False, "2 of minMember 4 members are left"),
    # still standing
    ("replacement, quorum holds", 3, released("Running", LOST), "RRRG", True, ""),
    ("released, binding", 3, released("Scheduling"), "BUU", True, ""),
    ("binding, a surge pod", 3, released("Scheduling"), "BUUG", True, ""),
    ("Job: next pod after one finished", 3, released("Running"), "RRSG", True, ""),
    ("Job: next wave after a wave finished", 3, released("Finished"), "SSSGGG", True, ""),
    ("Job: tail after two waves", 3, released("Finished"), "SSSSSSG", True, ""),
    ("finished pods deleted, new run", 3, released("Finished"), "GGG", False, "0 of minMember 3 members are left"),
    ("nothing came back gated", 4, released("Running", LOST), "RR", True, "members left it"),
    # gated members the release planned: a controller restarted mid-release, members beyond minMember
    ("restart mid-release", 4, released("Scheduling"), "UUWW", True, ""),
    ("waiting beyond minMember", 3, released("Running"), "RRRWWW", True, ""),
    ("waiting, one lost", 3, released("Running", LOST), "RRWWW", False, "members left it and 2 of minMember 3"),
    # ended for the reasons of before
    ("timed out", 3, released("Scheduling", TIMED_OUT), "BGG", False, "it timed out"),
    ("failed", 2, released("Failed"), "RFG", False, "lost through failures"),
    ("quorum evicted", 3, released("Running", QUORUM_LOST), "RRRG", False, "remaining members were evicted"),
    # issue 37 kind 7: a failed member of a run partly done is replaced within the run
    ("Indexed: 2 failed, 3 done, replaced", 4, released("Failed"), "RRFSG", True, ""),
    ("Indexed: loss recorded", 4, released("Running", LOST), "RRFSG", True, ""),
    ("last wave: 3 done, 1 failed, replaced", 4, released("Failed"), "SSSFG", True, ""),
    ("two failed, one replaced so far", 4, released("Failed"), "RSFFG", False, "lost through failures"),
    ("two failed, both replaced", 4, released("Failed"), "RSFFGG", True, ""),
    ("failed, replaced, none done: decided again", 3, released("Failed"), "RRFG", False, "lost through failures"),
    ("done, but deleted not failed: decided again", 4, released("Running", LOST), "RRSG", False,
     "members left it and 2 of minMember 4"),
    ("Job waves: one failed, replaced, next pod", 3, released("Running", LOST), "RSFGG", True, ""),
    ("limit: suspended after a failure joins", 3, released("Finished", LOST), "SSSFGGG", True, ""),
    ("done and failed, a timeout still ends", 4, released("Running", TIMED_OUT), "RRFSG", False, "it timed out"),
    ("done and failed, evicted below quorum", 4, released("Running", QUORUM_LOST), "RRFSG", False, "evicted"),
])
def test_when_a_release_stands(what, m, status, spec, stands, why):
    pg = podgroup(m, status)
    ms = members(spec)
    assert release_stands(pg.status, ms, GATE, min_member=m) is stands, what
    end = release_end(pg.status, ms, m, GATE)
    assert (why in end if why else end == ""), (what, end)


@given(st.integers(1, 6), st.text("GWUBRSF", max_size=10), st.booleans())
def test_a_release_stands_exactly_while_its_quorum_holds_or_nothing_waits_gated(m, spec, lost):
    """Property: with no timeout/failure/eviction recorded, the release stands iff
    ``holding + Succeeded + gated ones it planned >= m`` (and, after a recorded loss,
    ``holding >= m``), or a Succeeded member exists and the replacements of Failed members make
    it ``m`` again (issue 37 kind 7), or no member waits gated."""
    ms = members(spec)
    status = released("Running", LOST) if lost else released("Running")
    holding = sum(s in "UBR" for s in spec)
    quorum = holding + spec.count("S") + spec.count("W")
    assert generation_quorum(ms, GATE, START) == quorum
    stand_ins = min(spec.count("F"), spec.count("G"))
    goes_on = "S" in spec and stand_ins > 0 and quorum + stand_ins >= m  # issue 37 kind 7
    ok = goes_on or (quorum >= m and (holding >= m or not lost))
    waits = "G" in spec or "W" in spec
    assert release_stands(podgroup(m, status).status, ms, GATE, min_member=m) is (ok or not waits)


# ------------------------------------------------------------------ the recreated gang is never partly running

def _node(name: str, cpu: int) -> NodeInfo:
    return NodeInfo(name, labels={"kubernetes.io/hostname": name}, allocatable={"cpu": cpu * 1000, "pods": 110})


@settings(max_examples=300, deadline=None)
@given(m=st.integers(2, 6), survivors=st.integers(0, 6), recreated=st.integers(1, 6), room=st.integers(0, 8),
       filler=st.integers(0, 8), lost=st.booleans())
def test_a_recreated_gang_is_never_partly_running(m, survivors, recreated, room, filler, lost):
    """Property over planner + release rule: members that survive (bound) and members recreated
    gated, a filler pod holding part of the room. Whatever the planner releases, the recreated
    members released plus the survivors reach minMember, or the release stood because minMember
    survived."""
    survivors = min(survivors, m + 1)
    ms = [member("R", i) for i in range(survivors)] + [member("G", 100 + i) for i in range(recreated)]
    status = released("Running", LOST) if lost else released("Running")
    pg = podgroup(m, status)
    stands = release_stands(pg.status, ms, GATE, min_member=m)
    nodes = [_node("n1", survivors + room + filler)]
    bound = [p for p in ms if p.bound]
    filler_pod = PodInfo(namespace=NS, name="filler", uid="filler", labels={}, node_name="n1", phase="Running",
                         requests={"cpu": filler * 1000})
    request = GroupRequest(NS, NAME, m, 0.0, stands, tuple(ms))
    (v,) = decide(nodes, bound + [filler_pod], [request], [], T0, PlannerConfig()).verdicts
    if stands:
        assert survivors >= m
    else:
        n = len(v.release)
        assert n == 0 or survivors + n >= m, (v, survivors, n)
        assert n == (min(recreated, room) if survivors + min(recreated, room) >= m else 0)


# ------------------------------------------------------------------ Succeeded members (item 6)

@pytest.mark.parametrize("m,succeeded,new,released_now", [
    (6, 1, 5, False),   # MPI: 1 of 6 finished, 5 new pods: not started
    (6, 1, 6, True),    # a full gang of new pods
    (3, 3, 2, False),   # a finished wave does not make up a never-released gang
    (2, 5, 1, False),
])
def test_succeeded_members_do_not_count_toward_a_new_gang(m, succeeded, new, released_now):
    ms = [member("S", i) for i in range(succeeded)] + [member("G", 50 + i) for i in range(new)]
    request = GroupRequest(NS, NAME, m, 0.0, False, tuple(ms))
    (v,) = decide([_node("n1", 64)], [p for p in ms if p.bound], [request], [], T0, PlannerConfig()).verdicts
    assert (v.outcome == "Released") is released_now
    assert len(v.release) == (new if released_now else 0)
    done = compute_all(podgroup(m), ms, v, T0)
    assert done.status.phase == ("Scheduling" if released_now else "Pending")
    rel = done.status.condition("Released")
    if not released_now:
        assert (rel.status, rel.reason) == ("False", "WaitingForMembers")
        assert rel.message.startswith(f"{new} of {m} members present")
        assert rel.message.endswith(f"; {succeeded} Succeeded member{'s' if succeeded != 1 else ''} not counted: "
                                    "a new gang needs minMember members that can run")
        assert (done.status.scheduled, done.status.running) == (succeeded, 0)


@pytest.mark.parametrize("finished,running,m", [(1, 2, 3), (3, 0, 3), (6, 0, 3), (2, 1, 3)])
def test_a_jobs_next_pods_join_its_standing_release(finished, running, m):
    """Job waves (completions > parallelism): the release stands on its finished and running pods,
    so each next pod is released as room appears, also the last wave smaller than minMember."""
    spec = "S" * finished + "R" * running + "G"
    ms = members(spec)
    pg = podgroup(m, released("Finished" if not running else "Running"))
    assert release_stands(pg.status, ms, GATE, min_member=m)
    request = GroupRequest(NS, NAME, m, 0.0, True, tuple(ms))
    (v,) = decide([_node("n1", 64)], [p for p in ms if p.bound and not p.terminal], [request], [], T0,
                  PlannerConfig()).verdicts
    assert v.outcome == "AlreadyReleased" and list(v.release) == [ms[-1].uid]
    done = compute_all(pg, ms, v, T0 + 5)
    assert done.status.scheduleStartTime == START  # the same release
    assert done.status.succeeded == finished


@pytest.mark.parametrize("spec,m,written,room,joins", [
    ("RRFSG", 4, "Failed", 1, 1),        # Indexed Job: index 2 failed and replaced, index 3 done
    ("RRFSG", 4, "Running", 1, 1),       # the failure seen before the phase was written
    ("SSSFG", 4, "Failed", 1, 1),        # the last pod of a run failed, 3 done
    ("RSFFGG", 4, "Failed", 2, 2),       # backoffLimitPerIndex: two indexes retried at once
    ("RRFSG", 4, "Failed", 0, 0),        # no room: it waits as a new member of the standing run
    ("RSFFGG", 4, "Failed", 1, 1),       # room for one replacement: it joins, the other waits
])
def test_a_replacement_of_a_failed_member_joins_a_run_partly_done(spec, m, written, room, joins):
    """Issue 37 kind 7: running + Succeeded + the replacements of failed members make minMember, so
    the release stands (the same ``scheduleStartTime``) and each replacement is released on its own
    as room appears, never held for a gang decision that could not count the Succeeded member."""
    ms = members(spec)
    pg = podgroup(m, released(written))
    assert release_stands(pg.status, ms, GATE, min_member=m)
    request = GroupRequest(NS, NAME, m, 0.0, True, tuple(ms))
    live = [p for p in ms if p.bound and not p.terminal]
    (v,) = decide([_node("n1", len(live) + room)], live, [request], [], T0, PlannerConfig()).verdicts
    gated_uids = [p.uid for p in ms if p.gated_by(GATE)]
    assert v.outcome == "AlreadyReleased"
    assert len(v.release) == joins and set(v.release) <= set(gated_uids)
    done = compute_all(pg, ms, v, T0 + 5)
    assert done.status.scheduleStartTime == START  # the same run
    assert done.status.phase != "Failed"  # the replacements bring the group back


# ------------------------------------------------------------------ the status says it is deciding again

@pytest.mark.parametrize("spec,m,outcome,message,phase", [
    ("GGGG", 4, "InsufficientCapacity", "fits 2 of 4: cpu short by 2", "Pending"),
    ("RRGG", 4, "InsufficientCapacity", "fits 3 of 4: cpu short by 1", "Pending"),
    ("GG", 4, "WaitingForMembers", "2 of 4 members present", "Pending"),
])
def test_the_status_says_the_gang_is_decided_again(spec, m, outcome, message, phase):
    pg = podgroup(m, released("Running", LOST))
    ms = members(spec)
    v = GroupVerdict(NS, NAME, outcome, {}, 0, message)
    done = compute_all(pg, ms, v, T0 + 30)
    s = done.status
    holding = sum(c in "RB" for c in spec)
    assert (s.phase, s.scheduled, s.running, s.scheduleStartTime) == (phase, holding, holding, START)
    rel = s.condition("Released")
    assert (rel.status, rel.reason) == ("False", outcome)
    assert rel.message == (f"the release of {START} ended (members left it and {holding} of minMember {m} hold a "
                           f"place): the gang is decided again as a whole, all or nothing; {message}")
    # the next pass (phase Pending written) still says why
    again = again_text(podgroup(m, s.to_api()).status, ms, m, GATE)
    assert again.startswith(f"the release of {START} ended (members left it")
    # the gang released again: a new release, a new window, Disrupted healed
    ms2 = [p if p.bound else member("U", 9 + i) for i, p in enumerate(ms)] + [member("U", 20 + i)
                                                                               for i in range(m - len(ms))]
    v2 = GroupVerdict(NS, NAME, "Released", {}, m, f"fits {m} of {m}")
    s2 = compute_all(podgroup(m, s.to_api()), ms, v2, T0 + 60).status
    assert (s2.phase, s2.scheduleStartTime) == ("Scheduling", format_time(T0 + 60))
    assert s2.condition("Released").status == "True"
    assert release_stands(podgroup(m, s2.to_api()).status, ms2, GATE, min_member=m)


# ------------------------------------------------------------------ a recreated PodGroup adopts (item 7)

@pytest.mark.parametrize("spec,member_age,runners", [
    ("RRR", 60, 0),     # released under the old PodGroup: adopted
    ("RRG", 60, 0),     # two adopted, one gated new member
    ("RU", 60, 0),      # one still waiting for kube-scheduler
    ("RRR", -5, 3),     # created after the PodGroup, ungated by someone: reported
    ("RR", 0, 2),       # same second as the PodGroup: not older, reported
])
def test_a_recreated_podgroup_adopts_members_released_under_the_old_one(spec, member_age, runners):
    created = T0
    pg = podgroup(3, {}, created=created)
    ms = [member(s, i, created=created - member_age) for i, s in enumerate(spec)]
    assert len(lifecycle.ungated_without_release(pg, ms, GATE)) == runners
    adopted = lifecycle.adopted(pg, ms, GATE)
    assert len(adopted) == (0 if runners else sum(s in "RBU" for s in spec))
    if runners:
        return
    request = GroupRequest(NS, NAME, 3, created, False, tuple(ms))
    (v,) = decide([_node("n1", 8)], [p for p in ms if p.bound], [request], [], T0, PlannerConfig()).verdicts
    done = compute_all(pg, ms, v, T0 + 1)
    bound = sum(s in "RB" for s in spec)
    assert (done.status.scheduled, done.status.running) == (bound, spec.count("R"))
    if bound + spec.count("G") >= 3:
        assert v.outcome == "Released" and done.status.phase in ("Running", "Scheduling")
        assert done.status.condition("Released").status == "True"
    else:
        assert v.outcome == "WaitingForMembers" and done.status.phase == "Pending"
    assert done.status.condition("Disrupted") is None


# ------------------------------------------------------------------ the timeout measures lack of progress (item 10)

@pytest.mark.parametrize("timeout,size,gap", [(5, 500, 0.1), (2, 60, 1.5), (1, 20, 0.5), (30, 200, 10)])
def test_a_gang_still_binding_never_times_out(timeout, size, gap):
    """A gang of ``size`` whose members bind one every ``gap`` s (< timeout): binding takes
    ``size * gap`` s, far beyond ``scheduleTimeoutSeconds``, and the group never times out."""
    status = released("Scheduling")
    progress = None
    t = T0
    for placed in range(size + 1):
        ms = [member("B", i) for i in range(placed)] + [member("U", 1000 + i) for i in range(size - placed)]
        pg = podgroup(size, status, timeout=timeout)
        done = compute_all(pg, ms, None, t, GATE, None, progress)
        progress = done.progress
        cond = done.status.condition("TimedOut")
        assert cond is None or cond.status == "False", (placed, cond)
        deadline = timeout_deadline(podgroup(size, done.status.to_api(), timeout=timeout), progress)
        assert deadline is None or deadline > t
        status = done.status.to_api()
        t += gap
    assert done.status.condition("TimedOut").reason == "MembersBound"


@pytest.mark.parametrize("timeout,stall_after", [(5, 3), (2, 0), (10, 7)])
def test_a_stalled_gang_times_out_a_full_window_after_its_last_bind(timeout, stall_after):
    status = released("Scheduling")
    progress = None
    size = 10
    for placed in range(stall_after + 1):  # one bind a second, then none
        ms = [member("B", i) for i in range(placed)] + [member("U", 100 + i) for i in range(size - placed)]
        done = compute_all(podgroup(size, status, timeout=timeout), ms, None, T0 + placed, GATE, None, progress)
        progress, status = done.progress, done.status.to_api()
    last = T0 + stall_after
    assert progress.since == (last if stall_after else T0)
    assert timeout_deadline(podgroup(size, status, timeout=timeout), progress) == last + timeout
    early = compute_all(podgroup(size, status, timeout=timeout), ms, None, last + timeout - 0.5, GATE, None, progress)
    assert early.status.condition("TimedOut") is None
    late = compute_all(podgroup(size, status, timeout=timeout), ms, None, last + timeout, GATE, None, progress)
    c = late.status.condition("TimedOut")
    assert (c.status, c.reason) == ("True", "TimedOut")
    assert c.message == (f"{stall_after} of minMember {size} members bound; no member bound for "
                         f"scheduleTimeoutSeconds {timeout}")


@given(st.lists(st.tuples(st.floats(0.01, 20), st.booleans()), min_size=1, max_size=30), st.integers(1, 10))
def test_timeout_fires_only_after_a_full_window_without_a_bind(steps, timeout):
    """Property: passes at random intervals, a member binding at some; ``TimedOut=True`` exactly
    when ``timeout`` seconds passed since the last bind (or the release) without minMember."""
    size = len(steps) + 1
    status, progress, t, placed, last_bind = released("Scheduling"), None, T0, 0, T0
    for dt, binds in steps:
        t += dt
        if binds:
            placed += 1
            last_bind = t
        ms = [member("B", i) for i in range(placed)] + [member("U", 100 + i) for i in range(size - placed)]
        done = compute_all(podgroup(size, status, timeout=timeout), ms, None, t, GATE, None, progress)
        progress, status = done.progress, done.status.to_api()
        c = done.status.condition("TimedOut")
        fired = c is not None and c.status == "True"
        if t - last_bind >= timeout:
            assert fired
        elif not fired:
            assert t - last_bind < timeout
        if fired:
            break  # the release ended; the eviction (once) and a fresh release follow


def test_a_restarted_controller_gives_a_binding_gang_a_full_window():
    ms = [member("B", 0), member("U", 1)]
    first = track_progress(None, START, 1, T0 + 500, binding=True)
    assert first == BindProgress(START, 1, T0 + 500)
    idle = track_progress(None, START, 1, T0 + 500, binding=False)
    assert idle.since == T0  # nothing in flight: nothing to wait for
    done = compute_all(podgroup(2, released("Scheduling"), timeout=60), ms, None, T0 + 500, GATE, None, None)
    assert done.status.condition("TimedOut") is None and done.progress.since == T0 + 500


def test_a_fresh_release_after_a_timeout_gets_a_full_window():
    """Never two evictions in a row without a full window: the re-release starts its own clock."""
    status = released("Scheduling", TIMED_OUT)
    old = BindProgress(START, 1, T0 + 10)
    ms = [member("G", i) for i in range(3)]
    v = GroupVerdict(NS, NAME, "Released", {}, 3, "fits 3 of 3")
    done = compute_all(podgroup(3, status, timeout=5), ms, v, T0 + 100, GATE, None, old)
    assert done.status.scheduleStartTime == format_time(T0 + 100)
    assert done.progress == BindProgress(format_time(T0 + 100), 0, T0 + 100)
    c = done.status.condition("TimedOut")
    assert (c.status, c.reason) == ("False", "Released")
    assert timeout_deadline(podgroup(3, done.status.to_api(), timeout=5), done.progress) == T0 + 105


# ------------------------------------------------------------------ the shell: a loss and new pods in one pass

def test_pods_deleted_and_recreated_between_two_passes_are_decided_as_a_gang():
    """A Job suspended and resumed between two passes (its 2 finished pods stay): the pass sees
    the departures and the new gated pods at once; its planner input says the release no longer
    stands, and the status says the gang is decided again (not a stale ``Released=True``)."""
    from tests.builders import Harness, raw_pg, raw_pod, verdict

    start = "2024-01-01T00:00:10Z"
    old = [raw_pod(f"s{i}", gates=(), node="n1", phase="Succeeded", owner=True) for i in range(2)]
    run_ = [raw_pod(f"r{i}", gates=(), node="n1", phase="Running", owner=True) for i in range(2)]
    seen = []

    def verdicts(groups):
        (g,) = groups
        seen.append(g.released)
        if g.released:
            return [verdict("AlreadyReleased", fits=4)]
        return [verdict("InsufficientCapacity", fits=1, message="fits 1 of 2: cpu short by 1")]

    h = Harness(old + run_, [raw_pg(min_member=2, status={"phase": "Running", "scheduleStartTime": start})],
                verdicts)
    h.run()
    assert seen == [True]
    for p in run_:
        h.caches.members._handle_event({"type": "DELETED", "object": p})
    for i in range(2):
        h.caches.members.apply_local(raw_pod(f"new{i}", owner=True, created="2024-01-01T00:05:00Z"))
    h.run()
    assert seen == [True, False]
    st = h.cluster.pgs["pg"]["status"]
    rel = next(c for c in st["conditions"] if c["type"] == "Released")
    assert (rel["status"], rel["reason"]) == ("False", "InsufficientCapacity")
    assert rel["message"].startswith(f"the release of {start} ended (members left it and 0 of minMember 2 hold a "
                                     "place): the gang is decided again")
    assert rel["message"].endswith("fits 1 of 2: cpu short by 1; 2 Succeeded members not counted: a new gang needs "
                                   "minMember members that can run")
    dis = next(c for c in st["conditions"] if c["type"] == "Disrupted")
    assert (dis["status"], dis["reason"]) == ("True", "MemberLost")
    assert st["scheduleStartTime"] == start
    h.run()  # the loss now recorded: still decided as a gang
    assert seen == [True, False, False]


@pytest.mark.parametrize("created", [T0, T0 + 0.4, T0 + 1], ids=["the release's second", "within it", "a second later"])
@pytest.mark.parametrize("status", [released("Running"), released("Running", LOST)], ids=["loss in this pass", "recorded"])
def test_a_replacement_created_in_the_second_of_the_release_stands_in_for_its_failed_member(created, status):
    """Seen in CI: an Indexed Job of 4 released at 12:38:35; indexes 0 and 3 succeeded, index 1 failed
    and the Job controller replaced it, all within that second. Timestamps are whole seconds, so the
    replacement counted as a member the release planned (created no later than it), not as a stand-in,
    ``run_goes_on`` found no replacement, the loss ended the release and the replacement waited gated
    for a gang that could never form (1 of minMember 4 placed, 2 Succeeded not counted). A gated
    member created in the release's own second may be either; for a run partly done it stands in."""
    ms = [member("S", 0), member("F", 1), member("R", 2), member("S", 3), member("G", 4, created=created)]
    pg = podgroup(4, status)
    lost = not status["conditions"]
    assert release_end(pg.status, ms, 4, GATE, lost=lost) == ""
    assert release_stands(pg.status, ms, GATE, min_member=4, lost=lost)
    # without a member that failed there is nothing to stand in for: the loss of index 1 (deleted)
    # leaves 3 of minMember 4 and the release ends, whenever the gated pod was made
    gone = [p for p in ms if p.phase != "Failed"]
    assert release_end(podgroup(4, released("Running", LOST)).status, gone, 4, GATE) != ""
