"""Planner records, matching rules and API JSON converters (controller/model/records.py)."""

import pytest

from cogate.api import POD_GROUP_LABEL
from cogate.controller.model.records import (
    HostPort,
    InvalidObject,
    LabelSelector,
    LabelSelectorRequirement,
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
    Taint,
    Toleration,
    is_member,
    member_key,
    node_info,
    parse_time,
    pod_info,
)

Gi = 2**30


@pytest.mark.parametrize(
    "tol,taint,ok",
    [
        (Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "v", "NoSchedule"), True),
        (Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "w", "NoSchedule"), False),
        (Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "v", "NoExecute"), False),
        (Toleration("k", "Equal", "v", ""), Taint("k", "v", "NoExecute"), True),  # empty effect: all effects
        (Toleration("k", "Exists", "", "NoSchedule"), Taint("k", "anything", "NoSchedule"), True),
        (Toleration("", "Exists", "", ""), Taint("x", "y", "NoExecute"), True),  # tolerates everything
        (Toleration("", "Exists", "", "NoSchedule"), Taint("x", "y", "NoExecute"), False),
        (Toleration("other", "Exists"), Taint("k", "", "NoSchedule"), False),
        (Toleration("k", "", "", "NoSchedule"), Taint("k", "", "NoSchedule"), True),  # "" operator = Equal
        (Toleration("k", "Bogus", "", ""), Taint("k", "", "NoSchedule"), False),
    ],
)
def test_toleration(tol, taint, ok):
    assert tol.tolerates(taint) is ok


NODE = NodeInfo("n1", labels={"zone": "a", "gen": "5", "gpu": "true"})


@pytest.mark.parametrize(
    "req,ok",
    [
        (NodeSelectorRequirement("zone", "In", ("a", "b")), True),
        (NodeSelectorRequirement("zone", "In", ("b",)), False),
        (NodeSelectorRequirement("missing", "In", ("a",)), False),
        (NodeSelectorRequirement("zone", "NotIn", ("b",)), True),
        (NodeSelectorRequirement("zone", "NotIn", ("a",)), False),
        (NodeSelectorRequirement("missing", "NotIn", ("a",)), True),
        (NodeSelectorRequirement("gpu", "Exists"), True),
        (NodeSelectorRequirement("missing", "Exists"), False),
        (NodeSelectorRequirement("missing", "DoesNotExist"), True),
        (NodeSelectorRequirement("gpu", "DoesNotExist"), False),
        (NodeSelectorRequirement("gen", "Gt", ("4",)), True),
        (NodeSelectorRequirement("gen", "Gt", ("5",)), False),
        (NodeSelectorRequirement("gen", "Lt", ("6",)), True),
        (NodeSelectorRequirement("gen", "Lt", ("5",)), False),
        (NodeSelectorRequirement("zone", "Gt", ("1",)), False),  # label not an integer
        (NodeSelectorRequirement("gen", "Gt", ("x",)), False),  # value not an integer
        (NodeSelectorRequirement("gen", "Gt", ("1", "2")), False),  # exactly one value
        (NodeSelectorRequirement("missing", "Gt", ("1",)), False),
        (NodeSelectorRequirement("zone", "Weird", ("a",)), False),
    ],
)
def test_node_selector_requirement(req, ok):
    assert NodeSelectorTerm(match_expressions=(req,)).matches(NODE) is ok


def test_node_selector_term_ands_and_empty_term_matches_nothing():
    a = NodeSelectorRequirement("zone", "In", ("a",))
    b = NodeSelectorRequirement("gpu", "DoesNotExist")
    assert NodeSelectorTerm((a,)).matches(NODE)
    assert not NodeSelectorTerm((a, b)).matches(NODE)
    assert not NodeSelectorTerm().matches(NODE)


