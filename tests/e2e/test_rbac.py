"""Least privilege: cogate's components under the chart's own ServiceAccounts.

No kubelet needed: the chart is rendered (``helm template``, default values); its
ServiceAccounts, RBAC objects and MutatingWebhookConfiguration are applied to a local
control plane of this module, with the API server's audit log on for those
ServiceAccounts. Tokens are minted with the TokenRequest API (``kubectl create token``),
and the components run as local processes with the chart's own arguments and a kubeconfig
holding that token:

- the certificate bootstrap (the webhook pod's init container, then a forced renewal as
  its rotator sidecar does it) as the webhook ServiceAccount;
- the controller, with leader election, as the controller ServiceAccount;
- the webhook server itself makes no API calls; it serves admission from a local URL (the
  chart's MutatingWebhookConfiguration, whose Service has no pods here, is narrowed to match
  no pod; the bootstrap still patches its ``caBundle``).

Then the README example runs through them, and: no request of theirs was forbidden (audit
log and logs); each request kind the chart's RBAC exists for was made (so "nothing
forbidden" is not vacuous); and ``kubectl auth can-i --list`` for each ServiceAccount,
minus what any ServiceAccount may do, equals the RBAC table of ``charts/cogate/README.md``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from cogate.controller.model import releases
from cogate.localcluster import build, example, versions
from cogate.localcluster.cluster import LocalCluster
from cogate.localcluster.stack import CogateStack, free_port

from .kube import create_pod_group, events_for, gated, get_pod_group, pods, running, wait_for

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "cogate"
RELEASE = "cogate"
NAMESPACE = "cogate-system"
#: The chart's names for release "cogate" (fullname "cogate").
FULLNAME = RELEASE
WEBHOOK_SA = f"{FULLNAME}-webhook"
CONTROLLER_SA = f"{FULLNAME}-controller"
#: A ServiceAccount with no bindings: what every ServiceAccount may do (discovery, self reviews).
BASELINE_SA = "rbac-baseline"
SELECTOR = "app=nginx"


def sa_user(name: str) -> str:
    return f"system:serviceaccount:{NAMESPACE}:{name}"


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """``(cluster, audit_log_path)``: a control plane auditing requests of the release namespace's ServiceAccounts."""
    build.ensure_binaries(["etcd", "kubernetes", "kwok", "helm"], log=sys.stderr)
    work = tmp_path_factory.mktemp("audit")
    policy = work / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump({
        "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
        "rules": [{"level": "Metadata", "userGroups": [f"system:serviceaccounts:{NAMESPACE}"]}, {"level": "None"}],
    }))
    log = work / "audit.log"
    cluster = LocalCluster(extra_args={"kube-apiserver": [
        f"--audit-policy-file={policy}", f"--audit-log-path={log}", "--audit-log-format=json",
        "--audit-log-mode=blocking", "--audit-log-maxbackup=0"]})
    cluster.start()
    try:
        yield cluster, log
    finally:
        cluster.stop()


def render_chart(*set_values: str) -> list[dict]:
    kube_version = versions.KUBERNETES.lstrip("v")
    out = subprocess.run([str(build.binary("helm")), "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
                          "--kube-version", kube_version, *(a for v in set_values for a in ("--set", v))],
                         capture_output=True, text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def sa_kubeconfig(cluster: LocalCluster, sa: str, path: Path) -> Path:
    """A kubeconfig authenticating with a fresh token of ServiceAccount ``sa`` (TokenRequest API)."""
    token = cluster.kubectl("create", "token", sa, "-n", NAMESPACE, "--duration=2h").stdout.strip()
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": cluster.server,
                                                   "certificate-authority": str(cluster.ca_file)}}],
        "users": [{"name": sa, "user": {"token": token}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": sa, "namespace": NAMESPACE}}],
        "current-context": "local",
    }))
    path.chmod(0o600)
    return path


