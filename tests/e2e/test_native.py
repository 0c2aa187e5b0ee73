"""cogate beside Kubernetes' own gang scheduling (issue 18 item 3), on the real control plane.

With GenericWorkload on (``COGATE_FEATURE_GATES=GenericWorkload=true`` on a release that has it,
e.g. ``COGATE_KUBERNETES_VERSION=1.37.2``): pods that carry cogate's label *and*
``spec.schedulingGroup`` go through the stack's real webhook ungated, with its warning on kubectl's
stderr; kube-scheduler's gang scheduling binds them (a ``scheduling.k8s.io`` PodGroup of
``gang.minCount`` 2); cogate's PodGroup of the same label waits, saying it ignores them; ``kubectl
get podgroups`` then names the core resource and ``kubectl get pg`` cogate's. With the gate off the
API server drops ``spec.schedulingGroup`` after admission (the webhook cannot know): the pods are
stored ungated and without it, bound one by one, and cogate reports them (``UngatedWithoutRelease``).
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from cogate import api
from cogate.localcluster import example

from .kube import bound, condition, create_pod_group, gated, group_pods, status, wait_for

pytestmark = pytest.mark.e2e

NODE = dict(kwok_taint=False, **example.NODE_SHAPE)


def _native_api(cluster) -> str:
    """The ``scheduling.k8s.io`` version serving PodGroups ('' when none: GenericWorkload off)."""
    versions = cluster.kubectl("api-versions").stdout.split()
    return next((v for v in ("scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha2") if v in versions), "")


def _pod(name: str, namespace: str, group: str, native_group: str) -> dict:
    tpl = example.pod_template(group, cpu="1", memory="100Mi", app=f"native-{name}")
    tpl["spec"]["schedulingGroup"] = {"podGroupName": native_group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, **tpl["metadata"]},
            "spec": tpl["spec"]}


def _raw(cluster, namespace: str, name: str) -> dict:
    return json.loads(cluster.kubectl("get", "pod", name, "-n", namespace, "-o", "json").stdout)


def test_labelled_pods_in_native_gang_scheduling_are_left_to_it(stack, cluster, kube, namespace, only_nodes):
    only_nodes(1, **NODE)
    native = _native_api(cluster)
    # the local control plane's GenericWorkload setting serves the native API, or not
    assert bool(native) == cluster.feature_gates.get("GenericWorkload", False), (native, cluster.feature_gates)
    create_pod_group(kube, example.pod_group("train", 2, namespace=namespace, timeout_seconds=None))
    if native:
        group, version = native.split("/")
        client.CustomObjectsApi(kube).create_namespaced_custom_object(group, version, namespace, "podgroups", {
            "apiVersion": native, "kind": "PodGroup", "metadata": {"name": "native"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})
    warnings = []
    for name in ("n-0", "n-1"):
        proc = cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(_pod(name, namespace, "train",
                                                                                               "native")))
        warnings.append(proc.stderr)
    assert all("spec.schedulingGroup set: Kubernetes gang scheduling places it; not gated for PodGroup 'train'" in w
               for w in warnings), warnings
    raw = [_raw(cluster, namespace, n) for n in ("n-0", "n-1")]
    assert not any(g.get("name") == api.DEFAULT_GATE_NAME for r in raw for g in r["spec"].get("schedulingGates") or [])
    if not native:
        # GenericWorkload off: the API server drops the field after admission (dropDisabledSchedulingGroup),
        # so the stored pods are plain labelled pods no one gated: kube-scheduler binds them one by one
        # and cogate reports members that were never gated.
        assert all("schedulingGroup" not in r["spec"] for r in raw), [r["spec"].get("schedulingGroup") for r in raw]
        wait_for(lambda: (ps := group_pods(kube, namespace, "train")) and len(ps) == 2 and all(bound(p) for p in ps),
                 30, what="both pods bound without a gang")
        cond = wait_for(lambda: (c := condition(status(kube, namespace, "train"), "Disrupted")) and c["status"] == "True"
                        and "n-0" in c["message"] and "n-1" in c["message"] and c, 30, what="Disrupted=True naming both")
        assert cond["reason"] == "UngatedWithoutRelease", cond
        return
    assert all(r["spec"]["schedulingGroup"] == {"podGroupName": "native"} for r in raw)
    pods = wait_for(lambda: (ps := group_pods(kube, namespace, "train")) and len(ps) == 2
                    and all(bound(p) for p in ps) and ps, 60, what="both pods bound by native gang scheduling")
    assert not any(gated(p) for p in pods)

    def ignored():
        released = condition(status(kube, namespace, "train"), "Released")
        return released if released and "2 labelled pods ignored" in released.get("message", "") else None

    released = wait_for(ignored, 30, what="cogate's PodGroup saying it ignores the native pods")
    assert (released["status"], released["reason"]) == ("False", "WaitingForMembers"), released
    assert "(spec.schedulingGroup set): n-0, n-1" in released["message"], released
    # `kubectl get podgroups` is the core resource now; `pg` and the full name stay cogate's
    core = json.loads(cluster.kubectl("get", "podgroups", "-n", namespace, "-o", "json").stdout)
    assert [(i["apiVersion"], i["metadata"]["name"]) for i in core["items"]] == [(native, "native")]
    for name in ("pg", f"{api.PLURAL}.{api.GROUP}"):
        ours = json.loads(cluster.kubectl("get", name, "-n", namespace, "-o", "json").stdout)
        assert [(i["apiVersion"], i["metadata"]["name"]) for i in ours["items"]] == [(api.API_VERSION, "train")]
