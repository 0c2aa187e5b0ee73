"""cogate installed the way users install it: ``helm install`` of charts/cogate on the real
kubelet node of ``real_cluster`` (containerd, runc, kubelet, kube-proxy), the image built from
the Dockerfile (``make image``) and imported into the node, webhook and controller running as
containers under the chart's ServiceAccounts. The README example runs on fake (kwok) nodes.

One release for the module (fixture ``release``), installed with docs/development.md's command
(:func:`tests.e2e.helm_release.readme_commands`) and the values of
``charts/cogate/ci/real-node-values.yaml`` (placement on the real node, ``pullPolicy: Never``;
the chart's defaults otherwise). Tests run in file order, the ones that disturb the release
last: install; ServiceAccounts and ``can-i``; the containers' security context; the README
example; the leader deleted mid-release; the webhook scaled to 0; certificate rotation under
a stream of pod creations; nothing forbidden in the audit log; ``helm upgrade``; ``helm
uninstall`` (its pre-delete hook ungates a gang left waiting).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import re
import secrets
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from kubernetes import client, watch

from cogate import __version__
from cogate.api import POD_GROUP_LABEL
from cogate.certs import pki
from cogate.controller.model.config import DEFAULT_WORKERS
from cogate.localcluster import build, example
from cogate.localcluster.host import image, realnode

from . import test_example, test_rbac
from .conftest import replace_fake_nodes
from .helm_release import (ROOT, CERT_SECRET, CONTROLLER, CRD, NAMESPACE, WEBHOOK, WEBHOOK_CONFIG, WEBHOOK_ENTRY,
                           ca_bundle, component_pods, gated_by_webhook, helm, issued_by_one_of, labelled_pod,
                           lease_holder, readme_commands, ready, rolled_out, served_certificate)
from .kube import create_pod_group, events_for, gated, wait_for

pytestmark = pytest.mark.e2e

#: Values of ``charts/cogate/ci/real-node-values.yaml`` (docs/development.md's commands use the file).
REAL_NODE_VALUES = "charts/cogate/ci/real-node-values.yaml"
#: The pre-delete hook's Job and ServiceAccount (charts/cogate/templates/uninstall-hook.yaml).
UNINSTALL = "cogate-uninstall"
#: Lease duration of the controller's leader election (controller/kube/leader.py), seconds.
LEASE_DURATION = 15.0


def report(name: str, seconds: float) -> None:
    test_example._report(name, seconds)


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def api(real_cluster):
    a = real_cluster.api_client()
    yield a
    a.close()


def _namespace(api, prefix: str) -> str:
    name = f"{prefix}-{secrets.token_hex(3)}"
    core = client.CoreV1Api(api)
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    wait_for(lambda: core.list_namespaced_service_account(name, field_selector="metadata.name=default").items,
             30, what=f"the default ServiceAccount of {name}")
    return name


@pytest.fixture
def ns(api, request):
    name = _namespace(api, re.sub(r"[^a-z0-9]+", "-", request.node.name.removeprefix("test_"))[:24].strip("-"))
    yield name
    client.CoreV1Api(api).delete_namespace(name, propagation_policy="Background")


@pytest.fixture(scope="module")
def release(real_cluster, api, tmp_path_factory):
    """The chart packaged (``helm package``, as it is published) and the archive installed with
    docs/development.md's ``helm install`` (the chart directory replaced by the archive); ``timings`` holds
    the seconds from ``helm install`` to the first labelled pod gated (``install_to_gated``)."""
    build.ensure_binaries(["helm"], log=sys.stderr)
    built = image.build_image()
    t0 = time.monotonic()
    refs = real_cluster.load_image(built.archive)
    load_seconds = time.monotonic() - t0
    assert built.containerd_name in refs
    print(f"image {built.tag}: {built.image_bytes / 2**20:.0f} MiB, archive {built.archive_bytes / 2**20:.0f} MiB, "
          f"build {built.seconds:.1f}s (cached: {built.cached}), load_image {load_seconds:.1f}s")
    print(f"cluster start {real_cluster.timings.get('total', 0):.1f}s, "
          f"real node {real_cluster.timings.get('real-node', 0):.1f}s of it")
    replace_fake_nodes(api, 1, kwok_taint=False, **example.NODE_SHAPE)
    probe_ns = _namespace(api, "helm-probe")
    commands = readme_commands()
    assert set(commands) == {"install", "upgrade", "uninstall"}, commands

    package_dir = tmp_path_factory.mktemp("chart")
    helm(real_cluster, ["helm", "package", "charts/cogate", "--destination", str(package_dir)])
    (archive,) = package_dir.glob("cogate-*.tgz")
    assert "charts/cogate" in commands["install"]
    install = [str(archive) if a == "charts/cogate" else a for a in commands["install"]]
    t0 = time.monotonic()
    helm(real_cluster, install)
    helm_seconds = time.monotonic() - t0

    def webhook_gates():
        try:
            return gated_by_webhook(api, probe_ns)
        except client.ApiException:  # e.g. the configuration exists, its pods not ready yet
            return False

    wait_for(webhook_gates, 240, interval=0.25, what="a labelled pod gated by the installed webhook")
    timings = {"helm_install": helm_seconds, "install_to_gated": time.monotonic() - t0}
    report("helm install -> labelled pod gated", timings["install_to_gated"])
    state = SimpleNamespace(cluster=real_cluster, api=api, commands=commands, probe_ns=probe_ns, built=built,
                            timings=timings, installed=True, archive=archive)
    try:
        yield state
    finally:
        if state.installed:
            helm(real_cluster, ["helm", "uninstall", "cogate", "--namespace", NAMESPACE, "--wait"])
        core = client.CoreV1Api(api)
        core.delete_namespace(probe_ns, propagation_policy="Background")
        core.delete_namespace(NAMESPACE, propagation_policy="Background")


@pytest.fixture
def healthy(release, api):
    """Each test starts from a healthy release (both Deployments rolled out, a leader), so that
    one test's failure does not fail the next."""
    if release.installed:
        _wait_rolled_out(api)
    return release