def container(objs: list[dict], deployment: str, name: str, *, init: bool = False) -> dict:
    deploy = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == deployment)
    spec = deploy["spec"]["template"]["spec"]
    return next(c for c in spec["initContainers" if init else "containers"] if c["name"] == name)


def chart_args(c: dict, **overrides: str) -> list[str]:
    """The container's args with ``$(POD_NAMESPACE)`` resolved and ``--flag=value`` overrides applied
    (a value of ``None`` drops the flag)."""
    out = []
    for arg in c["args"]:
        arg = arg.replace("$(POD_NAMESPACE)", NAMESPACE)
        flag = arg.split("=", 1)[0]
        if flag in overrides:
            continue
        out.append(arg)
    return out + [f"{k}={v}" for k, v in overrides.items() if v is not None]


def run_cogate(args: list[str], log: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "cogate.cli", *args], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "POD_NAMESPACE": NAMESPACE})
    log.write_text(proc.stdout + proc.stderr)
    return proc


class _AdminKubectl:
    """What :class:`CogateStack` needs of a cluster, for the webhook only (CRD, local registration)."""

    def __init__(self, cluster: LocalCluster):
        self.kubectl = cluster.kubectl
        self.kubeconfig = cluster.kubeconfig


@pytest.fixture(scope="module")
def installed(audited, tmp_path_factory):
    """Chart RBAC applied; bootstrap run twice and the controller started under their ServiceAccounts."""
    cluster, audit_log = audited
    work = tmp_path_factory.mktemp("rbac")
    objs = render_chart()
    wanted = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
              "MutatingWebhookConfiguration"}
    applied = [o for o in objs if o["kind"] in wanted]
    for o in applied:
        if o["kind"] == "MutatingWebhookConfiguration":
            for hook in o["webhooks"]:  # its Service has no pods here: match no pod
                hook["objectSelector"] = {"matchLabels": {"cogate.test/never": "true"}}
    cluster.kubectl("create", "namespace", NAMESPACE)
    cluster.kubectl("create", "serviceaccount", BASELINE_SA, "-n", NAMESPACE)
    manifest = work / "chart-rbac.yaml"
    manifest.write_text(yaml.safe_dump_all(applied))
    cluster.kubectl("apply", "-f", str(manifest))

    webhook_kc = sa_kubeconfig(cluster, WEBHOOK_SA, work / "webhook.kubeconfig")
    controller_kc = sa_kubeconfig(cluster, CONTROLLER_SA, work / "controller.kubeconfig")

    # The webhook pod's init container, then its rotator sidecar forced to renew (secret update).
    cert_dir = work / "certs"
    init = container(objs, WEBHOOK_SA, "certs", init=True)
    first = run_cogate(chart_args(init, **{"--cert-dir": str(cert_dir), "--kubeconfig": str(webhook_kc)}),
                       work / "bootstrap.log")
    assert first.returncode == 0, first.stdout + first.stderr
    # A validity shorter than the first certificate's remaining one forces the renewal.
    rotator = container(objs, WEBHOOK_SA, "cert-rotator")
    renew = run_cogate(chart_args(rotator, **{"--cert-dir": str(cert_dir), "--kubeconfig": str(webhook_kc),
                                              "--loop": None, "--cert-validity-days": "300"}),
                       work / "rotate.log")
    assert renew.returncode == 0, renew.stdout + renew.stderr

    stack = CogateStack(_AdminKubectl(cluster), work / "stack")
    stack.workdir.mkdir(parents=True)
    stack.apply_crd()
    ca_pem = stack._write_certs()
    stack.start_webhook()
    stack.register_webhook(ca_pem)

    ctrl = container(objs, CONTROLLER_SA, "controller")
    port = free_port()
    args = chart_args(ctrl, **{"--metrics-port": str(port), "--metrics-host": "127.0.0.1",
                               "--kubeconfig": str(controller_kc)})
    stack.controller_metrics_port = port
    proc = stack._spawn("controller", args[1:])  # args[0] is the subcommand, _spawn adds it
    stack._wait_ready(proc, f"http://127.0.0.1:{port}/readyz", None)
    try:
        yield {"cluster": cluster, "audit": audit_log, "stack": stack, "objs": objs, "work": work,
               "logs": [work / "bootstrap.log", work / "rotate.log", proc.log]}
    finally:
        stack.stop()


