"""Owners that cannot complete their group (issue 21 item 5): the pure rules
(controller/release/owners.py, exhaustive tables and properties), the room that reads and remembers
owners (controller/release/ownership.py), and a reconciler pass (status and event)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.api import POD_GROUP_LABEL
from cogate.controller.release import owners
from cogate.controller.model import records
from cogate.controller.kube.events import Emitter
from cogate.controller.status.inputs import group_object
from cogate.controller.kube.metrics import Metrics
from cogate.controller.release.ownership import Ownership
from cogate.controller.release.owners import OwnerRef, OwnerState, judge, limit, owner_state
from cogate.controller.model.records import PodInfo
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, Outcome

from tests.builders import Harness, raw_pg, raw_pod, verdict

NS = "team"
JOB = OwnerRef("batch/v1", "Job", NS, "train", "job-uid")
STS = OwnerRef("apps/v1", "StatefulSet", NS, "db", "sts-uid")
RS = OwnerRef("apps/v1", "ReplicaSet", NS, "web-5d9f", "rs-uid")
OTHER = OwnerRef("kubeflow.org/v1", "MPIJob", NS, "mpi", "mpi-uid")


def member(name, ref: OwnerRef | None = JOB, phase="Pending", gated=True, node=""):
    return PodInfo(NS, name, "uid-" + name, labels={POD_GROUP_LABEL: "pg"}, node_name=node, phase=phase,
                   gates=("scheduling.x-k8s.io/pod-group",) if gated and not node else (),
                   owner=(ref.api_version, ref.kind, ref.name, ref.uid) if ref else ())


def job(spec=None, conditions=(), succeeded=None, uid="job-uid", **meta):
    status = {"conditions": list(conditions)}
    if succeeded is not None:
        status["succeeded"] = succeeded
    return {"metadata": {"name": "train", "namespace": NS, "uid": uid, **meta}, "spec": spec or {}, "status": status}


def cond(type_, reason="", message="", status="True"):
    return {"type": type_, "status": status, "reason": reason, "message": message}


# -- records: the controller owner is kept for members only ----------------------------------


def test_pod_info_keeps_the_controller_owner_of_members_only():
    raw = raw_pod("a", owner=True)
    assert records.pod_info(raw).owner == ("batch/v1", "Job", "j", "j1")
    raw["metadata"]["ownerReferences"].insert(0, {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "x"})
    assert records.pod_info(raw).owner == ("batch/v1", "Job", "j", "j1")  # the one with controller: true
    assert records.pod_info(raw_pod("b")).owner == ()  # no owner
    assert records.pod_info(raw_pod("c", group=None, owner=True)).owner == ()  # not a member: not kept


# -- owner_state: API JSON -> OwnerState -----------------------------------------------------


@pytest.mark.parametrize("ref,raw,expect", [
    (JOB, job(), dict(parallelism=1, completions=None, failed="", suspended=False)),
    (JOB, job({"parallelism": 4, "completions": 8, "activeDeadlineSeconds": 30}, succeeded=2),
     dict(parallelism=4, completions=8, succeeded=2, active_deadline=30)),
    (JOB, job(conditions=[cond("FailureTarget", "DeadlineExceeded", "Job was active longer than specified deadline")]),
     dict(failed="DeadlineExceeded", failed_message="Job was active longer than specified deadline")),
    (JOB, job(conditions=[cond("Failed", "BackoffLimitExceeded")]), dict(failed="BackoffLimitExceeded")),
    (JOB, job(conditions=[cond("Failed", "BackoffLimitExceeded", status="False")]), dict(failed="")),
    (JOB, job(conditions=[cond("Complete")]), dict(complete=True)),
    (JOB, job(conditions=[cond("SuccessCriteriaMet")]), dict(complete=True)),
    (JOB, job({"suspend": True}), dict(suspended=True)),
    (JOB, job(uid="other"), dict(exists=False)),
    (JOB, job(deletionTimestamp="2024-01-01T00:00:00Z"), dict(deleting=True)),
    (STS, {"metadata": {"uid": "sts-uid"}, "spec": {"replicas": 3}}, dict(replicas=3, ordered_ready=True)),
    (STS, {"metadata": {"uid": "sts-uid"}, "spec": {"replicas": 3, "podManagementPolicy": "Parallel"}},
     dict(replicas=3, ordered_ready=False)),
    (RS, {"metadata": {"uid": "rs-uid", "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}]},
          "spec": {"replicas": 2}}, dict(replicas=2, parent="Deployment web", ordered_ready=False)),
    (RS, {"metadata": {"uid": "rs-uid"}, "spec": {}}, dict(replicas=1, parent="")),
])
def test_owner_state(ref, raw, expect):
    s = owner_state(ref, raw)
    assert s.ref == ref
    for k, v in expect.items():
        assert getattr(s, k) == v, k


@pytest.mark.parametrize("raw", [
    job({"parallelism": "4"}), job({"completions": True}), job(succeeded="x"),
    {"metadata": {"uid": "sts-uid"}, "spec": {"replicas": 1.5}}, "not an object",
])
def test_owner_state_of_a_malformed_object_raises_value_error(raw):
    ref = STS if isinstance(raw, dict) and "replicas" in raw.get("spec", {}) else JOB
    with pytest.raises(ValueError):
        owner_state(ref, raw)


# -- limit: what an owner's state means, every rule -------------------------------------------


@pytest.mark.parametrize("state,present,most,why,fix,warning", [
    (OwnerState(JOB, exists=False), 0, 0, "was deleted", "recreate the workload", True),
    (OwnerState(JOB, deleting=True), 0, 0, "is being deleted", "recreate the workload", True),
    (OwnerState(JOB, failed="DeadlineExceeded", failed_message="Job was active longer than specified deadline",
                active_deadline=20), 0, 0,
     "failed (DeadlineExceeded: Job was active longer than specified deadline) and creates no more members",
     "its activeDeadlineSeconds (20s) ran out while the gang waited gated", True),
    (OwnerState(JOB, failed="BackoffLimitExceeded"), 0, 0, "failed (BackoffLimitExceeded)", "backoffLimit", True),
    (OwnerState(JOB, failed="PodFailurePolicy"), 0, 0, "failed (PodFailurePolicy)", "recreate the Job", True),
    (OwnerState(JOB, complete=True), 0, 0, "is complete", "delete this PodGroup", False),
    (OwnerState(JOB, suspended=True), 0, 0, "is suspended (spec.suspend)", "spec.suspend: false", False),
    (OwnerState(JOB, parallelism=2), 1, 2, "runs at most 2 pods at once (parallelism 2)", "raise its parallelism",
     True),
    (OwnerState(JOB, parallelism=4, completions=6, succeeded=5), 0, 1,
     "runs at most 1 pods at once (parallelism 4, completions 6, 5 succeeded)", "parallelism", True),
    (OwnerState(JOB, parallelism=4, completions=2, succeeded=3), 0, 0, "at most 0 pods", "parallelism", True),
    (OwnerState(RS, replicas=2, parent="Deployment web"), 2, 2,
     "(of Deployment web) keeps 2 pods (spec.replicas 2)", "scale Deployment web to at least minMember", True),
    (OwnerState(RS, replicas=0), 0, 0, "keeps 0 pods (spec.replicas 0)", "scale the ReplicaSet", True),
    (OwnerState(STS, replicas=3, ordered_ready=True), 1, 1,
     "creates its pods one at a time (podManagementPolicy OrderedReady, the default): db-1 only once db-0 is "
     "Running and Ready, which a gated pod never is", "podManagementPolicy: Parallel", True),
    (OwnerState(STS, replicas=3, ordered_ready=True), 2, 2, "db-2 only once db-1 is Running and Ready",
     "--cascade=orphan", True),
    (OwnerState(STS, replicas=3, ordered_ready=False), 1, 3, "keeps 3 pods", "scale the StatefulSet", True),
    (OwnerState(STS, replicas=2, ordered_ready=True), 2, 2, "keeps 2 pods", "scale the StatefulSet", True),
])
def test_limit(state, present, most, why, fix, warning):
    ref = state.ref
    got = limit(state, [member(f"{ref.name}-{i}", ref) for i in range(present)])
    assert got.most == most
    assert why in got.why and fix in got.fix
    assert got.warning is warning


def test_ordered_ready_statefulset_whose_members_all_run_is_not_held():
    """OrderedReady only stops the StatefulSet while one of its pods is not Ready; bound members
    (running) let it go on, so it keeps spec.replicas."""
    s = OwnerState(STS, replicas=3, ordered_ready=True)
    running = [member(f"db-{i}", STS, phase="Running", node="n1") for i in range(2)]
    assert limit(s, running).most == 3


# -- judge: the group as a whole -------------------------------------------------------------


def states(*ss: OwnerState):
    return {s.ref.uid: s for s in ss}


def test_statefulset_ordered_ready_names_the_cause_and_the_fix():
    ms = [member("db-0", STS)]
    f = judge(3, ms, [STS], states(OwnerState(STS, replicas=3, ordered_ready=True)))
    assert f is not None and f.most == 1 and f.warning and f.owners == ("StatefulSet team/db",)
    assert f.message == (
        "its owner can keep at most 1 of minMember 3 members: StatefulSet team/db creates its pods one at a time "
        "(podManagementPolicy OrderedReady, the default): db-1 only once db-0 is Running and Ready, which a gated "
        "pod never is; fix: recreate it with podManagementPolicy: Parallel (the field cannot be changed in place: "
        "kubectl delete statefulset db --cascade=orphan, then apply it with Parallel)")


def test_failed_job_whose_pods_are_gone_says_the_owner_gave_up():
    s = OwnerState(JOB, failed="DeadlineExceeded", failed_message="Job was active longer than specified deadline",
                   active_deadline=20)
    f = judge(3, [], [JOB], states(s))
    assert f is not None and f.most == 0 and f.warning
    assert f.message.startswith("its owner can keep at most 0 of minMember 3 members: Job team/train failed "
                                "(DeadlineExceeded: Job was active longer than specified deadline) and creates no "
                                "more members; fix: its activeDeadlineSeconds (20s) ran out")


def test_several_owners_are_summed_and_named():
    """A Deployment mid-rollout: the old ReplicaSet scaled to 0, the new one to 2, minMember 3."""
    old = OwnerRef("apps/v1", "ReplicaSet", NS, "web-old", "old-uid")
    ms = [member("web-new-a", RS), member("web-new-b", RS)]
    ss = states(OwnerState(RS, replicas=2, parent="Deployment web"), OwnerState(old, replicas=0))
    f = judge(3, ms, [old, RS], ss)
    assert f is not None and f.most == 2
    assert f.message.startswith("its owners can keep at most 2 of minMember 3 members: ReplicaSet team/web-old keeps "
                                "0 pods")
    assert "ReplicaSet team/web-5d9f (of Deployment web) keeps 2 pods" in f.message
    assert judge(2, ms, [old, RS], ss) is None  # 2 reach minMember 2


def test_suspended_job_is_said_as_normal():
    f = judge(2, [], [JOB], states(OwnerState(JOB, suspended=True, parallelism=2)))
    assert f is not None and not f.warning and "is suspended" in f.message


@pytest.mark.parametrize("ms,known,ss", [
    ([member("a", OTHER)], [OTHER], {}),  # a kind cogate does not read
    ([member("a")], [JOB], {}),  # not read (an error)
    ([member("a"), member("b", OTHER)], [JOB, OTHER], states(OwnerState(JOB, failed="x"))),  # one unknown
    ([member("a", None)], [], {}),  # bare pods only: no owner to judge
    ([member("a")], [JOB], states(OwnerState(JOB, parallelism=3))),  # parallelism reaches minMember
    ([member("a"), member("b", None)], [JOB], states(OwnerState(JOB, parallelism=2))),  # 2 + 1 bare = 3
])
def test_no_finding_unless_every_owner_is_known_and_short(ms, known, ss):
    assert judge(3, ms, known, ss) is None


def test_present_members_always_count_even_beyond_the_owners_limit():
    """Succeeded members of a complete Job still count (present), as the planner counts them."""
    done = [member(f"j-{i}", JOB, phase="Succeeded", gated=False, node="n1") for i in range(3)]
    assert judge(3, done, [JOB], states(OwnerState(JOB, complete=True))) is None
    failed = [member(f"j-{i}", JOB, phase="Failed", gated=False) for i in range(3)]
    f = judge(3, failed, [JOB], states(OwnerState(JOB, failed="BackoffLimitExceeded")))
    assert f is not None and f.most == 0  # Failed members are not present


KINDS = [JOB, STS, RS]


@st.composite
def situations(draw):
    refs = draw(st.lists(st.sampled_from(KINDS + [OTHER]), min_size=1, max_size=4, unique=True))
    ms = []
    for r in refs + [None]:
        for i in range(draw(st.integers(0, 3))):
            ms.append(member(f"{r.name if r else 'bare'}-{i}", r, phase=draw(st.sampled_from(["Pending", "Running",
                                                                                              "Failed"]))))
    ss = {}
    for r in refs:
        if draw(st.integers(0, 5)) == 0:
            continue  # not read
        ss[r.uid] = OwnerState(r, exists=draw(st.booleans()), replicas=draw(st.integers(0, 4)),
                               ordered_ready=draw(st.booleans()), parallelism=draw(st.integers(0, 4)),
                               failed=draw(st.sampled_from(["", "DeadlineExceeded"])),
                               suspended=draw(st.booleans()))
    return draw(st.integers(1, 8)), ms, refs, ss


@settings(max_examples=400, deadline=None)
@given(situations())
def test_judge_properties(sit):
    min_member, ms, refs, ss = sit
    f = judge(min_member, ms, refs, ss)
    present = [m for m in ms if m.phase != "Failed"]
    if f is None:
        return
    # only when every owner is of a kind read and was read
    assert all(owners.readable(r) and r.uid in ss for r in refs)
    # never when the members present already reach minMember, and the bound is at least them
    assert len(present) <= f.most < min_member
    # a larger minMember keeps the finding; a smaller one at or below the bound drops it
    assert judge(min_member + 1, ms, refs, ss) is not None
    assert judge(f.most, ms, refs, ss) is None if f.most >= 1 else True
    # every owner is counted, and named (up to OWNERS_SHOWN)
    assert set(f.owners) == {str(r) for r in refs}
    assert sum(str(r) in f.message for r in refs) == min(len(refs), owners.OWNERS_SHOWN)
    # a warning unless only suspended or complete owners limit it
    assert f.warning is any(limit(ss[r.uid], [m for m in present if m.owner and m.owner[3] == r.uid]).warning
                            for r in refs)


# -- the room: remembered owners, cached reads, events --------------------------------------------


class Reads:
    def __init__(self, objects):
        self.objects = objects
        self.calls = []

    def __call__(self, ref):
        self.calls.append(ref.name)
        obj = self.objects.get(ref.name)
        if isinstance(obj, Exception):
            raise obj
        return obj


class Status403(Exception):
    status = 403


class Recorded:
    def __init__(self):
        self.events = []

    def record(self, ref, notice):
        self.events.append((notice.type, notice.reason, notice.message))


def room(reads, clock, settle=0.0):  # settle 0: the reading rules alone (settling: its own tests)
    events = Emitter(None)
    rec = Recorded()
    events.recorder = rec  # record through the de-duplicator
    events.record = rec.record  # type: ignore[method-assign]
    return Ownership(reads, events, Metrics(), lambda: clock[0], settle_seconds=settle), rec


def pg_object(min_member=3):
    return group_object(raw_pg(min_member=min_member))


def request(ms, min_member=3):
    return GroupRequest(NS, "pg", min_member, 0.0, False, tuple(ms))


def waiting(present, min_member=3):
    return GroupVerdict(NS, "pg", Outcome.WAITING_FOR_MEMBERS, {}, 0, f"{present} of {min_member} members present")


def test_room_remembers_the_owner_of_deleted_members_and_says_the_job_gave_up():
    clock = [0.0]
    failed = job({"activeDeadlineSeconds": 20}, conditions=[cond("FailureTarget", "DeadlineExceeded", "too long")])
    reads = Reads({"train": job()})
    r, rec = room(reads, clock)
    g = pg_object()
    ms = [member(f"t-{i}") for i in range(3)]
    # while the gang waits for room (3 present): nothing read
    v = GroupVerdict(NS, "pg", Outcome.INSUFFICIENT_CAPACITY, {}, 0, "fits 0 of 3: cpu short by 3")
    assert r.explain(g, request(ms), v, 1.0) is v and reads.calls == []
    # the deadline passes: the job controller deletes the members
    reads.objects["train"] = failed
    out = r.explain(g, request([]), waiting(0), 2.0)
    assert out.message.startswith("0 of 3 members present; its owner can keep at most 0 of minMember 3 members: Job "
                                  "team/train failed (DeadlineExceeded: too long)")
    assert "activeDeadlineSeconds (20s) ran out" in out.message
    assert rec.events == [("Warning", "OwnerCannotComplete", out.message.split("; ", 1)[1])]
    # the same situation again: no new event, cached read
    assert r.explain(g, request([]), waiting(0), 3.0).message == out.message
    assert len(rec.events) == 1 and reads.calls == ["train"]
    # after the cache time it is read again
    clock[0] = 11.0
    r.explain(g, request([]), waiting(0), 12.0)
    assert reads.calls == ["train", "train"]


def test_room_reads_again_when_the_owners_members_change():
    clock = [0.0]
    reads = Reads({"db": {"metadata": {"uid": "sts-uid"}, "spec": {"replicas": 3}}})
    r, rec = room(reads, clock)
    g = pg_object()
    one = [member("db-0", STS)]
    out = r.explain(g, request(one), waiting(1), 1.0)
    assert "StatefulSet team/db creates its pods one at a time" in out.message and len(reads.calls) == 1
    r.explain(g, request(one), waiting(1), 2.0)
    assert len(reads.calls) == 1  # unchanged members: cached
    r.explain(g, request([member("db-0", STS, phase="Running", node="n1", gated=False)]), waiting(1), 3.0)
    assert len(reads.calls) == 2  # its member changed: read again


@pytest.mark.parametrize("objects,calls", [
    ({"train": Status403()}, 1),  # forbidden: unknown, not judged
    ({"train": RuntimeError("connection reset")}, 1),
    ({"train": job({"parallelism": "x"})}, 1),  # malformed: not judged
])
def test_room_never_judges_an_owner_it_could_not_read(objects, calls):
    clock = [0.0]
    reads = Reads(objects)
    r, rec = room(reads, clock)
    v = waiting(1)
    assert r.explain(pg_object(), request([member("t-0")]), v, 1.0) is v
    assert rec.events == [] and len(reads.calls) == calls


def test_room_reads_nothing_for_groups_that_do_not_wait_for_members():
    reads = Reads({"train": job(conditions=[cond("Failed", "BackoffLimitExceeded")])})
    r, _ = room(reads, [0.0])
    ms = [member(f"t-{i}") for i in range(3)]
    for v in (GroupVerdict(NS, "pg", Outcome.RELEASED, {}, 3, "fits 3 of 3"),
              GroupVerdict(NS, "pg", Outcome.INSUFFICIENT_CAPACITY, {}, 0, "fits 0 of 3"),
              # waiting for members, but all present (held by another gate): owners are not the cause
              GroupVerdict(NS, "pg", Outcome.WAITING_FOR_MEMBERS, {}, 0, "3 of 3 members present, 0 bound")):
        assert r.explain(pg_object(), request(ms), v, 1.0) is v
    assert reads.calls == []
    # an owner of a kind cogate does not read: not read either
    assert r.explain(pg_object(), request([member("m-0", OTHER)]), waiting(1), 1.0).message == "1 of 3 members present"
    assert reads.calls == []


def test_room_forgets_deleted_groups():
    reads = Reads({"train": job()})
    r, _ = room(reads, [0.0])
    r.explain(pg_object(), request([member("t-0")]), waiting(1), 1.0)
    assert r._seen and r._cache
    r.forget({"pg-uid-pg"})
    assert r._seen and r._cache
    r.forget(set())
    assert not r._seen and not r._cache


def test_room_remembers_at_most_the_latest_owners():
    from cogate.controller.release import ownership
    r, _ = room(None, [0.0])
    for i in range(ownership.REMEMBERED + 5):
        ref = OwnerRef("batch/v1", "Job", NS, f"j{i}", f"u{i}")
        r.explain(pg_object(), request([member("p", ref)]), waiting(1), 1.0)
    seen = r._seen["pg-uid-pg"]
    assert len(seen) == ownership.REMEMBERED and "u0" not in seen and f"u{ownership.REMEMBERED + 4}" in seen
    # owners of members present now are kept, however old
    ms = [member(f"p{i}", OwnerRef("batch/v1", "Job", NS, f"k{i}", f"k{i}")) for i in range(ownership.REMEMBERED + 2)]
    r.explain(pg_object(), request(ms), waiting(1), 1.0)
    assert set(r._seen["pg-uid-pg"]) == {f"k{i}" for i in range(ownership.REMEMBERED + 2)}


# -- settling: owners are read once members stop arriving (issue 40) --------------------------------

A, B, C = "a", "b", "c"


@pytest.mark.parametrize("before,present,last,t,expect", [
    (None, frozenset(), None, 0.0, (False, 0.0)),  # first sight, no members yet: an arrival
    (None, frozenset({A}), None, 3.0, (False, 3.0)),  # first sight with members: an arrival
    (frozenset({A}), frozenset({A, B}), 1.0, 3.0, (False, 3.0)),  # a new member: arrival now
    (frozenset({A, B}), frozenset({A, B}), 3.0, 7.9, (False, 3.0)),  # unchanged, 4.9 s: not yet
    (frozenset({A, B}), frozenset({A, B}), 3.0, 8.0, (True, 3.0)),  # unchanged for the settle time
    (frozenset({A, B}), frozenset({A}), 3.0, 3.5, (True, 3.0)),  # a member left: at once
    (frozenset({A, B}), frozenset({A, C}), 3.0, 3.5, (True, 3.0)),  # one left, one came: at once
    (frozenset({A}), frozenset(), 2.0, 2.1, (True, 2.0)),  # all left (a failed Job): at once
    (frozenset(), frozenset(), None, 9.0, (True, 9.0)),  # never a member
])
def test_settled(before, present, last, t, expect):
    from cogate.controller.release.ownership import settled
    assert settled(before, present, last, t, 5.0) == expect


def test_settled_refuses_a_negative_settle_time():
    from cogate.controller.release.ownership import settled
    with pytest.raises(ValueError, match="settle must be >= 0"):
        settled(None, frozenset(), None, 0.0, -1.0)
    with pytest.raises(ValueError, match="settle_seconds"):
        Ownership(None, Emitter(None), Metrics(), settle_seconds=-1)


@given(st.lists(st.tuples(st.sets(st.sampled_from("abcd")), st.floats(0, 10)), min_size=1, max_size=12))
@settings(max_examples=200, deadline=None)
def test_settled_properties(steps):
    """Over any sequence of passes: settled exactly when a member left, or no arrival for 5 s."""
    from cogate.controller.release.ownership import settled
    before, last, t = None, None, 0.0
    for members, dt in steps:
        t += dt
        present = frozenset(members)
        ok, new_last = settled(before, present, last, t, 5.0)
        left = before is not None and bool(before - present)
        arrived = bool(present - before) if before is not None else True
        if left:
            assert ok
        elif arrived:
            assert not ok and new_last == t
        else:
            assert ok == (last is None or t - last >= 5.0)
        before, last = present, new_last


def test_room_reads_owners_only_once_members_stop_arriving():
    """A ReplicaSet short of minMember: its members arrive over 3 s; its owner is read once,
    5 s after the last arrival (the pass woken for it), not on each pass in which one arrived."""
    clock = [0.0]
    reads = Reads({"web-5d9f": {"metadata": {"uid": "rs-uid"}, "spec": {"replicas": 2}}})
    r, rec = room(reads, clock, settle=5.0)
    g = pg_object()
    ms = [member(f"web-{i}", RS) for i in range(2)]
    for i, t in ((1, 0.0), (2, 3.0)):
        clock[0] = t
        v = waiting(i)
        assert r.explain(g, request(ms[:i]), v, t) is v  # arriving: nothing read, nothing said
        assert r.wake_at(g.uid) == pytest.approx(t + 5.0, abs=0.05)
    assert reads.calls == [] and rec.events == []
    clock[0] = 7.9
    assert r.explain(g, request(ms), waiting(2), 7.9).message == "2 of 3 members present"
    assert reads.calls == []
    clock[0] = r.wake_at(g.uid)  # the pass the reconciler runs when the settle time ends
    out = r.explain(g, request(ms), waiting(2), 8.0)
    assert "ReplicaSet team/web-5d9f" in out.message and reads.calls == ["web-5d9f"]
    assert r.wake_at(g.uid) is None and [e[1] for e in rec.events] == ["OwnerCannotComplete"]
    # a third member arrives (scaled up): the last state read is judged meanwhile, nothing read
    clock[0] = 9.0
    ms3 = ms + [member("web-2", RS)]
    v = GroupVerdict(NS, "pg", Outcome.INSUFFICIENT_CAPACITY, {}, 0, "fits 0 of 3")
    assert r.explain(g, request(ms3), v, 9.0) is v and reads.calls == ["web-5d9f"] and r.wake_at(g.uid) is None


def test_room_reads_at_once_when_a_member_leaves():
    """A Job that failed deletes its pods: the group is read in the pass that sees them gone."""
    clock = [0.0]
    failed = job(conditions=[cond("Failed", "BackoffLimitExceeded", "backoff")])
    reads = Reads({"train": job({"parallelism": 3})})
    r, rec = room(reads, clock, settle=5.0)
    g = pg_object()
    ms = [member(f"t-{i}") for i in range(2)]
    r.explain(g, request(ms), waiting(2), 0.0)
    assert reads.calls == []
    reads.objects["train"] = failed
    clock[0] = 1.0
    out = r.explain(g, request(ms[:1]), waiting(1), 1.0)
    assert reads.calls == ["train"] and "Job team/train failed (BackoffLimitExceeded: backoff)" in out.message
    assert r.wake_at(g.uid) is None


def test_room_forgets_the_arrivals_of_deleted_groups():
    r, _ = room(None, [0.0], settle=5.0)
    r.explain(pg_object(), request([member("t-0")]), waiting(1), 0.0)
    assert r.wake_at("pg-uid-pg") is not None
    r.forget(set())
    assert r.wake_at("pg-uid-pg") is None and not r._arrivals


# -- a reconciler pass: the status and the event tell it ---------------------------------------------


def test_reconciler_pass_writes_the_owner_finding_into_the_released_condition():
    pods = [raw_pod("a", owner=True)]
    h = Harness(pods, [raw_pg(min_member=3)], [verdict("WaitingForMembers", message="1 of 3 members present")])
    reads = Reads({"j": {"metadata": {"uid": "j1"}, "spec": {"parallelism": 1},
                         "status": {"conditions": [cond("Failed", "BackoffLimitExceeded", "Job has reached the "
                                                                                          "specified backoff limit")]}}})
    h.rec.owners = Ownership(reads, h.rec.events, h.rec.metrics, lambda: h.now, settle_seconds=0)
    h.run()
    st = h.cluster.pgs["pg"]["status"]
    rel = next(c for c in st["conditions"] if c["type"] == "Released")
    assert rel["status"] == "False" and rel["reason"] == "WaitingForMembers"
    assert rel["message"] == ("1 of 3 members present; its owner can keep at most 1 of minMember 3 members: Job team/j "
                              "failed (BackoffLimitExceeded: Job has reached the specified backoff limit) and creates "
                              "no more members; fix: its pods failed more often than backoffLimit allows: see their "
                              "events, then recreate the Job")
    assert st.get("phase", "Pending") == "Pending"
    warnings = [e for e in h.events if e[1] == "OwnerCannotComplete"]
    assert warnings == [("Warning", "OwnerCannotComplete", rel["message"].split("; ", 1)[1])]
    assert h.rec.metrics.owner_reads.labels("Job", "ok")._value.get() == 1


def test_reconciler_pass_wakes_when_a_waiting_groups_members_have_settled():
    """Settling (issue 40) in a pass: the first pass reads nothing and asks for a pass 5 s later,
    which reads the owner and says the finding."""
    from cogate.controller.release.ownership import SETTLE_SECONDS
    pods = [raw_pod("a", owner=True)]
    h = Harness(pods, [raw_pg(min_member=3)], [verdict("WaitingForMembers", message="1 of 3 members present")] * 2)
    reads = Reads({"j": {"metadata": {"uid": "j1"}, "spec": {"parallelism": 1},
                         "status": {"conditions": [cond("Failed", "BackoffLimitExceeded", "backoff")]}}})
    h.rec.owners = Ownership(reads, h.rec.events, h.rec.metrics, lambda: h.now)
    h.run()
    assert reads.calls == [] and not [e for e in h.events if e[1] == "OwnerCannotComplete"]
    assert h.rec.debouncer.deadline() == pytest.approx(h.now + SETTLE_SECONDS + 0.01, abs=1e-6)
    h.now += SETTLE_SECONDS + 0.01
    h.run()
    assert reads.calls == ["j"] and [e[1] for e in h.events if e[1] == "OwnerCannotComplete"] == ["OwnerCannotComplete"]


@pytest.mark.parametrize("outcome,message,plain", [
    ("WaitingForMembers", "3 of 8 members present", True),
    ("WaitingForMembers", "0 of 8 members present", True),
    ("WaitingForMembers", "3 of 8 members present; ResourceQuota compute: requests.cpu 4 of 4 used", False),
    ("WaitingForMembers", "role worker: 1 of 2 members present", False),
    ("WaitingForMembers", "set [ps, workers]: PodGroup workers names no set", False),
    ("WaitingForMembers", "8 of 8 members present, 2 bound; 6 held by other scheduling gates", False),
    ("InsufficientCapacity", "3 of 8 members present", False),
    ("WaitingForMembers", "", False),
])
def test_plain_wait(outcome, message, plain):
    from cogate.controller.status.notices import plain_wait
    assert plain_wait(outcome, message) is plain


def test_reconciler_holds_a_plain_wait_event_while_members_arrive():
    """Issue 40: the WaitingForMembers Event of a gang whose members are being created is held
    until none arrived for the settle time; a gang that completes sooner never gets one."""
    from cogate.controller.release.ownership import SETTLE_SECONDS
    script = iter([verdict("WaitingForMembers", message="2 of 3 members present"),
                   verdict("WaitingForMembers", message="2 of 3 members present"),
                   verdict("Released", {"uid-a": "n1", "uid-b": "n2"}, 2, "fits 2 of 2")])
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg(min_member=3)], lambda groups: [next(script)])
    h.run()
    h.now += SETTLE_SECONDS - 1
    h.run()
    h.now += 0.5
    h.run()
    assert [e[1] for e in h.events] == ["Released"]
    # a gang still short once members stop arriving: its event comes at the settle time
    h2 = Harness([raw_pod("a")], [raw_pg(min_member=2)], [verdict("WaitingForMembers", message="1 of 2 members present")])
    h2.run()
    assert h2.events == []
    h2.now += SETTLE_SECONDS + 0.01
    h2.run()
    assert [e[1] for e in h2.events] == ["WaitingForMembers"]
