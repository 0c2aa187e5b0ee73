"""Preemption beside Kubernetes' own gangs (issue 39) on the real local control plane.

Runs where the API server serves ``scheduling.k8s.io`` PodGroups: ``COGATE_KUBERNETES_VERSION=1.37.2
COGATE_FEATURE_GATES=GenericWorkload=true`` (``make test-releases``' NATIVE_SUBSET; ``v1beta1``), or
1.36.3 with ``GenericWorkload=true,GangScheduling=true,WorkloadAwarePreemption=true`` (``v1alpha2``,
whose PodGroup fields need the last gate). Elsewhere each test skips, saying so. kube-scheduler's own gang scheduling binds the native gangs (a
``scheduling.k8s.io/v1beta1`` PodGroup, ``gang.minCount`` 2, its pods naming it in
``spec.schedulingGroup``); fake nodes of 10 CPU, pods of 6 CPU, so each pod holds a node alone. A
cogate gang of priority 1000 then needs one node's room:

- a native gang in disruption mode ``all`` beside a cheaper victim (a plain pod, and a low-priority
  cogate gang, all of priority 100): only the plain pod goes; the native gang is named as skipped in
  ``Preempting`` and the ``Preempting`` event;
- a native ``all`` gang as the only room: both its pods go (never one), said ``taken whole``;
- a native ``single`` group: one of its pods goes, as an ordinary victim.

Every victim is held Terminating by a finalizer for a few seconds (termination grace: kwok deletes a
pod at once otherwise): the cogate gang waits gated, ``Preempting=True`` naming the victims, and binds
once they are gone. The session's controller runs with ``--preemption`` (its default).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from cogate.localcluster import example

from .kube import bound, events_for, gated, group_pods, pods, status, condition, wait_for
from .test_native import _native_api
from .test_preemption import FINALIZER, classes, create_gang, preempting_condition  # noqa: F401 (a fixture)

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, **example.NODE_SHAPE)
CPU = "6"
#: Seconds the victims stay Terminating (their finalizer removed after).
GRACE = 4.0


@pytest.fixture
def native(cluster) -> str:
    """The served ``scheduling.k8s.io`` version of PodGroups; the test skips where none is."""
    version = _native_api(cluster)
    if not version:
        pytest.skip("the API server serves no scheduling.k8s.io PodGroups (Kubernetes < 1.36, or GenericWorkload "
                    "off): run with COGATE_KUBERNETES_VERSION=1.37.2 COGATE_FEATURE_GATES=GenericWorkload=true")
    return version


def native_gang(kube, namespace: str, api_version: str, name: str, mode: str, priority_class: str,
                size: int = 2) -> set[str]:
    """A ``scheduling.k8s.io`` PodGroup (``gang.minCount`` = ``size``, disruption mode ``mode``, the
    pods' priority class) and its pods, held by :data:`FINALIZER`; their uids once all are bound."""
    group, version = api_version.split("/")
    mode_field: Any = {mode: {}} if version == "v1beta1" else {"all": "PodGroup", "single": "Pod"}[mode]
    client.CustomObjectsApi(kube).create_namespaced_custom_object(group, version, namespace, "podgroups", {
        "apiVersion": api_version, "kind": "PodGroup", "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": size}}, "disruptionMode": mode_field,
                 "priorityClassName": priority_class}})
    core = client.CoreV1Api(kube)
    for i in range(size):
        tpl = example.pod_template(None, cpu=CPU, memory="100Mi", app=name)
        tpl["spec"].update(schedulingGroup={"podGroupName": name}, priorityClassName=priority_class)
        tpl["metadata"].update(name=f"{name}-{i}", finalizers=[FINALIZER])
        core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})
    return _bound(kube, namespace, name, size)


def plain_pod(kube, namespace: str, name: str, priority_class: str) -> set[str]:
    tpl = example.pod_template(None, cpu=CPU, memory="100Mi", app=name)
    tpl["spec"]["priorityClassName"] = priority_class
    tpl["metadata"].update(name=name, finalizers=[FINALIZER])
    client.CoreV1Api(kube).create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})
    return _bound(kube, namespace, name, 1)


def _bound(kube, namespace: str, app: str, count: int) -> set[str]:
    ps = wait_for(lambda: (ps := pods(kube, namespace, f"app={app}")) and len(ps) == count
                  and all(bound(p) for p in ps) and ps, 60, what=f"{app} bound")
    return {p.metadata.uid for p in ps}