# --------------------------------------------------------------------- audit

def audit_events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def request_kind(event: dict) -> tuple[str, str, str]:
    """``(verb, group/resource[/subresource], name)`` of an audit event."""
    ref = event.get("objectRef") or {}
    resource = "/".join(p for p in (ref.get("apiGroup") or "", ref.get("resource", ""), ref.get("subresource", "")) if p)
    return event["verb"], resource, ref.get("name", "")


# ---------------------------------------------------------------------- tests

def test_readme_example_under_the_chart_service_accounts(installed):
    cluster, stack = installed["cluster"], installed["stack"]
    cluster.add_nodes(1, prefix="rbac-", kwok_taint=False, **example.NODE_SHAPE)
    api = cluster.api_client()
    try:
        apps = client.AppsV1Api(api)
        lease = wait_for(lambda: client.CoordinationV1Api(api).read_namespaced_lease("cogate-controller", NAMESPACE),
                         30, what="controller Lease")
        assert lease.spec.holder_identity

        for ns in ("rbac-three", "rbac-four"):
            cluster.kubectl("create", "namespace", ns)
        # minMember 3: released, 3 run and 3 stay Pending, gated (no room)
        create_pod_group(api, example.pod_group("nginx", 3, namespace="rbac-three", timeout_seconds=10))
        apps.create_namespaced_replica_set("rbac-three", example.replica_set("nginx", 6, namespace="rbac-three",
                                                                             group="nginx"))

        def three_running():
            ps = pods(api, "rbac-three", SELECTOR)
            return len(ps) == 6 and sum(map(running, ps)) == 3 and sum(map(gated, ps)) == 3

        wait_for(three_running, 30, what="3 Running, 3 held gated")
        wait_for(lambda: get_pod_group(api, "rbac-three", "nginx").get("status", {}).get("phase") == "Running", 30,
                 what="PodGroup Running")
        # the recorder writes events after the status
        reasons = wait_for(lambda: "Released" in (r := {e.reason for e in events_for(api, "rbac-three", "nginx")})
                           and r, 10, what="Released event")
        assert "Released" in reasons
        apps.delete_namespaced_replica_set("nginx", "rbac-three", propagation_policy="Foreground")
        wait_for(lambda: not pods(api, "rbac-three", SELECTOR), 60, what="first example's pods gone")

        # minMember 4: nothing released, all 6 gated, the PodGroup says why
        create_pod_group(api, example.pod_group("nginx", 4, namespace="rbac-four", timeout_seconds=10))
        apps.create_namespaced_replica_set("rbac-four", example.replica_set("nginx", 6, namespace="rbac-four",
                                                                            group="nginx"))

        def says_why():
            st = get_pod_group(api, "rbac-four", "nginx").get("status", {})
            return any(c.get("reason") == "InsufficientCapacity" for c in st.get("conditions", []))

        wait_for(says_why, 30, what="InsufficientCapacity condition")
        # the ReplicaSet may still be creating its last pods once minMember of them are judged
        ps = wait_for(lambda: len(ps := pods(api, "rbac-four", SELECTOR)) == 6 and ps, 30, what="6 pods")
        assert len(ps) == 6 and all(map(gated, ps))
        reasons = wait_for(lambda: "InsufficientCapacity" in (r := {e.reason for e in
                                                                   events_for(api, "rbac-four", "nginx")}) and r,
                           10, what="InsufficientCapacity event")
        assert "InsufficientCapacity" in reasons
    finally:
        api.close()
    assert stack.processes["controller"].alive()


