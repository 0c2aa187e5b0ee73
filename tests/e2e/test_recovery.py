"""A gang's health after it starts, end to end (issue 34 item 1): the two-way ``Satisfied``
condition and the per-gang recovery deadline, on the real control plane (webhook and controller
as real processes, kube-scheduler, kube-controller-manager's ReplicaSet controller, kwok nodes).

A gang of 4 (a ReplicaSet of 4 x 3 CPU, minMember 4) on four 4-CPU nodes: one member per node.
Losing a node is what the node lifecycle does to it: the Node goes and its pods are deleted (the
pod garbage collector's part, done here at once instead of after its 40 s quarantine). Evictions
are counted from the controller's metrics (no other eviction policy is on in the session's
controller) and from the pods' uids.
"""

from __future__ import annotations

import re
import time

import pytest
from kubernetes import client

from cogate import api
from cogate.localcluster import example
from cogate.localcluster import nodes as fake_nodes

from .kube import condition, create_pod_group, events_for, gated, group_pods, running, status, wait_for

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, cpu="4", memory="8Gi", pods=110)


def _metric(stack, name: str) -> float:
    m = re.search(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+]+)$", stack.metrics(), re.M)
    return float(m.group(1)) if m else 0.0


def _evictions(stack) -> float:
    return _metric(stack, "cogate_controller_recovery_evictions_total")


def _gang(kube, namespace, annotations: dict[str, str]) -> list[client.V1Pod]:
    pg = example.pod_group("g", 4, namespace=namespace, timeout_seconds=None)
    pg["metadata"]["annotations"] = annotations
    create_pod_group(kube, pg)
    client.AppsV1Api(kube).create_namespaced_replica_set(
        namespace, example.replica_set("g", 4, namespace=namespace, group="g", cpu="3"))
    return wait_for(lambda: (ps := group_pods(kube, namespace, "g", deleting=False)) and len(ps) == 4
                    and all(running(p) for p in ps) and ps, 30, what="the gang of 4 Running")


def _lose_node(kube, namespace, node: str) -> float:
    """The Node goes and its pods are deleted; returns when (monotonic)."""
    core = client.CoreV1Api(kube)
    core.delete_node(node)
    for p in group_pods(kube, namespace, "g"):
        if p.spec.node_name == node:
            core.delete_namespaced_pod(p.metadata.name, namespace, grace_period_seconds=0)
    return time.monotonic()


def _satisfied(kube, namespace) -> dict | None:
    return condition(status(kube, namespace, "g"), "Satisfied")


def _reasons(kube, namespace, reason: str) -> list[str]:
    return [e.message for e in events_for(kube, namespace, "g") if e.reason == reason]


def _story(stack, kube, namespace) -> str:
    """What a failed assertion needs to tell what happened: the PodGroup's events in order, its
    members (node, gated, deleting, created), the controller's eviction counts and log lines."""
    events = sorted(events_for(kube, namespace, "g"), key=lambda e: (str(e.last_timestamp or e.event_time or ""), e.reason))
    lines = [f"event {e.last_timestamp} {e.reason} x{e.count}: {e.message}" for e in events]
    lines += [f"pod {p.metadata.name} uid={p.metadata.uid[:8]} node={p.spec.node_name} gated={gated(p)} "
              f"deleting={p.metadata.deletion_timestamp is not None} created={p.metadata.creation_timestamp}"
              for p in group_pods(kube, namespace, "g")]
    lines += [m for m in stack.metrics().splitlines() if m.startswith("cogate_controller_evictions_total")]
    log = stack.workdir / "controller.log"
    lines += [ln for ln in log.read_text().splitlines() if namespace in ln][-30:] if log.exists() else []
    return "\n".join(lines)


