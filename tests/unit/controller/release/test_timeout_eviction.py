"""Eviction on schedule timeout: a released member that was pinned to its planned node but
never bound does not block the group from forming again.

How it happens (placement ``pinned``): a member loses the gate with its required node
affinity narrowed to the planned node; before kube-scheduler binds it, the room is taken by
a pod cogate does not manage (kube-scheduler does not see cogate's reservations) or the node
goes away. The member can never move: node affinity is immutable once the gate is gone
(KEP-3838 only allows narrowing while gated). So ``--evict-on-timeout`` evicts it too (when
it has a controller owner), along with the bound members; the owner recreates them gated
and the whole group is planned again (``inputs.timeout_victims``).
"""

from __future__ import annotations

import jsonpatch
import pytest

from cogate.api import DEFAULT_GATE_NAME
from cogate.controller.model.records import pod_info
from cogate.controller.planning.patches import pin_ops
from cogate.controller.status.inputs import timeout_victims

from tests.builders import Harness, raw_pg, raw_pod, verdict


def test_timeout_eviction_also_frees_members_stuck_on_their_pin():
    stuck = raw_pod("c", gates=(), owner=True)
    stuck = jsonpatch.apply_patch(stuck, pin_ops(stuck["spec"], "gone-node"))
    pods = [raw_pod("a", gates=(), node="n1", phase="Running", owner=True),
            raw_pod("b", gates=(), node="n1", phase="Running", owner=True), stuck]
    status = {"phase": "Scheduling", "scheduleStartTime": "2024-01-01T00:00:00Z"}
    h = Harness(pods, [raw_pg(min_member=3, status=status, timeout=60)], [verdict("AlreadyReleased", fits=2)],
                evict=True)
    h.run()  # first sight (as after a restart): c may be binding, the window counts from now
    assert h.cluster.evicted == []
    h.now += 60  # nothing bound since: the window passed without progress
    h.run()
    assert sorted(h.cluster.evicted) == ["a", "b", "c"]


@pytest.mark.parametrize("name,kwargs,pin,expected", [
    ("bound-owned", dict(gates=(), node="n1", phase="Running", owner=True), None, True),
    ("bound-unowned", dict(gates=(), node="n1", phase="Running", owner=False), None, False),
    ("gated-owned", dict(owner=True), None, False),
    ("free-unbound-owned", dict(gates=(), owner=True), None, False),
    ("pinned-unbound-owned", dict(gates=(), owner=True), "n2", True),
    ("pinned-unbound-unowned", dict(gates=(), owner=False), "n2", False),
    ("succeeded-owned", dict(gates=(), node="n1", phase="Succeeded", owner=True), None, False),
])
def test_timeout_victims(name, kwargs, pin, expected):
    raw = raw_pod(name, **kwargs)
    if pin:
        raw = jsonpatch.apply_patch(raw, pin_ops(raw["spec"], pin))
    victims = timeout_victims([pod_info(raw)], DEFAULT_GATE_NAME)
    assert [p.name for p in victims] == ([name] if expected else [])


def test_the_timeout_event_counts_only_the_evictions_that_went_through():
    """An eviction the API server refuses (a budget: 429) is not counted as done: the event says
    how many went and how many failed (the same rule as the recovery rounds and the quorum policy)."""
    pods = [raw_pod(n, gates=(), node="n1", phase="Running", owner=True) for n in ("a", "b", "c")]
    status = {"phase": "Scheduling", "scheduleStartTime": "2024-01-01T00:00:00Z"}
    h = Harness(pods, [raw_pg(min_member=4, status=status, timeout=60)], [verdict("AlreadyReleased", fits=3)],
                evict=True)
    refuse = {"b"}
    evict = h.cluster.create_namespaced_pod_eviction

    def busy(name, namespace, body, **kw):
        from kubernetes.client.exceptions import ApiException

        if name in refuse:
            raise ApiException(status=429, reason="Too Many Requests")
        return evict(name, namespace, body, **kw)

    h.cluster.create_namespaced_pod_eviction = busy
    h.run()
    h.now += 60
    h.run()
    assert sorted(h.cluster.evicted) == ["a", "c"]
    (ev,) = [e for e in h.events if e[1] == "Timeout" and "evicted" in e[2]]
    assert ev[2].startswith("evicted 2 members with a controller owner after the schedule timeout"), ev
    assert ev[2].endswith("; 1 evictions failed (the controller's log says why)"), ev