def _wait_rolled_out(api, timeout: float = 180.0) -> None:
    for name in (WEBHOOK, CONTROLLER):
        wait_for(lambda: rolled_out(api, name), timeout, interval=0.5, what=f"Deployment {name} rolled out")
    wait_for(lambda: lease_holder(api) in {p.metadata.name for p in component_pods(api, "controller")},
             timeout, interval=0.5, what="the Lease held by a running controller pod")


# ----------------------------------------------------------------- 1 install

def test_install_webhook_ready_lease_held_crd_and_ca_bundle(release, api):
    print(f"helm install {release.timings['helm_install']:.1f}s; "
          f"helm install -> labelled pod gated {release.timings['install_to_gated']:.1f}s")
    _wait_rolled_out(api)
    webhooks = component_pods(api, "webhook")
    controllers = component_pods(api, "controller")
    assert len(webhooks) == 2 and all(map(ready, webhooks))
    assert len(controllers) == 2 and all(map(ready, controllers))
    for pod in webhooks + controllers:
        assert pod.spec.node_name == realnode.NODE_NAME, pod.metadata.name
        assert all(c.image == f"cogate:{__version__}" and c.image_pull_policy == "Never" for c in pod.spec.containers)
    # The Lease is held by exactly one of the two controller pods.
    assert lease_holder(api) in {p.metadata.name for p in controllers}
    crd = client.ApiextensionsV1Api(api).read_custom_resource_definition(CRD)
    assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)
    # caBundle: the CA of the bootstrap's Secret; each replica serves a certificate it signed
    # for the Service's name.
    secret = client.CoreV1Api(api).read_namespaced_secret(CERT_SECRET, NAMESPACE)
    secret_cas = pki.load_certs_pem(base64.b64decode(secret.data["ca.crt"]))
    bundle = ca_bundle(api)
    assert [c.fingerprint(pki.hashes.SHA256()) for c in bundle] == \
           [c.fingerprint(pki.hashes.SHA256()) for c in secret_cas]
    for pod in webhooks:
        leaf = served_certificate(pod.status.pod_ip)
        assert issued_by_one_of(leaf, bundle[:1]), pod.metadata.name
        names = leaf.extensions.get_extension_for_class(pki.x509.SubjectAlternativeName).value
        assert f"{WEBHOOK}.{NAMESPACE}.svc" in names.get_values_for_type(pki.x509.DNSName)


# ------------------------------------------------ 3 ServiceAccounts and can-i

def test_components_run_under_the_chart_service_accounts_with_the_readme_rights(release, healthy, api):
    for pod in component_pods(api, "webhook"):
        assert pod.spec.service_account_name == WEBHOOK
    for pod in component_pods(api, "controller"):
        assert pod.spec.service_account_name == CONTROLLER
    cluster = release.cluster
    if cluster.kubectl("get", "serviceaccount", test_rbac.BASELINE_SA, "-n", NAMESPACE, check=False).returncode:
        cluster.kubectl("create", "serviceaccount", test_rbac.BASELINE_SA, "-n", NAMESPACE)
    table = test_rbac.readme_rbac_table()
    for sa, short in ((WEBHOOK, "webhook"), (CONTROLLER, "controller")):
        for namespace, scopes in ((NAMESPACE, {"cluster", "release namespace"}), ("default", {"cluster"})):
            granted = test_rbac.can_i(cluster, sa, namespace) - test_rbac.can_i(cluster, test_rbac.BASELINE_SA,
                                                                                namespace)
            expected = {(res, name, verb) for who, scope, res, name, verb in table if who == short and scope in scopes}
            assert granted == expected, (short, namespace, sorted(granted ^ expected))


# ------------------------------------------------------- 8 security context

def _container_pid(cluster, container_id: str) -> int:
    cid = container_id.split("://", 1)[1]
    out = cluster.node.ctr("tasks", "ls").stdout
    for line in out.splitlines()[1:]:
        fields = line.split()
        if fields and fields[0] == cid:
            return int(fields[1])
    raise AssertionError(f"container {cid} not running in the node's containerd:\n{out}")


def _status(pid: int) -> dict[str, str]:
    return dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)


def _writable_mounts(pid: int) -> dict[str, str]:
    """Mount point -> file system type of the process's writable mounts (``/proc/<pid>/mountinfo``)."""
    out = {}
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        left, right = line.split(" - ", 1)
        fields = left.split()
        point, options = fields[4], fields[5].split(",")
        fstype, super_options = right.split()[0], right.split()[2].split(",")
        if "rw" in options and "ro" not in super_options:
            out[point] = fstype
    return out


#: Kernel file systems (not storage); the runtime's masked paths below /proc are skipped too.
VIRTUAL_FS = {"proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue"}
#: Writable mounts every container has: the runtime's /dev and /dev/shm (tmpfs), on cgroup v1
#: the tmpfs holding the (read-only) cgroup hierarchies, and kubelet's files. All root-owned
#: but /dev/shm and kubelet's files.
RUNTIME_WRITABLE = {"/dev", "/dev/shm", "/sys/fs/cgroup", "/dev/termination-log", "/etc/hosts", "/etc/hostname",
                    "/etc/resolv.conf"}