@pytest.mark.parametrize(
    "field,ok",
    [
        (NodeSelectorRequirement("metadata.name", "In", ("n1",)), True),
        (NodeSelectorRequirement("metadata.name", "In", ("n2",)), False),
        (NodeSelectorRequirement("metadata.name", "NotIn", ("n2",)), True),
        (NodeSelectorRequirement("metadata.name", "Exists"), False),  # only In/NotIn allowed
        (NodeSelectorRequirement("metadata.uid", "In", ("n1",)), False),  # only metadata.name
    ],
)
def test_match_fields(field, ok):
    assert NodeSelectorTerm(match_fields=(field,)).matches(NODE) is ok


@pytest.mark.parametrize(
    "sel,labels,ok",
    [
        (LabelSelector(), {"a": "1"}, True),
        (LabelSelector((("app", "x"),)), {"app": "x"}, True),
        (LabelSelector((("app", "x"),)), {"app": "y"}, False),
        (LabelSelector((), (LabelSelectorRequirement("app", "In", ("x", "y")),)), {"app": "y"}, True),
        (LabelSelector((), (LabelSelectorRequirement("app", "NotIn", ("x",)),)), {}, True),
        (LabelSelector((), (LabelSelectorRequirement("app", "Exists"),)), {}, False),
        (LabelSelector((), (LabelSelectorRequirement("app", "DoesNotExist"),)), {}, True),
        (LabelSelector((), (LabelSelectorRequirement("app", "Gt", ("1",)),)), {"app": "2"}, False),
    ],
)
def test_label_selector(sel, labels, ok):
    assert sel.matches(labels) is ok


@pytest.mark.parametrize(
    "a,b,conflict",
    [
        (HostPort(80), HostPort(80), True),
        (HostPort(80), HostPort(81), False),
        (HostPort(80, "TCP"), HostPort(80, "UDP"), False),
        (HostPort(80, "TCP", "10.0.0.1"), HostPort(80, "TCP", "10.0.0.2"), False),
        (HostPort(80, "TCP", "10.0.0.1"), HostPort(80, "TCP", "10.0.0.1"), True),
        (HostPort(80, "TCP", "0.0.0.0"), HostPort(80, "TCP", "10.0.0.2"), True),
        (HostPort(80, "TCP", "10.0.0.2"), HostPort(80, "TCP", "0.0.0.0"), True),
    ],
)
def test_host_port_conflicts(a, b, conflict):
    assert a.conflicts(b) is conflict
    assert b.conflicts(a) is conflict


def node_obj(**over):
    obj = {
        "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
        "spec": {"taints": [{"key": "dedicated", "value": "train", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110", "nvidia.com/gpu": "8"},
            "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
        },
    }
    obj.update(over)
    return obj


def test_node_info():
    n = node_info(node_obj())
    assert n.name == "n1"
    assert n.allocatable == {"cpu": 3920, "memory": 15 * Gi, "pods": 110, "nvidia.com/gpu": 8}
    assert n.taints == (Taint("dedicated", "train", "NoSchedule"),)
    assert n.ready and not n.unschedulable
    assert n.labels["kubernetes.io/hostname"] == "n1"


@pytest.mark.parametrize(
    "conditions,ready",
    [
        ([{"type": "Ready", "status": "True"}], True),
        ([{"type": "Ready", "status": "False"}], False),
        ([{"type": "Ready", "status": "Unknown"}], False),
        ([], False),
    ],
)
def test_node_ready(conditions, ready):
    obj = node_obj()
    obj["status"]["conditions"] = conditions
    assert node_info(obj).ready is ready


def test_node_unschedulable():
    obj = node_obj(spec={"unschedulable": True})
    assert node_info(obj).unschedulable


@pytest.mark.parametrize(
    "mutate,field",
    [
        (lambda o: o["status"]["allocatable"].__setitem__("cpu", "four"), "status.allocatable.cpu"),
        (lambda o: o["spec"].__setitem__("taints", "x"), "spec.taints"),
        (lambda o: o["metadata"].__setitem__("labels", {"a": 1}), "metadata.labels.a"),
        (lambda o: o["metadata"].pop("name"), "metadata.name"),
    ],
)
def test_node_info_garbage(mutate, field):
    obj = node_obj()
    mutate(obj)
    with pytest.raises(InvalidObject) as ei:
        node_info(obj)
    assert field in str(ei.value)


def pod_obj():
    return {
        "metadata": {
            "name": "w-0",
            "namespace": "ml",
            "uid": "u-0",
            "resourceVersion": "42",
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "labels": {POD_GROUP_LABEL: "train"},
            "ownerReferences": [{"kind": "Job", "name": "j", "controller": True}],
        },
        "spec": {
            "schedulerName": "default-scheduler",
            "priority": 100,
            "schedulingGates": [{"name": "scheduling.x-k8s.io/pod-group"}, {"name": "other"}],
            "nodeSelector": {"pool": "gpu"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "train", "effect": "NoSchedule"},
                            {"operator": "Exists"},
                            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300}],
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]},
                ]}},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname",
                     "labelSelector": {"matchLabels": {POD_GROUP_LABEL: "train"}}},
                ]},
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "zone", "labelSelector": {"matchExpressions": [
                        {"key": "app", "operator": "In", "values": ["db"]}]}, "namespaces": ["data"]},
                ]},
            },
            "initContainers": [{"name": "side", "restartPolicy": "Always",
                                "resources": {"requests": {"cpu": "100m"}},
                                "ports": [{"containerPort": 9000, "hostPort": 9000, "protocol": "UDP"}]}],
            "containers": [{"name": "main", "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}},
                            "ports": [{"containerPort": 80}, {"containerPort": 8080, "hostPort": 8080,
                                                              "hostIP": "10.0.0.1"}]}],
        },
        "status": {"phase": "Pending"},
    }


