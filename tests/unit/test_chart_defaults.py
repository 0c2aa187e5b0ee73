"""The chart's safe defaults, user roles and network values (issue 30 items 3, 4 and 6), on the
objects `helm template` renders (the helpers of tests/unit/test_chart.py):

- cogate's own pods run under a PriorityClass at the highest user-definable value, and the
  controller protects the release namespace from preemption;
- webhook and controller replicas spread over nodes (soft), the webhook keeps its PDB;
- the late-label webhook entry is opt-in, and scoped by a namespaceSelector when on;
- installing into "default" fails with a message saying why and how to override;
- aggregated ClusterRoles give view/edit/admin PodGroup rights (status read-only);
- hostNetwork, the opt-in NetworkPolicies, and cert-manager's issuerRef.
"""

from __future__ import annotations

import pytest

from cogate.api import POD_GROUP_LABEL
from cogate.controller import main as controller_main
from cogate.webhook import config as webhook_config

from .test_chart import NAMESPACE, _template, all_of, container, find, helm, render  # noqa: F401 (fixture)

#: kubernetes pkg/apis/scheduling HighestUserDefinablePriority.
HIGHEST_USER_PRIORITY = 1_000_000_000
SELECTOR = {"app.kubernetes.io/name": "cogate", "app.kubernetes.io/instance": "cogate"}


@pytest.fixture(scope="module")
def objs(helm) -> list[dict]:
    return render(helm)


def _pod_spec(objs, component: str) -> dict:
    return find(objs, "Deployment", f"cogate-{component}")["spec"]["template"]["spec"]


# -- item 3: safe defaults


def test_cogates_pods_outrank_every_user_priority(objs):
    pc = find(objs, "PriorityClass")
    assert pc["value"] == HIGHEST_USER_PRIORITY and pc["globalDefault"] is False
    assert pc.get("preemptionPolicy", "PreemptLowerPriority") == "PreemptLowerPriority"
    for component in ("webhook", "controller"):
        assert _pod_spec(objs, component)["priorityClassName"] == pc["metadata"]["name"]


def test_a_named_priority_class_wins_and_none_is_created_when_off(helm):
    objs = render(helm, "--set", "webhook.priorityClassName=system-cluster-critical",
                  "--set", "priorityClass.create=false")
    assert not all_of(objs, "PriorityClass")
    assert _pod_spec(objs, "webhook")["priorityClassName"] == "system-cluster-critical"
    assert "priorityClassName" not in _pod_spec(objs, "controller")


def test_a_priority_above_the_user_range_is_refused(helm):
    out = _template(helm, "--set", "priorityClass.value=1000000001", check=False)
    assert out.returncode != 0 and "priorityClass.value must be at most 1000000000" in out.stderr


def _controller_args(objs) -> list[str]:
    return container(find(objs, "Deployment", "cogate-controller"), "controller")["args"]


def test_the_release_namespace_is_protected_from_preemption(objs, helm):
    args = controller_main.build_parser().parse_args(_controller_args(objs)[1:])
    assert controller_main.configure(args).protected_namespaces == frozenset({NAMESPACE, "kube-system"})
    objs = render(helm, "--set", "controller.protectedNamespaces={monitoring," + NAMESPACE + "}")
    assert [a for a in _controller_args(objs) if a.startswith("--protected-namespace")] == [
        f"--protected-namespace={NAMESPACE}", "--protected-namespace=monitoring"]
    objs = render(helm, "--set", "controller.preemption=false")
    assert not [a for a in _controller_args(objs) if a.startswith("--protected-namespace")]


def test_a_bad_protected_namespace_is_refused(helm):
    out = _template(helm, "--set", "controller.protectedNamespaces={Bad_NS}", check=False)
    assert out.returncode != 0 and '"Bad_NS" is not a namespace name' in out.stderr