def test_containers_run_non_root_read_only_without_capabilities_under_runtime_default_seccomp(release, healthy, api):
    cluster = release.cluster
    seen = []
    for pod in component_pods(api, "webhook") + component_pods(api, "controller"):
        for cs in pod.status.container_statuses:
            pid = _container_pid(cluster, cs.container_id)
            st = _status(pid)
            where = f"{pod.metadata.name}/{cs.name} (pid {pid})"
            assert st["Uid"].split() == ["10001"] * 4, (where, st["Uid"])
            assert st["Gid"].split() == ["10001"] * 4, (where, st["Gid"])
            for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
                assert int(st[cap], 16) == 0, (where, cap, st[cap])
            assert st["NoNewPrivs"] == "1", where      # allowPrivilegeEscalation: false
            assert st["Seccomp"] == "2", where         # a filter: RuntimeDefault
            mountinfo = Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
            root = [m for m in mountinfo if m.split()[4] == "/"]
            assert root and "ro" in root[-1].split()[5].split(","), (where, root)
            writable = {point: fstype for point, fstype in _writable_mounts(pid).items()
                        if fstype not in VIRTUAL_FS and not point.startswith("/proc/")}
            allowed = RUNTIME_WRITABLE | ({"/certs"} if cs.name == "cert-rotator" else set())
            assert set(writable) <= allowed, (where, writable)
            if cs.name == "cert-rotator":
                assert writable["/certs"] == "tmpfs", where  # emptyDir medium Memory
            if cs.name == "webhook":
                assert "/certs" not in writable, where
            seen.append(where)
    assert len(seen) == 6, seen  # webhook x2 (webhook, cert-rotator), controller x2
    assert _log_lines(release, api, WRITE_FAILED) == []


#: Log lines saying a write failed (the read-only root or a read-only mount refused it).
WRITE_FAILED = r"Read-only file system|EROFS|Permission denied|EACCES|Traceback"
#: RBAC's refusal as the API server words it ("... is forbidden: User "system:serviceaccount:..." cannot ...").
FORBIDDEN = r'forbidden: User "|cannot \w+ resource'



def _log_lines(release, api, pattern: str) -> list[tuple[str, str, str]]:
    """``(pod, container, line)`` of every log line of the release's containers (init
    containers included) matching ``pattern``."""
    found = []
    for pod in component_pods(api, "webhook") + component_pods(api, "controller"):
        for c in (pod.spec.init_containers or []) + pod.spec.containers:
            log = release.cluster.kubectl("logs", "-n", NAMESPACE, pod.metadata.name, "-c", c.name).stdout
            found += [(pod.metadata.name, c.name, line[:300]) for line in log.splitlines() if re.search(pattern, line)]
    return found


# ------------------------------------------------------------- 2 the example

def test_readme_example_through_the_installed_chart(release, healthy, api):
    """The assertions of tests/e2e/test_example.py, on the release instead of local processes."""
    stack = SimpleNamespace(cluster=release.cluster)

    def only_nodes(count=1, **shape):
        return replace_fake_nodes(api, count, **shape)

    for test in (test_example.test_min_member_3_runs_three_and_holds_three_gated,
                 test_example.test_min_member_4_keeps_all_six_gated):
        namespace = _namespace(api, test.__name__.removeprefix("test_")[:12].replace("_", "-"))
        watcher = test_example.PodWatch(api, namespace)
        watcher.start()
        watcher.ready.wait(5)
        try:
            test(stack=stack, kube=api, namespace=namespace, only_nodes=only_nodes, pod_watch=watcher)
        finally:
            watcher.stop()
            client.CoreV1Api(api).delete_namespace(namespace, propagation_policy="Background")


# ------------------------------------- issue 30: namespace users, cogate's own pods, webhook calls

#: kubernetes pkg/apis/scheduling: no user-defined PriorityClass may exceed it.
HIGHEST_USER_PRIORITY = 1_000_000_000


def _impersonating(cluster, user: str) -> client.ApiClient:
    """An API client of the admin kubeconfig acting as ``user`` (``Impersonate-User``), with no group
    beyond ``system:authenticated``: only what RBAC grants that user name."""
    a = cluster.api_client()
    a.set_default_header("Impersonate-User", user)
    return a


def _bind(api, namespace: str, user: str, cluster_role: str) -> None:
    client.RbacAuthorizationV1Api(api).create_namespaced_role_binding(namespace, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": f"{user}-{cluster_role}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})


def _can(user_api, namespace: str, verb: str, subresource: str = "") -> bool:
    review = client.AuthorizationV1Api(user_api).create_self_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": namespace, "verb": verb, "group": "scheduling.x-k8s.io",
                                        "resource": "podgroups", "subresource": subresource}}})
    return bool(review.status.allowed)


