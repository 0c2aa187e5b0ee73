"""The recovery deadline through passes of the reconciler with the real planner: a gang of 4, one
member per node, loses a node. Evictions are counted: never more than the policy allows, also
across a restarted controller (the record is in the PodGroup's status)."""

from __future__ import annotations

import copy

from cogate import api
from cogate.controller.model.wakeups import WAKE_MARGIN
from tests.builders import World, pod, raw_pg, ready_node
from tests.builders.fakes import StatusCluster


class EvictingCluster(StatusCluster):
    """An Eviction deletes the pod (no budget in the way), as the API server does."""

    def create_namespaced_pod_eviction(self, name, namespace, body, **_):
        self.evicted.append(name)
        self.pods.pop(name, None)


class Gang(World):
    cluster_class = EvictingCluster
    condition_type = "Satisfied"


def _gang(annotations, nodes=4):
    """``nodes`` nodes of 4 CPU; four 3-CPU owned members of ``pg`` (minMember 4): one per node."""
    pods = [pod(f"k-{i}").req(cpu="3").group("pg").owner("ReplicaSet", "k", "rs1", "apps/v1").gated().raw()
            for i in range(4)]
    pg = raw_pg("pg", 4)
    pg["metadata"]["annotations"] = annotations
    return Gang(pods, [pg], nodes=tuple(ready_node(f"n{i}", "4") for i in range(nodes)), preemption=False)


def _run_and_bind(w: Gang, dt: float = 1.0) -> None:
    w.run(dt)
    for name, p in list(w.cluster.pods.items()):
        if not p["spec"].get("schedulingGates") and not p["spec"].get("nodeName"):
            w.bind(name)


def _recreate(w: Gang, names) -> None:
    """The owner recreates what went (gated again by the webhook)."""
    for name in names:
        w.cluster.pods[name + "r"] = pod(name + "r").req(cpu="3").group("pg").created(w.now) \
            .owner("ReplicaSet", "k", "rs1", "apps/v1").gated().raw()


def _lose_node(w: Gang, node: str) -> list[str]:
    """The node goes, and the pod garbage collector deletes its pods."""
    del w.cluster.nodes[node]
    gone = [n for n, p in w.cluster.pods.items() if p["spec"].get("nodeName") == node]
    for n in gone:
        del w.cluster.pods[n]
    return gone


def test_a_lost_node_is_said_in_one_pass_and_the_deadline_evicts_once_per_round_up_to_failed():
    w = _gang({api.RECOVERY_DEADLINE_ANNOTATION: "10", api.RECOVERY_LIMIT_ANNOTATION: "2"})
    _run_and_bind(w)
    w.run(1)
    assert w.condition()["status"] == "True"
    gone = _lose_node(w, "n3")
    w.run(1)  # the one pass that sees it
    sat = w.condition()
    assert (sat["status"], sat["reason"]) == ("False", "QuorumLost") and "3 of minMember 4" in sat["message"]
    assert w.condition(type_="Recovery")["reason"] == "WaitingForQuorum"
    _recreate(w, gone)  # the replacement waits gated: no node for it
    for _ in range(9):
        w.run(1)
    assert w.cluster.evicted == [], "not before the deadline"
    w.run(1)
    assert sorted(w.cluster.evicted) == ["k-0", "k-1", "k-2"], "the survivors, once"
    assert w.condition(type_="Recovery")["reason"] == "MembersEvicted"
    (first,) = w.reasons("RecoveryEvicted")
    assert "eviction round 1 of 2: evicted 3 remaining members" in first[3]
    _recreate(w, ["k-0", "k-1", "k-2"])
    restarted_at = None
    for i in range(120):  # two minutes of passes; a new process before the second round
        if i == 10:
            w = w.restarted()
            restarted_at = w.now
        _run_and_bind(w)
    assert restarted_at is not None
    assert sorted(w.cluster.evicted) == ["k-0", "k-1", "k-2"], "nothing more placed to evict"
    (second,) = w.reasons("RecoveryEvicted")  # the restarted process's own events: round 2 only
    assert "eviction round 2 of 2: nothing placed to evict" in second[3]
    status = w.cluster.pgs["pg"]["status"]
    assert status["phase"] == "Failed"
    rec = w.condition(type_="Recovery")
    assert (rec["status"], rec["reason"]) == ("False", "RecoveryFailed") and "two of two" in rec["message"]
    assert w.condition()["reason"] == "RecoveryFailed"
    assert w.metric("cogate_controller_recovery_rounds_total", action="failed") == 1
    # the node comes back: the gang re-forms whole and the recovery is over
    w.cluster.nodes["n3"] = ready_node("n3", "4")
    for _ in range(3):
        _run_and_bind(w)
    assert w.cluster.pgs["pg"]["status"]["phase"] in ("Scheduled", "Running")
    assert w.condition()["status"] == "True"
    assert w.condition(type_="Recovery")["reason"] == "Recovered"


