"""Fixtures for cogate's end-to-end tests: cogate running on the local control plane.

``stack`` (session): the webhook and controller as real processes against the
session's ``cluster`` (tests/conftest.py). ``only_nodes`` (function): replace every
fake node by the shapes a test asks for, so capacity-sensitive tests see exactly the
cluster they describe.

``autoscaled_cluster`` (session): a second, separate LocalCluster running the real
cluster-autoscaler (:data:`AUTOSCALER_SPEC`: the dev group ``autoscaled``, 0 to 4 nodes of 16 CPU,
scale-down off), started on first use. ``autoscaled`` (function): that cluster reset for one
test (:class:`Autoscaled`: a fresh namespace, no node of the group, the autoscaler's own view
back at 0 nodes), and reset again after it.
"""

from __future__ import annotations

import itertools
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
from kubernetes import client

from cogate.localcluster import autoscaler as ca
from cogate.localcluster import nodes as fake_nodes
from cogate.localcluster.stack import CogateStack

from .kube import wait_for

_counter = itertools.count()


@pytest.fixture(scope="session")
def stack(cluster, tmp_path_factory):
    s = CogateStack(cluster, Path(tmp_path_factory.mktemp("cogate")))
    s.start()
    yield s
    s.stop()


def replace_fake_nodes(api: client.ApiClient, count: int = 1, **shape) -> list[str]:
    """Delete every fake (kwok) node, create ``count`` of ``shape``, wait until Ready; returns
    their names (``e2e-<n>``). The shape keywords are those of
    :func:`cogate.localcluster.nodes.node_manifest` (cpu, memory, pods, labels, taints...).
    A real node (``real_cluster``) is not a fake one and stays.

    Ready is :func:`cogate.localcluster.nodes.node_ready`: the Ready condition True *and* the
    node lifecycle controller's not-ready taint gone (kube-scheduler and cogate's planner both
    exclude a node until then, so a test reading a verdict at once would read "excluded by taint
    node.kubernetes.io/not-ready"). The controller works from its own informer and may put the
    taint on after the condition turned True, so readiness must hold on a second look."""
    core = client.CoreV1Api(api)
    existing = [n.metadata.name for n in core.list_node(label_selector="type=kwok").items]
    for name in existing:
        core.delete_node(name)
    wait_for(lambda: not core.list_node(label_selector="type=kwok").items, 60, what="old fake nodes deleted")
    names = [f"e2e-{next(_counter)}" for _ in range(count)]
    for name in names:
        core.create_node(fake_nodes.node_manifest(name, **shape))

    def ready() -> bool:
        got = {n.metadata.name: api.sanitize_for_serialization(n)
               for n in core.list_node(label_selector="type=kwok").items}
        return all(name in got and fake_nodes.node_ready(got[name]) for name in names)

    deadline = time.monotonic() + 60
    while True:
        wait_for(ready, max(1.0, deadline - time.monotonic()), what=f"nodes {names} Ready without a not-ready taint")
        time.sleep(0.5)
        if ready():
            return names


@pytest.fixture
def only_nodes(cluster, kube):
    """``only_nodes(count, taint=False, **shape) -> [names]``: delete every fake node, create these
    (:func:`replace_fake_nodes`)."""
    return lambda count=1, **shape: replace_fake_nodes(kube, count, **shape)


def now() -> float:
    return time.time()


#: The autoscaler of the e2e tests: the dev group (16 CPU, 64Gi, 110 pods, 0 to 4 nodes) with
#: scale-down off. Why off: the tests reset the group by deleting its nodes themselves
#: (the kwok provider's target follows), and a scale-down would change the node counts they
#: assert (three 8-CPU pods on three new nodes are 50 % utilisation each: candidates for
#: consolidation). The autoscaler's scale-down defaults (10 min unneeded, 10 min after a
#: scale-up) would act in the middle of a long session, at a time no test chooses.
AUTOSCALER_SPEC = ca.AutoscalerSpec(groups=(ca.AUTOSCALED,), scale_down=False, scan_interval=1.0)


