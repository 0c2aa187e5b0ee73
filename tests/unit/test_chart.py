"""Helm chart charts/cogate: `helm lint` and the objects `helm template` renders.

Uses the pinned Helm CLI from the local tool cache (built from its Go module on first
use, see cogate.localcluster.build). Asserts the contract of docs/semantics.md on the
rendered objects (valid YAML without duplicate mapping keys): webhook registration (same rules as cogate.webhook.config), replicas,
leader election, probes, least-privilege RBAC, certificate modes, and that every
container's arguments parse with the component's own argparse.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cogate import __version__
from cogate.api import DEFAULT_ADOPTED_SCHEDULER_NAMES, POD_GROUP_LABEL
from cogate.certs import bootstrap
from cogate.controller import main as controller_main
from cogate.controller.model.config import DEFAULT_WORKERS
from cogate.localcluster import versions
from cogate.localcluster.build import binary, ensure_binaries
from cogate.webhook import config as webhook_config
from cogate.webhook import main as webhook_main
from cogate.webhook.admission import validate_adoption

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "cogate"
RELEASE, NAMESPACE = "cogate", "cogate-system"


@pytest.fixture(scope="module")
def helm() -> Path:
    path = binary("helm")
    if not path.is_file():
        ensure_binaries(["helm"], log=sys.stderr)
    return path


def _template(helm: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    # helm template assumes Kubernetes 1.20 without a cluster; render for the version we test against.
    return subprocess.run([str(helm), "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
                           "--kube-version", versions.KUBERNETES, *args],
                          capture_output=True, text=True, check=check)


class UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that raises on a duplicate mapping key (PyYAML keeps the last one silently;
    strict parsers such as kubectl's and yamllint's reject the document)."""

    def construct_mapping(self, node, deep=False):
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_all_strict(text: str) -> list[dict]:
    return [d for d in yaml.load_all(text, Loader=UniqueKeyLoader) if d]


def render(helm: Path, *args: str) -> list[dict]:
    """The rendered objects; raises ``yaml.constructor.ConstructorError`` on any duplicate key."""
    return load_all_strict(_template(helm, *args).stdout)


def find(objs: list[dict], kind: str, name: str | None = None) -> dict:
    hits = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(hits) == 1, f"expected one {kind} {name or ''}, got {[o['metadata']['name'] for o in hits]}"
    return hits[0]