def test_without_a_deadline_a_lost_node_evicts_nothing():
    w = _gang({})
    _run_and_bind(w)
    w.run(1)
    _lose_node(w, "n0")
    for _ in range(60):
        w.run(5)
    assert w.cluster.evicted == []
    assert w.condition()["reason"] == "QuorumLost" and w.condition(type_="Recovery") is None


def test_a_bad_annotation_is_reported_and_its_default_applies():
    w = _gang({api.RECOVERY_DEADLINE_ANNOTATION: "soon"})
    _run_and_bind(w)
    w.run(1)
    (event,) = w.reasons("InvalidRecoveryPolicy")
    assert event[0] == "Warning" and "'soon'" in event[3]
    _lose_node(w, "n0")
    for _ in range(30):
        w.run(5)
    assert w.cluster.evicted == []


def _three_of_min_two(annotations):
    pods = [pod(f"w-{i}").req(cpu="1").group("pg").owner("ReplicaSet", "w", "rs1", "apps/v1").gated().raw()
            for i in range(3)]
    pg = raw_pg("pg", 2)
    pg["metadata"]["annotations"] = annotations
    return Gang(pods, [pg], nodes=(ready_node("n0", "8"),), preemption=False)


def test_free_releases_a_replacement_into_the_standing_release_and_whole_forms_the_gang_again():
    starts = {}
    for rule in ("free", "whole"):
        w = _three_of_min_two({api.RECOVERY_ANNOTATION: rule})
        _run_and_bind(w)
        w.run(1)
        first = w.cluster.pgs["pg"]["status"]["scheduleStartTime"]
        del w.cluster.pods["w-2"]  # 2 of minMember 2 still placed: the quorum holds
        w.run(1)
        assert w.condition()["status"] == "True"
        w.now += 5
        _recreate(w, ["w-2"])
        for _ in range(3):
            _run_and_bind(w)
        assert not w.gated("w-2r"), rule
        starts[rule] = (first, w.cluster.pgs["pg"]["status"]["scheduleStartTime"])
        released = w.condition(type_="Released")
        assert released["status"] == "True"
    assert starts["free"][0] == starts["free"][1], "free: the replacement joined the standing release"
    assert starts["whole"][0] != starts["whole"][1], "whole: a fresh release of the gang as a whole"


class BusyCluster(EvictingCluster):
    """The API server answers the first ``busy`` Evictions with 429 (API Priority and Fairness
    under load, a budget in the way): nothing is evicted by those."""

    busy = 3

    def create_namespaced_pod_eviction(self, name, namespace, body, **kw):
        from kubernetes.client.exceptions import ApiException

        if self.busy > 0:
            self.busy -= 1
            raise ApiException(status=429, reason="Too Many Requests")
        return super().create_namespaced_pod_eviction(name, namespace, body, **kw)


class LaggingCluster(EvictingCluster):
    """The API server takes each Eviction, but the pods stay in the controller's view as they
    were (its watch is behind): placed, not deleting."""

    def create_namespaced_pod_eviction(self, name, namespace, body, **_):
        self.evicted.append(name)


def _lost_one_node(cluster_class, deadline="10", limit="2"):
    """The gang of :func:`_gang` on ``cluster_class``, bound, with node n3 lost: the three survivors
    wait for the deadline, the lost member's replacement waits gated."""
    w = _gang({api.RECOVERY_DEADLINE_ANNOTATION: deadline, api.RECOVERY_LIMIT_ANNOTATION: limit})
    w.cluster.__class__ = cluster_class
    _run_and_bind(w)
    w.run(1)
    _recreate(w, _lose_node(w, "n3"))
    return w


