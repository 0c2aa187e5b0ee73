"""Shared pytest fixtures: the local control plane for end-to-end tests.

- ``cluster`` (session): a started :class:`cogate.localcluster.cluster.LocalCluster`; the
  Go binaries are built first if missing (a cache hit takes well under a second). Started
  once per test session, only when an e2e test asks for it; stopped at the end of the session.
  ``COGATE_KEEP_CLUSTER=1`` keeps its work dir (logs, etcd data, kubeconfig) for post-mortems.
- ``kube``: a ``kubernetes.client.ApiClient`` (admin) on that cluster, closed after the test.
- ``namespace``: a fresh namespace per test (name derived from the test name), deleted after.

Every test under ``tests/e2e/`` is marked ``e2e`` automatically (select with ``-m e2e``,
skip with ``-m 'not e2e'``).
"""

from __future__ import annotations

import re
import secrets
import sys
from pathlib import Path
from typing import Iterator

import pytest

E2E_DIR = Path(__file__).parent / "e2e"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if E2E_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


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
