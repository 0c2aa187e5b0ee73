"""Gangs that ask for DRA devices (issue 17), end to end on the local control plane.

No driver runs: ResourceSlices and DeviceClasses are plain API objects the test makes; the real
kube-scheduler's DynamicResources plugin allocates devices from them and writes the allocation
into the claims, and kwok runs the pods. Each test uses a driver and class of its own (named
after its namespace), so slices of other tests never match.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from cogate.localcluster import example

from .kube import condition, create_pod_group, group_pods, hold_gated, running, status, wait_for

pytestmark = pytest.mark.e2e

GROUP, VERSION = "resource.k8s.io", "v1"


def _slice(name: str, driver: str, node: str, devices: int, generation: int = 1) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "a100"}}}
                                 for i in range(devices)]}}


@pytest.fixture
def dra(kube, namespace):
    """``(driver, class)`` of this test; the cluster-scoped objects it makes are deleted after it."""
    custom = client.CustomObjectsApi(kube)
    driver = f"{namespace}.example.com"
    made: list[tuple[str, str]] = []

    def create(plural: str, body: dict[str, Any]) -> dict[str, Any]:
        made.append((plural, body["metadata"]["name"]))
        return custom.create_cluster_custom_object(GROUP, VERSION, plural, body)

    create("deviceclasses", {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceClass", "metadata": {"name": driver},
                             "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}})
    try:
        yield driver, create
    finally:
        for plural, name in reversed(made):
            try:
                custom.delete_cluster_custom_object(GROUP, VERSION, plural, name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise


def test_the_api_server_serves_resource_k8s_io_v1(kube):
    groups = {g.name: [v.version for v in g.versions] for g in client.ApisApi(kube).get_api_versions().groups}
    assert VERSION in groups.get(GROUP, []), f"resource.k8s.io versions served: {groups.get(GROUP)}"


def test_gang_short_of_devices_stays_gated_whole_and_is_released_when_a_third_device_appears(
        stack, kube, namespace, only_nodes, dra):
    """The issue's trial: two nodes with one device each, a gang of 3 members each claiming one
    device from a template, CPU plentiful. It was half-placed (2 Running, 1 Pending) while the
    PodGroup said Released; it must stay gated whole, say which devices are short, and start when
    a third device is published."""
    driver, create = dra
    n1, n2 = only_nodes(2, cpu="16", memory="32Gi", kwok_taint=False)
    create("resourceslices", _slice(f"{namespace}-a", driver, n1, 1))
    create("resourceslices", _slice(f"{namespace}-b", driver, n2, 1))
    client.CustomObjectsApi(kube).create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": driver}}]}}}})
    create_pod_group(kube, example.pod_group("g", 3, namespace=namespace, timeout_seconds=None))
    core = client.CoreV1Api(kube)
    for i in range(3):
        tpl = example.pod_template("g", cpu="1", app="g")
        tpl["metadata"]["name"] = f"g-{i}"
        tpl["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        tpl["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})

    def waiting():
        c = condition(status(kube, namespace, "g"), "Released")
        return c if c and c["status"] == "False" and f"{driver} devices short by 1" in c["message"] else None

    cond = wait_for(waiting, 30, what="Released=False naming the device shortage")
    assert cond["reason"] == "InsufficientCapacity" and "fits 2 of 3 even with every eligible node empty" in cond[
        "message"], cond
    hold_gated(kube, namespace, "g", 4.0, 3)

    # A third device on n1: the gang starts whole, one device per member, two of them on n1.
    custom = client.CustomObjectsApi(kube)
    custom.replace_cluster_custom_object(GROUP, VERSION, "resourceslices", f"{namespace}-a", {
        **_slice(f"{namespace}-a", driver, n1, 2, generation=2),
        "metadata": {"name": f"{namespace}-a",
                     "resourceVersion": custom.get_cluster_custom_object(
                         GROUP, VERSION, "resourceslices", f"{namespace}-a")["metadata"]["resourceVersion"]}})
    wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "g")) == 3, 60, what="all 3 Running")
    assert sorted(p.spec.node_name for p in group_pods(kube, namespace, "g")) == sorted([n1, n1, n2])
    claims = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims")["items"]
    devices = [(r["pool"], r["device"]) for c in claims for r in c["status"]["allocation"]["devices"]["results"]]
    assert len(claims) == 3 and len(set(devices)) == 3, f"each member got a device of its own: {devices}"
    released = condition(status(kube, namespace, "g"), "Released")
    assert released["status"] == "True" and "not checked" not in released["message"], released


def test_claims_cogate_cannot_check_hold_the_group_and_say_which(stack, kube, namespace, only_nodes, dra):
    """A claim with a matchAttribute constraint (not modelled): the group stays gated by default,
    naming the member, the claim and the feature."""
    driver, create = dra
    (n1,) = only_nodes(1, cpu="16", memory="32Gi", kwok_taint=False)
    create("resourceslices", _slice(f"{namespace}-a", driver, n1, 2))
    client.CustomObjectsApi(kube).create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim", "metadata": {"name": "pair"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": driver, "count": 2}}],
                             "constraints": [{"matchAttribute": f"{driver}/model"}]}}})
    create_pod_group(kube, example.pod_group("u", 1, namespace=namespace, timeout_seconds=None))
    tpl = example.pod_template("u", cpu="1", app="u")
    tpl["metadata"]["name"] = "u-0"
    tpl["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "pair"}]
    client.CoreV1Api(kube).create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})

    def held():
        c = condition(status(kube, namespace, "u"), "Released")
        return c if c and c["status"] == "False" and "resource claim pair: constraints (matchAttribute)" in c[
            "message"] else None

    cond = wait_for(held, 30, what="Released=False naming the unchecked claim")
    assert "u-0" in cond["message"] and "--unchecked-constraints=hold-devices" in cond["message"], cond
    hold_gated(kube, namespace, "u", 3.0, 1)


def test_gang_asking_for_an_extended_resource_backed_by_dra_is_released_and_runs(stack, kube, namespace, only_nodes,
                                                                                 dra):
    """KEP-5004 (DRAExtendedResource, beta and on in 1.36): pods keep asking for ``<domain>/gpu: 1``
    while no node's allocatable has it; a DeviceClass names it as its extendedResourceName.
    cogate said "never fits" (ExceedsClusterCapacity); kube-scheduler places such pods on the
    devices of the class. 4 devices on 2 nodes, a gang of 4: released whole, every member Running
    with a device; a fifth member beyond the devices waits."""
    driver, create = dra
    resource = f"{driver}/gpu"
    create("deviceclasses", {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceClass",
                             "metadata": {"name": f"ext.{driver}"},
                             "spec": {"extendedResourceName": resource,
                                      "selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}})
    n1, n2 = only_nodes(2, cpu="16", memory="32Gi", kwok_taint=False)
    create("resourceslices", _slice(f"{namespace}-a", driver, n1, 2))
    create("resourceslices", _slice(f"{namespace}-b", driver, n2, 2))
    create_pod_group(kube, example.pod_group("x", 4, namespace=namespace, timeout_seconds=None))
    core = client.CoreV1Api(kube)
    for i in range(5):
        tpl = example.pod_template("x", cpu="1", app="x")
        tpl["metadata"]["name"] = f"x-{i}"
        res = tpl["spec"]["containers"][0]["resources"]
        res["requests"][resource] = res["limits"][resource] = "1"
        core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})
    try:
        wait_for(lambda: sum(running(p) for p in group_pods(kube, namespace, "x")) == 4, 60, what="4 Running")
    except AssertionError:
        raise AssertionError(f"{status(kube, namespace, 'x')}; pods: {[(p.metadata.name, p.spec.node_name, p.spec.scheduling_gates, p.status.conditions) for p in group_pods(kube, namespace, 'x')]}") from None
    ps = group_pods(kube, namespace, "x")
    assert sorted(p.spec.node_name for p in ps if p.spec.node_name) == sorted([n1, n1, n2, n2])
    assert all(resource not in (core.read_node(n).status.allocatable or {}) for n in (n1, n2))
    claims = client.CustomObjectsApi(kube).list_namespaced_custom_object(GROUP, VERSION, namespace,
                                                                        "resourceclaims")["items"]
    devices = {(r["pool"], r["device"]) for c in claims for r in c["status"]["allocation"]["devices"]["results"]}
    assert len(devices) == 4, f"kube-scheduler gave each running member a device: {devices}"

    def fifth_waits():
        c = condition(status(kube, namespace, "x"), "MembersWaiting")
        return c if c and f"{resource} short by 1" in c["message"] else None

    try:
        cond = wait_for(fifth_waits, 30, what="the fifth member waits for a device")
    except AssertionError as e:
        raise AssertionError(f"{e}; status: {status(kube, namespace, 'x')}") from None
    assert "x-4" in cond["message"] or "1 member" in cond["message"], cond
    (fifth,) = [p for p in group_pods(kube, namespace, "x") if not running(p)]
    assert fifth.spec.scheduling_gates, "the member beyond the devices stays gated"
