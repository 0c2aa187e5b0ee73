"""Many small gangs (issue 40), on the real control plane.

- **What the API server sends to the webhook.** With the chart's registration (no late-label
  entry) a pod without the pod-group label never reaches the webhook (the label
  ``objectSelector``): its request counter does not move while such pods are created, and moves by
  one per labelled pod. With the late-label entry (``webhook.lateLabels.enabled``) every pod of
  the covered namespaces not gated yet still reaches it: the API server reinvokes only webhooks it
  called in the first round, so the entry must see unlabelled pods for a later mutator's label to
  be gated (docs/semantics.md, Admission).
- **Pre-gated members.** A member created already carrying cogate's gate, with a nameable label and
  the default scheduler, is not sent at all (the first entry's match condition) and is released
  with its group; one the webhook still has work for (refusal, warning) is sent.
- **Sub-second groups.** The member event that completes a group makes the controller's pass due
  at once. Run with a debounce of 30 s (and no resync before it), groups of 2, 3 (the README
  example: 3 of 6 pods of 3 CPU fit one 10-CPU node), 4 and 8 members are still bound within a
  few seconds of their last member, and each is released whole (judged from gates and bindings in
  the API server's order: tests/e2e/gangwatch.py).
"""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest
import yaml
from kubernetes import client

from cogate.api import POD_GROUP_LABEL
from cogate.webhook.config import webhook_configuration

from .kube import bound, controller_flags, create_pod_group, group_pods, wait_for, webhook_requests

pytestmark = pytest.mark.e2e

#: The debounce the sub-second test runs the controller with: far longer than the release it expects.
LONG_DEBOUNCE = 30.0


def _pod(name: str, group: str | None, cpu: str = "100m", gate: str | None = None, **spec: Any) -> dict[str, Any]:
    """A pod of ``cpu``, labelled for ``group``; ``gate``: created carrying that scheduling gate (pre-gated)."""
    labels = {POD_GROUP_LABEL: group} if group else {}
    res = {"cpu": cpu, "memory": "64Mi"}
    gates = {"schedulingGates": [{"name": gate}]} if gate else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "registry.invalid/e2e:1",
                                     "resources": {"requests": res, "limits": res}}],
                     "terminationGracePeriodSeconds": 0, **gates, **spec}}


def _register(stack, late_labels: str | None) -> None:
    config = webhook_configuration({"url": f"https://127.0.0.1:{stack.webhook_port}/mutate",
                                    "caBundle": base64.b64encode((stack.workdir / "ca.crt").read_bytes()).decode()},
                                   gate_name=stack.gate_name, late_labels=late_labels)
    path = stack.workdir / f"webhook-configuration-{late_labels}.yaml"
    path.write_text(yaml.safe_dump(config))
    stack.cluster.kubectl("apply", "-f", str(path))
    time.sleep(2)  # the API server loads webhook configurations asynchronously


def _arrival_to_release(stack) -> dict[str, float]:
    """``cogate_controller_arrival_to_release_seconds``: the sum per step and the count of groups observed."""
    out: dict[str, float] = {}
    for line in stack.metrics("controller").splitlines():
        if line.startswith("cogate_controller_arrival_to_release_seconds_sum{"):
            labels, value = line.rsplit(" ", 1)
            out[labels.split('step="', 1)[1].split('"', 1)[0]] = float(value)
        elif line.startswith('cogate_controller_arrival_to_release_seconds_count{step="released"}'):
            out["count"] = float(line.rsplit(" ", 1)[1])
    return out


def _calls(stack) -> float:
    return sum(webhook_requests(stack).values())


def test_unlabelled_pods_reach_the_webhook_only_through_the_late_label_entry(stack, kube, namespace):
    core = client.CoreV1Api(kube)
    create_pod_group(kube, {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                            "metadata": {"name": "g", "namespace": namespace}, "spec": {"minMember": 100}})
    try:
        _register(stack, None)  # the chart's default: no late-label entry
        before = _calls(stack)
        for i in range(10):
            core.create_namespaced_pod(namespace, _pod(f"plain-{i}", None))
        assert _calls(stack) == before, "an unlabelled pod was sent to the webhook"
        for i in range(3):
            core.create_namespaced_pod(namespace, _pod(f"member-{i}", "g"))
        assert _calls(stack) == before + 3, "each labelled pod: one webhook call"
        assert all(p.spec.scheduling_gates for p in group_pods(kube, namespace, "g"))
        _register(stack, "Ignore")  # the late-label entry: every pod not gated yet reaches the webhook
        before = _calls(stack)
        for i in range(5):
            core.create_namespaced_pod(namespace, _pod(f"late-{i}", None))
        assert _calls(stack) == before + 5
        core.create_namespaced_pod(namespace, _pod("member-late", "g"))
        assert _calls(stack) == before + 6, "a pod the first entry gated is not sent again (matchConditions)"
    finally:
        stack.register_webhook((stack.workdir / "ca.crt").read_bytes())


