"""cogate.webhook.policies: the admission policies' shape (what kube-apiserver does with them is
checked against the webhook's decision on a real control plane: tests/e2e/test_admission_policies.py)."""

from __future__ import annotations

import pytest

from cogate.api import POD_GROUP_LABEL
from cogate.webhook import policies


def _by(objs, kind):
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


def test_objects_and_bindings():
    objs = policies.admission_policies("r", late_labels="Ignore")
    maps, vaps = _by(objs, "MutatingAdmissionPolicy"), _by(objs, "ValidatingAdmissionPolicy")
    assert sorted(maps) == ["r-gate", "r-late-labels"] and sorted(vaps) == ["r-refuse", "r-warn"]
    for kind in ("MutatingAdmissionPolicy", "ValidatingAdmissionPolicy"):
        for name, binding in _by(objs, kind + "Binding").items():
            assert binding["spec"]["policyName"] == name
    bindings = _by(objs, "ValidatingAdmissionPolicyBinding")
    assert bindings["r-refuse"]["spec"]["validationActions"] == ["Deny"]
    assert bindings["r-warn"]["spec"]["validationActions"] == ["Warn"]
    assert maps["r-gate"]["spec"]["failurePolicy"] == "Fail" and maps["r-late-labels"]["spec"]["failurePolicy"] == "Ignore"
    assert vaps["r-refuse"]["spec"]["failurePolicy"] == "Fail" and vaps["r-warn"]["spec"]["failurePolicy"] == "Ignore"
    assert all(m["spec"]["reinvocationPolicy"] == "IfNeeded" for m in maps.values())


def test_late_policy_is_opt_in_and_validated():
    assert "r-late-labels" not in _by(policies.admission_policies("r"), "MutatingAdmissionPolicy")
    with pytest.raises(ValueError, match="late_labels"):
        policies.admission_policies("r", late_labels="Never")


def test_label_selector_only_where_a_late_label_cannot_matter():
    """The gate policy and both validating policies select labelled pods (validation sees the final
    object); the late policy must not (the API server never invokes a policy first on reinvocation)."""
    objs = policies.admission_policies("r", late_labels="Fail", excluded_namespaces=("kube-system", "ops"))
    selector = {"matchExpressions": [{"key": POD_GROUP_LABEL, "operator": "Exists"}]}
    for o in objs:
        if o["kind"].endswith("Binding"):
            continue
        constraints = o["spec"]["matchConstraints"]
        assert constraints["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "ops"]
        assert constraints["resourceRules"][0]["operations"] == ["CREATE"]
        assert constraints.get("objectSelector") == (None if o["metadata"]["name"] == "r-late-labels" else selector)


def test_match_conditions_read_no_variables():
    """matchConditions cannot read ``variables`` (the API server refuses the policy)."""
    for o in policies.admission_policies("r", late_labels="Fail"):
        for cond in o.get("spec", {}).get("matchConditions", []):
            assert "variables." not in cond["expression"], cond


def test_mutation_adopts_only_listed_names():
    assert "schedulerName" not in policies.mutation_expression("g/x", ())
    expr = policies.mutation_expression("g/x", ("b-sched", "a-sched"))
    assert "['a-sched', 'b-sched']" in expr and "'default-scheduler'" in expr


def test_planned_names_in_the_warning():
    (warn,) = [o for o in policies.admission_policies("r", scheduler_names=("batch",))
               if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == "r-warn"]
    exprs = [v["expression"] for v in warn["spec"]["validations"]]
    assert any("['batch', 'default-scheduler']" in e for e in exprs)
