"""Scheduler-name adoption on the real control plane (issue 20 item 1).

Pods that name ``scheduler-plugins-scheduler`` (as KubeRay and the Kubeflow operators' docs
make them) go through the stack's real webhook, which adopts that name by default
(``CogateStack.adopt_scheduler_names``, the chart's ``webhook.adoptSchedulerNames``): the gate
and ``spec.schedulerName: default-scheduler`` arrive in one patch, the group waits whole, and
kube-scheduler (profile ``default-scheduler``) binds it once cogate releases it. No scheduler
named ``scheduler-plugins-scheduler`` runs here: without adoption the group would wait for ever.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from cogate.localcluster import example

from .kube import bound, create_pod_group, gated, group_pods, hold_gated, scheduled_by_default_scheduler, wait_for

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, **example.NODE_SHAPE)  # cpu 10: three members of 3 CPU per node
SPS = "scheduler-plugins-scheduler"
WARNING = f"Warning: schedulerName '{SPS}' -> 'default-scheduler': adopted by cogate"


def adopted_count(stack) -> float:
    """``cogate_webhook_scheduler_names_adopted_total{scheduler_name="scheduler-plugins-scheduler"}``."""
    for line in stack.metrics("webhook").splitlines():
        if line.startswith(f'cogate_webhook_scheduler_names_adopted_total{{scheduler_name="{SPS}"}}'):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("the webhook exports no adoption counter for scheduler-plugins-scheduler")


def test_scheduler_plugins_pods_are_adopted_and_bound_by_default_scheduler_as_one_gang(
        stack, cluster, kube, namespace, only_nodes):
    assert SPS in stack.adopt_scheduler_names
    only_nodes(2, **NODE)
    apps = client.AppsV1Api(kube)
    before = adopted_count(stack)
    create_pod_group(kube, example.pod_group("sp", 4, namespace=namespace, timeout_seconds=None))
    rs = example.replica_set("sp", 3, namespace=namespace, group="sp")
    rs["spec"]["template"]["spec"]["schedulerName"] = SPS
    apps.create_namespaced_replica_set(namespace, rs)

    three = wait_for(lambda: (ps := group_pods(kube, namespace, "sp")) and len(ps) == 3 and ps, 30,
                     what="3 ReplicaSet members created")
    assert all(gated(p) and p.spec.scheduler_name == "default-scheduler" for p in three), \
        [(p.metadata.name, p.spec.scheduler_name, p.spec.scheduling_gates) for p in three]
    assert apps.read_namespaced_replica_set("sp", namespace).spec.template.spec.scheduler_name == SPS  # only pods change
    hold_gated(kube, namespace, "sp", 2.0, 3)  # 3 of minMember 4: nothing leaves the gate

    # The fourth member by `kubectl create`: the admission warning reaches the client.
    tpl = example.pod_template("sp", app="sp-extra")
    tpl["spec"]["schedulerName"] = SPS
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sp-extra", **tpl["metadata"]},
                "spec": tpl["spec"]}
    proc = cluster.kubectl("create", "--namespace", namespace, "-f", "-", input=json.dumps(manifest))
    assert WARNING in proc.stderr, proc.stderr

    members = wait_for(lambda: (ps := group_pods(kube, namespace, "sp")) and len(ps) == 4
                       and all(bound(p) for p in ps) and ps, 60, what="all 4 members bound")
    assert {p.spec.scheduler_name for p in members} == {"default-scheduler"}
    assert not any(gated(p) for p in members)
    names = {p.metadata.name for p in members}
    wait_for(lambda: names <= scheduled_by_default_scheduler(kube, namespace), 15,
             what="Scheduled events from default-scheduler")
    assert adopted_count(stack) - before == 4