def all_of(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


@pytest.fixture(scope="module")
def objs(helm) -> list[dict]:
    return render(helm)


@pytest.fixture(scope="module")
def webhook_deploy(objs) -> dict:
    return find(objs, "Deployment", "cogate-webhook")


@pytest.fixture(scope="module")
def controller_deploy(objs) -> dict:
    return find(objs, "Deployment", "cogate-controller")


def container(deploy: dict, name: str, init: bool = False) -> dict:
    spec = deploy["spec"]["template"]["spec"]
    (c,) = [c for c in spec["initContainers" if init else "containers"] if c["name"] == name]
    return c


def test_helm_lint(helm):
    proc = subprocess.run([str(helm), "lint", str(CHART), "--namespace", NAMESPACE], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout
    proc = subprocess.run([str(helm), "lint", str(CHART), "--set", "webhook.certs.mode=cert-manager"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_strict_loader_rejects_duplicate_keys():
    with pytest.raises(yaml.constructor.ConstructorError, match="duplicate key 'app'"):
        load_all_strict("metadata:\n  labels:\n    app: a\n    tier: b\n    app: a\n")
    assert load_all_strict("a: 1\n---\nb: {a: 1}\n") == [{"a": 1}, {"b": {"a": 1}}]


@pytest.mark.parametrize("sets", [[], ["webhook.certs.mode=cert-manager"], ["controller.evictOnTimeout=true"],
                                  ["serviceAccount.create=false"]], ids=str)
def test_rendered_yaml_has_no_duplicate_keys(helm, sets):
    objs = render(helm, *[a for s in sets for a in ("--set", s)])  # raises on a duplicate key
    for deploy in all_of(objs, "Deployment"):
        labels = deploy["spec"]["template"]["metadata"]["labels"]
        assert deploy["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_rendered_kinds(objs):
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objs)
    assert ("MutatingWebhookConfiguration", "cogate") in kinds
    assert ("Service", "cogate-webhook") in kinds
    assert ("PodDisruptionBudget", "cogate-webhook") in kinds
    assert ("ServiceAccount", "cogate-webhook") in kinds and ("ServiceAccount", "cogate-controller") in kinds
    assert {n for k, n in kinds if k == "Service"} >= {"cogate-webhook-metrics", "cogate-controller-metrics"}
    for o in objs:
        if o["metadata"]["name"] == "cogate-controller-scheduler-lease":  # kube-scheduler's Lease, read by name
            assert o["metadata"]["namespace"] == "kube-system"
        elif o["kind"] not in ("ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "PriorityClass"):
            assert o["metadata"]["namespace"] == NAMESPACE, o["metadata"]["name"]


def test_crd_is_installed_from_crds_dir(helm):
    objs = render(helm, "--include-crds")
    crd = find(objs, "CustomResourceDefinition", "podgroups.scheduling.x-k8s.io")
    assert crd == yaml.safe_load((CHART / "crds" / "scheduling.x-k8s.io_podgroups.yaml").read_text())


def test_webhook_registration_matches_the_builder(helm):
    mwc = find(render(helm, "--set", "webhook.lateLabels.enabled=true"), "MutatingWebhookConfiguration")
    hook, late = mwc["webhooks"]
    ref, ref_late = webhook_config.webhook_configuration({"service": {}},
                                                         excluded_namespaces=("kube-system", NAMESPACE))["webhooks"]
    for key in ("name", "admissionReviewVersions", "rules", "objectSelector", "namespaceSelector", "failurePolicy",
                "matchPolicy", "sideEffects", "timeoutSeconds", "reinvocationPolicy", "matchConditions"):
        assert hook.get(key) == ref.get(key), key
        assert late.get(key) == ref_late.get(key), key
    assert hook["reinvocationPolicy"] == late["reinvocationPolicy"] == "IfNeeded"
    assert "objectSelector" not in late and late["failurePolicy"] == "Ignore"
    assert [c["name"] for c in hook["matchConditions"]] == ["not-pre-gated"]
    assert [c["name"] for c in late["matchConditions"]] == ["not-gated-yet"]
    assert late["clientConfig"] == hook["clientConfig"]
    assert hook["objectSelector"] == {"matchExpressions": [{"key": POD_GROUP_LABEL, "operator": "Exists"}]}
    assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None" and hook["timeoutSeconds"] == 5
    assert hook["rules"][0]["operations"] == ["CREATE"] and hook["rules"][0]["resources"] == ["pods"]
    svc = hook["clientConfig"]["service"]
    assert svc == {"name": "cogate-webhook", "namespace": NAMESPACE, "path": "/mutate", "port": 443}
    assert "caBundle" not in hook["clientConfig"]  # set at runtime by the bootstrap


def test_excluded_namespaces_extend_the_selector(helm):
    objs = render(helm, "--set", "webhook.excludedNamespaces={monitoring,kube-system}")
    for hook in find(objs, "MutatingWebhookConfiguration")["webhooks"]:
        (expr,) = hook["namespaceSelector"]["matchExpressions"]
        assert expr == {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                        "values": ["kube-system", NAMESPACE, "monitoring"]}


@pytest.mark.parametrize("values,policies", [
    ((), ["Fail"]),  # opt-in (docs/operations/pod-safety.md)
    (("--set", "webhook.lateLabels.enabled=true"), ["Fail", "Ignore"]),
    (("--set", "webhook.lateLabels.enabled=true", "--set", "webhook.lateLabels.failurePolicy=Fail"), ["Fail", "Fail"]),
])
def test_late_label_entry_values(helm, values, policies):
    objs = render(helm, *values)
    hooks = find(objs, "MutatingWebhookConfiguration")["webhooks"]
    assert [h["failurePolicy"] for h in hooks] == policies
    # the certificate bootstrap sets the caBundle of every entry it registers
    deploy = find(objs, "Deployment", "cogate-webhook")
    init = deploy["spec"]["template"]["spec"]["initContainers"][0]
    named = [a.split("=", 1)[1] for a in init["args"] if a.startswith("--webhook-name=")]
    assert named == [h["name"] for h in hooks]


def test_late_label_failure_policy_is_validated(helm):
    out = _template(helm, "--set", "webhook.lateLabels.failurePolicy=Never", check=False)
    assert out.returncode != 0 and "webhook.lateLabels.failurePolicy must be Ignore or Fail" in out.stderr


def test_webhook_deployment(objs, webhook_deploy):
    spec = webhook_deploy["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pod_labels = spec["template"]["metadata"]["labels"]
    c = container(webhook_deploy, "webhook")
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    args = webhook_main.build_parser().parse_args(c["args"][1:])
    assert c["args"][0] == "webhook"
    assert (args.tls_cert_file, args.tls_key_file) == ("/certs/tls.crt", "/certs/tls.key")
    assert args.gate_name == "scheduling.x-k8s.io/pod-group" and args.port == 9443
    # Service and PDB select exactly the webhook pods
    svc = find(objs, "Service", "cogate-webhook")
    assert svc["spec"]["ports"][0]["targetPort"] == "https"
    assert set(svc["spec"]["selector"].items()) <= set(pod_labels.items())
    assert svc["spec"]["selector"]["app.kubernetes.io/component"] == "webhook"
    pdb = find(objs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]
    assert set(spec["selector"]["matchLabels"].items()) <= set(pod_labels.items())


def test_bootstrap_init_container_and_rotator(webhook_deploy):
    init = container(webhook_deploy, "certs", init=True)
    rot = container(webhook_deploy, "cert-rotator")
    for c in (init, rot):
        assert c["args"][0] == "certs"
        args = bootstrap.build_parser().parse_args(c["args"][1:])
        assert args.command == "bootstrap"
        assert args.secret_name == "cogate-webhook-cert"
        assert args.service_name == "cogate-webhook"
        assert args.webhook_config_name == "cogate"
        assert args.webhook_name == [webhook_config.WEBHOOK_NAME]  # the late entry is opt-in
        assert args.cert_dir == "/certs"
        assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in c["env"]
    assert bootstrap.build_parser().parse_args(init["args"][1:]).loop == 0
    assert bootstrap.build_parser().parse_args(rot["args"][1:]).loop == 3600
    vols = webhook_deploy["spec"]["template"]["spec"]["volumes"]
    assert vols == [{"name": "certs", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}]


def test_cert_manager_mode(helm):
    objs = render(helm, "--set", "webhook.certs.mode=cert-manager")
    dep = find(objs, "Deployment", "cogate-webhook")
    pod = dep["spec"]["template"]["spec"]
    assert "initContainers" not in pod
    assert [c["name"] for c in pod["containers"]] == ["webhook"]
    assert pod["volumes"] == [{"name": "certs", "secret": {"secretName": "cogate-webhook-cert"}}]
    assert pod["automountServiceAccountToken"] is False
    cert = find(objs, "Certificate")
    assert cert["spec"]["secretName"] == "cogate-webhook-cert"
    assert f"cogate-webhook.{NAMESPACE}.svc" in cert["spec"]["dnsNames"]
    assert cert["spec"]["renewBefore"] == "720h"
    mwc = find(objs, "MutatingWebhookConfiguration")
    assert mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/cogate-webhook"
    # no Secret or webhook-configuration rights without the bootstrap
    assert not [r for r in all_of(objs, "Role") + all_of(objs, "ClusterRole") if r["metadata"]["name"] == "cogate-webhook"]


@pytest.mark.parametrize("kind", ["ClusterIssuer", "Issuer"])
def test_cert_manager_mode_with_issuer_ref(helm, kind):
    objs = render(helm, "--set", "webhook.certs.mode=cert-manager", "--set", "webhook.certs.issuerRef.name=corp-ca",
                  "--set", f"webhook.certs.issuerRef.kind={kind}")
    assert not all_of(objs, "Issuer"), "no self-signed Issuer of the chart's own with issuerRef"
    cert = find(objs, "Certificate")
    assert cert["spec"]["issuerRef"] == {"name": "corp-ca", "kind": kind, "group": "cert-manager.io"}
    mwc = find(objs, "MutatingWebhookConfiguration")
    assert mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/cogate-webhook"


@pytest.mark.parametrize("sets, message", [
    (["webhook.certs.issuerRef.name=corp-ca"], "applies to webhook.certs.mode=cert-manager only"),
    (["webhook.certs.mode=cert-manager", "webhook.certs.issuerRef.kind=ClusterIssuer"],
     "webhook.certs.issuerRef.name is required"),
    (["webhook.certs.mode=cert-manager", "webhook.certs.issuerRef.name=a", "webhook.certs.issuerRef.kind=CA"],
     'must be Issuer or ClusterIssuer for group cert-manager.io, got "CA"'),
], ids=str)
def test_issuer_ref_errors(helm, sets, message):
    proc = _template(helm, *[a for s in sets for a in ("--set", s)], check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def test_issuer_ref_of_an_external_issuer_keeps_its_kind(helm):
    objs = render(helm, "--set", "webhook.certs.mode=cert-manager", "--set", "webhook.certs.issuerRef.name=vault",
                  "--set", "webhook.certs.issuerRef.kind=VaultIssuer", "--set", "webhook.certs.issuerRef.group=example.com")
    assert find(objs, "Certificate")["spec"]["issuerRef"] == {"name": "vault", "kind": "VaultIssuer",
                                                             "group": "example.com"}


def test_controller_deployment(controller_deploy):
    spec = controller_deploy["spec"]
    assert spec["replicas"] == 2
    c = container(controller_deploy, "controller")
    assert c["args"][0] == "controller"
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    flags = dict(a.split("=", 1) if "=" in a else (a, True) for a in c["args"][1:])
    assert flags["--leader-elect"] is True
    assert flags["--leader-election-namespace"] == "$(POD_NAMESPACE)"
    assert flags["--placement"] == "pinned"
    assert flags["--gate-name"] == "scheduling.x-k8s.io/pod-group"
    assert flags["--reservation-ttl"] == "60" and flags["--starvation-seconds"] == "300"
    assert flags["--metrics-port"] == "8080"
    assert flags["--workers"] == str(DEFAULT_WORKERS)  # the chart's default is the controller's
    args = controller_main.build_parser().parse_args(c["args"][1:])
    assert args.leader_elect is True and args.placement == "pinned"
    assert "--evict-on-timeout" not in c["args"]
    assert args.scheduler_names == [] and args.unchecked_constraints == "hold-devices" == controller_main.verdicts.DEFAULT_UNCHECKED


def test_scheduler_names_and_unchecked_policy_reach_the_controller(helm):
    objs = render(helm, "--set", "controller.schedulerNames={batch-scheduler,gpu-scheduler}",
                  "--set", "controller.uncheckedConstraints=hold")
    args = container(find(objs, "Deployment", "cogate-controller"), "controller")["args"]
    parsed = controller_main.build_parser().parse_args(args[1:])
    assert parsed.scheduler_names == ["batch-scheduler", "gpu-scheduler"]
    assert parsed.unchecked_constraints == "hold"


def _webhook_args(objs: list[dict]):
    args = container(find(objs, "Deployment", "cogate-webhook"), "webhook")["args"]
    return webhook_main.build_parser().parse_args(args[1:])


def test_adopted_scheduler_names_reach_the_webhook(helm, webhook_deploy):
    """Issue 20 item 1: by default the webhook adopts the name scheduler-plugins' operators set
    (the same default as the local stack, cogate.api.DEFAULT_ADOPTED_SCHEDULER_NAMES)."""
    args = webhook_main.build_parser().parse_args(container(webhook_deploy, "webhook")["args"][1:])
    assert args.adopt_scheduler_names == list(DEFAULT_ADOPTED_SCHEDULER_NAMES) == ["scheduler-plugins-scheduler"]
    assert args.scheduler_names == []
    assert _webhook_args(render(helm, "--set", "webhook.adoptSchedulerNames={a-sched,b-sched}")
                         ).adopt_scheduler_names == ["a-sched", "b-sched"]
    off = _webhook_args(render(helm, "--set", "webhook.adoptSchedulerNames=null"))
    assert off.adopt_scheduler_names == []
    both = _webhook_args(render(helm, "--set", "webhook.adoptSchedulerNames={volcano}",
                                "--set", "controller.schedulerNames={scheduler-plugins-scheduler}"))
    assert (both.adopt_scheduler_names, both.scheduler_names) == (["volcano"], ["scheduler-plugins-scheduler"])
    validate_adoption(both.adopt_scheduler_names, frozenset(both.scheduler_names) | {"default-scheduler"})


def test_evict_on_timeout_adds_flag_and_eviction_right(helm):
    objs = render(helm, "--set", "controller.evictOnTimeout=true")
    args = container(find(objs, "Deployment", "cogate-controller"), "controller")["args"]
    assert controller_main.build_parser().parse_args(args[1:]).evict_on_timeout is True
    assert (("",), ("pods/eviction",), ("create",), ()) in _rules(objs, "ClusterRole", "cogate-controller")


def test_after_release_values_reach_the_flags_and_rights(helm):
    default = render(helm)
    args = container(find(default, "Deployment", "cogate-controller"), "controller")["args"]
    parsed = controller_main.build_parser().parse_args(args[1:])
    assert parsed.recreate_stuck_members and parsed.validate_releases == "auto"
    assert not parsed.pod_disruption_budgets and not parsed.evict_below_quorum
    admission = (("admissionregistration.k8s.io",), ("validatingwebhookconfigurations", "mutatingwebhookconfigurations",
                                                      "validatingadmissionpolicies", "mutatingadmissionpolicies"),
                 ("get", "list", "watch"), ())
    assert admission in _rules(default, "ClusterRole", "cogate-controller")
    objs = render(helm, "--set", "controller.recreateStuckMembers=false", "--set", "controller.preemption=false",
                  "--set", "controller.validateReleases=false", "--set", "controller.podDisruptionBudgets=true", "--set", "controller.evictBelowQuorum=true")
    args = container(find(objs, "Deployment", "cogate-controller"), "controller")["args"]
    parsed = controller_main.build_parser().parse_args(args[1:])
    assert not parsed.recreate_stuck_members and parsed.validate_releases == "never"
    assert parsed.pod_disruption_budgets and parsed.evict_below_quorum
    rules = _rules(objs, "ClusterRole", "cogate-controller")
    assert admission not in rules
    assert (("",), ("pods",), ("delete",), ()) not in rules
    assert (("policy",), ("poddisruptionbudgets",), ("create", "delete", "get", "patch"), ()) in rules
    assert (("",), ("pods/eviction",), ("create",), ()) in rules


def test_preemption_value_reaches_the_flag_and_rights(helm):
    default = render(helm)
    args = container(find(default, "Deployment", "cogate-controller"), "controller")["args"]
    assert controller_main.build_parser().parse_args(args[1:]).preemption is True  # on by default
    status = (("",), ("pods/status",), ("patch",), ())
    budgets = (("policy",), ("poddisruptionbudgets",), ("list", "watch"), ())
    assert status in _rules(default, "ClusterRole", "cogate-controller")
    objs = render(helm, "--set", "controller.preemption=true", "--set", "controller.recreateStuckMembers=false")
    rules = _rules(objs, "ClusterRole", "cogate-controller")
    assert status in rules and budgets in rules
    assert (("",), ("pods",), ("delete",), ()) in rules  # victims are deleted even without stuck-member recreation
    off = render(helm, "--set", "controller.preemption=false", "--set", "controller.recreateStuckMembers=false")
    args = container(find(off, "Deployment", "cogate-controller"), "controller")["args"]
    assert controller_main.build_parser().parse_args(args[1:]).preemption is False
    rules = _rules(off, "ClusterRole", "cogate-controller")
    assert status not in rules and budgets not in rules
    assert not any("delete" in r[2] and "pods" in r[1] for r in rules)
    # kube-scheduler's leader Lease, by name, in kube-system only (a new leader is told the nominations again)
    role = find(default, "Role", "cogate-controller-scheduler-lease")
    assert role["metadata"]["namespace"] == "kube-system"
    assert _rules(default, "Role", "cogate-controller-scheduler-lease") == [
        (("coordination.k8s.io",), ("leases",), ("get", "list", "watch"), ("kube-scheduler",))]
    binding = find(default, "RoleBinding", "cogate-controller-scheduler-lease")
    assert binding["metadata"]["namespace"] == "kube-system" and binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "cogate-controller", "namespace": NAMESPACE}]
    assert not [r for r in all_of(off, "Role") if r["metadata"]["name"] == "cogate-controller-scheduler-lease"]


def test_provisioning_class_reaches_the_flag_and_rights(helm):
    """Issue 16: off by default (no flag, no rights); a class adds the flag and exactly the rights it uses."""
    requests = (("autoscaling.x-k8s.io",), ("provisioningrequests",), ("create", "delete", "get", "list", "watch"), ())
    templates = (("",), ("podtemplates",), ("create", "delete"), ())
    default = render(helm)
    args = container(find(default, "Deployment", "cogate-controller"), "controller")["args"]
    assert controller_main.build_parser().parse_args(args[1:]).provisioning_class == ""
    rules = _rules(default, "ClusterRole", "cogate-controller")
    assert requests not in rules and templates not in rules
    on = render(helm, "--set", "controller.provisioningClass=best-effort-atomic-scale-up.autoscaling.x-k8s.io")
    args = container(find(on, "Deployment", "cogate-controller"), "controller")["args"]
    parsed = controller_main.build_parser().parse_args(args[1:])
    assert parsed.provisioning_class == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    rules = _rules(on, "ClusterRole", "cogate-controller")
    assert requests in rules and templates in rules


def test_values_reach_the_containers(helm):
    objs = render(helm, "--set", "gateName=example.com/gang", "--set", "controller.placement=free",
                  "--set", "webhook.replicas=3", "--set", "controller.replicas=1", "--set", "controller.leaderElect=false",
                  "--set", "controller.nodeSelector.pool=system", "--set", "logLevel=debug",
                  "--set", "controller.workers=4")
    web = find(objs, "Deployment", "cogate-webhook")
    ctl = find(objs, "Deployment", "cogate-controller")
    assert web["spec"]["replicas"] == 3 and ctl["spec"]["replicas"] == 1
    assert "--gate-name=example.com/gang" in container(web, "webhook")["args"]
    args = container(ctl, "controller")["args"]
    assert "--gate-name=example.com/gang" in args and "--placement=free" in args and "--no-leader-elect" in args
    assert "--log-level=debug" in args
    assert "--workers=4" in args
    assert "--log-level=debug" in container(web, "webhook")["args"]
    controller_main.build_parser().parse_args(args[1:])
    assert ctl["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "system"}
    assert not [r for r in all_of(objs, "Role") if "leader-election" in r["metadata"]["name"]]


def _cogate_containers(objs: list[dict]) -> list[dict]:
    """Every container (init containers included) that runs the cogate image."""
    pods = [d["spec"]["template"]["spec"] for d in all_of(objs, "Deployment")]
    return [c for pod in pods for c in pod["containers"] + pod.get("initContainers", []) if c["image"].startswith("cogate:")]


@pytest.mark.parametrize("sets, fmt", [([], "json"), (["--set", "logFormat=text"], "text")])
def test_log_format_reaches_every_cogate_container(helm, sets, fmt):
    containers = _cogate_containers(render(helm, *sets))
    assert sorted(c["name"] for c in containers) == ["cert-rotator", "certs", "controller", "webhook"]
    parsers = {"controller": controller_main.build_parser, "webhook": webhook_main.build_parser,
               "certs": bootstrap.build_parser}
    for c in containers:
        assert f"--log-format={fmt}" in c["args"], c["name"]
        args = [*c["args"][1:], "--insecure-http"] if c["args"][0] == "webhook" else c["args"][1:]
        assert parsers[c["args"][0]]().parse_args(args).log_format == fmt


@pytest.mark.parametrize("sets,message", [
    (["logFormat=yaml"], "logFormat must be json or text"),
    (["controller.placement=anywhere"], "controller.placement must be pinned or free"),
    (["controller.uncheckedConstraints=ignore"], "controller.uncheckedConstraints must be release, hold-devices or hold"),
    (["controller.validateReleases=sometimes"], "controller.validateReleases must be auto, always or never"),
    (["webhook.certs.mode=manual"], "webhook.certs.mode must be bootstrap or cert-manager"),
    (["webhook.timeoutSeconds=31"], "timeoutSeconds must be between 1 and 30"),
    (["controller.leaderElect=false"], "needs controller.leaderElect=true"),
    (["controller.workers=0"], "controller.workers must be a whole number of at least 1, got 0"),
    (["webhook.adoptSchedulerNames={default-scheduler}"], "webhook.adoptSchedulerNames must not hold default-scheduler"),
    (["controller.schedulerNames={scheduler-plugins-scheduler}"],
     'webhook.adoptSchedulerNames and controller.schedulerNames both name "scheduler-plugins-scheduler"'),
])
def test_bad_values_fail_with_a_message(helm, sets, message):
    args = [a for s in sets for a in ("--set", s)]
    proc = _template(helm, *args, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert "templates/validate-values.yaml" in proc.stderr  # the error points at the values check


# ------------------------------------------------------------------ RBAC
def _rules(objs, kind, name):
    return [(tuple(r.get("apiGroups", [])), tuple(r["resources"]), tuple(sorted(r["verbs"])),
             tuple(r.get("resourceNames", ()))) for r in find(objs, kind, name)["rules"]]


def test_controller_rbac_is_least_privilege(objs):
    rules = _rules(objs, "ClusterRole", "cogate-controller")
    assert sorted(rules) == sorted([
        (("",), ("pods",), ("get", "list", "patch", "watch"), ()),
        (("",), ("nodes", "persistentvolumeclaims", "persistentvolumes"), ("get", "list", "watch"), ()),
        (("",), ("resourcequotas",), ("get", "list", "watch"), ()),
        (("kueue.x-k8s.io",), ("topologies",), ("list", "watch"), ()),
        (("resource.k8s.io",), ("resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates"),
         ("get", "list", "watch"), ()),
        (("",), ("pods",), ("delete",), ()),
        (("",), ("pods/status",), ("patch",), ()),
        (("policy",), ("poddisruptionbudgets",), ("list", "watch"), ()),
        (("scheduling.k8s.io",), ("podgroups",), ("get", "list", "watch"), ()),
        (("apps",), ("replicasets", "statefulsets"), ("get",), ()),
        (("batch",), ("jobs",), ("get",), ()),
        (("kubeflow.org",), ("mpijobs", "pytorchjobs"), ("get",), ()),
        (("ray.io",), ("rayclusters",), ("get",), ()),
        (("jobset.x-k8s.io",), ("jobsets",), ("get",), ()),
        (("scheduling.x-k8s.io",), ("podgroups",), ("get", "list", "patch", "watch"), ()),
        (("scheduling.x-k8s.io",), ("podgroups/status",), ("get", "patch", "update"), ()),
        (("", "events.k8s.io"), ("events",), ("create", "patch"), ()),
        (("admissionregistration.k8s.io",), ("validatingwebhookconfigurations", "mutatingwebhookconfigurations",
                                             "validatingadmissionpolicies", "mutatingadmissionpolicies"),
         ("get", "list", "watch"), ()),
    ])
    role = find(objs, "Role", "cogate-controller-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert _rules(objs, "Role", "cogate-controller-leader-election") == [
        (("coordination.k8s.io",), ("leases",), ("create", "get", "list", "patch", "update", "watch"), ())]
    crb = find(objs, "ClusterRoleBinding", "cogate-controller")
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": "cogate-controller", "namespace": NAMESPACE}]
    assert controller_sa(objs) == "cogate-controller"


def controller_sa(objs):
    return find(objs, "Deployment", "cogate-controller")["spec"]["template"]["spec"]["serviceAccountName"]


def test_webhook_rbac_is_least_privilege(objs):
    assert sorted(_rules(objs, "Role", "cogate-webhook")) == sorted([
        (("",), ("secrets",), ("create",), ()),
        (("",), ("secrets",), ("get", "update"), ("cogate-webhook-cert",)),
    ])
    assert _rules(objs, "ClusterRole", "cogate-webhook") == [
        (("admissionregistration.k8s.io",), ("mutatingwebhookconfigurations",), ("get", "patch"), ("cogate",))]
    rb = find(objs, "RoleBinding", "cogate-webhook")
    assert rb["subjects"] == [{"kind": "ServiceAccount", "name": "cogate-webhook", "namespace": NAMESPACE}]


def test_no_wildcards_anywhere(objs):
    for o in all_of(objs, "ClusterRole") + all_of(objs, "Role"):
        for r in o["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in r.get(field, []), (o["metadata"]["name"], r)


def test_containers_are_hardened(objs):
    for dep in all_of(objs, "Deployment"):
        pod = dep["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        for c in pod["containers"] + pod.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert c["image"] == f"cogate:{__version__}"
            assert "requests" in c["resources"]


@pytest.mark.parametrize("value,mode", [("auto", "auto"), ("always", "always"), ("never", "never"),
                                        ("true", "always"), ("false", "never")])
def test_validate_releases_modes(helm, value, mode):
    objs = render(helm, "--set", f"controller.validateReleases={value}")
    args = container(find(objs, "Deployment", "cogate-controller"), "controller")["args"]
    assert controller_main.build_parser().parse_args(args[1:]).validate_releases == mode
    has_rule = any(g == ("admissionregistration.k8s.io",) for g, *_ in _rules(objs, "ClusterRole", "cogate-controller"))
    assert has_rule == (mode == "auto")


def test_topology_levels_reach_the_controller(helm):
    """controller.topologyLevels -> --topology-levels, read back by the controller's own parser (issue 32)."""
    sets = ["--set", "controller.topologyLevels={topology.kubernetes.io/zone,example.com/rack}"]
    c = next(c for c in _cogate_containers(render(helm, *sets)) if c["name"] == "controller")
    assert controller_main.build_parser().parse_args(c["args"][1:]).topology_levels == (
        "topology.kubernetes.io/zone", "example.com/rack", "kubernetes.io/hostname")
    default = next(c for c in _cogate_containers(render(helm)) if c["name"] == "controller")
    assert not any(a.startswith("--topology-levels") for a in default["args"])
