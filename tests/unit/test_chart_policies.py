"""Chart ``admission.mode``: the admission policies the chart renders are those of
:func:`cogate.webhook.policies.admission_policies` (checked against the webhook's rules on a real
kube-apiserver by tests/e2e/test_admission_policies.py), and each mode renders what it needs only."""

from __future__ import annotations

import pytest

from cogate.api import DEFAULT_ADOPTED_SCHEDULER_NAMES
from cogate.webhook import policies

from .test_chart import NAMESPACE, RELEASE, _template, helm, render  # noqa: F401 - helm is a fixture

POLICY_KINDS = {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy",
                "ValidatingAdmissionPolicyBinding"}
WEBHOOK_OBJECTS = {("MutatingWebhookConfiguration", "cogate"), ("Deployment", "cogate-webhook"),
                   ("Service", "cogate-webhook"), ("Service", "cogate-webhook-metrics"),
                   ("ServiceAccount", "cogate-webhook"), ("PodDisruptionBudget", "cogate-webhook")}
MAP_V1 = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"


def _kinds(objs):
    return {(o["kind"], o["metadata"]["name"]) for o in objs}


def _policies(objs):
    return {(o["kind"], o["metadata"]["name"]): o["spec"] for o in objs if o["kind"] in POLICY_KINDS}


@pytest.mark.parametrize("sets,kwargs", [
    ((), dict(adopted=DEFAULT_ADOPTED_SCHEDULER_NAMES)),
    (("--set", "webhook.lateLabels.enabled=true", "--set", "webhook.lateLabels.failurePolicy=Fail",
      "--set", "webhook.adoptSchedulerNames={b-sched,a-sched}", "--set", "controller.schedulerNames={batch}",
      "--set", "webhook.excludedNamespaces={ops}", "--set", "gateName=example.com/hold",
      "--set", "webhook.lateLabels.namespaceSelector[0].key=late",
      "--set", "webhook.lateLabels.namespaceSelector[0].operator=Exists"),
     dict(adopted=("a-sched", "b-sched"), scheduler_names=("batch",), gate_name="example.com/hold",
          late_labels="Fail", late_namespace_terms=({"key": "late", "operator": "Exists"},),
          extra_excluded=("ops",))),
    (("--set-json", "webhook.adoptSchedulerNames=[]", "--set", "webhook.lateLabels.enabled=true"),
     dict(adopted=(), late_labels="Ignore")),
])
def test_policy_mode_renders_the_builders_policies(helm, sets, kwargs):
    objs = render(helm, "--set", "admission.mode=policy", *sets)
    extra = kwargs.pop("extra_excluded", ())
    want = policies.admission_policies(RELEASE, excluded_namespaces=("kube-system", NAMESPACE, *extra), **kwargs)
    assert _policies(objs) == {(o["kind"], o["metadata"]["name"]): o["spec"] for o in want}


def test_policy_mode_renders_no_webhook(helm):
    objs = render(helm, "--set", "admission.mode=policy", "--set", "monitoring.prometheusRule.enabled=true",
                  "--set", "networkPolicy.enabled=true")
    assert not _kinds(objs) & WEBHOOK_OBJECTS
    assert not [o for o in objs if o["kind"] == "NetworkPolicy" and "webhook" in o["metadata"]["name"]]
    (rule,) = [o for o in objs if o["kind"] == "PrometheusRule"]
    alerts = [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert alerts and not [a for a in alerts if "Webhook" in a], alerts


@pytest.mark.parametrize("api_versions,mode", [((), "webhook"), (("--api-versions", MAP_V1), "policy")])
def test_auto_follows_what_the_cluster_serves(helm, api_versions, mode):
    """``auto``: policies where MutatingAdmissionPolicy v1 is served; `helm template` without a cluster
    knows no such API (Helm's built-in capabilities), so it renders the webhook."""
    objs = render(helm, "--set", "admission.mode=auto", *api_versions)
    assert bool(_policies(objs)) == (mode == "policy")
    assert bool(_kinds(objs) & WEBHOOK_OBJECTS) == (mode == "webhook")


def test_webhook_is_the_default(helm):
    objs = render(helm)
    assert not _policies(objs) and ("MutatingWebhookConfiguration", "cogate") in _kinds(objs)


def test_a_bad_mode_fails_with_a_message(helm):
    out = _template(helm, "--set", "admission.mode=both", check=False)
    assert out.returncode != 0 and 'admission.mode must be webhook, policy or auto, got "both"' in out.stderr