def test_pod_info():
    p = pod_info(pod_obj())
    assert (p.namespace, p.name, p.uid, p.resource_version) == ("ml", "w-0", "u-0", "42")
    assert p.group == "train"
    assert p.requests == {"cpu": 2100, "nvidia.com/gpu": 1}
    assert p.gates == ("scheduling.x-k8s.io/pod-group", "other")
    assert p.gated_by("other") and not p.gated_by("nope")
    assert p.node_selector == {"pool": "gpu"}
    assert len(p.required_node_affinity) == 2
    assert p.required_node_affinity[1].match_fields[0].values == ("n9",)
    assert p.tolerations[0] == Toleration("dedicated", "Equal", "train", "NoSchedule")
    assert p.tolerations[1] == Toleration("", "Exists", "", "")
    assert p.tolerations[2] == Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute", 300)
    assert p.tolerations[1].seconds is None, "no tolerationSeconds: for ever"
    assert set(p.host_ports) == {HostPort(9000, "UDP", "0.0.0.0"), HostPort(8080, "TCP", "10.0.0.1")}
    assert p.required_pod_anti_affinity[0].label_selector.matches({POD_GROUP_LABEL: "train"})
    assert p.required_pod_affinity[0].topology_key == "zone"
    assert p.required_pod_affinity[0].namespaces == ("data",)
    assert p.priority == 100
    assert p.created == parse_time("2024-05-01T10:00:00Z") == 1714557600.0
    assert p.has_controller and not p.deleting and not p.bound and not p.terminal
    assert p.phase == "Pending"


def test_pod_info_defaults_and_flags():
    p = pod_info({"metadata": {"name": "a", "namespace": "n", "deletionTimestamp": "2024-01-01T00:00:00Z"},
                  "spec": {"nodeName": "n1"}, "status": {"phase": "Succeeded"}})
    assert p.deleting and p.bound and p.terminal
    assert p.group is None and p.priority == 0 and p.scheduler_name == "default-scheduler"
    assert p.required_node_affinity == () and p.requests == {}


