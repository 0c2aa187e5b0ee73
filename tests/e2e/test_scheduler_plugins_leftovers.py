"""Migrating from scheduler-plugins: what it leaves behind (issue 21 item 8), on the real control plane.

(a) scheduler-plugins v0.34.7's own PodGroup CRD (``manifests/coscheduling/crd.yaml`` of the source
snapshot in the repository's ``third_party/``, or ``$COGATE_COSCHEDULING_SRC``; its schema has no ``status.conditions`` nor ``status.scheduled``) installed
instead of cogate's: the API server prunes those fields from every status write. The controller says
so (Warning ``StatusFieldsDropped`` naming the fields and the fix, the metric
``cogate_controller_status_fields_dropped_total``), keeps releasing gangs whole, and does not write the
same status again and again. (b) scheduler-plugins' real PodGroup controller (built from those sources
into the tool cache on first use) running beside cogate: it writes ``Scheduling`` as soon as minMember
pods exist; cogate names it (Warning ``ForeignStatusWriter``), never takes that phase for a release
(the gang stays gated while it does not fit) and releases it whole once it fits.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
from kubernetes import client

from cogate.api import GROUP, PLURAL, VERSION
from cogate.controller.model import leftovers
from cogate.localcluster import example

from .kube import bound, condition, create_pod_group, events_for, gated, group_pods, status, wait_for

pytestmark = pytest.mark.e2e



def _sp_source() -> Path:
    """The scheduler-plugins v0.34.7 snapshot: ``$COGATE_COSCHEDULING_SRC``, else the repository's
    ``third_party/scheduler-plugins-v0.34.7`` (where it comes from: ``third_party/README.md``)."""
    env = os.environ.get("COGATE_COSCHEDULING_SRC")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "third_party" / "scheduler-plugins-v0.34.7"


def sp_file(path: Path) -> Path:
    """``path`` in the snapshot; raises FileNotFoundError naming it and how to point at the snapshot."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the scheduler-plugins v0.34.7 source snapshot is not there "
                                "(it sits in the repository's third_party/; or set $COGATE_COSCHEDULING_SRC)")
    return path


SP = _sp_source()
SP_CRD = SP / "manifests" / "coscheduling" / "crd.yaml"
SP_EQ_CRD = SP / "manifests" / "capacityscheduling" / "crd.yaml"
NODE8 = dict(kwok_taint=False, cpu="8", memory="16Gi", pods=110)


def _bare(name: str, group: str, cpu: str) -> dict:
    tpl = example.pod_template(group, cpu=cpu, app=group)
    tpl["metadata"]["name"] = name
    return {"apiVersion": "v1", "kind": "Pod", **tpl}


def _metric(stack, name: str, labels: str = "") -> float:
    pattern = re.compile(rf"^cogate_controller_{name}(?:\{{{re.escape(labels)}\}})? ([0-9.e+]+)$", re.M)
    m = pattern.search(stack.metrics())
    return float(m.group(1)) if m else 0.0


def _warnings(kube, namespace: str, name: str, reason: str) -> list[client.CoreV1Event]:
    return [e for e in events_for(kube, namespace, name) if e.reason == reason and e.type == "Warning"]


@pytest.fixture
def sp_crd(stack) -> Iterator[None]:
    """scheduler-plugins' PodGroup CRD in place of cogate's; cogate's is applied again after the test."""
    stack.cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(sp_file(SP_CRD)))
    stack.cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/podgroups.scheduling.x-k8s.io")
    time.sleep(1)
    try:
        yield
    finally:
        stack.apply_crd()


