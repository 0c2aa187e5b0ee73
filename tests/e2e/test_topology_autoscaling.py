"""A ProvisioningRequest confined to a topology domain (issue 32 item 2), end to end with the real
cluster-autoscaler 1.36.1 (kwok provider) and cogate asking with the all-or-nothing class.

The session's autoscaled cluster (tests/e2e/conftest.py) runs, for this module only, three more node
groups (:data:`RACK_GROUPS`) whose nodes select with ``cogate.dev/node-group: racks``: ``rack-a``
(template labelled ``example.com/rack: ra``), ``rack-b`` (``example.com/rack: rb``) and ``unracked``
(no rack label); all 0 to 4 nodes of 16 CPU. The autoscaler is restarted with them at the start and
without them at the end (the kwok provider reads its templates at start). A new node takes one member
of 8 CPU (the autoscaler's simulated node carries a kube-proxy pod of 100 millicores). Each test adds
its own existing nodes (``ra-*``, ``rb-*``: 10 or 20 CPU, no node group) and the gang requires
``example.com/rack`` with no levels configured (a domain is the nodes sharing one value of it):

- no rack holds the gang; the closest one (rb, the most members now) is grown: its request's
  template asks for ``example.com/rack In [rb]``, only ``rack-b`` grows, the whole gang binds in rb,
  and the PodGroup says where it asked and where it went (asked without the rack, the autoscaler
  could as well have grown ``rack-a`` or ``unracked``, three groups of one shape);
- the node group the members may use has no rack label (the gang selects ``autoscaled``): cogate still
  asks for nodes in the closest rack, no node group can give one, so no node is added, and the
  PodGroup says ``CapacityIsNotFound`` for new nodes in that rack while the gang stays gated whole;
- an exclusive gang whose bigger rack holds another gang's member: the request asks for the only
  rack free of other gangs (rb, though ra holds more of it now), only ``rack-b`` grows, the gang binds
  there and the other gang's rack gets nothing.

Cost: the file took 65 s and 85 s in two runs alone on a shared 2-core machine (``--durations``: 25 to
41 s setting up, the autoscaled cluster's start included; calls 17 to 21 s; 13 s restoring the
session's autoscaler at the end).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from cogate.api import POD_GROUP_LABEL
from cogate.controller.provisioning import provreq
from cogate.controller.topology import constraints as t
from cogate.localcluster import autoscaler as ca
from cogate.localcluster import example
from cogate.localcluster import nodes as fake_nodes
from cogate.localcluster.stack import CogateStack

from .conftest import AUTOSCALER_SPEC
from .kube import bound, condition, events_for, gated, group_pods, status, wait_for

pytestmark = pytest.mark.e2e

RACK = "example.com/rack"
POOL = "racks"
#: Seconds a "nothing more happens" check watches (the autoscaler loops every second).
HOLD = 8.0
GIB = 2**30
RACK_GROUPS = (
    ca.NodeGroup("rack-a", cpu=16_000, memory=64 * GIB, labels={ca.GROUP_LABEL: POOL, RACK: "ra"}, max=4),
    ca.NodeGroup("rack-b", cpu=16_000, memory=64 * GIB, labels={ca.GROUP_LABEL: POOL, RACK: "rb"}, max=4),
    ca.NodeGroup("unracked", cpu=16_000, memory=64 * GIB, labels={ca.GROUP_LABEL: POOL}, max=4),
)
SPEC = dataclasses.replace(AUTOSCALER_SPEC, groups=(*AUTOSCALER_SPEC.groups, *RACK_GROUPS))
GROUPS = tuple(g.name for g in SPEC.groups)


def _run_with(cluster: Any, api: client.ApiClient, spec: ca.AutoscalerSpec) -> None:
    """The autoscaler restarted on ``spec``'s node groups, none of their nodes left."""
    cluster.autoscaler = spec
    ca.prepare(cluster, spec, cluster.workdir)
    ca.reset(cluster, api, spec)


@pytest.fixture(scope="module")
def racks(autoscaled_cluster, tmp_path_factory) -> Iterator[Any]:
    """The autoscaled cluster with :data:`RACK_GROUPS` too, and cogate asking for nodes on it."""
    api = autoscaled_cluster.api_client()
    saved = autoscaled_cluster.autoscaler
    _run_with(autoscaled_cluster, api, SPEC)
    s = CogateStack(autoscaled_cluster, Path(tmp_path_factory.mktemp("cogate-topology-autoscaling")),
                    controller_args=("--provisioning-class", provreq.ATOMIC_CLASS))
    try:
        s.start()
        yield autoscaled_cluster
    finally:
        s.stop()
        ca.reset(autoscaled_cluster, api, SPEC)  # the nodes of every group of SPEC go with it
        _run_with(autoscaled_cluster, api, saved)
        api.close()


