"""The ``Released`` condition records the release; the members a release leaves gated are
``MembersWaiting``'s to name (found by a new user: after the ReplicaSet was deleted,
``kubectl get pg -o wide`` still said "3 members (...) wait gated for capacity")."""

from __future__ import annotations

import pytest

from tests.builders import World, pod, raw_pg, ready_node


def _readme(min_member: int, count: int = 6) -> World:
    """The README example: one node of 10 CPU, ``count`` 3-CPU members of a ReplicaSet."""
    pods = [pod(f"nginx-{i}").req(cpu="3").group("pg").owner("ReplicaSet", "nginx", "rs1", "apps/v1").gated().raw()
            for i in range(count)]
    w = World(pods, [raw_pg("pg", min_member)], nodes=(ready_node("n1", "10"),), preemption=False)
    w.condition_type = "Released"
    return w


def _bind_released(w: World) -> None:
    for name, p in list(w.cluster.pods.items()):
        if not p["spec"].get("schedulingGates") and not p["spec"].get("nodeName"):
            w.bind(name)


@pytest.mark.parametrize("count", [4, 6])
def test_released_records_the_release_and_members_waiting_names_who_waits(count):
    w = _readme(3, count)
    w.run()
    _bind_released(w)
    w.run(1)
    waiting = [f"nginx-{i}" for i in range(3, count)]
    released = w.condition()
    assert (released["status"], released["reason"], released["message"]) == (
        "True", "Released", "fits 3 of 3: releasing 3 gated members")
    mw = w.condition(type_="MembersWaiting")
    assert (mw["status"], mw["reason"]) == ("True", "WaitingForCapacity")
    assert all(n in mw["message"] for n in waiting) and "wait" in mw["message"], mw

    for name in list(w.cluster.pods):  # kubectl delete rs nginx
        del w.cluster.pods[name]
    for _ in range(3):
        w.run(5)
    assert w.condition()["message"] == "fits 3 of 3: releasing 3 gated members"
    texts = [c["message"] for c in w.cluster.pgs["pg"]["status"]["conditions"]]
    assert not [n for n in waiting if any(n in t for t in texts)], "no condition names a waiting member gone"
    mw = w.condition(type_="MembersWaiting")
    assert (mw["status"], mw["reason"]) == ("False", "MembersReleased")