@pytest.mark.parametrize("component", ["webhook", "controller"])
def test_replicas_spread_over_nodes_softly(objs, component):
    (c,) = _pod_spec(objs, component)["topologySpreadConstraints"]
    assert c == {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
                 "labelSelector": {"matchLabels": {**SELECTOR, "app.kubernetes.io/component": component}}}
    deploy = find(objs, "Deployment", f"cogate-{component}")
    assert c["labelSelector"]["matchLabels"] == deploy["spec"]["selector"]["matchLabels"]


def test_spread_values_keep_their_own_selector_and_can_be_turned_off(helm):
    own = '[{"maxSkew":2,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"a":"b"}}}]'
    objs = render(helm, "--set-json", f"webhook.topologySpreadConstraints={own}",
                  "--set-json", "controller.topologySpreadConstraints=[]")
    assert _pod_spec(objs, "webhook")["topologySpreadConstraints"][0]["labelSelector"] == {"matchLabels": {"a": "b"}}
    assert "topologySpreadConstraints" not in _pod_spec(objs, "controller")


def test_the_webhook_keeps_its_disruption_budget(objs):
    pdb = find(objs, "PodDisruptionBudget", "cogate-webhook")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == {**SELECTOR, "app.kubernetes.io/component": "webhook"}


def test_the_late_label_entry_is_opt_in_and_scoped_when_on(objs, helm):
    (hook,) = find(objs, "MutatingWebhookConfiguration")["webhooks"]
    # off: only pods carrying the label at creation reach the webhook (the API server filters the rest)
    assert hook["objectSelector"] == {"matchExpressions": [{"key": POD_GROUP_LABEL, "operator": "Exists"}]}
    scope = '[{"key":"cogate.dev/late-labels","operator":"In","values":["true"]}]'
    hooks = find(render(helm, "--set", "webhook.lateLabels.enabled=true",
                        "--set-json", f"webhook.lateLabels.namespaceSelector={scope}"),
                 "MutatingWebhookConfiguration")["webhooks"]
    first, late = hooks
    assert late["name"] == webhook_config.LATE_WEBHOOK_NAME and "objectSelector" not in late
    assert late["namespaceSelector"]["matchExpressions"] == [
        *first["namespaceSelector"]["matchExpressions"],
        {"key": "cogate.dev/late-labels", "operator": "In", "values": ["true"]}]


def test_installing_into_default_is_refused_with_the_reason_and_the_override(helm):
    out = _template(helm, "--namespace", "default", check=False)
    assert out.returncode != 0
    assert 'cogate must not be installed into the namespace \\"default\\"' in out.stderr or \
        'cogate must not be installed into the namespace "default"' in out.stderr, out.stderr
    assert "would never be gated" in out.stderr and "allowDefaultNamespace=true" in out.stderr
    objs = render(helm, "--namespace", "default", "--set", "allowDefaultNamespace=true")
    assert find(objs, "Deployment", "cogate-webhook")["metadata"]["namespace"] == "default"


# -- item 4: PodGroups for namespace users


def _rules(role: dict) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]}


def test_podgroup_rights_aggregate_into_view_edit_and_admin(objs):
    roles = {r["metadata"]["name"]: r for r in all_of(objs, "ClusterRole")}
    view, edit = roles["cogate-podgroups-view"], roles["cogate-podgroups-edit"]
    agg = "rbac.authorization.k8s.io/aggregate-to-"
    assert {k for k, v in view["metadata"]["labels"].items() if k.startswith(agg) and v == "true"} == {
        agg + "view", agg + "edit", agg + "admin"}
    assert {k for k, v in edit["metadata"]["labels"].items() if k.startswith(agg) and v == "true"} == {
        agg + "edit", agg + "admin"}
    g = "scheduling.x-k8s.io"
    assert _rules(view) == {(g, r, v) for r in ("podgroups", "podgroups/status") for v in ("get", "list", "watch")}
    assert _rules(edit) == {(g, "podgroups", v) for v in ("create", "update", "patch", "delete", "deletecollection")}
    # status stays the controller's: no user role writes it
    assert not {v for _, r, v in _rules(view) | _rules(edit) if r == "podgroups/status"} - {"get", "list", "watch"}