@dataclasses.dataclass
class Case:
    api: client.ApiClient
    namespace: str

    def nodes_of(self, group: str) -> set[str]:
        return {n.metadata.name for n in client.CoreV1Api(self.api).list_node().items
                if (n.metadata.annotations or {}).get(ca.NAME_ANNOTATION) == group}

    def grown(self) -> dict[str, int]:
        """Node group -> nodes it has now (groups with none left out)."""
        return {g: n for g in GROUPS if (n := len(self.nodes_of(g)))}


@pytest.fixture
def case(racks, request) -> Iterator[Case]:
    api = racks.api_client()
    name = f"tas-{request.node.name.removeprefix('test_')[:30].replace('_', '-').strip('-')}"
    client.CoreV1Api(api).create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield Case(api, name)
    finally:
        ca.reset(racks, api, SPEC, name)
        api.close()


@contextlib.contextmanager
def existing_nodes(c: Case, nodes: Mapping[str, tuple[str, Mapping[str, str]]]) -> Iterator[None]:
    """Nodes ``name -> (cpu, labels)`` outside every node group, for the ``with`` block."""
    core = client.CoreV1Api(c.api)
    for name, (cpu, labels) in nodes.items():
        core.create_node(fake_nodes.node_manifest(name, cpu=cpu, memory="32Gi", pods=110, kwok_taint=False,
                                                  labels=dict(labels)))
    try:
        fake_nodes.wait_nodes_ready(c.api, list(nodes), timeout=60)
        yield
    finally:
        for name in nodes:
            core.delete_node(name)


def gang(c: Case, name: str, size: int, cpu: str, pool: str, annotations: Mapping[str, str],
         node_selector: Mapping[str, str] | None = None) -> None:
    pg = example.pod_group(name, size, namespace=c.namespace, timeout_seconds=None)
    pg["metadata"]["annotations"] = dict(annotations)
    client.CustomObjectsApi(c.api).create_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", c.namespace, "podgroups", pg)
    core = client.CoreV1Api(c.api)
    for i in range(size):
        core.create_namespaced_pod(c.namespace, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-{i}", "labels": {POD_GROUP_LABEL: name, "app": name}},
            "spec": {"nodeSelector": {ca.GROUP_LABEL: pool, **(node_selector or {})},
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}})


def request_of(c: Case, group: str) -> tuple[dict[str, Any], list[Any]]:
    """The group's standing request and its PodTemplates, once there."""
    def standing():
        got = client.CustomObjectsApi(c.api).list_namespaced_custom_object(
            provreq.GROUP, provreq.VERSION, c.namespace, provreq.PLURAL,
            label_selector=f"{provreq.GROUP_LABEL}={group}")["items"]
        return [r for r in got if not r["metadata"].get("deletionTimestamp")] or None

    (r,) = wait_for(standing, 60, what=f"{group}: a ProvisioningRequest")
    tpls = client.CoreV1Api(c.api).list_namespaced_pod_template(
        c.namespace, label_selector=f"{provreq.GROUP_LABEL}={group}").items
    return r, tpls


def required_terms(tpl: Any) -> list[dict[str, list[str]]]:
    """The template's required node affinity terms as ``{key + ' ' + operator: values}``."""
    terms = tpl.template.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    return [{f"{e.key} {e.operator}": list(e.values or []) for e in (term.match_expressions or [])}
            for term in terms.node_selector_terms]


def bound_in(c: Case, group: str, size: int) -> dict[str, str]:
    """Once all ``size`` members are bound: member -> the rack label of its node ('' for none)."""
    pods = wait_for(lambda: (ps := group_pods(c.api, c.namespace, group)) and len(ps) == size
                    and all(bound(p) for p in ps) and ps, 120, what=f"{group}: {size} members bound")
    nodes = {n.metadata.name: n.metadata.labels or {} for n in client.CoreV1Api(c.api).list_node().items}
    return {p.metadata.name: nodes[p.spec.node_name].get(RACK, "") for p in pods}


def asked_events(c: Case, group: str) -> list[str]:
    """Messages of the group's ``ProvisioningRequested`` events (what was asked, and why)."""
    return [e.message for e in events_for(c.api, c.namespace, group) if e.reason == "ProvisioningRequested"]


def hold(seconds: float, check) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        check()
        time.sleep(0.5)