def test_a_namespace_user_with_edit_runs_the_readme_example(release, healthy, api, ns):
    """A user bound only to Kubernetes' standard ``edit`` ClusterRole in one namespace creates the
    README example there (PodGroup + ReplicaSet of 6 x 3 CPU, minMember 3) and sees it gated and
    released as the README says; ``view`` reads PodGroups only; neither writes status."""
    t0 = time.monotonic()
    _bind(api, ns, "alice", "edit")
    _bind(api, ns, "bob", "view")
    alice, bob = _impersonating(release.cluster, "alice"), _impersonating(release.cluster, "bob")
    try:
        # the aggregation controller (kube-controller-manager) fills edit/view from the chart's roles
        wait_for(lambda: _can(alice, ns, "create") and _can(bob, ns, "list"), 30, interval=0.25,
                 what="PodGroup rights aggregated into edit and view")
        assert all(_can(alice, ns, v) for v in ("get", "list", "watch", "update", "patch", "delete",
                                                "deletecollection"))
        assert not _can(alice, ns, "patch", "status") and not _can(alice, ns, "update", "status")
        assert not _can(alice, release.probe_ns, "create"), "edit is bound in one namespace only"
        assert all(_can(bob, ns, v) for v in ("get", "list", "watch")) and _can(bob, ns, "get", "status")
        assert not any(_can(bob, ns, v) for v in ("create", "update", "patch", "delete"))
        watcher = test_example.PodWatch(api, ns)
        watcher.start()
        watcher.ready.wait(5)
        try:
            test_example.test_min_member_3_runs_three_and_holds_three_gated(
                stack=SimpleNamespace(cluster=release.cluster), kube=alice, namespace=ns,
                only_nodes=lambda count=1, **shape: replace_fake_nodes(api, count, **shape), pod_watch=watcher)
        finally:
            watcher.stop()
        with pytest.raises(client.ApiException) as denied:  # status stays the controller's
            client.CustomObjectsApi(alice).patch_namespaced_custom_object_status(
                "scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", "nginx", {"status": {"phase": "Failed"}})
        assert denied.value.status == 403
    finally:
        alice.close()
        bob.close()
    report("namespace user (edit) runs the README example", time.monotonic() - t0)


def _cpu_millis(q) -> int:
    from kubernetes.utils import parse_quantity

    return int(parse_quantity(q or "0") * 1000)


def _request_cpu(c: client.V1Container) -> int:
    return _cpu_millis(((c.resources and c.resources.requests) or {}).get("cpu"))


def _free_cpu_millis(api, node: str) -> int:
    """Allocatable CPU of ``node`` minus the effective requests (kube-scheduler's: the larger of
    the containers' sum and each init container) of the pods bound there."""
    core = client.CoreV1Api(api)
    free = _cpu_millis(core.read_node(node).status.allocatable["cpu"])
    for p in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items:
        if p.status.phase in ("Succeeded", "Failed"):
            continue
        inits = [_request_cpu(c) for c in p.spec.init_containers or []]
        free -= max([sum(_request_cpu(c) for c in p.spec.containers), *inits])
    return free


def test_cogates_own_pods_outrank_every_gang_and_are_never_victims(release, healthy, api, ns):
    """cogate's pods run at a priority no user PriorityClass reaches (kube-scheduler and cogate
    preempt only strictly lower priorities), and the controller never selects them even for a
    gang above them: a gang of system-cluster-critical priority that would fit the real node only
    without cogate's pods preempts nothing and says so (Preempting False, OnlyProtectedPods)."""
    t0 = time.monotonic()
    mine = component_pods(api, "webhook") + component_pods(api, "controller")
    assert len(mine) == 4
    for p in mine:
        assert p.spec.priority >= HIGHEST_USER_PRIORITY and p.spec.priority_class_name == "cogate-critical", \
            (p.metadata.name, p.spec.priority)
    (ctl,) = [c for c in component_pods(api, "controller")[0].spec.containers if c.name == "controller"]
    assert f"--protected-namespace={NAMESPACE}" in ctl.args
    node = realnode.NODE_NAME
    free = _free_cpu_millis(api, node)
    assert free >= 0
    uids = {p.metadata.uid for p in mine}
    create_pod_group(api, {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                           "metadata": {"name": "above", "namespace": ns}, "spec": {"minMember": 1}})
    # 50m more than the node has free: it fits only once some of cogate's 310m of requests go
    member = labelled_pod("above-0", group="above", priorityClassName="system-cluster-critical",
                          nodeSelector={"cogate.dev/real-node": "true"},
                          tolerations=[{"key": "cogate.dev/real-node", "operator": "Equal", "value": "true",
                                        "effect": "NoSchedule"}])
    member["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{free + 50}m"
    created = client.CoreV1Api(api).create_namespaced_pod(ns, member)
    assert created.spec.priority == 2_000_000_000 and created.spec.scheduling_gates

    def says_protected():
        pg = client.CustomObjectsApi(api).get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", ns,
                                                                       "podgroups", "above")
        conds = {c["type"]: c for c in pg.get("status", {}).get("conditions", [])}
        c = conds.get("Preempting")
        return c and c["status"] == "False" and c["reason"] == "OnlyProtectedPods" and c

    cond = wait_for(says_protected, 60, interval=0.5, what="Preempting=False OnlyProtectedPods")
    assert NAMESPACE in cond["message"], cond
    assert gated(client.CoreV1Api(api).read_namespaced_pod("above-0", ns))
    time.sleep(2)
    assert {p.metadata.uid for p in component_pods(api, "webhook") + component_pods(api, "controller")} == uids
    report("gang above cogate's priority -> OnlyProtectedPods", time.monotonic() - t0)


def _webhook_calls(api) -> float:
    """``cogate_webhook_requests_total`` summed over the webhook pods (their /metrics, by pod IP)."""
    import urllib.request

    total = 0.0
    for p in component_pods(api, "webhook"):
        with urllib.request.urlopen(f"http://{p.status.pod_ip}:8080/metrics", timeout=5) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith("cogate_webhook_requests_total{"):
                    total += float(line.rsplit(" ", 1)[1])
    return total