@pytest.fixture(scope="session")
def autoscaled_cluster() -> Iterator[Any]:
    from cogate.localcluster import versions
    from cogate.localcluster.build import ensure_binaries
    from cogate.localcluster.cluster import LocalCluster

    ensure_binaries([*versions.CONTROL_PLANE_TOOLS, *versions.AUTOSCALER_TOOLS], log=sys.stderr)
    c = LocalCluster(autoscaler=AUTOSCALER_SPEC)
    c.start()
    try:
        yield c
    finally:
        c.stop()


@dataclass
class Autoscaled:
    """One test's view of :func:`autoscaled_cluster`: ``cluster``, an admin ``api`` client, a fresh
    ``namespace``, the autoscaler's ``spec``."""

    cluster: Any
    api: client.ApiClient
    namespace: str
    spec: ca.AutoscalerSpec

    def group_nodes(self, group: str = "autoscaled") -> list[dict[str, Any]]:
        """Nodes (dicts) the kwok provider created for ``group``."""
        nodes = [self.api.sanitize_for_serialization(n) for n in client.CoreV1Api(self.api).list_node().items]
        return [n for n in nodes if ca.group_of(n) == group]

    def view(self) -> dict[str, ca.GroupView]:
        return ca.view(self.api, self.spec.namespace)

    def log(self) -> str:
        return self.cluster.log_path("cluster-autoscaler").read_text(errors="replace")


def reset_autoscaled(cluster: Any, api: client.ApiClient, namespace: str | None, spec: ca.AutoscalerSpec, *,
                     restart: bool = True) -> None:
    """:func:`cogate.localcluster.autoscaler.reset`: ``namespace`` deleted, the autoscaler restarted
    (unless ``restart=False``: the last test's reset restarted it), no node of the group left."""
    ca.reset(cluster, api, spec, namespace, restart=restart)


@pytest.fixture
def autoscaled(autoscaled_cluster, request) -> Iterator[Autoscaled]:
    api = autoscaled_cluster.api_client()
    try:
        reset_autoscaled(autoscaled_cluster, api, None, AUTOSCALER_SPEC, restart=False)
        name = f"as-{request.node.name.removeprefix('test_')[:40].replace('_', '-').strip('-')}-{secrets.token_hex(3)}"
        client.CoreV1Api(api).create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        try:
            yield Autoscaled(autoscaled_cluster, api, name, AUTOSCALER_SPEC)
        finally:
            reset_autoscaled(autoscaled_cluster, api, name, AUTOSCALER_SPEC)
    finally:
        api.close()


def restarted_with(stack, *flags: str) -> Iterator[Any]:
    """A fixture's body: the controller restarted (fresh metrics) with the session's flags and
    ``flags``; restarted with the session's flags again after it."""
    saved = stack.controller_args
    stack.restart_controller(*saved, *flags)
    try:
        yield stack
    finally:
        stack.controller_args = saved
        stack.restart_controller()


@pytest.fixture
def gang_watch(kube, namespace):
    """A :class:`~tests.e2e.gangwatch.GangWatch` of the test's namespace, started before the test
    creates anything: judges all-or-nothing from gates and bindings in the API server's order."""
    from .gangwatch import GangWatch

    w = GangWatch(kube, namespace).start()
    yield w
    w.stop()


@pytest.fixture(scope="module")
def built() -> None:
    """The operators of ``versions.OPERATOR_TOOLS`` built (cached after the first time)."""
    from cogate.localcluster import versions
    from cogate.localcluster.build import ensure_binaries

    ensure_binaries(list(versions.OPERATOR_TOOLS), log=sys.stderr)


def running(tool: str, cluster, tmp_path_factory, scheduler: str | None) -> Iterator[Any]:
    """A module fixture's body: operator ``tool`` (:class:`cogate.localcluster.operators.Operator`)
    started against ``cluster`` with gang scheduler ``scheduler``, stopped after the module."""
    from cogate.localcluster.operators import Operator

    op = Operator(tool, cluster, tmp_path_factory.mktemp(tool), scheduler)
    op.start()
    try:
        yield op
    finally:
        op.stop()