def test_the_closest_rack_is_grown_and_the_gang_binds_in_it(case):
    """Four members of 8 CPU; ra has one node of 10 CPU (holds 1), rb two (hold 2): no rack holds 4.
    rb is the closest: the request asks for the 2 members rb lacks, on new nodes labelled rb."""
    c = case
    with existing_nodes(c, {"ra-0": ("10", {ca.GROUP_LABEL: POOL, RACK: "ra"}),
                            "rb-0": ("10", {ca.GROUP_LABEL: POOL, RACK: "rb"}),
                            "rb-1": ("10", {ca.GROUP_LABEL: POOL, RACK: "rb"})}):
        gang(c, "train", 4, "8", POOL, {t.REQUIRED: RACK})
        r, tpls = request_of(c, "train")
        assert [ps["count"] for ps in r["spec"]["podSets"]] == [2], r["spec"]
        assert r["metadata"]["annotations"][t.DOMAIN_ANNOTATION] == f"{RACK}=rb", r["metadata"]
        (terms,) = [required_terms(tp) for tp in tpls]
        assert [term[f"{RACK} In"] for term in terms] == [["rb"]], terms
        assert all(set(term["kubernetes.io/hostname NotIn"]) >= {"ra-0", "rb-0", "rb-1"} for term in terms), terms
        prov = condition(status(c.api, c.namespace, "train"), "Provisioning")
        assert prov is not None and "2 pods on new nodes in rack rb" in prov["message"], prov
        racks_of = bound_in(c, "train", 4)
        assert set(racks_of.values()) == {"rb"}, racks_of
        assert c.grown() == {"rack-b": 2}, c.grown()
        st = status(c.api, c.namespace, "train")
        released = condition(st, "Released")
        assert released["status"] == "True" and "in rack rb" in released["message"], released
        prov = wait_for(lambda: (p := condition(status(c.api, c.namespace, "train"), "Provisioning"))
                        and p["reason"] == "Consumed" and p, 30, what="Provisioning Consumed")
        assert prov["status"] == "False", prov
        (asked,) = asked_events(c, "train")
        assert asked.startswith("asked cluster-autoscaler for 2 pods on new nodes in rack rb ("), asked
        assert "rack: no rack holds 4; rb fits 2" in asked, asked
        hold(3, lambda: c.grown() == {"rack-b": 2} or pytest.fail(f"more nodes: {c.grown()}"))


def test_a_node_group_without_the_rack_label_is_not_grown_and_the_status_says_so(case):
    """The members select the ``autoscaled`` group, whose nodes carry no rack label; the only
    existing node of that pool (ra-0, 10 CPU) is in rack ra and holds 1 of 2. cogate asks for one
    node in rack ra, as for any required rack: a node without the label would be in no rack and
    could never hold a member. No group can give one: the autoscaler answers CapacityIsNotFound,
    adds nothing, and the gang stays gated whole, saying so."""
    c = case
    with existing_nodes(c, {"ra-0": ("10", {ca.GROUP_LABEL: "autoscaled", RACK: "ra"})}):
        gang(c, "flat", 2, "8", "autoscaled", {t.REQUIRED: RACK})
        r, tpls = request_of(c, "flat")
        assert [ps["count"] for ps in r["spec"]["podSets"]] == [1], r["spec"]
        assert [term[f"{RACK} In"] for tp in tpls for term in required_terms(tp)] == [["ra"]]
        prov = wait_for(lambda: (p := condition(status(c.api, c.namespace, "flat"), "Provisioning"))
                        and p["reason"] == "NotProvisioned" and p, 60, what="Provisioning NotProvisioned")
        assert prov["status"] == "True", prov
        assert "1 pod on new nodes in rack ra" in prov["message"] and "CapacityIsNotFound" in prov["message"], prov

        def nothing():
            assert c.grown() == {}, c.grown()
            assert all(gated(p) for p in group_pods(c.api, c.namespace, "flat"))
        hold(HOLD, nothing)
        released = condition(status(c.api, c.namespace, "flat"), "Released")
        assert released["status"] == "False" and "rack: no rack holds 2; ra fits 1" in released["message"], released


def test_an_exclusive_gang_grows_the_only_rack_free_of_other_gangs(case):
    """ra (one node of 20 CPU) runs a member of gang ``other``; rb has one node of 10 CPU. The
    exclusive gang of 3 x 8 CPU would fit 2 in ra now, 1 in rb: ra is refused (held by another gang),
    so rb is grown by the 2 it lacks and the gang binds there; ra's group gets no node."""
    c = case
    with existing_nodes(c, {"ra-0": ("20", {ca.GROUP_LABEL: POOL, RACK: "ra"}),
                            "rb-0": ("10", {ca.GROUP_LABEL: POOL, RACK: "rb"})}):
        gang(c, "other", 1, "2", POOL, {}, node_selector={RACK: "ra"})
        assert bound_in(c, "other", 1) == {"other-0": "ra"}
        gang(c, "solo", 3, "8", POOL, {t.REQUIRED: RACK, t.EXCLUSIVE: "true"})
        r, tpls = request_of(c, "solo")
        assert [ps["count"] for ps in r["spec"]["podSets"]] == [2], r["spec"]
        assert [term[f"{RACK} In"] for tp in tpls for term in required_terms(tp)] == [["rb"]]
        racks_of = bound_in(c, "solo", 3)
        assert set(racks_of.values()) == {"rb"}, racks_of
        assert c.grown() == {"rack-b": 2}, c.grown()
        released = condition(status(c.api, c.namespace, "solo"), "Released")
        assert released["status"] == "True" and "in rack rb" in released["message"], released
        assert bound_in(c, "other", 1) == {"other-0": "ra"}
        (asked,) = asked_events(c, "solo")
        assert asked.startswith("asked cluster-autoscaler for 2 pods on new nodes in rack rb ("), asked
        assert "ra refused (" in asked and "rb fits 1" in asked, asked
