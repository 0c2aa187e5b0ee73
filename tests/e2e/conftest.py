"""Fixtures for cogate's end-to-end tests: cogate running on the local control plane.

``stack`` (session): the webhook and controller as real processes against the
session's ``cluster`` (tests/conftest.py). ``only_nodes`` (function): replace every
fake node by the shapes a test asks for, so capacity-sensitive tests see exactly the
cluster they describe.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest
from kubernetes import client

from cogate.localcluster.stack import CogateStack
from cogate.localcluster import nodes as fake_nodes

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