def test_a_pre_gated_member_skips_the_webhook_and_is_released_with_its_group(stack, kube, namespace, only_nodes):
    """A member created already carrying cogate's gate (its template has it) with a nameable label and
    the default scheduler is not sent to the webhook (the first entry's match condition, issue 40), yet
    its group is released and bound like any other; a pre-gated pod the webhook still has work for
    (a label no PodGroup can have: refused; another scheduler name) is still sent."""
    only_nodes(1, kwok_taint=False, cpu="10", memory="8Gi", pods=110)
    core = client.CoreV1Api(kube)
    create_pod_group(kube, {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                            "metadata": {"name": "pre", "namespace": namespace}, "spec": {"minMember": 3}})
    before = _calls(stack)
    for i in range(3):
        core.create_namespaced_pod(namespace, _pod(f"pre-{i}", "pre", gate=stack.gate_name))
    assert _calls(stack) == before, "a pre-gated member was sent to the webhook"
    wait_for(lambda: sum(bound(p) for p in group_pods(kube, namespace, "pre")) == 3, 30,
             what="the pre-gated group released and bound")
    assert all(not p.spec.scheduling_gates for p in group_pods(kube, namespace, "pre"))
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod(namespace, _pod("bad", "Bad_Name", gate=stack.gate_name))
    assert refused.value.status == 422 and "cannot name a PodGroup" in refused.value.body, refused.value.body
    core.create_namespaced_pod(namespace, _pod("other", "pre", gate=stack.gate_name, schedulerName="batch"))
    assert _calls(stack) == before + 2, "a pre-gated pod the webhook refuses or warns about is still sent"


@pytest.mark.parametrize("groups", [
    # (name, members, minMember, cpu): the README example, then 2, 4 and 8 members created at once
    [("readme", 6, 3, "3")],
    [("two", 2, 2, "100m"), ("four", 4, 4, "100m"), ("eight", 8, 8, "100m")],
], ids=["readme-example", "2-4-8"])
def test_a_complete_group_is_released_without_waiting_for_the_debounce(stack, kube, namespace, only_nodes,
                                                                       gang_watch, groups):
    only_nodes(1, kwok_taint=False, cpu="10", memory="8Gi", pods=110)
    core = client.CoreV1Api(kube)
    with controller_flags(stack, "--debounce", str(LONG_DEBOUNCE), "--resync", "300"):
        time.sleep(LONG_DEBOUNCE / 10)  # past the restarted controller's first passes
        for name, _, min_member, _ in groups:
            create_pod_group(kube, {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                                    "metadata": {"name": name, "namespace": namespace},
                                    "spec": {"minMember": min_member}})
        time.sleep(1)  # the controller's PodGroup cache has them (a group created after its members waits)
        for name, size, _, cpu in groups:
            for i in range(size):
                core.create_namespaced_pod(namespace, _pod(f"{name}-{i}", name, cpu))
        last = time.monotonic()

        def all_bound() -> bool:
            return all(sum(bound(p) for p in group_pods(kube, namespace, name)) >= min_member
                       for name, _, min_member, _ in groups)
        wait_for(all_bound, LONG_DEBOUNCE / 3, what="every group bound well within the debounce")
        took = time.monotonic() - last
        # the controller's own account of each group's path (the restarted controller's metrics: these groups only)
        path = _arrival_to_release(stack)
        assert path["count"] == len(groups), path
        assert 0 < path["released"] < LONG_DEBOUNCE / 3 * len(groups), path
        assert path["pass_started"] <= path["planned"] <= path["released"], path
    for name, size, min_member, _ in groups:
        pods = group_pods(kube, namespace, name)
        members = [p.metadata.name for p in pods if bound(p)]
        assert len(members) == (min_member if name == "readme" else size), (name, took)
        wait_for(lambda: all(any(s.name == n and s.bound for s in list(gang_watch.log)) for n in members), 10,
                 what=f"the watch saw the bindings of {name}")
        assert gang_watch.faults(name, members=members) == [], name