def test_the_user_roles_can_be_turned_off(helm):
    names = {r["metadata"]["name"] for r in all_of(render(helm, "--set", "rbac.aggregateToDefaultRoles=false"),
                                                   "ClusterRole")}
    assert not {"cogate-podgroups-view", "cogate-podgroups-edit"} & names


# -- item 6: networks


def test_host_network_changes_dns_and_rollout(objs, helm):
    spec = _pod_spec(objs, "webhook")
    assert "hostNetwork" not in spec and "dnsPolicy" not in spec
    objs = render(helm, "--set", "webhook.hostNetwork=true")
    deploy = find(objs, "Deployment", "cogate-webhook")
    spec = deploy["spec"]["template"]["spec"]
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    # host ports: a successor cannot start beside its predecessor
    assert deploy["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}
    assert "hostNetwork" not in _pod_spec(objs, "controller")


def test_network_policies_are_opt_in(objs, helm):
    assert not all_of(objs, "NetworkPolicy")
    objs = render(helm, "--set", "networkPolicy.enabled=true", "--set", "webhook.metricsPort=9090",
                  "--set", "networkPolicy.apiServer.cidrs={10.0.0.1/32}")
    policies = {p["metadata"]["name"]: p for p in all_of(objs, "NetworkPolicy")}
    assert set(policies) == {"cogate-webhook", "cogate-controller"}
    for component, p in ((c, policies[f"cogate-{c}"]) for c in ("webhook", "controller")):
        spec = p["spec"]
        assert spec["podSelector"]["matchLabels"] == {**SELECTOR, "app.kubernetes.io/component": component}
        assert spec["policyTypes"] == ["Ingress", "Egress"]
        metrics_port = 9090 if component == "webhook" else 8080
        (scrape,) = [r for r in spec["ingress"] if "from" in r]
        assert scrape["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
        assert scrape["ports"] == [{"port": metrics_port, "protocol": "TCP"}]
        api, dns = spec["egress"]
        assert api["to"] == [{"ipBlock": {"cidr": "10.0.0.1/32"}}]
        assert {x["port"] for x in api["ports"]} == {443, 6443}
        assert {x["port"] for x in dns["ports"]} == {53}
    open_ = [r for r in policies["cogate-webhook"]["spec"]["ingress"] if "from" not in r]
    assert open_ == [{"ports": [{"port": 9443, "protocol": "TCP"}]}]  # the API server: any source
    assert not [r for r in policies["cogate-controller"]["spec"]["ingress"] if "from" not in r]


def test_cert_manager_uses_an_existing_issuer(helm):
    objs = render(helm, "--set", "webhook.certs.mode=cert-manager",
                  "--set", "webhook.certs.issuerRef.name=corp-ca",
                  "--set", "webhook.certs.issuerRef.kind=ClusterIssuer")
    assert not all_of(objs, "Issuer")
    cert = find(objs, "Certificate")
    assert cert["spec"]["issuerRef"] == {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    objs = render(helm, "--set", "webhook.certs.mode=cert-manager")
    issuer = find(objs, "Issuer")
    assert issuer["spec"] == {"selfSigned": {}}
    assert find(objs, "Certificate")["spec"]["issuerRef"] == {"kind": "Issuer", "name": issuer["metadata"]["name"]}


@pytest.mark.parametrize("sets, message", [
    (["webhook.certs.issuerRef.kind=ClusterIssuer"], "webhook.certs.issuerRef.name is required"),
    (["webhook.certs.issuerRef.name=x", "webhook.certs.issuerRef.kind=CA"],
     'issuerRef.kind must be Issuer or ClusterIssuer for group cert-manager.io, got "CA"'),
])
def test_a_bad_issuer_ref_is_refused(helm, sets, message):
    out = _template(helm, "--set", "webhook.certs.mode=cert-manager", *[a for s in sets for a in ("--set", s)],
                    check=False)
    assert out.returncode != 0 and message in out.stderr, out.stderr