def test_unlabelled_pods_cost_no_webhook_call(release, healthy, api):
    """With the chart's defaults (late-label entry off) the API server calls the webhook only for
    pods carrying the pod-group label: 50 unlabelled pod creates (server-side dry runs: admission
    runs, nothing is stored) add no call; one labelled create adds one."""
    core = client.CoreV1Api(api)
    config = client.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration(WEBHOOK_CONFIG)
    assert [h.name for h in config.webhooks] == [WEBHOOK_ENTRY]
    before = _webhook_calls(api)
    for i in range(50):
        body = labelled_pod(f"plain-{i}")
        del body["metadata"]["labels"][POD_GROUP_LABEL]
        assert not core.create_namespaced_pod(release.probe_ns, body, dry_run="All").spec.scheduling_gates
    after_plain = _webhook_calls(api)
    assert gated_by_webhook(api, release.probe_ns)
    after_labelled = wait_for(lambda: (v := _webhook_calls(api)) > after_plain and v, 10, interval=0.2,
                              what="the labelled create counted")
    print(f"webhook calls: {after_plain - before:g} for 50 unlabelled pods, {after_labelled - after_plain:g} for 1 "
          "labelled")
    assert after_plain == before and after_labelled == after_plain + 1


# ------------------------------------------------ 6 leader deleted mid-release

@pytest.fixture
def one_worker(release, healthy, api):
    """The release upgraded to ``controller.workers=1`` (one gate removal in flight), back to the
    chart's default afterwards: with 32 in flight a release of the 120 members that fit the test's
    nodes takes a few round trips, done before the test can see its first member and delete the
    leader (CI saw all 60 of a 60-member gang released by then), so the deletion would not be
    mid-release."""
    base = ["helm", "upgrade", "cogate", "charts/cogate", "--namespace", NAMESPACE, "--reuse-values", "--wait",
            "--timeout", "3m", "--set"]
    helm(release.cluster, [*base, "controller.workers=1"])
    _wait_rolled_out(api)
    try:
        yield
    finally:
        helm(release.cluster, [*base, f"controller.workers={DEFAULT_WORKERS}"])
        _wait_rolled_out(api)


def test_leader_deleted_mid_release_another_replica_finishes_it(release, healthy, one_worker, api, ns):
    members = 120
    replace_fake_nodes(api, 2, cpu="32", memory="64Gi", pods=110, kwok_taint=False)
    core = client.CoreV1Api(api)
    workers = [a for p in component_pods(api, "controller") for c in p.spec.containers if c.name == "controller"
               for a in c.args if a.startswith("--workers")]
    assert workers == ["--workers=1", "--workers=1"], workers
    client.AppsV1Api(api).create_namespaced_replica_set(
        ns, example.replica_set("gang", members, namespace=ns, group="gang", cpu="100m", memory="64Mi"))
    wait_for(lambda: len([p for p in core.list_namespaced_pod(ns).items if gated(p)]) == members, 60,
             what=f"{members} gated members")
    leader = lease_holder(api)
    standby = {p.metadata.name for p in component_pods(api, "controller")} - {leader}
    assert leader and len(standby) == 1

    deleted_at: list[float] = []
    w = watch.Watch()
    create_pod_group(api, example.pod_group("gang", members, namespace=ns, timeout_seconds=None))
    for ev in w.stream(core.list_namespaced_pod, ns, timeout_seconds=60):
        if not ev["object"].spec.scheduling_gates:  # the release has begun: delete the leader now
            core.delete_namespaced_pod(leader, NAMESPACE)
            deleted_at.append(time.monotonic())
            w.stop()
            break
    assert deleted_at, "no member was released"
    released = sum(not gated(p) for p in core.list_namespaced_pod(ns).items)
    print(f"{released} of {members} members released right after the leader pod's deletion")
    assert released < members, "not mid-release: the whole group was released before the deletion"
    new = wait_for(lambda: (h := lease_holder(api)) not in (None, leader) and h, LEASE_DURATION + 5, interval=0.2,
                   what="a new Lease holder")
    takeover = time.monotonic() - deleted_at[0]
    report("leader pod deleted -> another controller holds the Lease", takeover)
    # The old leader finishes its reconcile pass, then gives the Lease up; the standby or the
    # Deployment's replacement pod, whichever asks first, takes it.
    print(f"new leader {new} ({'the standby' if new in standby else 'the replacement pod'})")
    assert new in {p.metadata.name for p in component_pods(api, "controller")}
    assert takeover <= LEASE_DURATION, f"takeover took {takeover:.1f}s"
    wait_for(lambda: not any(gated(p) for p in core.list_namespaced_pod(ns).items), 60,
             what="every member released")
    assert len(core.list_namespaced_pod(ns).items) == members
    wait_for(lambda: rolled_out(api, CONTROLLER), 120, interval=0.5, what="the controller Deployment back to 2")


# ---------------------------------------------------------- 5 webhook down

def _scale(api, name: str, replicas: int) -> None:
    client.AppsV1Api(api).patch_namespaced_deployment_scale(name, NAMESPACE, {"spec": {"replicas": replicas}})