def release_finalizers(kube, namespace: str) -> None:
    core = client.CoreV1Api(kube)
    for p in core.list_namespaced_pod(namespace).items:
        if p.metadata.finalizers and FINALIZER in p.metadata.finalizers:
            core.patch_namespaced_pod(p.metadata.name, namespace, {"metadata": {"finalizers": None}})


def preempt_and_bind(kube, namespace: str, high: str) -> tuple[set[str], str]:
    """A cogate gang of one 6-CPU member of priority ``high``: the uids of the pods it preempted
    (held Terminating :data:`GRACE` seconds, while the gang waits gated on ``Preempting=True``), and
    its ``Preempting`` message; it then binds."""
    create_gang(kube, namespace, "train", 1, CPU, high)
    c = wait_for(lambda: (c := preempting_condition(kube, namespace, "train")) and c["status"] == "True" and c, 30,
                 what="Preempting=True")
    core = client.CoreV1Api(kube)
    terminating = wait_for(lambda: {p.metadata.uid for p in core.list_namespaced_pod(namespace).items
                                    if p.metadata.deletion_timestamp} or None, 20, what="victims terminating")
    end = time.monotonic() + GRACE
    while time.monotonic() < end:  # the victims terminate: the gang waits gated, the condition says why
        member = group_pods(kube, namespace, "train")[0]
        assert gated(member) and not bound(member), member.spec
        assert preempting_condition(kube, namespace, "train")["status"] == "True"
        time.sleep(0.5)
    assert "waiting for" in preempting_condition(kube, namespace, "train")["message"]
    release_finalizers(kube, namespace)
    wait_for(lambda: all(bound(p) for p in group_pods(kube, namespace, "train")), 60, what="gang bound")
    events = [e.message for e in events_for(kube, namespace, "train") if e.reason == "Preempting"]
    assert events and events[0].startswith(c["message"].split("; waiting for")[0]), (events, c["message"])
    return terminating, c["message"]


def alive(kube, namespace: str, uids: set[str]) -> set[str]:
    return {p.metadata.uid for p in client.CoreV1Api(kube).list_namespaced_pod(namespace).items
            if p.metadata.uid in uids and not p.metadata.deletion_timestamp}


def test_a_cheaper_plain_victim_is_taken_and_the_native_all_gang_is_said_skipped(
        stack, native, kube, namespace, only_nodes, classes):
    only_nodes(5, **NODE)
    create_gang(kube, namespace, "lowgang", 2, CPU, classes["low"])  # a cogate gang of 2 at priority 100
    lowgang = _bound(kube, namespace, "lowgang", 2)
    nat = native_gang(kube, namespace, native, "nat", "all", classes["low"])
    plain = plain_pod(kube, namespace, "plain", classes["low"])
    try:
        victims, message = preempt_and_bind(kube, namespace, classes["high"])
        assert victims == plain, message
        assert alive(kube, namespace, nat | lowgang) == nat | lowgang
        assert (f"native gang {namespace}/nat (scheduling.k8s.io, disruptionMode all) skipped: 1 of its 2 pods would "
                "have been needed, and it is preempted whole or not at all") in message, message
    finally:
        release_finalizers(kube, namespace)


def test_a_native_all_gang_with_no_other_choice_is_taken_whole(stack, native, kube, namespace, only_nodes,
                                                                classes):
    only_nodes(2, **NODE)
    nat = native_gang(kube, namespace, native, "nat", "all", classes["low"])
    try:
        victims, message = preempt_and_bind(kube, namespace, classes["high"])
        assert victims == nat, message  # both, never one
        assert f"whole gangs: {namespace}/nat (scheduling.k8s.io)" in message, message
        assert "taken whole: 1 of its 2 pods would have been needed" in message, message
        st = status(kube, namespace, "train")
        assert condition(st, "Preempting")["reason"] == "Placed", st
    finally:
        release_finalizers(kube, namespace)


def test_a_native_single_groups_pods_are_ordinary_victims(stack, native, kube, namespace, only_nodes, classes):
    only_nodes(2, **NODE)
    nat = native_gang(kube, namespace, native, "nat", "single", classes["low"])
    try:
        victims, message = preempt_and_bind(kube, namespace, classes["high"])
        assert len(victims) == 1 and victims < nat, message
        assert len(alive(kube, namespace, nat)) == 1
        assert "native gang" not in message and "whole gangs" not in message, message
    finally:
        release_finalizers(kube, namespace)