def test_owners_of_waiting_groups_are_read_under_the_chart_service_account(installed):
    """A group whose ReplicaSet keeps fewer pods than minMember, and one whose Job runs fewer at
    once: the controller reads both owners (get only) and says so (issue 21 item 5)."""
    cluster = installed["cluster"]
    api = cluster.api_client()
    try:
        ns = "rbac-owners"
        cluster.kubectl("create", "namespace", ns)
        create_pod_group(api, example.pod_group("web", 3, namespace=ns, timeout_seconds=None))
        client.AppsV1Api(api).create_namespaced_replica_set(ns, example.replica_set("web", 2, namespace=ns,
                                                                                    group="web", cpu="100m"))
        tpl = example.pod_template("train", cpu="100m", app="train")
        tpl["spec"]["restartPolicy"] = "Never"
        create_pod_group(api, example.pod_group("train", 3, namespace=ns, timeout_seconds=None))
        client.BatchV1Api(api).create_namespaced_job(ns, {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
            "spec": {"parallelism": 2, "completions": 2, "template": tpl}})

        def says(group: str, text: str):
            return lambda: any(c.get("type") == "Released" and text in c.get("message", "")
                               for c in get_pod_group(api, ns, group).get("status", {}).get("conditions", []))

        wait_for(says("web", "keeps 2 pods (spec.replicas 2)"), 30, what="the ReplicaSet named")
        wait_for(says("train", "runs at most 2 pods at once"), 30, what="the Job named")
        reasons = wait_for(lambda: "OwnerCannotComplete" in (r := {e.reason for e in events_for(api, ns, "web")}) and r,
                           10, what="OwnerCannotComplete event")  # the recorder writes it after the status
        assert "OwnerCannotComplete" in reasons
    finally:
        api.close()


def test_staged_owners_are_read_under_the_chart_service_account(installed):
    """Groups waiting for members with an owner of a staged kind (issue 20 item 3): a PodGroup
    whose controller owner is an MPIJob, a pod whose label names a JobSet. Their CRDs are not
    installed here: the controller's ``get`` (granted by the chart) answers 404, which is quiet."""
    cluster = installed["cluster"]
    api = cluster.api_client()
    try:
        ns = "rbac-staged"
        cluster.kubectl("create", "namespace", ns)
        pg = example.pod_group("pi", 5, namespace=ns, timeout_seconds=None)
        pg["metadata"]["ownerReferences"] = [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "pi",
                                              "uid": "00000000-0000-0000-0000-000000000001", "controller": True}]
        create_pod_group(api, pg)
        create_pod_group(api, example.pod_group("js", 3, namespace=ns, timeout_seconds=None))
        core = client.CoreV1Api(api)
        for group, labels in (("pi", {}), ("js", {"jobset.sigs.k8s.io/jobset-name": "js"})):
            tpl = example.pod_template(group, cpu="100m", app=group)
            tpl["metadata"]["name"] = f"{group}-0"
            tpl["metadata"]["labels"].update(labels)
            core.create_namespaced_pod(ns, {"apiVersion": "v1", "kind": "Pod", **tpl})

        def read(resource: str) -> bool:
            return any(e["user"]["username"] == sa_user(CONTROLLER_SA) and request_kind(e)[:2] == ("get", resource)
                       for e in audit_events(installed["audit"]))

        wait_for(lambda: read("kubeflow.org/mpijobs") and read("jobset.x-k8s.io/jobsets"), 30,
                 what="the controller's get of the MPIJob and the JobSet in the audit log")
    finally:
        api.close()