def test_evictions_the_api_server_refuses_are_tried_again_each_pass_and_counted_as_they_go_through():
    w = _lost_one_node(BusyCluster)
    for _ in range(11):
        w.run(1)
    assert w.cluster.evicted == [] and w.cluster.busy == 0, "round 1 came, all three evictions refused"
    (first,) = w.reasons("RecoveryEvicted")
    assert "eviction round 1 of 2: evicted none; 3 evictions failed, tried again every 5 s" in first[3], first
    assert w.metric("cogate_controller_recovery_evictions_total") == 0
    assert w.metric("cogate_controller_evictions_total", result="failed") == 3
    memory = w.rec.memory.recall(w.cluster.pgs["pg"]["metadata"]["uid"]).release
    assert w.rec.aftercare.retry_wake(memory, w.now) == w.now + 5 + WAKE_MARGIN, \
        "a pass is asked for the retry, not only for round 2 (20 s away)"
    for _ in range(4):
        w.run(1)
    assert w.cluster.evicted == [], "not before 5 s"
    w.run(1)  # 5 s after: the same round's evictions again, not a new round
    assert sorted(w.cluster.evicted) == ["k-0", "k-1", "k-2"]
    again = w.reasons("RecoveryEvicted")[1]
    assert "eviction round 1 of 2: evicted 3 more remaining members whose eviction had failed" in again[3], again
    assert w.metric("cogate_controller_recovery_evictions_total") == 3
    assert "eviction rounds done: one of two" in w.condition(type_="Recovery")["message"]
    for _ in range(5):
        w.run(1)
    assert sorted(w.cluster.evicted) == ["k-0", "k-1", "k-2"], "each member once"
    assert len(w.reasons("RecoveryEvicted")) == 2


def test_a_view_behind_the_evictions_never_evicts_a_member_twice_and_says_so():
    w = _lost_one_node(LaggingCluster, deadline="5")
    for _ in range(6):
        w.run(1)
    assert sorted(w.cluster.evicted) == ["k-0", "k-1", "k-2"]
    for _ in range(12):  # round 2 is due 10 s after round 1: the view still shows the survivors placed
        w.run(1)
    rounds = [e[3] for e in w.reasons("RecoveryEvicted")]
    assert len(rounds) == 2, rounds
    assert rounds[1].startswith("eviction round 2 of 2: nothing placed to evict (3 members evicted in an "
                                "earlier round are still going)"), rounds[1]
    assert sorted(w.cluster.evicted) == ["k-0", "k-1", "k-2"], "never twice"
    assert w.metric("cogate_controller_recovery_evictions_total") == 3


def test_a_member_evicted_by_a_round_never_counts_as_placed_while_the_members_watch_still_shows_it():
    """The race CI hit twice: two watches, one for the members and one for the bound pods. Under
    load the bound pods' watch already shows a survivor's node empty (evicted, gone) while the
    members' watch still shows it bound; counted as placed, the gang "fitted 4 of 4" with the
    replacements in the room its eviction freed, and the next round evicted them. A member cogate
    evicted is going, whatever the members' watch says: nothing is released on three nodes."""
    from cogate.controller.kube.informer import Informer
    from cogate.controller.model import records
    from cogate.controller.kube.informer import uid_key

    w = _lost_one_node(EvictingCluster, deadline="5", limit="3")
    stale = copy.deepcopy(w.cluster.pods["k-0"])
    assert stale["spec"]["nodeName"] == "n0"
    c = w.cluster

    def members():  # the members' watch behind: k-0 as it was before its eviction
        pods = [p for p in c.pods.values() if p["metadata"]["labels"]]
        return pods + ([stale] if "k-0" not in c.pods else [])

    w.caches.members = Informer("members", lambda: (members(), "1"), lambda rv: iter(()), uid_key, records.pod_info)
    w.rec.caches.members = w.caches.members
    for _ in range(6):
        _run_and_bind(w)
    assert sorted(c.evicted) == ["k-0", "k-1", "k-2"], "round 1"
    _recreate(w, ["k-0", "k-1", "k-2"])
    for _ in range(5):
        _run_and_bind(w)
    assert all(w.gated(n) for n in ("k-3r", "k-0r", "k-1r", "k-2r")), "4 members cannot fit 3 nodes: none released"
    assert len(w.reasons("Released")) == 1, "the first release only"
    assert sorted(c.evicted) == ["k-0", "k-1", "k-2"]
    assert w.metric("cogate_controller_recovery_evictions_total") == 3