def test_webhook_down_refuses_labelled_pods_clearly_and_jobs_recover(release, healthy, api, ns):
    core = client.CoreV1Api(api)
    replace_fake_nodes(api, 1, cpu="32", memory="64Gi", kwok_taint=False)
    _scale(api, WEBHOOK, 0)
    try:
        # stopping replicas keep serving for webhook.shutdownDelaySeconds: wait until all are gone
        sel = "app.kubernetes.io/instance=cogate,app.kubernetes.io/component=webhook"
        wait_for(lambda: not core.list_namespaced_pod(NAMESPACE, label_selector=sel).items, 90,
                 what="no webhook pods, terminating ones included")
        with pytest.raises(client.ApiException) as refused:
            core.create_namespaced_pod(ns, labelled_pod("refused"))
        message = json.loads(refused.value.body)["message"]
        print(f"refused: {message}")
        assert f'failed calling webhook "{WEBHOOK_ENTRY}"' in message
        # the API server's words (kube-proxy rejects a Service without endpoints): the webhook
        # entry, its Service and why
        assert f"https://{WEBHOOK}.{NAMESPACE}.svc:443/mutate" in message and "connection refused" in message, message
        plain = labelled_pod("plain")
        del plain["metadata"]["labels"][POD_GROUP_LABEL]
        created = core.create_namespaced_pod(ns, plain)
        assert not created.spec.scheduling_gates
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "gang"},
               "spec": {"parallelism": 2, "completions": 2, "backoffLimit": 0,
                        "template": {"metadata": {"labels": {POD_GROUP_LABEL: "job-gang"}},
                                     "spec": {**labelled_pod("x")["spec"], "restartPolicy": "Never"}}}}
        client.BatchV1Api(api).create_namespaced_job(ns, job)

        def failed_create():
            return [e for e in events_for(api, ns, "gang", kind="Job") if e.reason == "FailedCreate"]

        events = wait_for(failed_create, 30, what="the Job's FailedCreate event")
        assert WEBHOOK_ENTRY in events[0].message
        assert not core.list_namespaced_pod(ns, label_selector=f"{POD_GROUP_LABEL}=job-gang").items
    finally:
        _scale(api, WEBHOOK, 2)
    t0 = time.monotonic()
    wait_for(lambda: rolled_out(api, WEBHOOK), 180, interval=0.5, what="the webhook back with 2 replicas")
    job_pods = wait_for(lambda: (ps := core.list_namespaced_pod(ns, label_selector=f"{POD_GROUP_LABEL}=job-gang")
                                 .items) and len(ps) == 2 and ps, 120, interval=0.5, what="the Job's 2 pods")
    report("webhook back -> the Job's labelled pods created", time.monotonic() - t0)
    assert all(gated(p) for p in job_pods), "created through the webhook: gated (no PodGroup yet)"


# ------------------------------------------------------ 4 certificate rotation

#: Short validities (days) forcing rotation within the test: certificates 30 s, CA 50 s,
#: renewed 15 s before expiry, sidecar checks every 2 s; the webhook reloads within 5 s
#: (``--tls-reload-interval``), well inside the 15 s the previous CA stays in caBundle.
#: The running CA (10 years) is rolled over at once the operator's way: ``ca.key`` removed
#: from the Secret; the new one (50 s) is rolled over again before it expires.
ROTATION_VALUES = ("webhook.certs.certValidityDays=0.000347222", "webhook.certs.caValidityDays=0.000578704",
                   "webhook.certs.rotateBeforeDays=0.000173611", "webhook.certs.checkIntervalSeconds=2")
#: Seconds from a CA's creation to its sidecar rollover with ROTATION_VALUES: caValidity 50 s - rotateBefore 15 s.
ROLLOVER_AFTER = (0.000578704 - 0.000173611) * 86400


class CreationLoop(threading.Thread):
    """Creates a labelled pod every ``period`` seconds for ``duration`` seconds; records failures."""

    def __init__(self, api, namespace: str, period: float = 0.2, duration: float = 60.0):
        super().__init__(daemon=True)
        self.core, self.namespace, self.period, self.duration = client.CoreV1Api(api), namespace, period, duration
        self.created: list[str] = []
        self.ungated: list[str] = []
        self.failures: list[str] = []

    def run(self) -> None:
        start = time.monotonic()
        n = 0
        while (now := time.monotonic()) - start < self.duration:
            name = f"p-{n}"
            try:
                pod = self.core.create_namespaced_pod(self.namespace, labelled_pod(name, group="stream"),
                                                      _request_timeout=30)
                self.created.append(name)
                if not pod.spec.scheduling_gates:
                    self.ungated.append(name)
            except Exception as exc:  # noqa: BLE001 - every failure is recorded and asserted on
                self.failures.append(f"{now - start:.1f}s {name}: {getattr(exc, 'body', None) or exc}")
            n += 1
            time.sleep(max(0.0, start + n * self.period - time.monotonic()))