def test_no_request_forbidden_and_every_granted_kind_used(installed):
    # runs after the example (pytest keeps file order): the audit log holds all of it, and
    # at least one renewal of the leader Lease (every 2 s, controller.leader.RETRY_PERIOD)
    def renewed():
        return any(e["user"]["username"] == sa_user(CONTROLLER_SA)
                   and request_kind(e)[:2] == ("update", "coordination.k8s.io/leases")
                   for e in audit_events(installed["audit"]))

    wait_for(renewed, 20, what="a Lease renewal by the controller in the audit log")
    events = audit_events(installed["audit"])
    ours = {sa_user(WEBHOOK_SA): [], sa_user(CONTROLLER_SA): []}
    for e in events:
        if e["user"]["username"] in ours:
            ours[e["user"]["username"]].append(e)
    forbidden = [(e["user"]["username"], *request_kind(e)) for evs in ours.values() for e in evs
                 if e.get("responseStatus", {}).get("code") == 403]
    assert forbidden == [], f"forbidden requests: {forbidden}"
    for log in installed["logs"]:
        text = log.read_text()
        assert not re.search(r"\b403\b|Forbidden|forbidden", text), f"{log.name}:\n{text[-2000:]}"

    made = {user: {(v, r) for v, r, _ in map(request_kind, evs)} for user, evs in ours.items()}
    webhook_needed = {("create", "secrets"), ("get", "secrets"), ("update", "secrets"),
                      ("get", "admissionregistration.k8s.io/mutatingwebhookconfigurations"),
                      ("patch", "admissionregistration.k8s.io/mutatingwebhookconfigurations")}
    controller_needed = {("list", "pods"), ("watch", "pods"), ("patch", "pods"), ("list", "nodes"),
                         ("list", "scheduling.x-k8s.io/podgroups"),
                         ("create", "coordination.k8s.io/leases"), ("update", "coordination.k8s.io/leases"),
                         ("watch", "coordination.k8s.io/leases"),  # kube-scheduler's, by name (preemption)
                         ("get", "apps/replicasets"), ("get", "batch/jobs"),
                         ("get", "kubeflow.org/mpijobs"), ("get", "jobset.x-k8s.io/jobsets")}
    devices_room = {(verb, f"resource.k8s.io/{res}") for verb in ("list", "watch")
                    for res in ("resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates")}
    version = releases.parse(versions.release().kubernetes)
    if any(f.name == "dra" for f in releases.unsupported(version)):  # resource.k8s.io/v1 not served (< 1.34)
        # only the availability check (devices.feature: a list of one ResourceSlice, answered 404), no informer
        assert {(v, r) for v, r in made[sa_user(CONTROLLER_SA)] if r.startswith("resource.k8s.io/")} \
            <= {("list", "resource.k8s.io/resourceslices")}, "the devices room watches an API its release does not serve"
    else:
        controller_needed |= devices_room
    assert webhook_needed <= made[sa_user(WEBHOOK_SA)], sorted(made[sa_user(WEBHOOK_SA)])
    assert controller_needed <= made[sa_user(CONTROLLER_SA)], sorted(made[sa_user(CONTROLLER_SA)])
    status_writes = {v for v, r in made[sa_user(CONTROLLER_SA)] if r == "scheduling.x-k8s.io/podgroups/status"}
    event_writes = {r for v, r in made[sa_user(CONTROLLER_SA)] if v in ("create", "patch") and r.endswith("events")}
    assert status_writes & {"update", "patch"} and event_writes, sorted(made[sa_user(CONTROLLER_SA)])


# ------------------------------------------------------------- can-i --list

def _values_default(key: str):
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for part in key.split("."):
        values = values[part]
    return values


def readme_rbac_table(values: dict[str, str] | None = None) -> set[tuple[str, str, str, str, str]]:
    """Rows of the chart README's RBAC table that apply with default values (``values``: keys set
    otherwise, as ``--set`` gives them), expanded to ``(service account, scope, group/resource,
    resource name, verb)``. A row's condition is ``key=value``, or ``key`` set (a non-empty value)."""
    values = values or {}
    text = (CHART / "README.md").read_text()
    lines = text.split("| ServiceAccount | scope |", 1)[1].splitlines()[2:]
    rows: set[tuple[str, str, str, str, str]] = set()
    for line in lines:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        sa, scope, groups, resources, names, verbs, when = cells[:7]
        if when not in ("", "—"):
            if when.endswith(" set"):
                key = when.removesuffix(" set").strip("`")
                if not str(values.get(key, _values_default(key)) or ""):
                    continue
            else:
                key, _, value = when.strip("`").partition("=")
                if str(values.get(key, _values_default(key))).lower() != value.lower():
                    continue

        def words(cell: str) -> list[str]:
            return [w.strip().strip("`") for w in cell.split(",") if w.strip() not in ("", "—")]

        for group in words(groups):
            group = "" if group in ('""', "core") else group
            for resource in words(resources):
                for name in words(names) or [""]:
                    name = name.replace("<release>", FULLNAME)
                    for verb in words(verbs):
                        rows.add((sa.strip("`"), scope, f"{group}/{resource}" if group else resource, name, verb))
    return rows