def _sp_controller_binary() -> Path:
    """scheduler-plugins v0.34.7's ``cmd/controller``, built once into the tool cache by the same
    builder as the side-by-side benchmark (``bench/schedplugins.py`` ``ensure_built``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    try:
        schedplugins = importlib.import_module("schedplugins")
    finally:
        sys.path.pop(0)
    return schedplugins.ensure_built(SP, names=("controller",))["controller"]


@pytest.fixture
def sp_controller(stack, tmp_path) -> Iterator[None]:
    """scheduler-plugins' PodGroup (and ElasticQuota) controller as a local process against the cluster."""
    binary = _sp_controller_binary()
    stack.cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(sp_file(SP_EQ_CRD)))
    log = (tmp_path / "sp-controller.log").open("w")
    proc = subprocess.Popen([str(binary), "--metricsAddr=0", "--probeAddr=0", "--workers=2"],
                            env=dict(os.environ, KUBECONFIG=str(stack.cluster.kubeconfig)), stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


# ----------------------------------------------------------------- (a) its CRD prunes cogate's status


@pytest.mark.parametrize("case", ["waiting", "released"])
def test_status_pruned_by_scheduler_plugins_crd_is_reported_without_a_write_loop(stack, kube, namespace, only_nodes,
                                                                                 sp_crd, case):
    only_nodes(1, **NODE8)
    core = client.CoreV1Api(kube)
    create_pod_group(kube, example.pod_group("g", 3 if case == "waiting" else 2, namespace=namespace,
                                             timeout_seconds=None))
    for i in range(2):
        core.create_namespaced_pod(namespace, _bare(f"g-{i}", "g", "1"))
    warned = wait_for(lambda: _warnings(kube, namespace, "g", "StatusFieldsDropped"), 20,
                      what="Warning StatusFieldsDropped")
    msg = warned[0].message
    assert "status.conditions" in msg and "charts/cogate/crds/scheduling.x-k8s.io_podgroups.yaml" in msg, msg
    assert _metric(stack, "status_fields_dropped_total", 'field="conditions"') >= 1
    st = status(kube, namespace, "g")
    assert "conditions" not in st and "scheduled" not in st, st  # what the API server kept
    if case == "waiting":
        assert st.get("phase") == "Pending", st
        assert all(gated(p) for p in group_pods(kube, namespace, "g"))
    else:  # released whole all the same; the phase and counts the schema has tell the truth
        wait_for(lambda: all(bound(p) for p in group_pods(kube, namespace, "g")), 30, what="both members bound")
        st = wait_for(lambda: (s := status(kube, namespace, "g")).get("phase") in ("Running", "Scheduled") and s, 20,
                      what="phase Running")
        assert st.get("scheduleStartTime"), st
    custom = client.CustomObjectsApi(kube)
    # the write counter is the controller's, for every PodGroup: wait until earlier tests' groups are gone
    others = lambda: [(o["metadata"]["namespace"], o["metadata"]["name"])  # noqa: E731
                      for o in custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
                      if o["metadata"]["namespace"] != namespace]
    try:
        wait_for(lambda: not others(), 120, interval=1, what="no other PodGroup in the cluster")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; left: {others()}") from None
    time.sleep(2)  # settled
    # PodGroup events make passes: with the conditions dropped, none of them writes the status again
    writes = _metric(stack, "status_writes_total", 'result="ok"')
    for i in range(6):
        custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "g",
                                              {"metadata": {"annotations": {"e2e/poke": str(i)}}})
        time.sleep(0.3)
    time.sleep(1)
    assert _metric(stack, "status_writes_total", 'result="ok"') - writes == 0
    assert len(_warnings(kube, namespace, "g", "StatusFieldsDropped")) == 1  # told once (event count aside)


# ----------------------------------------------------------------- (b) its controller still running


@pytest.mark.parametrize("fits_later", [False, True], ids=["never-fits", "fits-later"])
def test_scheduler_plugins_controller_beside_cogate_is_named_and_its_phase_is_no_release(stack, kube, namespace,
                                                                                        only_nodes, sp_controller,
                                                                                        fits_later):
    """minMember 3, three 3-CPU members on one 8-CPU node: scheduler-plugins' controller writes
    ``Scheduling`` (3 pods exist); cogate keeps all gated, says why, and names the other writer.
    With a second node the gang fits and is released whole."""
    only_nodes(1, **NODE8)
    core = client.CoreV1Api(kube)
    create_pod_group(kube, example.pod_group("g", 3, namespace=namespace, timeout_seconds=None))
    for i in range(3):
        core.create_namespaced_pod(namespace, _bare(f"g-{i}", "g", "3"))
    warned = wait_for(lambda: _warnings(kube, namespace, "g", "ForeignStatusWriter"), 30,
                      what="Warning ForeignStatusWriter")
    # names the other manager and the fields it owns at that moment (the phase and counts change hands)
    assert re.search(r"writes this PodGroup's status: controller \(status\.\w+", warned[0].message), warned[0].message
    # the gauge is set once the pass has emitted its events, which the recorder may write first
    assert wait_for(lambda: _metric(stack, "foreign_status_writers"), 10, what="foreign_status_writers set") >= 1
    seen_scheduling = False
    for _ in range(16):  # 8 s: whatever phase the other controller writes, no member goes
        st = status(kube, namespace, "g")
        seen_scheduling |= st.get("phase") == "Scheduling"
        ms = group_pods(kube, namespace, "g", deleting=False)
        assert len(ms) == 3 and all(gated(p) and not bound(p) for p in ms), [(p.metadata.name, p.spec.node_name)
                                                                           for p in ms]
        time.sleep(0.5)
    assert seen_scheduling, "scheduler-plugins' controller wrote Scheduling"  # the input this test is about
    released = condition(status(kube, namespace, "g"), "Released")
    assert released["status"] == "False" and released["reason"] == "InsufficientCapacity", released
    assert "fits 2 of 3" in released["message"], released
    if not fits_later:
        return
    only_nodes(2, **NODE8)  # room for 3 of 3 now
    wait_for(lambda: all(bound(p) for p in group_pods(kube, namespace, "g", deleting=False)), 40,
             what="the gang released whole and bound")
    wait_for(lambda: (s := status(kube, namespace, "g")).get("scheduleStartTime")
             and condition(s, "Released")["status"] == "True", 20, what="Released=True")
    # The counts and phase are fields the other controller writes too: cogate takes them back at
    # most every FOREIGN_WRITE_SECONDS (no write war), so they may lag the binding by that long.
    wait_for(lambda: (s := status(kube, namespace, "g")).get("scheduled") == 3
             or s.get("phase") in ("Scheduled", "Running"), leftovers.FOREIGN_WRITE_SECONDS + 20,
             what="scheduled 3 or phase Scheduled/Running in cogate's status")