def test_lost_node_says_so_in_one_pass_the_deadline_evicts_once_and_the_gang_re_forms_whole(
        stack, kube, namespace, only_nodes):
    """Satisfied=False within one pass of the loss; after the deadline the 3 survivors are evicted
    once, the ReplicaSet recreates them gated (no 4th node); the node returns before the next round:
    the gang re-forms whole, Satisfied=True, Recovery=False/Recovered. Exactly 3 evictions."""
    names = only_nodes(4, **NODE)
    first = _gang(kube, namespace, {api.RECOVERY_DEADLINE_ANNOTATION: "6", api.RECOVERY_LIMIT_ANNOTATION: "3"})
    wait_for(lambda: (c := _satisfied(kube, namespace)) and c["status"] == "True", 10, what="Satisfied=True")
    before = _evictions(stack)
    lost_at = _lose_node(kube, namespace, names[3])
    c = wait_for(lambda: (c := _satisfied(kube, namespace)) and c["status"] == "False" and c, 5,
                 what="Satisfied=False")
    told = time.monotonic() - lost_at
    assert told < 2.0, f"Satisfied=False {told:.1f}s after the loss: more than one pass"
    assert c["reason"] == "QuorumLost" and c["message"].startswith("3 of minMember 4 members placed"), c
    rec = condition(status(kube, namespace, "g"), "Recovery")
    assert rec and (rec["status"], rec["reason"]) == ("True", "WaitingForQuorum"), rec
    survivors = {p.metadata.uid for p in first if p.spec.node_name != names[3]}

    # The deadline: the survivors are evicted once; the ReplicaSet recreates them gated.
    msg = wait_for(lambda: _reasons(kube, namespace, "RecoveryEvicted"), 15, what="RecoveryEvicted")[0]
    assert "eviction round 1 of 3: evicted 3 remaining members" in msg, msg
    wait_for(lambda: (ps := group_pods(kube, namespace, "g", deleting=False)) and len(ps) == 4
             and all(gated(p) for p in ps) and not survivors & {p.metadata.uid for p in ps}, 20,
             what="4 members back, gated")
    assert _evictions(stack) - before == 3, _story(stack, kube, namespace)
    rec = condition(status(kube, namespace, "g"), "Recovery")
    assert rec["reason"] == "MembersEvicted" and "eviction rounds done: one of three" in rec["message"], rec

    # The node returns before the next round (12 s after the first): the gang re-forms whole.
    client.CoreV1Api(kube).create_node(fake_nodes.node_manifest(names[3], **NODE))
    wait_for(lambda: (ps := group_pods(kube, namespace, "g", deleting=False)) and len(ps) == 4
             and all(running(p) for p in ps), 30, what="the gang Running again")
    wait_for(lambda: (c := _satisfied(kube, namespace)) and c["status"] == "True", 10, what="Satisfied=True again")
    rec = condition(status(kube, namespace, "g"), "Recovery")
    assert (rec["status"], rec["reason"]) == ("False", "Recovered"), rec
    time.sleep(3)
    assert _evictions(stack) - before == 3, "never more than the one round\n" + _story(stack, kube, namespace)
    assert len(_reasons(kube, namespace, "RecoveryEvicted")) == 1, _story(stack, kube, namespace)


def test_with_no_node_the_rounds_follow_the_back_off_and_stop_at_the_limit_with_failed(
        stack, kube, namespace, only_nodes):
    """Deadline 3 s, limit 2: round 1 at +3 s evicts the 3 survivors, round 2 6 s later finds
    nothing placed (the recreated gang cannot form on 3 nodes) and evicts nothing, and 12 s after
    it the group is Failed. Evictions: 3, and none after."""
    names = only_nodes(4, **NODE)
    _gang(kube, namespace, {api.RECOVERY_DEADLINE_ANNOTATION: "3", api.RECOVERY_LIMIT_ANNOTATION: "2",
                            api.RECOVERY_ANNOTATION: "whole"})
    wait_for(lambda: (c := _satisfied(kube, namespace)) and c["status"] == "True", 10, what="Satisfied=True")
    before = _evictions(stack)
    lost_at = _lose_node(kube, namespace, names[0])
    failed = wait_for(lambda: _reasons(kube, namespace, "RecoveryFailed"), 40, what="RecoveryFailed")[0]
    took = time.monotonic() - lost_at
    assert 3 + 6 + 12 - 1 <= took, f"Failed {took:.1f}s after the loss: the back-off is 3 + 6 + 12 s"
    assert "eviction rounds done: two of two" in failed, failed
    rounds = _reasons(kube, namespace, "RecoveryEvicted")
    assert len(rounds) == 2, _story(stack, kube, namespace)
    assert any("eviction round 2 of 2: nothing placed to evict" in r for r in rounds), _story(stack, kube, namespace)
    st = status(kube, namespace, "g")
    assert st["phase"] == "Failed"
    assert condition(st, "Satisfied")["reason"] == "RecoveryFailed"
    assert (condition(st, "Recovery")["status"], condition(st, "Recovery")["reason"]) == ("False", "RecoveryFailed")
    time.sleep(8)  # nothing more
    assert _evictions(stack) - before == 3
    assert len(_reasons(kube, namespace, "RecoveryEvicted")) == 2
    assert all(gated(p) for p in group_pods(kube, namespace, "g", deleting=False))