def test_certificate_rotation_under_a_stream_of_pod_creations(release, healthy, api, ns):
    fp = lambda c: c.fingerprint(pki.hashes.SHA256()).hex()[:12]  # noqa: E731
    loop = CreationLoop(api, ns)
    samples: list[dict] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            served = {}
            for pod in component_pods(api, "webhook"):
                if pod.status.pod_ip and ready(pod):
                    try:
                        served[pod.metadata.name] = served_certificate(pod.status.pod_ip)
                    except OSError:
                        continue
            bundle = ca_bundle(api)  # read after the served certificates (caBundle changes first)
            samples.append({"t": time.monotonic(), "at": datetime.datetime.now(datetime.timezone.utc),
                            "bundle": bundle, "served": served})
            stop.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    loop.start()
    time.sleep(2)
    release.cluster.kubectl("patch", "secret", CERT_SECRET, "-n", NAMESPACE, "--type=json",
                            "-p", '[{"op": "remove", "path": "/data/ca.key"}]')
    upgrade = ["helm", "upgrade", "cogate", "charts/cogate", "--namespace", NAMESPACE, "--values", REAL_NODE_VALUES,
               *(a for v in ROTATION_VALUES for a in ("--set", v)), "--wait", "--timeout", "3m"]
    helm(release.cluster, upgrade)
    loop.join(90)

    def settled() -> bool:
        """The sidecar's own rollover was seen (a third CA: it comes caValidity - rotateBefore,
        35 s, after the CA that ca.key's removal made, which on a loaded machine can be after
        the stream of creations ended) and the last sample has both replicas serving a
        certificate of the newest CA."""
        seen = list(samples)
        if len({fp(c) for s in seen for c in s["bundle"]}) < 3 or not seen:
            return False
        last = seen[-1]
        return len(last["served"]) == 2 and all(issued_by_one_of(leaf, last["bundle"][:1], last["at"])
                                                for leaf in last["served"].values())

    def newest_ca_since() -> float | None:
        """When the newest CA seen so far first appeared in caBundle (monotonic seconds), or None."""
        first: dict[str, float] = {}
        for s in list(samples):
            for c in s["bundle"]:
                first.setdefault(fp(c), s["t"])
        return max(first.values()) if first else None

    # Sampling goes on for 90 s at least, and at least until the sidecar's rollover is due: the newest CA's
    # age reaching caValidity - rotateBefore (35 s), plus the check interval and 60 s for a loaded machine,
    # whose helm upgrade can make the second CA late. The asserts below still judge.
    deadline = time.monotonic() + 90
    hard_deadline = time.monotonic() + 240
    while not settled() and time.monotonic() < hard_deadline:
        since = newest_ca_since()
        if time.monotonic() >= max(deadline, (since or 0.0) + ROLLOVER_AFTER + 2 + 60):
            break
        time.sleep(1)
    stop.set()
    sampler.join(10)
    assert not loop.is_alive()

    def diagnostics() -> str:
        t0 = samples[0]["t"] if samples else 0.0
        lines = [f"{s['t'] - t0:6.1f}s bundle={[fp(c) for c in s['bundle']]} served="
                 f"{ {p[-5:]: (fp(leaf), round(pki.not_after(leaf) - time.time() + (time.monotonic() - s['t']), 1)) for p, leaf in s['served'].items()} }"
                 for s in samples]
        for pod in component_pods(api, "webhook"):
            for c in ("certs", "cert-rotator"):
                log = release.cluster.kubectl("logs", "-n", NAMESPACE, pod.metadata.name, "-c", c, check=False).stdout
                lines += [f"{pod.metadata.name[-5:]}/{c}: {line[:300]}" for line in log.splitlines()[-15:]]
        return "\n".join(lines)

    assert loop.failures == [], f"{len(loop.failures)} of {len(loop.created) + len(loop.failures)} creations " \
                                f"failed:\n" + "\n".join(f[:400] for f in loop.failures[:10]) + "\n" + diagnostics()
    assert loop.ungated == [] and len(loop.created) >= 250, (len(loop.created), loop.ungated[:5])

    # Invariant at every sample: each replica serves a certificate signed by a CA in caBundle.
    broken = [(round(s["t"] - samples[0]["t"], 1), pod, [fp(c) for c in s["bundle"]])
              for s in samples for pod, leaf in s["served"].items() if not issued_by_one_of(leaf, s["bundle"], s["at"])]
    assert broken == [], f"{broken}\n{diagnostics()}"
    cas_seen = {fp(c) for s in samples for c in s["bundle"]}
    rollovers = [s for s in samples if len(s["bundle"]) >= 2]
    leaves = {fp(leaf) for s in samples for leaf in s["served"].values()}
    print(f"{len(samples)} samples, {len(cas_seen)} CAs, {len(leaves)} serving certificates, "
          f"{len(rollovers)} samples with 2 CAs in caBundle, {len(loop.created)} pods created")
    assert len(cas_seen) >= 3, f"the CA rolled over after ca.key's removal, then again by a sidecar\n{diagnostics()}"
    assert rollovers, "a CA rollover keeps the previous CA in caBundle"
    # (The invariant above is "a previous CA leaves caBundle only once no replica serves a
    # certificate it signed".) In the end every replica serves one signed by the newest CA.
    last = samples[-1]
    assert len(last["served"]) == 2 and all(issued_by_one_of(leaf, last["bundle"][:1], last["at"])
                                            for leaf in last["served"].values()), last
    # Rotation happened in place: the webhook containers were not restarted by it.
    for pod in component_pods(api, "webhook"):
        assert all(cs.restart_count == 0 for cs in pod.status.container_statuses), pod.metadata.name
    # Certificates are renewed without restarting: a replica served more than one over the test.
    per_pod: dict[str, set] = {}
    for s in samples:
        for pod, leaf in s["served"].items():
            per_pod.setdefault(pod, set()).add(fp(leaf))
    assert any(len(v) >= 2 for v in per_pod.values()), per_pod


# ------------------------------------------------- 3 nothing forbidden (audit)

