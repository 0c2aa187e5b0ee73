"""The chart's pre-delete hook (charts/cogate/templates/uninstall-hook.yaml): `cogate ungate` before
`helm uninstall`, with its own hook ServiceAccount and least-privilege RBAC (helm template)."""

from __future__ import annotations

import pytest

from cogate import ungate
from tests.unit.test_chart import RELEASE, _template, container, find, helm, render  # noqa: F401  (fixture)

NAME = f"{RELEASE}-uninstall"
HOOK = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Job")


@pytest.fixture(scope="module")
def hook(helm):
    return {kind: find(render(helm), kind, NAME) for kind in HOOK}


def test_every_hook_object_is_a_pre_delete_hook_deleted_once_it_succeeded(hook):
    weights = {}
    for kind, obj in hook.items():
        ann = obj["metadata"]["annotations"]
        assert ann["helm.sh/hook"] == "pre-delete", kind
        assert ann["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded", kind
        weights[kind] = int(ann["helm.sh/hook-weight"])
    assert max(weights[k] for k in HOOK[:3]) < weights["Job"], "RBAC before the Job"


def test_the_job_runs_cogate_ungate_on_the_release_webhook_first(hook):
    job = hook["Job"]
    spec = job["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == NAME and spec["restartPolicy"] == "Never"
    c = container(job, "ungate")
    assert c["args"][0] == "ungate"
    args = ungate.parse_args(c["args"][1:])  # the command's own parser accepts them
    assert args.all and not args.delete and not args.dry_run
    assert args.webhook_configuration == RELEASE  # the chart's MutatingWebhookConfiguration
    assert args.gate_name == "scheduling.x-k8s.io/pod-group"
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert job["spec"]["activeDeadlineSeconds"] == 300


def test_least_privilege(hook):
    rules = hook["ClusterRole"]["rules"]
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "get", "patch"]} in rules
    (mwc,) = [r for r in rules if r["resources"] == ["mutatingwebhookconfigurations"]]
    assert mwc["resourceNames"] == [RELEASE] and mwc["verbs"] == ["get", "delete"]
    binding = hook["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == NAME and binding["subjects"][0]["name"] == NAME


def test_delete_action_and_placement(helm):
    objs = render(helm, "--set", "uninstall.action=delete",
                  "--set", "controller.nodeSelector.role=system")
    job = find(objs, "Job", NAME)
    assert "--delete" in container(job, "ungate")["args"]
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"role": "system"}, "where the controller runs"
    pods = [r for r in find(objs, "ClusterRole", NAME)["rules"] if r["resources"] == ["pods"]]
    assert pods[0]["verbs"] == ["list", "get", "delete"]


def test_off_renders_no_hook(helm):
    objs = render(helm, "--set", "uninstall.releaseGatedPods=false")
    assert not [o for o in objs if o["metadata"]["name"] == NAME]


def test_a_bad_action_fails_naming_it(helm):
    out = _template(helm, "--set", "uninstall.action=purge", check=False)
    assert out.returncode != 0 and "uninstall.action must be ungate or delete" in out.stderr


def test_policy_mode_deletes_the_gate_policies_bindings_first(helm):
    """admission.mode policy: no webhook configuration; the hook deletes the gate policies' bindings
    (the objects the chart renders) and may touch nothing else of admissionregistration."""
    objs = render(helm, "--set", "admission.mode=policy", "--set", "webhook.lateLabels.enabled=true")
    job, role = find(objs, "Job", NAME), find(objs, "ClusterRole", NAME)
    args = ungate.parse_args(container(job, "ungate")["args"][1:])
    bindings = sorted(o["metadata"]["name"] for o in objs if o["kind"] == "MutatingAdmissionPolicyBinding")
    assert sorted(args.admission_policy_binding) == bindings == [f"{RELEASE}-gate", f"{RELEASE}-late-labels"]
    assert not args.webhook_configuration
    (rule,) = [r for r in role["rules"] if r["apiGroups"] == ["admissionregistration.k8s.io"]]
    assert rule["resources"] == ["mutatingadmissionpolicybindings"] and sorted(rule["resourceNames"]) == bindings
    assert rule["verbs"] == ["get", "delete"]
