"""Device pools mid-update (issue 37 kind 8), end to end on the local control plane.

A DRA driver that republishes a pool raises ``spec.pool.generation``; a pool of several slices
says how many in ``spec.pool.resourceSliceCount``. kube-scheduler allocates only from the newest
generation of complete pools. No driver runs: the slices are API objects the test makes (each
test has a driver and class of its own); the real kube-scheduler allocates, kwok runs the pods.

Shapes: a pool republished whose new generation is not complete yet (held, named as being
updated, released once the rest is published); a pool incomplete from the start; a pool
republished complete with fewer devices than the old generation (the old devices are not
counted: the gang stays gated whole, never half-placed).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from cogate.localcluster import example

from .kube import condition, create_pod_group, group_pods, hold_gated, running, status, wait_for

pytestmark = pytest.mark.e2e

GROUP, VERSION = "resource.k8s.io", "v1"


def rslice(name: str, driver: str, node: str, devices: list[str], generation: int, count: int) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
                     "devices": [{"name": d, "attributes": {"model": {"string": "a100"}}} for d in devices]}}


# ``dra``: this test's driver and DeviceClass, the fixture of test_devices.py
from .test_devices import dra  # noqa: E402, F401


def gang(kube, namespace: str, driver: str, size: int) -> None:
    """PodGroup ``g`` of ``size`` members, each claiming one device of ``driver``'s class from a template."""
    client.CustomObjectsApi(kube).create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaimTemplate", "metadata": {"name": "one"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": driver}}]}}}})
    create_pod_group(kube, example.pod_group("g", size, namespace=namespace, timeout_seconds=None))
    core = client.CoreV1Api(kube)
    for i in range(size):
        tpl = example.pod_template("g", cpu="1", app="g")
        tpl["metadata"]["name"] = f"g-{i}"
        tpl["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one"}]
        tpl["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})


def held_saying(kube, namespace: str, *words: str) -> dict[str, Any]:
    def said():
        c = condition(status(kube, namespace, "g"), "Released")
        return c if c and c["status"] == "False" and all(w in c["message"] for w in words) else None

    try:
        return wait_for(said, 30, what=f"Released=False saying {words}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; Released: {condition(status(kube, namespace, 'g'), 'Released')}") from None


def runs_whole(kube, namespace: str, size: int) -> None:
    wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "g")) == size, 60,
             what=f"all {size} Running")
    claims = client.CustomObjectsApi(kube).list_namespaced_custom_object(GROUP, VERSION, namespace,
                                                                         "resourceclaims")["items"]
    devices = [r["device"] for c in claims for r in c["status"]["allocation"]["devices"]["results"]]
    assert len(set(devices)) == size, devices
    released = condition(status(kube, namespace, "g"), "Released")
    assert released["status"] == "True" and "being updated" not in released["message"], released


@pytest.mark.parametrize("old", [2, 0])
def test_a_pool_mid_update_holds_the_gang_and_says_so_until_complete(stack, kube, namespace, only_nodes, dra, old):
    """``old`` devices in generation 1 (0: the pool is new), then generation 2 published in 2
    slices, the first with 2 devices: the pool is incomplete, kube-scheduler allocates nothing
    from it, so a gang of 2 stays gated whole and is told the pool is being updated; the second
    slice (1 device) completes it and the gang runs."""
    driver, create = dra
    (n1,) = only_nodes(1, cpu="16", memory="32Gi", kwok_taint=False)
    if old:
        create("resourceslices", rslice(f"{namespace}-g1", driver, n1, [f"old-{i}" for i in range(old)], 1, 1))
    create("resourceslices", rslice(f"{namespace}-g2a", driver, n1, ["new-0", "new-1"], 2, 2))
    gang(kube, namespace, driver, 2)
    ignored = "; 1 older slice ignored" if old else ""
    held_saying(kube, namespace, "device pools being updated",
                f"pool {n1} of {driver} (generation 2: 1 of 2 slices published{ignored})")
    hold_gated(kube, namespace, "g", 4.0, 2)
    create("resourceslices", rslice(f"{namespace}-g2b", driver, n1, ["new-2"], 2, 2))
    runs_whole(kube, namespace, 2)
    claims = client.CustomObjectsApi(kube).list_namespaced_custom_object(GROUP, VERSION, namespace,
                                                                         "resourceclaims")["items"]
    assert all(r["device"].startswith("new-") for c in claims for r in c["status"]["allocation"]["devices"]["results"])


def test_a_pool_republished_with_fewer_devices_counts_only_the_new_ones(stack, kube, namespace, only_nodes, dra):
    """Generation 1 had 3 devices; generation 2 (complete, 1 slice) has 1. A gang of 2 fits the
    old count, not the new: it stays gated whole (kube-scheduler would place one member only),
    the message says a device is short; a second device in generation 3 releases it."""
    driver, create = dra
    (n1,) = only_nodes(1, cpu="16", memory="32Gi", kwok_taint=False)
    create("resourceslices", rslice(f"{namespace}-g1", driver, n1, ["old-0", "old-1", "old-2"], 1, 1))
    create("resourceslices", rslice(f"{namespace}-g2", driver, n1, ["new-0"], 2, 1))
    gang(kube, namespace, driver, 2)
    c = held_saying(kube, namespace, f"{driver} devices short by 1")
    assert "being updated" not in c["message"], c
    hold_gated(kube, namespace, "g", 4.0, 2)
    create("resourceslices", rslice(f"{namespace}-g3", driver, n1, ["new-0", "new-1"], 3, 1))
    runs_whole(kube, namespace, 2)