def test_pod_info_empty_required_affinity_matches_nothing():
    obj = pod_obj()
    obj["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {}
    p = pod_info(obj)
    assert p.required_node_affinity and not any(t.matches(NODE) for t in p.required_node_affinity)


@pytest.mark.parametrize(
    "mutate,field",
    [
        (lambda o: o["spec"]["containers"][0]["resources"]["limits"].__setitem__("cpu", "2 cores"),
         "spec.containers[0].resources.limits.cpu"),
        (lambda o: o["spec"].__setitem__("overhead", {"memory": "1GB"}), "spec.overhead.memory"),
        (lambda o: o["spec"].__setitem__("priority", "high"), "spec.priority"),
        (lambda o: o["spec"].__setitem__("tolerations", {}), "spec.tolerations"),
        (lambda o: o["spec"]["tolerations"][2].__setitem__("tolerationSeconds", "300"), "spec.tolerations[2].tolerationSeconds"),
        (lambda o: o["spec"]["containers"][0]["ports"][1].__setitem__("hostPort", "80"),
         "spec.containers[0].ports[1].hostPort"),
        (lambda o: o["metadata"].__setitem__("creationTimestamp", "yesterday"), "metadata.creationTimestamp"),
        (lambda o: o["spec"].__setitem__("schedulingGates", [{"name": 5}]), "spec.schedulingGates[0].name"),
        (lambda o: o["spec"]["affinity"].__setitem__("podAntiAffinity", []), "spec.affinity.podAntiAffinity"),
    ],
)
def test_pod_info_garbage_names_the_field(mutate, field):
    obj = pod_obj()
    mutate(obj)
    with pytest.raises(InvalidObject) as ei:
        pod_info(obj)
    assert field in str(ei.value)
    assert "ml/w-0" in str(ei.value)


@pytest.mark.parametrize("obj", [None, [], "pod", 3])
def test_pod_info_not_an_object(obj):
    with pytest.raises(InvalidObject):
        pod_info(obj)


def test_records_are_frozen():
    p = PodInfo("n", "a", "u")
    with pytest.raises(AttributeError):
        p.name = "b"  # type: ignore[misc]


@pytest.mark.parametrize(
    "labels,namespace,deleting,key",
    [
        ({POD_GROUP_LABEL: "train"}, "ml", False, ("ml", "train")),
        ({POD_GROUP_LABEL: "train"}, "ml", True, None),  # being deleted: no longer a member
        ({POD_GROUP_LABEL: ""}, "ml", False, None),  # an empty label names no group
        ({}, "ml", False, None),
        ({"other": "train"}, "ml", False, None),
    ],
)
def test_membership_rule(labels, namespace, deleting, key):
    p = PodInfo(namespace=namespace, name="p", uid="u", labels=labels, deleting=deleting)
    assert member_key(p) == key
    assert is_member(p, "ml", "train") == (key == ("ml", "train"))
    assert not is_member(p, "other-ns", "train")  # a same-named group in another namespace never matches


@pytest.mark.parametrize("policy,expected", [(None, "PreemptLowerPriority"), ("Never", "Never"),
                                             ("PreemptLowerPriority", "PreemptLowerPriority")])
def test_pod_info_preemption_policy(policy, expected):
    obj = pod_obj()
    if policy is not None:
        obj["spec"]["preemptionPolicy"] = policy
    assert pod_info(obj).preemption_policy == expected


@pytest.mark.parametrize("policy", ["never", "Always", 3, ["Never"]])
def test_pod_info_bad_preemption_policy_names_the_field(policy):
    obj = pod_obj()
    obj["spec"]["preemptionPolicy"] = policy
    with pytest.raises(InvalidObject) as ei:
        pod_info(obj)
    assert "spec.preemptionPolicy" in str(ei.value) and "ml/w-0" in str(ei.value)


def test_pod_info_start_time():
    obj = pod_obj()
    assert pod_info(obj).started == 0.0
    obj["status"]["startTime"] = "2024-05-01T10:00:05Z"
    assert pod_info(obj).started == parse_time("2024-05-01T10:00:00Z") + 5
    obj["status"]["startTime"] = "soon"
    with pytest.raises(InvalidObject) as ei:
        pod_info(obj)
    assert "status.startTime" in str(ei.value)
