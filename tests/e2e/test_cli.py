"""The user-facing commands, run as a user runs them: ``cogate demo`` and ``cogate dev up|status|down``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from cogate.localcluster import build
from cogate.localcluster.procs import process_alive

pytestmark = pytest.mark.e2e


def _cogate(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cogate.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def _pod_rows(section: str) -> list[list[str]]:
    """Rows of the first ``kubectl get pods -o wide`` table in ``section``."""
    table = section.split("$ kubectl get pods -n demo -o wide\n", 1)[1].split("\n$ ", 1)[0]
    return [line.split() for line in table.splitlines()[1:] if line.strip()]


def test_demo_prints_both_outcomes(cluster):  # the session cluster: binaries are built
    out = _cogate("demo")
    assert out.returncode == 0, out.stderr + out.stdout
    text = out.stdout
    first, second = text.split("minMember 4;", 1)
    rows = _pod_rows(first)
    assert len(rows) == 6
    assert sum(r[2] == "Running" for r in rows) == 3 and sum(r[2] == "SchedulingGated" for r in rows) == 3
    assert "Unschedulable" not in first
    assert re.search(r"MembersWaiting=True WaitingForCapacity: .*wait gated for capacity: cpu short by", first)
    assert re.search(r"nginx\s+Running\s+3\s+3\s+3\s+0\s+0", first), "kubectl get pg shows Running, 3 running"
    rows = _pod_rows(second)
    assert len(rows) == 6 and all(r[2] == "SchedulingGated" for r in rows)
    assert re.search(r"nginx\s+Pending\s+4\s+0\s+0\s+0\s+0", second)
    assert "InsufficientCapacity: fits 3 of 4" in second


def test_dev_up_status_down(cluster, tmp_path):
    env = {"COGATE_DEV_DIR": str(tmp_path / "dev")}
    up = _cogate("dev", "up", "--nodes", "2", "--cpu", "4", "--label", "zone=a", env=env)
    assert up.returncode == 0, up.stderr + up.stdout
    kubeconfig = re.search(r"export KUBECONFIG=(\S+)", up.stdout).group(1)
    state = json.loads((tmp_path / "dev" / "cluster" / "state.json").read_text())
    pids = [p["pid"] for p in state["processes"].values()]
    pids += [v["pid"] for v in json.loads((tmp_path / "dev" / "cogate.json").read_text()).values()
             if isinstance(v, dict)]
    try:
        assert all(process_alive(p) for p in pids)
        status = _cogate("dev", "status", env=env)
        assert status.stdout.count("running") == len(pids), status.stdout
        nodes = subprocess.run([str(build.binary("kubectl")), "--kubeconfig", kubeconfig, "get", "nodes",
                                "-l", "zone=a", "-o", "name"], capture_output=True, text=True, check=True)
        assert len(nodes.stdout.split()) == 2, nodes.stdout
        again = _cogate("dev", "up", env=env)
        assert again.returncode == 1 and "already up" in again.stderr
    finally:
        down = _cogate("dev", "down", env=env)
    assert down.returncode == 0, down.stderr
    assert not any(process_alive(p) for p in pids)
    assert not (tmp_path / "dev" / "cluster").exists()
    assert "no dev environment is up" in _cogate("dev", "status", env=env).stdout


def test_dev_up_no_cogate_leaves_the_cluster_to_the_chart(cluster, tmp_path):
    """``dev up --no-cogate``: a cluster without cogate's CRD, webhook registration or processes, so
    that the README's ``helm install`` can create them."""
    env = {"COGATE_DEV_DIR": str(tmp_path / "dev")}
    up = _cogate("dev", "up", "--no-cogate", env=env)
    assert up.returncode == 0, up.stderr + up.stdout
    assert "cogate is not installed (--no-cogate)" in up.stdout
    kubeconfig = re.search(r"export KUBECONFIG=(\S+)", up.stdout).group(1)
    try:
        assert not (tmp_path / "dev" / "cogate.json").exists()

        def kubectl(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([str(build.binary("kubectl")), "--kubeconfig", kubeconfig, *args],
                                  capture_output=True, text=True)

        crd = kubectl("get", "crd", "podgroups.scheduling.x-k8s.io")
        assert crd.returncode != 0 and "NotFound" in crd.stderr, crd.stdout + crd.stderr
        hooks = kubectl("get", "mutatingwebhookconfigurations", "-o", "name")
        assert hooks.returncode == 0 and hooks.stdout.strip() == "", hooks.stdout
        status = _cogate("dev", "status", env=env).stdout
        assert "webhook" not in status and "controller" not in status.replace("kube-controller-manager", ""), status
    finally:
        down = _cogate("dev", "down", env=env)
    assert down.returncode == 0, down.stderr
    assert not (tmp_path / "dev" / "cluster").exists()
