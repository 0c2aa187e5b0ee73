"""The real cluster-autoscaler (v1.36.1, kwok cloud provider) beside the local control plane.

``LocalCluster(autoscaler=...)`` runs it; ``cogate dev up --autoscaler`` turns it on with
:data:`AUTOSCALED`. The binary is built from the source snapshot in the repository's ``third_party/``
(:data:`versions.SOURCES`, :func:`cogate.localcluster.build.source_dir`) only when asked for.

How the kwok provider works (its source, ``cloudprovider/kwok/``): node groups come from template
Nodes in a ConfigMap (:func:`templates_config_map`), configured by another ConfigMap
(:func:`provider_config_map`), both in the namespace ``POD_NAMESPACE`` names. A scale-up *creates
Node objects* named ``<group>-<5 random characters>``, copies of the group's template (its labels,
annotations, taints, capacity and allocatable) plus the annotations
``cluster-autoscaler.kwok.nodegroup/name: <group>`` and ``kwok.x-k8s.io/node: fake``, which the
cluster's own kwok selects: kwok then runs them like every other fake node (Ready, Lease, pods
Running). A scale-down deletes the Node. Before every loop (``Refresh``) the provider sets each
group's target size to the number of Nodes carrying its name annotation, so deleting a group's
Nodes (:func:`delete_group_nodes`) resets the group: the autoscaler's target follows.

Two behaviours to know (both from the source, both seen here):

- The template a scale-up simulates is the provider's template Node *plus a kube-proxy pod
  requesting 100 millicores* (``cloudprovider.BuildKubeProxy``, ``KubeProxyCpuRequestMillis``),
  as long as the group has no node Ready for more than a minute (``stabilizationDelay`` of the
  ``MixedTemplateNodeInfoProvider``; after that it simulates such a real node, and caches it for
  ``--node-info-cache-expire-time``). So on a fresh group of 16-CPU nodes a pod of 16 CPU never
  fits a new node, and two pods of 8 CPU are planned on two new nodes, not one.
- On SIGTERM the autoscaler deletes its status ConfigMap and every Node of its groups
  (``StaticAutoscaler.ExitCleanUp`` -> ``KwokCloudProvider.Cleanup``).

Pure part: :class:`NodeGroup`, :class:`AutoscalerSpec`, the manifests and the command line.
Process part: :func:`prepare` (the ProvisioningRequest CRD, the namespace, the ConfigMaps), the
process itself is started by :class:`~cogate.localcluster.cluster.LocalCluster` like its other
components; :func:`view` reads the autoscaler's own account of its groups (its status ConfigMap).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import yaml

from . import build
from .nodes import node_manifest

__all__ = [
    "NodeGroup",
    "AutoscalerSpec",
    "AUTOSCALED",
    "GROUP_LABEL",
    "NODE_GROUP_LABEL_KEY",
    "NAME_ANNOTATION",
    "PROVISIONING_CLASS",
    "PROVISIONING_REQUEST_CRD",
    "template_node",
    "provider_config_map",
    "templates_config_map",
    "command_line",
    "environment",
    "group_of",
    "crd_path",
    "prepare",
    "view",
    "GroupView",
    "parse_status",
    "delete_group_nodes",
    "reset",
    "AutoscalerError",
]

#: Label key the kwok provider groups template Nodes by (``nodegroups.fromNodeLabelKey``).
NODE_GROUP_LABEL_KEY = "kwok-nodegroup"
#: Annotation the kwok provider puts on every Node it creates: the node group's name.
NAME_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/name"
MIN_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/min-count"
MAX_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/max-count"
DESIRED_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/desired-count"
#: The label ``cogate dev up --autoscaler`` gives its group's nodes (key).
GROUP_LABEL = "cogate.dev/node-group"
#: The ProvisioningRequest class that scales up only if every pod of the request fits.
PROVISIONING_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
#: Name of the ProvisioningRequest CRD (``autoscaling.x-k8s.io/v1``).
PROVISIONING_REQUEST_CRD = "provisioningrequests.autoscaling.x-k8s.io"
#: The ConfigMaps the kwok provider reads (its defaults; ``KWOK_PROVIDER_CONFIGMAP`` unset).
PROVIDER_CONFIG = "kwok-provider-config"
TEMPLATES_CONFIG = "kwok-provider-templates"
#: The status ConfigMap the autoscaler writes every loop (``--status-config-map-name`` default).
STATUS_CONFIG = "cluster-autoscaler-status"

_GROUP_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
#: A created Node is named ``<group>-<5 characters>``; the group name is also a label value (63).
_GROUP_NAME_MAX = 57
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class AutoscalerError(RuntimeError):
    """The autoscaler could not be prepared, or its view did not reach what was awaited; the
    message says what and shows the last view."""


def _labels(value: Mapping[str, str], what: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{what}: expected a mapping of strings, got {value!r}")
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or not k or not isinstance(v, str):
            raise ValueError(f"{what}: keys and values must be strings (keys non-empty), got {k!r}: {v!r}")
        out[k] = v
    return out


@dataclass(frozen=True)
class NodeGroup:
    """One node group of the kwok provider: the shape of its nodes and its size bounds.

    ``name``: DNS-1123 label of at most 57 characters (nodes are named ``<name>-<5 characters>``;
    it is also the value of the template's ``kwok-nodegroup`` label). ``cpu``: allocatable CPU
    per node in millicores; ``memory``: allocatable memory per node in bytes; ``pods``: pod
    slots per node (capacity equals allocatable). ``labels``, ``taints`` (dicts with ``key``,
    optional ``value``, ``effect``): copied to every node of the group. ``min``/``max``: the
    group's size bounds (``0 <= min <= max``); a group starts with no node: the provider's
    target follows the Nodes that exist (see the module docstring), the autoscaler adds nodes
    up to ``max`` for pods that need them and, with ``--enforce-node-group-min-size`` (not
    set here), up to ``min``.

    Raises ``ValueError`` naming the field on bad input.
    """

    name: str
    cpu: int
    memory: int
    pods: int = 110
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()
    min: int = 0
    max: int = 4

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or len(self.name) > _GROUP_NAME_MAX or not _GROUP_NAME.match(self.name):
            raise ValueError(f"name: {self.name!r} is not a DNS-1123 label of at most {_GROUP_NAME_MAX} characters")
        for what in ("cpu", "memory", "pods"):
            value = getattr(self, what)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{what}: expected a positive integer "
                                 f"({'millicores' if what == 'cpu' else 'bytes' if what == 'memory' else 'pods'}),"
                                 f" got {value!r}")
        for what in ("min", "max"):
            value = getattr(self, what)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{what}: expected a non-negative integer, got {value!r}")
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        labels = _labels(self.labels, "labels")
        if labels.get(NODE_GROUP_LABEL_KEY, self.name) != self.name:
            raise ValueError(f"labels: {NODE_GROUP_LABEL_KEY} is the group's name ({self.name!r}), "
                             f"got {labels[NODE_GROUP_LABEL_KEY]!r}")
        object.__setattr__(self, "labels", labels)
        taints = []
        for i, t in enumerate(self.taints):
            if not isinstance(t, Mapping) or not isinstance(t.get("key"), str) or not t.get("key"):
                raise ValueError(f"taints[{i}]: expected a mapping with a non-empty 'key', got {t!r}")
            if t.get("effect") not in _EFFECTS:
                raise ValueError(f"taints[{i}].effect: expected one of {_EFFECTS}, got {t.get('effect')!r}")
            taints.append({k: str(v) for k, v in t.items() if k in ("key", "value", "effect") and v not in (None, "")})
        object.__setattr__(self, "taints", tuple(taints))


#: The group of ``cogate dev up --autoscaler``: nodes of 16 CPU, 64 GiB, 110 pods, labelled
#: ``cogate.dev/node-group=autoscaled``, from 0 to 4 nodes.
AUTOSCALED = NodeGroup("autoscaled", cpu=16_000, memory=64 * 2**30, pods=110,
                       labels={GROUP_LABEL: "autoscaled"}, min=0, max=4)


def _check_seconds(value: float, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{what}: expected non-negative seconds, got {value!r}")


def _duration(seconds: float) -> str:
    """A Go duration flag value: ``90`` -> ``90s``, ``0.5`` -> ``0.5s``."""
    return f"{seconds:g}s"


@dataclass(frozen=True)
class AutoscalerSpec:
    """How :class:`~cogate.localcluster.cluster.LocalCluster` runs the autoscaler.

    ``groups``: the node groups (at least one, distinct names). ``namespace``: where its
    ConfigMaps live (``POD_NAMESPACE``, ``--namespace``). ``scan_interval``: seconds between
    loops (``--scan-interval``; with ``--frequent-loops-enabled``, its default, a productive
    loop also triggers the next one sooner). ``scale_down``: False passes
    ``--scale-down-enabled=false`` (deprecated in 1.36 but honoured): no node is ever removed,
    what the tests want (they reset by deleting nodes themselves, and a scale-down would
    change the counts they assert). ``scale_down_unneeded_time``/``scale_down_delay_after_add``:
    seconds a node must be unneeded before removal, and after a scale-up before any scale-down
    is considered (defaults 600 s each, the autoscaler's). ``max_node_provision_time``: seconds
    a created node may take to become Ready before the autoscaler gives up on it.
    ``extra_args``: more flags, appended last.
    """

    groups: tuple[NodeGroup, ...] = (AUTOSCALED,)
    namespace: str = "cogate-autoscaler"
    scan_interval: float = 1.0
    scale_down: bool = True
    scale_down_unneeded_time: float = 600.0
    scale_down_delay_after_add: float = 600.0
    max_node_provision_time: float = 120.0
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        groups = tuple(self.groups)
        if not groups or not all(isinstance(g, NodeGroup) for g in groups):
            raise ValueError(f"groups: expected one or more NodeGroup values, got {self.groups!r}")
        names = [g.name for g in groups]
        if len(set(names)) != len(names):
            raise ValueError(f"groups: names must be distinct, got {names}")
        object.__setattr__(self, "groups", groups)
        if not isinstance(self.namespace, str) or not _GROUP_NAME.match(self.namespace) or len(self.namespace) > 63:
            raise ValueError(f"namespace: {self.namespace!r} is not a DNS-1123 label")
        if isinstance(self.scan_interval, bool) or not isinstance(self.scan_interval, (int, float)) \
                or self.scan_interval <= 0:
            raise ValueError(f"scan_interval: expected positive seconds, got {self.scan_interval!r}")
        for what in ("scale_down_unneeded_time", "scale_down_delay_after_add", "max_node_provision_time"):
            _check_seconds(getattr(self, what), what)
        object.__setattr__(self, "extra_args", tuple(str(a) for a in self.extra_args))

    def group(self, name: str) -> NodeGroup:
        """The group called ``name``; KeyError when there is none."""
        for g in self.groups:
            if g.name == name:
                return g
        raise KeyError(name)


def _cpu(millicores: int) -> str:
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


def template_node(group: NodeGroup) -> dict[str, Any]:
    """The template Node (dict) of ``group`` for the kwok provider's templates ConfigMap.

    Labels: ``type: kwok``, ``kubernetes.io/os: linux``, ``kubernetes.io/arch: amd64``,
    ``kwok-nodegroup: <group>`` and the group's labels. No ``kubernetes.io/hostname``: the
    provider copies the template's labels to every node it creates, so all of them would carry
    the template's hostname (kube-scheduler and cogate read a missing hostname label as the
    node's own domain; cogate falls back to the node name). Annotations: the provider's
    ``cluster-autoscaler.kwok.nodegroup/name|min-count|max-count|desired-count`` (desired =
    min; the provider's ``Refresh`` replaces it by the count of existing nodes anyway) and
    ``kwok.x-k8s.io/node: fake`` (so the cluster's kwok runs the nodes). Taints: the group's
    (no kwok taint). ``status.capacity`` = ``status.allocatable`` = cpu, memory, pods.
    """
    node = node_manifest(
        group.name, cpu=_cpu(group.cpu), memory=str(group.memory), pods=group.pods,
        labels={NODE_GROUP_LABEL_KEY: group.name, **group.labels}, taints=list(group.taints), kwok_taint=False,
        annotations={NAME_ANNOTATION: group.name, MIN_ANNOTATION: str(group.min),
                     MAX_ANNOTATION: str(group.max), DESIRED_ANNOTATION: str(group.min)})
    node["metadata"]["labels"].pop("kubernetes.io/hostname", None)
    return node


def provider_config_map(namespace: str) -> dict[str, Any]:
    """The ConfigMap ``kwok-provider-config`` (key ``config``): templates from the ConfigMap
    ``kwok-provider-templates`` (key ``templates``), groups by the ``kwok-nodegroup`` label, no
    ``kwok-provider`` taint on created nodes (``nodes.skipTaint``)."""
    config = {
        "apiVersion": "v1alpha1",
        "readNodesFrom": "configmap",
        "nodegroups": {"fromNodeLabelKey": NODE_GROUP_LABEL_KEY},
        "nodes": {"skipTaint": True},
        "configmap": {"name": TEMPLATES_CONFIG, "key": "templates"},
    }
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": PROVIDER_CONFIG, "namespace": namespace},
            "data": {"config": yaml.safe_dump(config, sort_keys=False)}}


def templates_config_map(groups: Sequence[NodeGroup], namespace: str) -> dict[str, Any]:
    """The ConfigMap ``kwok-provider-templates`` (key ``templates``): a ``v1`` ``List`` of the
    :func:`template_node` of each group, in order."""
    items = {"apiVersion": "v1", "kind": "List", "items": [template_node(g) for g in groups]}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": TEMPLATES_CONFIG, "namespace": namespace},
            "data": {"templates": yaml.safe_dump(items, sort_keys=False)}}


def command_line(binary: str | os.PathLike[str], kubeconfig: str | os.PathLike[str], spec: AutoscalerSpec,
                 port: int) -> list[str]:
    """argv of the autoscaler: kwok provider, ``spec``'s namespace and timings, no leader
    election, least-waste expander, ProvisioningRequests on, health check and metrics on
    ``127.0.0.1:<port>`` (``/health-check``, ``/metrics``), logs to stderr at ``--v=2``."""
    args = [
        str(binary), f"--kubeconfig={kubeconfig}", "--cloud-provider=kwok", f"--namespace={spec.namespace}",
        f"--address=127.0.0.1:{port}", f"--scan-interval={_duration(spec.scan_interval)}", "--leader-elect=false",
        "--expander=least-waste", f"--max-node-provision-time={_duration(spec.max_node_provision_time)}",
        "--enable-provisioning-requests=true",
        f"--scale-down-unneeded-time={_duration(spec.scale_down_unneeded_time)}",
        f"--scale-down-delay-after-add={_duration(spec.scale_down_delay_after_add)}",
    ]
    if not spec.scale_down:
        args.append("--scale-down-enabled=false")
    return [*args, "--logtostderr=true", "--v=2", *spec.extra_args]


def environment(base: Mapping[str, str], kubeconfig: str | os.PathLike[str], namespace: str) -> dict[str, str]:
    """The autoscaler's environment: ``base`` plus ``KWOK_PROVIDER_MODE=local`` (the provider reads
    the kubeconfig, not the in-cluster config), ``KUBECONFIG`` (which the provider reads itself:
    ``--kubeconfig`` alone makes it exit with "no configuration has been provided") and
    ``POD_NAMESPACE`` (where its ConfigMaps are)."""
    env = {k: v for k, v in base.items() if k != "KWOK_PROVIDER_CONFIGMAP"}
    env.update(KWOK_PROVIDER_MODE="local", KUBECONFIG=str(kubeconfig), POD_NAMESPACE=namespace)
    return env


def group_of(node: Mapping[str, Any]) -> str | None:
    """The node group a Node (dict) was created for by the kwok provider, else None."""
    return ((node.get("metadata") or {}).get("annotations") or {}).get(NAME_ANNOTATION)


@dataclass(frozen=True)
class GroupView:
    """The autoscaler's account of one group in its status ConfigMap: ``registered`` nodes
    (``health.nodeCounts.registered.total``), of which ``ready``; ``target``
    (``health.cloudProviderTarget``); ``unregistered`` (instances of the provider without a Node,
    ``nodeCounts.unregistered`` + ``longUnregistered``: a Node deleted behind the autoscaler's
    back stays one until its instance cache refreshes, every 2 min); ``time`` of the status (its
    ``time`` field, text)."""

    registered: int
    ready: int
    target: int
    unregistered: int
    time: str


def parse_status(text: str) -> dict[str, GroupView]:
    """The groups of the status ConfigMap's ``status`` key (YAML, ``clusterstate/api/types.go``
    ``ClusterAutoscalerStatus``); raises ValueError on text that is not such a status."""
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"not a cluster-autoscaler status: {text[:200]!r}")
    out = {}
    for g in data.get("nodeGroups") or []:
        health = g.get("health") or {}
        counts = health.get("nodeCounts") or {}
        registered = counts.get("registered") or {}
        out[str(g.get("name"))] = GroupView(
            int(registered.get("total", 0)), int(registered.get("ready", 0)), int(health.get("cloudProviderTarget", 0)),
            int(counts.get("unregistered", 0)) + int(counts.get("longUnregistered", 0)), str(data.get("time", "")))
    return out


# ------------------------------------------------------------------ process part

def crd_path() -> Path:
    """The ProvisioningRequest CRD of the source snapshot (``apis/config/crd/``); raises
    :class:`~cogate.localcluster.build.MissingSource` naming the snapshot's path when it is missing."""
    return build.source_dir("cluster-autoscaler") / "apis" / "config" / "crd" / \
        "autoscaling.x-k8s.io_provisioningrequests.yaml"


def prepare(cluster: Any, spec: AutoscalerSpec, workdir: Path) -> None:
    """Install what the autoscaler needs before it starts: the ProvisioningRequest CRD (waits until
    Established: without it the autoscaler waits for ever at "Waiting for Provisioning Request
    cache to sync"), the namespace, the two ConfigMaps of the kwok provider (files in ``workdir``).
    ``cluster`` needs ``kubectl(*args)``. Raises the cluster's error when kubectl fails."""
    cluster.kubectl("apply", "--server-side", "-f", str(crd_path()))
    cluster.wait_crds_established([PROVISIONING_REQUEST_CRD])
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": spec.namespace}}
    path = workdir / "cluster-autoscaler-config.yaml"
    path.write_text(yaml.safe_dump_all([namespace, provider_config_map(spec.namespace),
                                        templates_config_map(spec.groups, spec.namespace)], sort_keys=False))
    cluster.kubectl("apply", "-f", str(path))


def view(api: Any, namespace: str) -> dict[str, GroupView]:
    """The autoscaler's current status per group (its status ConfigMap in ``namespace``); empty
    before its first loop. ``api``: a ``kubernetes.client.ApiClient``."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    try:
        cm = client.CoreV1Api(api).read_namespaced_config_map(STATUS_CONFIG, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return {}
        raise
    return parse_status((cm.data or {}).get("status", "")) if (cm.data or {}).get("status") else {}


def delete_group_nodes(api: Any, spec: AutoscalerSpec, *, timeout: float = 60.0,
                       groups: Iterable[str] | None = None) -> list[str]:
    """Delete every Node the kwok provider created for ``groups`` (default: all of ``spec``'s),
    then wait until the autoscaler's own view (:func:`view`) counts none of them registered and
    targets 0; returns the deleted names. Pods bound to those nodes are left to the pod
    garbage collector (delete them first for a quick reset). The deleted nodes stay
    ``unregistered`` in the autoscaler's view for up to 2 min (see :class:`GroupView`); for a
    reset with nothing remembered restart the autoscaler first
    (:meth:`~cogate.localcluster.cluster.LocalCluster.restart_autoscaler`, which deletes the
    nodes itself). Raises :class:`AutoscalerError` with the last view after ``timeout`` s."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    wanted = set(groups) if groups is not None else {g.name for g in spec.groups}
    core = client.CoreV1Api(api)
    deleted = []
    for node in core.list_node().items:
        if (node.metadata.annotations or {}).get(NAME_ANNOTATION) in wanted:
            try:
                core.delete_node(node.metadata.name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
            deleted.append(node.metadata.name)
    deadline = time.monotonic() + timeout
    last: dict[str, GroupView] = {}
    while True:
        left = [n.metadata.name for n in core.list_node().items
                if (n.metadata.annotations or {}).get(NAME_ANNOTATION) in wanted]
        last = view(api, spec.namespace)
        if not left and all(g in last and last[g].registered == 0 and last[g].target == 0 for g in wanted):
            return deleted
        if time.monotonic() >= deadline:
            raise AutoscalerError(f"node groups {sorted(wanted)} not back to 0 nodes after {timeout:.0f}s: "
                                  f"nodes left {left}, autoscaler's view {last}")
        time.sleep(0.2)


def reset(cluster: Any, api: Any, spec: AutoscalerSpec, namespace: str | None = None, *, restart: bool = True,
          timeout: float = 120.0) -> None:
    """Bring the autoscaled ``cluster`` back to no node of any group, with nothing remembered.

    Deletes ``namespace``'s ProvisioningRequests and pods (grace 0) and waits until no pod is left (a
    pending pod left would make the autoscaler add nodes again), deletes the namespace in the
    background, restarts the autoscaler
    (:meth:`~cogate.localcluster.cluster.LocalCluster.restart_autoscaler`: it deletes its nodes on
    the way out and comes back with no cached template, no back-off, no node deleted behind its
    back counted as unregistered), deletes any node of the groups left
    (:func:`delete_group_nodes`) and waits until the autoscaler's view is 0 registered,
    0 unregistered, target 0. ``restart=False`` (when the last reset restarted it already) skips
    the restart. Used by the e2e fixture ``autoscaled`` and the autoscaler benchmark. Raises
    :class:`AutoscalerError` when a step does not finish within ``timeout`` s (the pods) or
    60 s (the nodes, the view)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(api)
    if namespace is not None:
        # what makes the autoscaler act goes first (requests, pods: grace 0); the namespace itself is
        # deleted in the background (waiting for the namespace controller took 5-10 s a reset)
        try:
            client.CustomObjectsApi(api).delete_collection_namespaced_custom_object(
                "autoscaling.x-k8s.io", "v1", namespace, "provisioningrequests")
        except ApiException as exc:
            if exc.status != 404:
                raise
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        deadline = time.monotonic() + timeout
        while core.list_namespaced_pod(namespace).items:
            if time.monotonic() >= deadline:
                raise AutoscalerError(f"pods of namespace {namespace} not deleted after {timeout:.0f}s")
            time.sleep(0.2)
        try:
            core.delete_namespace(namespace, propagation_policy="Background")
        except ApiException as exc:
            if exc.status != 404:
                raise
    if restart:
        cluster.restart_autoscaler()
    delete_group_nodes(api, spec, timeout=60)
    deadline = time.monotonic() + 30
    while True:
        last = view(api, spec.namespace)
        if all(v.unregistered == 0 for v in last.values()):
            return
        if time.monotonic() >= deadline:
            raise AutoscalerError(f"unregistered nodes left in the autoscaler's view after 30s: {last}")
        time.sleep(0.2)
