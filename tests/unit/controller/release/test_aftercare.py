"""The after-release duties acted on by the shell: the opt-in PodDisruptionBudget and the opt-in
quorum eviction (rules: controller/status/lifecycle.py; stuck pins and departures: test_lifecycle.py).

Each runs a reconciler pass against the fakes of ``tests/builders/`` with a fake ``PolicyV1Api``
and checks which budget calls are made, and that each is made only when the state changes.
"""

from __future__ import annotations

import copy

from cogate.controller.status import lifecycle
from cogate.controller.kube.metrics import Metrics
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.reconciler import Reconciler

from tests.builders import ApiError, Harness, raw_pg, raw_pod, verdict

RELEASED = {"phase": "Scheduling", "scheduleStartTime": "2024-01-01T00:00:00Z"}


class FakePolicy:
    """``PolicyV1Api`` subset: PodDisruptionBudgets by name; ``foreign``: one of that name exists
    that cogate did not make."""

    def __init__(self, foreign: bool = False) -> None:
        self.pdbs: dict[str, dict] = {}
        self.calls: list[tuple] = []
        if foreign:
            self.pdbs["pg"] = {"metadata": {"name": "pg", "labels": {}}, "spec": {"minAvailable": 1}}

    def create_namespaced_pod_disruption_budget(self, namespace, body, **_):
        name = body["metadata"]["name"]
        self.calls.append(("create", name, body["spec"]["minAvailable"]))
        if name in self.pdbs:
            raise ApiError(409)
        self.pdbs[name] = copy.deepcopy(body)

    def read_namespaced_pod_disruption_budget(self, name, namespace, **_):
        self.calls.append(("read", name))
        if name not in self.pdbs:
            raise ApiError(404)
        return copy.deepcopy(self.pdbs[name])

    def patch_namespaced_pod_disruption_budget(self, name, namespace, body, **_):
        self.calls.append(("patch", name, body["spec"]["minAvailable"]))
        self.pdbs[name]["spec"]["minAvailable"] = body["spec"]["minAvailable"]

    def delete_namespaced_pod_disruption_budget(self, name, namespace, body=None, **_):
        self.calls.append(("delete", name))
        del self.pdbs[name]


def harness(pods, pgs, verdicts, policy, **config) -> Harness:
    """A :class:`Harness` whose reconciler has ``config`` and ``policy``."""
    h = Harness(pods, pgs, verdicts)
    h.rec.close()
    h.rec = Reconciler(h.cluster, h.cluster, h.caches, ReconcilerConfig(max_patch_attempts=4, **config),
                       recorder=h.recorder, metrics=Metrics(), decide=h.decide, policy=policy,
                       clock=lambda: h.now, monotonic=lambda: h.now, sleep=lambda s: None)
    return h


def passes(h: Harness, n: int = 2) -> None:
    """``n`` more passes, a second apart."""
    for _ in range(n):
        h.now += 1
        h.run()


def running(name, **kw):
    return raw_pod(name, gates=(), node="n1", phase="Running", owner=True, **kw)


def test_budget_is_ensured_kept_in_step_and_deleted_each_once():
    policy = FakePolicy()
    h = harness([running("a"), running("b")], [raw_pg(status=dict(RELEASED))],
                lambda groups: [verdict("AlreadyReleased", fits=2)], policy, pod_disruption_budgets=True)
    h.run()
    assert h.cluster.pgs["pg"]["status"]["phase"] == "Running"
    assert policy.calls == [("create", "pg", 2)]
    assert policy.pdbs["pg"]["metadata"]["labels"][lifecycle.MANAGED_BY_LABEL] == "cogate"
    passes(h, 1)
    assert policy.calls == [("create", "pg", 2)], "written only when it changes"
    # minMember raised: the budget follows it, once
    pg = copy.deepcopy(h.cluster.pgs["pg"])
    pg["spec"]["minMember"] = 3
    h.cluster._bump(pg)
    h.cluster.pgs["pg"] = pg
    h.caches.podgroups.apply_local(pg)
    policy.calls.clear()
    passes(h)
    assert policy.calls == [("create", "pg", 3), ("read", "pg"), ("patch", "pg", 3)]
    assert policy.pdbs["pg"]["spec"]["minAvailable"] == 3
    # the gang finished: the budget goes, once
    for name in ("a", "b", "c"):
        done = running(name, rv="900")
        done["status"]["phase"] = "Succeeded"
        h.caches.members.apply_local(done)
    policy.calls.clear()
    passes(h)
    assert h.cluster.pgs["pg"]["status"]["phase"] == "Finished"
    assert policy.calls == [("read", "pg"), ("delete", "pg")] and policy.pdbs == {}


def test_a_budget_of_another_owner_is_reported_once_and_left_alone():
    policy = FakePolicy(foreign=True)
    h = harness([running("a"), running("b")], [raw_pg(status=dict(RELEASED))],
                lambda groups: [verdict("AlreadyReleased", fits=2)], policy, pod_disruption_budgets=True)
    h.run()
    assert policy.calls == [("create", "pg", 2), ("read", "pg")]
    (ev,) = [e for e in h.events if e[1] == "PodDisruptionBudgetConflict"]
    assert ev[0] == "Warning"
    passes(h, 3)
    assert policy.calls == [("create", "pg", 2), ("read", "pg")], "not touched again"
    assert policy.pdbs["pg"]["spec"]["minAvailable"] == 1


def test_a_gang_below_quorum_loses_its_budget_and_its_owned_members_once():
    policy = FakePolicy()
    status = dict(RELEASED, phase="Running")
    h = harness([running("a")], [raw_pg(status=status)], lambda groups: [verdict("AlreadyReleased", fits=1)],
                policy, pod_disruption_budgets=True, evict_below_quorum=True)
    h.run()
    assert h.cluster.evicted == ["a"]
    assert policy.calls[:1] == [("read", "pg")], "the budget is deleted before the evictions"
    (ev,) = [e for e in h.events if e[1] == "QuorumLost"]
    assert "evicted 1 remaining members" in ev[2]
    calls = list(policy.calls)
    passes(h)
    assert h.cluster.evicted == ["a"], "once per release"
    assert len([e for e in h.events if e[1] == "QuorumLost"]) == 1
    assert policy.calls == calls


def test_a_refused_quorum_eviction_is_not_counted_as_done():
    """``--evict-below-quorum`` says how many evictions went through and how many the API server
    refused (429: a budget of its own the member carries), once per release."""
    from kubernetes.client.exceptions import ApiException

    status = dict(RELEASED, phase="Running")
    h = harness([running("a"), running("b")], [raw_pg(min_member=3, status=status)],
                lambda groups: [verdict("AlreadyReleased", fits=2)], None, evict_below_quorum=True)
    evict = h.cluster.create_namespaced_pod_eviction

    def refusing(name, namespace, body, **kw):
        if name == "b":
            raise ApiException(status=429, reason="Too Many Requests")
        return evict(name, namespace, body, **kw)

    h.cluster.create_namespaced_pod_eviction = refusing
    h.run()
    assert h.cluster.evicted == ["a"]
    (ev,) = [e for e in h.events if e[1] == "QuorumLost"]
    assert "evicted 1 remaining members" in ev[2] and ev[2].endswith("; 1 evictions failed (the controller's log "
                                                                       "says why)"), ev