_CAN_I_ROW = re.compile(r"^(\S*)\s+\[([^\]]*)\]\s+\[([^\]]*)\]\s+\[([^\]]*)\]\s*$")


def can_i(cluster: LocalCluster, sa: str, namespace: str) -> set[tuple[str, str, str]]:
    """``kubectl auth can-i --list`` of ``sa`` in ``namespace`` as ``(group/resource, name, verb)``
    (non-resource URLs as ``(url, "", verb)``).

    kubectl prints ``resource.group/subresource`` (its ``combineResourceGroup``), one list
    in brackets per column.
    """
    out = cluster.kubectl("auth", "can-i", "--list", f"--as={sa_user(sa)}", "-n", namespace).stdout
    lines = out.splitlines()
    assert lines and lines[0].split()[:2] == ["Resources", "Non-Resource"], out
    rights = set()
    for line in lines[1:]:
        m = _CAN_I_ROW.match(line)
        assert m, f"unexpected can-i line: {line!r}"
        resource, urls, names, verbs = m.group(1), m.group(2).split(), m.group(3).split(), m.group(4).split()
        if resource:
            base, _, sub = resource.partition("/")
            plural, _, group = base.partition(".")
            key = "/".join(p for p in (group, plural, sub) if p)
            for name in names or [""]:
                rights.update((key, name, verb) for verb in verbs)
        for url in urls:
            rights.update((url, "", verb) for verb in verbs)
    return rights


@pytest.mark.parametrize("sa, short", [(WEBHOOK_SA, "webhook"), (CONTROLLER_SA, "controller")])
def test_can_i_list_matches_the_chart_readme(installed, sa, short):
    cluster = installed["cluster"]
    table = readme_rbac_table()
    assert table, "no RBAC table in charts/cogate/README.md"
    for namespace, scopes in ((NAMESPACE, {"cluster", "release namespace"}), ("default", {"cluster"}),
                              ("kube-system", {"cluster", "`kube-system`"})):
        baseline = can_i(cluster, BASELINE_SA, namespace)
        granted = can_i(cluster, sa, namespace) - baseline
        expected = {(res, name, verb) for who, scope, res, name, verb in table if who == short and scope in scopes}
        assert granted == expected, (f"{short} in {namespace}: granted but not in the README: "
                                     f"{sorted(granted - expected)}; in the README but not granted: "
                                     f"{sorted(expected - granted)}")


# ------------------------------------------------------- provisioning (issue 16)