def test_no_request_of_the_components_was_forbidden(release, healthy, api):
    """Runs after everything above (pytest keeps file order) and before uninstall."""
    events = test_rbac.audit_events(release.cluster.audit_log)
    ours = [e for e in events if e["user"]["username"] in (test_rbac.sa_user(WEBHOOK), test_rbac.sa_user(CONTROLLER))]
    kinds = {(e["user"]["username"].rsplit(":", 1)[1], *test_rbac.request_kind(e)[:2]) for e in ours}
    print(f"{len(ours)} audited requests of the release's ServiceAccounts; {len(kinds)} kinds")
    # RBAC's verdict is in the audit annotations; other 403s (NamespaceLifecycle: an event for
    # an object of a namespace being deleted) are not about the ServiceAccounts' rights.
    forbidden = [(e["user"]["username"], *test_rbac.request_kind(e)) for e in ours
                 if (e.get("annotations") or {}).get("authorization.k8s.io/decision") != "allow"]
    assert forbidden == [], forbidden
    others = [(test_rbac.request_kind(e), e["responseStatus"].get("message", "")[:160]) for e in ours
              if e.get("responseStatus", {}).get("code") == 403]
    print(f"403s not from RBAC: {others}")
    assert all("because it is being terminated" in message for _, message in others), others
    # not vacuous: the requests the RBAC rules exist for were made, from inside the pods
    needed = {(WEBHOOK, "create", "secrets"), (WEBHOOK, "patch", "admissionregistration.k8s.io/mutatingwebhookconfigurations"),
              (WEBHOOK, "update", "secrets"),
              (CONTROLLER, "watch", "pods"), (CONTROLLER, "patch", "pods"), (CONTROLLER, "list", "nodes"),
              (CONTROLLER, "update", "coordination.k8s.io/leases")}
    assert needed <= kinds, sorted(needed - kinds)
    sources = {ip for e in ours for ip in e.get("sourceIPs", [])}
    print(f"source addresses: {sorted(sources)}")
    assert all(ipaddress.ip_address(ip) in ipaddress.ip_network(realnode.POD_SUBNET) for ip in sources), sources
    assert _log_lines(release, api, FORBIDDEN) == []
    # and, after rotations and rollouts, still no failed write (the certificate reload once needed one)
    assert _log_lines(release, api, WRITE_FAILED) == []


# ------------------------------------------------------- 7 upgrade, uninstall

def test_helm_upgrade_rolls_both_deployments_and_keeps_working(release, healthy, api):
    before = {p.metadata.name for p in component_pods(api, "webhook") + component_pods(api, "controller")}
    helm(release.cluster, release.commands["upgrade"] + ["--wait", "--timeout", "3m"])
    _wait_rolled_out(api)
    after = component_pods(api, "webhook") + component_pods(api, "controller")
    assert not before & {p.metadata.name for p in after}, "every pod replaced"
    for pod in after:
        args = [a for c in pod.spec.containers for a in c.args]
        assert "--log-level=debug" in args, pod.metadata.name
    assert gated_by_webhook(api, release.probe_ns)
    assert lease_holder(api) in {p.metadata.name for p in component_pods(api, "controller")}


def _gated_anywhere(api) -> list[str]:
    """Every pod in the cluster carrying cogate's gate, as ``namespace/name``."""
    pods = client.CoreV1Api(api).list_pod_for_all_namespaces().items
    return sorted(f"{p.metadata.namespace}/{p.metadata.name}" for p in pods if gated(p))


def test_helm_uninstall_leaves_only_what_the_chart_readme_says(release, healthy, api, ns):
    core = client.CoreV1Api(api)
    # a gang left waiting at uninstall: 2 members of a PodGroup of minMember 3 (WaitingForMembers)
    create_pod_group(api, example.pod_group("stuck", 3, namespace=ns))
    for i in range(2):
        core.create_namespaced_pod(ns, labelled_pod(f"stuck-{i}", group="stuck"))
    wait_for(lambda: len(_gated_anywhere(api)) == 2, 30, what="the 2 members stored gated")
    t0 = time.monotonic()
    helm(release.cluster, release.commands["uninstall"] + ["--wait"])
    report("helm uninstall (pre-delete hook: cogate ungate)", time.monotonic() - t0)
    release.installed = False
    # the pre-delete hook (charts/cogate/templates/uninstall-hook.yaml) ungated them: none is left gated
    assert _gated_anywhere(api) == []
    for p in core.list_namespaced_pod(ns).items:
        assert p.metadata.name.startswith("stuck-") and not p.spec.scheduling_gates, p.metadata.name
    # its objects went with it (hook-succeeded), and its ServiceAccount did only what its RBAC allows
    assert not [a for a in core.list_namespaced_service_account(NAMESPACE).items
                if a.metadata.name == UNINSTALL]
    hook = [e for e in test_rbac.audit_events(release.cluster.audit_log)
            if e["user"]["username"] == test_rbac.sa_user(UNINSTALL)]
    kinds = {test_rbac.request_kind(e)[:2] for e in hook}
    assert {("delete", "admissionregistration.k8s.io/mutatingwebhookconfigurations"), ("patch", "pods")} <= kinds, kinds
    assert all((e.get("annotations") or {}).get("authorization.k8s.io/decision") == "allow" for e in hook)
    admission = client.AdmissionregistrationV1Api(api)
    assert WEBHOOK_CONFIG not in {c.metadata.name for c in admission.list_mutating_webhook_configuration().items}
    wait_for(lambda: not core.list_namespaced_pod(NAMESPACE).items, 90, what="the release's pods gone")
    secrets_left = {s.metadata.name for s in core.list_namespaced_secret(NAMESPACE).items}
    assert secrets_left == {CERT_SECRET}, secrets_left
    leases = client.CoordinationV1Api(api).list_namespaced_lease(NAMESPACE).items
    assert {le.metadata.name for le in leases} == {"cogate-controller"}, leases
    print(f"Lease left by uninstall: holder {leases[0].spec.holder_identity!r}")
    # exactly what the chart's README says uninstall keeps
    kept = re.search(r"`helm uninstall` keeps (.*?)\.", (ROOT / "charts/cogate/README.md").read_text(), re.S)
    assert kept and "Secret `<release>-webhook-cert`" in kept.group(1) and "Lease `cogate-controller`" in kept.group(1)
    # labelled pods are admitted again (no leftover failurePolicy: Fail webhook), ungated
    pod = core.create_namespaced_pod(release.probe_ns, labelled_pod("after-uninstall"), dry_run="All")
    assert not pod.spec.scheduling_gates
