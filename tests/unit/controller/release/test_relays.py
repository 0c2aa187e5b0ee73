"""Explanations where users look (issue 20 item 4): the pure rules (controller/release/relays.py: what
is relayed, to whom, cut how), the de-duplication per group and reason
(controller/release/relaying.py), and reconciler passes that tell a Job and its gated pods."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.api import POD_GROUP_LABEL
from cogate.controller.release import relays
from cogate.controller.kube.events import Emitter
from cogate.controller.status.inputs import group_object
from cogate.controller.model.records import PodInfo
from cogate.controller.release.relaying import Relaying
from cogate.controller.release.relays import audience, cut, held, relayed
from cogate.controller.release.ownership import SETTLE_SECONDS
from cogate.controller.model.verdicts import GroupRequest
from cogate.models import Condition, PodGroupStatus

from tests.builders import Harness, raw_pg, raw_pod, verdict

NS = "team"
GATE = "scheduling.x-k8s.io/pod-group"
JOB = ("batch/v1", "Job", "train", "job-uid")


def status(reason, message="m", state="False"):
    return PodGroupStatus(conditions=[Condition(type="Released", status=state, reason=reason, message=message,
                                                lastTransitionTime="2024-01-01T00:00:00Z")])


def member(i, owner=JOB, gated=True, node=""):
    return PodInfo(NS, f"p{i}", f"u{i}", labels={POD_GROUP_LABEL: "pg"}, node_name=node,
                   gates=(GATE,) if gated else (), owner=owner)


# -- what is relayed -----------------------------------------------------------------------------


@pytest.mark.parametrize("st_, explained, expect", [
    (status("InsufficientCapacity", "fits 1 of 2"), False, ("InsufficientCapacity", "fits 1 of 2")),
    (status("Unschedulable"), False, ("Unschedulable", "m")),
    (status("ReleaseRefused"), False, ("ReleaseRefused", "m")),
    (status("WaitingForMembers"), False, None),  # every gang's first moment
    (status("WaitingForMembers", "1 of 3; MPIJob ..."), True, ("WaitingForMembers", "1 of 3; MPIJob ...")),
    (status("Released", state="True"), False, None),
    (PodGroupStatus(), False, None),
    (None, False, None),
])
def test_held(st_, explained, expect):
    assert held(st_, explained) == expect


def test_relayed_names_the_podgroup_and_takes_the_podgroup_events_type():
    n = relayed(NS, "pg", "InsufficientCapacity", "fits 1 of 2: cpu short by 1")
    assert n == ("Warning", "InsufficientCapacity", "PodGroup team/pg: fits 1 of 2: cpu short by 1")
    assert relayed(NS, "pg", "WaitingForMembers", "x").type == "Normal"
    assert relayed(NS, "pg", "WaitingForMembers", "x", explained=True).type == "Warning"


def test_cut_keeps_whole_parts():
    parts = [f"part {i} " + "x" * 90 for i in range(20)]
    text = "; ".join(parts)
    out = cut(text)
    assert len(out) <= relays.MESSAGE_CHARS and out.endswith("; ...")
    assert out[:-len("; ...")] == "; ".join(parts[:len(out[:-5].split("; "))])
    assert cut("short; text") == "short; text"
    long_word = "y" * 2000
    assert len(cut(long_word)) <= relays.MESSAGE_CHARS
    assert cut("a " * 600).endswith("; ...")


@given(st.text(alphabet=st.sampled_from("ab ;"), max_size=3000), st.integers(20, 1200))
def test_cut_property_bounded_and_a_prefix(text, limit):
    out = cut(text, limit)
    assert len(out) <= limit
    assert out == text or text.startswith(out[:-len("; ...")])


# -- to whom ----------------------------------------------------------------------------------------


def test_audience_is_the_podgroups_owner_first_then_the_members_common_owner():
    ms = [member(0), member(1), member(2, gated=False, node="n1")]
    a = audience(NS, (), ms, GATE)
    assert a.owner is not None and (a.owner.kind, a.owner.name, a.owner.uid, a.owner.api_version) == (
        "Job", "train", "job-uid", "batch/v1")
    assert [m.name for m in a.members] == ["p0", "p1"] and all(m.kind == "Pod" for m in a.members)
    mpi = ("kubeflow.org/v2beta1", "MPIJob", "pi", "mpi-uid")
    assert audience(NS, mpi, ms, GATE).owner.kind == "MPIJob"


@pytest.mark.parametrize("ms", [
    [member(0), member(1, owner=("batch/v1", "Job", "other", "o"))],  # two owners
    [member(0), member(1, owner=())],  # one bare pod
    [member(0, owner=()), member(1, owner=())],
    [],
])
def test_audience_without_a_single_owner_tells_the_members_only(ms):
    a = audience(NS, (), ms, GATE)
    assert a.owner is None and len(a.members) == len(ms)


def test_audience_is_capped_for_a_large_gang():
    ms = [member(i) for i in range(1000)]
    a = audience(NS, (), ms, GATE)
    assert len(a.members) == relays.MEMBERS_TOLD and a.left_out == 1000 - relays.MEMBERS_TOLD
    assert [m.name for m in a.members] == [f"p{i}" for i in range(relays.MEMBERS_TOLD)]
    assert len(a.refs) == relays.MEMBERS_TOLD + 1


def test_audience_tells_only_members_gated_by_cogate():
    other = PodInfo(NS, "q", "uq", labels={POD_GROUP_LABEL: "pg"}, gates=("example.com/quota",), owner=JOB)
    assert [m.name for m in audience(NS, (), [member(0), other], GATE).members] == ["p0"]


# -- de-duplicated per group and reason -------------------------------------------------------------


class Recorded:
    def __init__(self):
        self.events = []

    def record(self, ref, notice):
        self.events.append((ref.kind, ref.name, notice.reason, notice.message))


def relay():
    events = Emitter(None)
    rec = Recorded()
    events.recorder = rec
    events.record = rec.record  # type: ignore[method-assign]
    return Relaying(events, GATE), rec


def test_told_once_per_reason_not_on_every_message_change():
    r, rec = relay()
    g = group_object(raw_pg())
    req = GroupRequest(NS, "pg", 3, 0.0, False, (member(0), member(1)))
    assert r.tell(g, req, status("InsufficientCapacity", "fits 1 of 3: cpu short by 2"), 1.0) == 3
    assert {(k, n) for k, n, *_ in rec.events} == {("Job", "train"), ("Pod", "p0"), ("Pod", "p1")}
    # counts and wording change, the reason does not: nothing new, even much later
    assert r.tell(g, req, status("InsufficientCapacity", "fits 2 of 3: memory short by 1Gi"), 5000.0) == 0
    # another reason: told at once
    assert r.tell(g, req, status("Unschedulable", "member p1 fits no node"), 5001.0) == 3
    assert rec.events[-1][2:] == ("Unschedulable", "PodGroup team/pg: member p1 fits no node")
    # released: forgotten, so the next hold is news again, even with the same reason
    assert r.tell(g, req, status("Released", state="True"), 5002.0) == 0
    assert r.tell(g, req, status("Unschedulable", "member p1 fits no node"), 5003.0) == 3
    assert len(rec.events) == 9


def test_members_created_later_hear_the_standing_reason_once_up_to_the_cap():
    r, rec = relay()
    g = group_object(raw_pg())
    st_ = status("InsufficientCapacity", "fits 0 of 60")
    # the PodGroup before its owner made any pod: nobody to tell yet
    assert r.tell(g, GroupRequest(NS, "pg", 60, 0.0, False, ()), st_, 1.0) == 0 and rec.events == []
    first = tuple(member(i) for i in range(2))
    assert r.tell(g, GroupRequest(NS, "pg", 60, 0.0, False, first), st_, 2.0) == 3  # the Job and p0, p1
    more = first + tuple(member(i) for i in range(2, 70))
    assert r.tell(g, GroupRequest(NS, "pg", 60, 0.0, False, more), st_, 3.0) == relays.MEMBERS_TOLD - 2
    assert r.tell(g, GroupRequest(NS, "pg", 60, 0.0, False, more), st_, 4.0) == 0
    pods = [n for k, n, *_ in rec.events if k == "Pod"]
    assert len(pods) == len(set(pods)) == relays.MEMBERS_TOLD and pods == [f"p{i}" for i in range(relays.MEMBERS_TOLD)]
    assert [n for k, n, *_ in rec.events if k == "Job"] == ["train"]
    r.forget(set())
    assert r.tell(g, GroupRequest(NS, "pg", 60, 0.0, False, more), st_, 5.0) == relays.MEMBERS_TOLD + 1


def test_an_owner_that_heard_the_finding_is_not_told_again():
    r, rec = relay()
    req = GroupRequest(NS, "pg", 3, 0.0, False, (member(0),))
    assert r.tell(group_object(raw_pg()), req, status("WaitingForMembers"), 1.0, explained=True, heard="job-uid") == 1
    assert [(k, n) for k, n, *_ in rec.events] == [("Pod", "p0")]


def test_groups_are_told_apart_and_nothing_without_a_recorder():
    r, rec = relay()
    req = GroupRequest(NS, "pg", 3, 0.0, False, (member(0),))
    for name in ("a", "b"):
        r.tell(group_object(raw_pg(name)), req, status("InsufficientCapacity"), 1.0)
    assert len(rec.events) == 4
    quiet = Relaying(Emitter(None), GATE)
    assert quiet.tell(group_object(raw_pg()), req, status("InsufficientCapacity"), 1.0) == 0


# -- reconciler passes ---------------------------------------------------------------------------------


def test_reconciler_pass_tells_the_job_and_its_gated_pods_once_per_reason():
    pods = [raw_pod(f"t{i}", owner=True) for i in range(3)]
    msgs = iter(["fits 1 of 3: cpu short by 2", "fits 2 of 3: cpu short by 1", "no eligible node"])
    outcomes = iter(["InsufficientCapacity", "InsufficientCapacity", "Unschedulable"])
    h = Harness(pods, [raw_pg(min_member=3)], lambda groups: [verdict(next(outcomes), message=next(msgs))])
    h.run()
    rel = next(c for c in h.cluster.pgs["pg"]["status"]["conditions"] if c["type"] == "Released")
    expect = ("Warning", "InsufficientCapacity", f"PodGroup team/pg: {rel['message']}")
    assert h.relayed == [("Job", "j", *expect)] + [("Pod", f"t{i}", *expect) for i in range(3)]
    h.run()  # same reason, other numbers
    assert len(h.relayed) == 4
    h.run()
    assert len(h.relayed) == 8 and {r[3] for r in h.relayed[4:]} == {"Unschedulable"}


def test_reconciler_pass_does_not_relay_a_plain_wait_for_members():
    h = Harness([raw_pod("a", owner=True)], [raw_pg(min_member=3)],
                [verdict("WaitingForMembers", message="1 of 3 members present")])
    h.run()
    assert h.relayed == [] and h.events == []  # members may still arrive: the event waits (Ownership.arriving)
    h.now += SETTLE_SECONDS
    h.run()
    assert h.relayed == [] and any(e[1] == "WaitingForMembers" for e in h.events)


def test_reconciler_pass_tells_the_podgroups_own_owner():
    pg = raw_pg(min_member=3)
    pg["metadata"]["ownerReferences"] = [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc",
                                          "uid": "rc-uid", "controller": True}]
    h = Harness([raw_pod("a"), raw_pod("b")], [pg], [verdict("InsufficientCapacity", message="fits 0 of 3")])
    h.run()
    assert [(k, n) for k, n, *_ in h.relayed] == [("RayCluster", "rc"), ("Pod", "a"), ("Pod", "b")]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["InsufficientCapacity", "Unschedulable", "Released"]),
                          st.integers(0, 80), st.integers(0, 80)), min_size=1, max_size=8))
def test_relaying_property_each_member_once_per_reason_within_the_cap(steps):
    """Over any sequence of passes (reason, members present, of which bound): a member hears a
    reason at most once while it stands, only while gated; at most MEMBERS_TOLD members and the
    owner once per standing reason; nothing while released."""
    r, rec = relay()
    g = group_object(raw_pg())
    heard: list[list[tuple[str, str]]] = []  # per run of one standing reason
    last = None
    for reason, n, bound in steps:
        if reason != last:
            heard.append([])
        last = reason
        ms = tuple(member(i, gated=i >= bound, node="n1" if i < bound else "") for i in range(n))
        st_ = status(reason, state="True" if reason == "Released" else "False")
        before = len(rec.events)
        r.tell(g, GroupRequest(NS, "pg", 100, 0.0, False, ms), st_, 1.0)
        new = rec.events[before:]
        assert reason != "Released" or new == []
        for kind, name, rsn, _ in new:
            assert rsn == reason
            assert kind == "Job" or int(name[1:]) >= bound  # a pod hears it only while gated
            heard[-1].append((kind, name))
    for run in heard:
        pods = [n for k, n in run if k == "Pod"]
        assert len(pods) == len(set(pods)) and len(pods) <= relays.MEMBERS_TOLD
        assert [k for k, _ in run].count("Job") <= 1