def test_provisioning_rights_are_exactly_what_it_uses(installed):
    """Runs last: the chart's RBAC again with ``controller.provisioningClass`` set, the controller
    restarted with the chart's arguments (``--provisioning-class``) under its ServiceAccount,
    cluster-autoscaler's ProvisioningRequest CRD installed (no autoscaler runs: the request stays
    unanswered). A gang that fits no node makes cogate create a PodTemplate and a request; a member
    deleted (the group no longer waits for room) makes it delete both. Nothing is forbidden, every
    provisioning right is used, and ``can-i --list`` equals the README's table for those values."""
    from cogate.controller.provisioning import provreq
    from cogate.localcluster import autoscaler as ca

    cluster, stack, work = installed["cluster"], installed["stack"], installed["work"]
    value = f"controller.provisioningClass={provreq.ATOMIC_CLASS}"
    cluster.kubectl("apply", "-f", str(ca.crd_path()))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                    "crd/provisioningrequests.autoscaling.x-k8s.io")
    objs = render_chart(value)
    role = [o for o in objs if o["kind"] == "ClusterRole" and o["metadata"]["name"] == CONTROLLER_SA]
    manifest = work / "chart-rbac-provisioning.yaml"
    manifest.write_text(yaml.safe_dump_all(role))
    cluster.kubectl("apply", "-f", str(manifest))
    old = stack.processes.pop("controller")
    old.stop()
    ctrl = container(objs, CONTROLLER_SA, "controller")
    assert f"--provisioning-class={provreq.ATOMIC_CLASS}" in ctrl["args"]
    port = free_port()
    args = chart_args(ctrl, **{"--metrics-port": str(port), "--metrics-host": "127.0.0.1",
                               "--kubeconfig": str(work / "controller.kubeconfig")})
    stack.controller_metrics_port = port
    proc = stack._spawn("controller", args[1:])
    stack._wait_ready(proc, f"http://127.0.0.1:{port}/readyz", None)
    api = cluster.api_client()
    ns = "rbac-provisioning"
    try:
        cluster.kubectl("create", "namespace", ns)
        create_pod_group(api, example.pod_group("big", 2, namespace=ns, timeout_seconds=None))
        core = client.CoreV1Api(api)
        for i in range(2):
            tpl = example.pod_template("big", cpu="100", app="big")  # fits no node
            tpl["metadata"]["name"] = f"big-{i}"
            core.create_namespaced_pod(ns, {"apiVersion": "v1", "kind": "Pod", **tpl})
        custom = client.CustomObjectsApi(api)

        def requests() -> list[dict]:
            return custom.list_namespaced_custom_object(provreq.GROUP, provreq.VERSION, ns, provreq.PLURAL)["items"]

        made = wait_for(lambda: requests() or None, 30, what="a ProvisioningRequest")
        assert [ps["count"] for ps in made[0]["spec"]["podSets"]] == [2]
        assert core.list_namespaced_pod_template(ns).items
        core.delete_namespaced_pod("big-1", ns)
        wait_for(lambda: not requests() and not core.list_namespaced_pod_template(ns).items, 30,
                 what="request and template deleted")
    finally:
        api.close()

    def deleted() -> bool:
        return any(e["user"]["username"] == sa_user(CONTROLLER_SA)
                   and request_kind(e)[:2] == ("delete", "autoscaling.x-k8s.io/provisioningrequests")
                   for e in audit_events(installed["audit"]))

    wait_for(deleted, 20, what="the controller's delete in the audit log")
    events = [e for e in audit_events(installed["audit"]) if e["user"]["username"] == sa_user(CONTROLLER_SA)]
    forbidden = [request_kind(e) for e in events if e.get("responseStatus", {}).get("code") == 403]
    assert forbidden == [], forbidden
    text = proc.log.read_text()
    assert not re.search(r"\b403\b|Forbidden|forbidden", text), text[-2000:]
    made_kinds = {request_kind(e)[:2] for e in events}
    needed = {("list", "autoscaling.x-k8s.io/provisioningrequests"),
              ("watch", "autoscaling.x-k8s.io/provisioningrequests"),
              ("create", "autoscaling.x-k8s.io/provisioningrequests"),
              ("delete", "autoscaling.x-k8s.io/provisioningrequests"),
              ("create", "podtemplates"), ("delete", "podtemplates"), ("get", "pods")}
    assert needed <= made_kinds, sorted(needed - made_kinds)
    table = readme_rbac_table({"controller.provisioningClass": provreq.ATOMIC_CLASS})
    for namespace, scopes in ((NAMESPACE, {"cluster", "release namespace"}), ("default", {"cluster"})):
        baseline = can_i(cluster, BASELINE_SA, namespace)
        granted = can_i(cluster, CONTROLLER_SA, namespace) - baseline
        expected = {(res, name, verb) for who, scope, res, name, verb in table
                    if who == "controller" and scope in scopes}
        assert granted == expected, (sorted(granted - expected), sorted(expected - granted))
