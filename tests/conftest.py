"""Shared pytest fixtures: the local control plane for end-to-end tests.

- ``cluster`` (session): a started :class:`cogate.localcluster.cluster.LocalCluster`; the
  Go binaries are built first if missing (a cache hit takes well under a second). Started
  once per test session, only when an e2e test asks for it; stopped at the end of the session.
  ``COGATE_KEEP_CLUSTER=1`` keeps its work dir (logs, etcd data, kubeconfig) for post-mortems.
  ``COGATE_KUBERNETES_VERSION=1.37.2`` runs it (and every other LocalCluster of the session) on
  that release, ``COGATE_FEATURE_GATES=GenericWorkload=true`` with those gates
  (:data:`cogate.localcluster.versions.RELEASES`; default v1.36.3, no gates).
- ``kube``: a ``kubernetes.client.ApiClient`` (admin) on that cluster, closed after the test.
- ``namespace``: a fresh namespace per test (name derived from the test name), deleted after.
- ``real_cluster`` (session): a second, separate LocalCluster with a real kubelet node
  (``LocalCluster(real_node=True)``: containerd, runc, kubelet, kube-proxy; needs root), started
  on first use; ``real_cluster.host_baseline`` is what the host looked like before it (see
  :func:`host_state`); at the end of the session it is stopped and the host must be back to that.
  Its API server audits (metadata level) every request made with a ServiceAccount token outside
  ``kube-system`` (:data:`REAL_CLUSTER_AUDIT`; log at ``real_cluster.audit_log``), so tests of
  components running in pods can check that none of their requests was forbidden.

Every test under ``tests/e2e/`` is marked ``e2e`` automatically (select with ``-m e2e``,
skip with ``-m 'not e2e'``).
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from pathlib import Path
from typing import Iterator

import pytest

E2E_DIR = Path(__file__).parent / "e2e"
# `make test` records each phase's time in $COGATE_PHASES_FILE (localcluster/phases.py); the tests
# time as one phase from outside, and the builds they run (real or faked by the unit tests) are not
# phases of the run: nothing in a test session writes to that file.
os.environ.pop("COGATE_PHASES_FILE", None)
#: Test files that use what this host has only one of (the real kubelet node, the container image
#: build): one xdist group, so they never run at the same time on two workers.
HOST_EXCLUSIVE = frozenset({"test_real_node.py", "test_helm_install.py", "test_helm_cert_manager.py", "test_image.py"})
HOST_GROUP = "host"


def xdist_group(path: Path) -> str:
    """The pytest-xdist group of a test file (``make test`` runs ``-n 2 --dist loadgroup``): a group is
    run whole on one worker, in order. Each file is a group of its own (its session and module fixtures
    start once, its tests keep their order), except :data:`HOST_EXCLUSIVE`, one group together."""
    return HOST_GROUP if path.name in HOST_EXCLUSIVE else path.relative_to(E2E_DIR.parent).as_posix()


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups on a worker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath))
        if E2E_DIR in path.parents:
            item.add_marker(pytest.mark.e2e)
        item.add_marker(pytest.mark.xdist_group(xdist_group(path)))
    # The longest group first, so that a worker does not start it when the others are nearly done.
    items.sort(key=lambda item: xdist_group(Path(str(item.fspath))) != HOST_GROUP)


@pytest.fixture(scope="session")
def cluster() -> Iterator["LocalCluster"]:  # noqa: F821 - imported lazily
    from cogate.localcluster.build import ensure_binaries
    from cogate.localcluster.cluster import LocalCluster

    ensure_binaries(["etcd", "kubernetes", "kwok"], log=sys.stderr)  # what the control plane runs
    c = LocalCluster()
    c.start()
    try:
        yield c
    finally:
        c.stop()


def host_state() -> dict:
    """What a real node could leave on this host: its leftovers (processes, mounts, bridge,
    iptables rules, cgroups; :func:`cogate.localcluster.host.realnode.host_leftovers`), the veth
    interfaces, network namespaces and the kernel settings kubelet and the CNI bridge change."""
    from cogate.localcluster.host import realnode

    sysctls = (*realnode.KUBELET_SYSCTLS, "net/ipv4/ip_forward")
    netns = Path("/var/run/netns")
    return {
        "leftovers": realnode.host_leftovers(),
        # veth interfaces on no bridge (a pod's, once the node's bridge is gone); other tools'
        # containers (buildah) keep theirs on their own bridge.
        "veths": sorted(p.name for p in Path("/sys/class/net").iterdir()
                        if p.name.startswith("veth") and not (p / "master").exists()),
        "netns": sorted(p.name for p in netns.iterdir()) if netns.is_dir() else [],
        "sysctls": {k: Path("/proc/sys", k).read_text().strip() for k in sysctls},
    }


#: Audit policy of ``real_cluster``: requests of ServiceAccounts outside kube-system
#: (kube-controller-manager's controllers use kube-system ones), metadata only.
REAL_CLUSTER_AUDIT = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
    "rules": [{"level": "None", "userGroups": ["system:serviceaccounts:kube-system"]},
              {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
              {"level": "None"}],
}


@pytest.fixture(scope="session")
def real_cluster() -> Iterator["LocalCluster"]:  # noqa: F821 - imported lazily
    from cogate.localcluster import versions
    from cogate.localcluster.build import ensure_binaries
    from cogate.localcluster.cluster import LocalCluster

    from cogate.localcluster.host import realnode

    ensure_binaries([*versions.CONTROL_PLANE_TOOLS, *versions.NODE_TOOLS], log=sys.stderr)
    # A run killed while its real node ran (or a crashed `cogate dev`) leaves the node's host
    # state behind with a dead owner: remove it first (raises while the owner still runs).
    realnode.recover_host(log=sys.stderr)
    baseline = host_state()
    assert baseline["leftovers"] == [], "the host must be clean before a real node starts"
    c = LocalCluster(real_node=True, audit_policy=REAL_CLUSTER_AUDIT)
    c.host_baseline = baseline
    c.start()
    try:
        yield c
    finally:
        c.stop()
    assert host_state() == baseline, "stopping the real node must leave the host as it was"


@pytest.fixture
def kube(cluster):
    api = cluster.api_client()
    try:
        yield api
    finally:
        api.close()


def _namespace_name(test_name: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", test_name.lower().removeprefix("test_")).strip("-")[:40].strip("-")
    return f"{base or 't'}-{secrets.token_hex(3)}"


@pytest.fixture
def namespace(kube, request) -> Iterator[str]:
    """Name of a namespace created for this test and deleted (in the background) after it."""
    from kubernetes import client

    core = client.CoreV1Api(kube)
    name = _namespace_name(request.node.name)
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name, propagation_policy="Background")
        except client.ApiException as exc:
            if exc.status != 404:
                raise
