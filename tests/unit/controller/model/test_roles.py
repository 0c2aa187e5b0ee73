"""Role minimums' annotations and the role of a member (cogate.controller.model.roles)."""

from __future__ import annotations

import pytest

from cogate.controller.model import roles
from tests.builders.objects import pod

A = roles.ROLE_MINIMUMS_ANNOTATION
L = roles.ROLE_LABEL_ANNOTATION


def test_no_annotation_is_no_roles():
    assert roles.parse(None) is None
    assert roles.parse({"other": "x"}) is None


def test_minimums_are_read_sorted_with_the_label():
    got = roles.parse({A: '{"worker": 4, "launcher": 1}', L: " app/role "})
    assert got == roles.Roles((("launcher", 1), ("worker", 4)), "app/role")
    assert got.total == 5 and got.minimum("worker") == 4 and got.minimum("ps") == 0


@pytest.mark.parametrize("raw, fault", [
    ("{", "not JSON"),
    ("[1]", "want a JSON object"),
    ("{}", "want a JSON object"),
    ('{"w": 0}', "minimum of role 'w' is 0, want an integer >= 1"),
    ('{"w": true}', "minimum of role 'w' is true"),
    ('{"w": 1.5}', "minimum of role 'w' is 1.5"),
    ('{"w": "2"}', 'minimum of role \'w\' is "2"'),
    ('{"": 1}', "role '' is not a label value"),
    ('{"' + "x" * 64 + '": 1}', "is not a label value"),
    ("{" + ",".join(f'"r{i}": 1' for i in range(33)) + "}", "33 roles, at most 32"),
])
def test_bad_minimums_name_the_annotation_and_the_fault(raw, fault):
    with pytest.raises(roles.RolesError) as e:
        roles.parse({A: raw})
    assert str(e.value).startswith(f"annotation {A}: ") and fault in str(e.value)


def test_an_empty_label_annotation_is_refused_even_without_minimums():
    with pytest.raises(roles.RolesError, match=f"annotation {L}: empty"):
        roles.parse({L: " "})


@pytest.mark.parametrize("labels, role", [
    ({"training.kubeflow.org/replica-type": "master", "training.kubeflow.org/job-role": "master"}, "master"),
    ({"training.kubeflow.org/job-role": "launcher", "training.kubeflow.org/operator-name": "mpi-operator"}, "launcher"),
    ({"ray.io/group": "headgroup", "ray.io/node-type": "head"}, "headgroup"),
    ({"ray.io/node-type": "worker"}, "worker"),
    ({"jobset.sigs.k8s.io/replicatedjob-name": "decode"}, "decode"),
    ({"volcano.sh/task-spec": "ps"}, "ps"),
    ({"leaderworkerset.sigs.k8s.io/worker-index": "0"}, "leader"),
    ({"leaderworkerset.sigs.k8s.io/worker-index": "3"}, "worker"),
    ({"app": "x"}, ""),
])
def test_the_role_comes_from_the_operators_labels(labels, role):
    assert roles.role_of(pod("p").labels(labels).info()) == role


def test_a_named_label_wins_and_is_the_only_one_read():
    p = pod("p").labels({"ray.io/group": "gpu", "tier": "prefill"}).info()
    assert roles.role_of(p, "tier") == "prefill"
    assert roles.role_of(p, "missing") == ""


def test_count_by_role_lists_every_role():
    r = roles.Roles((("a", 1), ("b", 2)), "k")
    ps = [pod(f"p{i}").labels({"k": v}).info() for i, v in enumerate(["a", "a", "c", ""])]
    assert roles.count_by_role(ps, r) == {"a": 2, "b": 0}
