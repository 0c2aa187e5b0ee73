"""model/constraints readers: what each call site reads as absent, and errors naming the field
(pod_info and node_info use them: tests/unit/controller/model/test_records.py)."""

import pytest

from cogate.controller.model import constraints, records
from cogate.controller.model.constraints import (HostPort, LabelSelector, LabelSelectorRequirement,
                                                 NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration,
                                                 TopologySpreadConstraint, host_ports, label_selector,
                                                 node_selector_terms, spread_constraints, taints, tolerations)
from cogate.controller.model.readers import InvalidObject


def test_records_reexports_the_constraint_records_and_readers():
    for name in ("Taint", "Toleration", "NodeSelectorRequirement", "NodeSelectorTerm", "LabelSelectorRequirement",
                 "LabelSelector", "PodAffinityTerm", "TopologySpreadConstraint", "HostPort", "label_selector"):
        assert getattr(records, name) is getattr(constraints, name)
        assert name in records.__all__


def test_spread_constraints_defaults_kept_at_the_call_site():
    one = {"topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    assert spread_constraints([one], "s") == (TopologySpreadConstraint(1, "zone"),)  # absent maxSkew: 1
    assert spread_constraints([{**one, "maxSkew": None, "minDomains": None}], "s")[0].max_skew is None  # as before
    assert spread_constraints([{**one, "maxSkew": None, "minDomains": None}], "s")[0].min_domains == 1
    assert spread_constraints([{"topologyKey": "zone"}], "s")[0].max_skew == 1  # whenUnsatisfiable absent: kept
    assert spread_constraints([{**one, "whenUnsatisfiable": "ScheduleAnyway"}], "s") == ()
    with pytest.raises(InvalidObject, match=r"^s\[0\].maxSkew: expected an integer, got '2'$"):
        spread_constraints([{**one, "maxSkew": "2"}], "s")
    with pytest.raises(InvalidObject, match=r"^s\[0\].minDomains: expected an integer, got True$"):
        spread_constraints([{**one, "minDomains": True}], "s")


def test_host_ports_skip_zero_and_absent_and_name_a_bad_port():
    spec = {"initContainers": [{"ports": [{"hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}]}],
            "containers": [{"ports": [{"containerPort": 80}, {"hostPort": 0}, {"hostPort": False},
                                      {"hostPort": 8080}]}]}
    assert host_ports(spec) == (HostPort(53, "UDP", "10.0.0.1"), HostPort(8080))
    with pytest.raises(InvalidObject, match=r"^spec.containers\[0\].ports\[0\].hostPort: expected an integer"):
        host_ports({"containers": [{"ports": [{"hostPort": "80"}]}]})


def test_taints_and_tolerations():
    assert taints([{"key": "k", "effect": "NoSchedule"}], "spec.taints") == (Taint("k", "", "NoSchedule"),)
    assert taints(None, "spec.taints") == ()
    tol = tolerations([{"key": "k", "operator": None}], "spec.tolerations")
    assert tol == (Toleration("k", "Equal"),)
    assert tolerations([{"key": "k"}], "spec.tolerations") is tol  # one shared tuple per value
    with pytest.raises(InvalidObject, match=r"^spec.tolerations\[0\].effect: expected a string, got int$"):
        tolerations([{"effect": 1}], "spec.tolerations")


def test_selectors():
    terms = node_selector_terms([{"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}],
                                  "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}], "t")
    assert terms == (NodeSelectorTerm((NodeSelectorRequirement("a", "In", ("x",)),),
                                      (NodeSelectorRequirement("metadata.name", "In", ("n1",)),)),)
    assert label_selector(None, "sel") is None
    assert label_selector({}, "sel") == LabelSelector()
    assert label_selector({"matchLabels": {"b": "2", "a": "1"}, "matchExpressions": [{"key": "c", "operator": "Exists"}]},
                          "sel") == LabelSelector((("a", "1"), ("b", "2")), (LabelSelectorRequirement("c", "Exists"),))
    with pytest.raises(InvalidObject, match=r"^sel.matchLabels.a: expected a string value$"):
        label_selector({"matchLabels": {"a": 1}}, "sel")
    with pytest.raises(InvalidObject, match=r"^t\[0\].matchFields\[0\].values\[0\]: expected a string, got int$"):
        node_selector_terms([{"matchFields": [{"key": "k", "operator": "In", "values": [1]}]}], "t")


def test_domain_requirements_keep_a_pod_in_its_domain_and_serialise_as_the_api_server_accepts():
    from cogate.controller.model.constraints import NodeSelectorRequirement, domain_requirements

    reqs = domain_requirements((("topology.kubernetes.io/zone", "z1"), ("example.com/rack", None)))
    assert reqs == (NodeSelectorRequirement("topology.kubernetes.io/zone", "In", ("z1",)),
                    NodeSelectorRequirement("example.com/rack", "Exists"))
    assert [r.api() for r in reqs] == [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]},
        {"key": "example.com/rack", "operator": "Exists"},  # no values: the API server refuses them for Exists
    ]
    inside = {"topology.kubernetes.io/zone": "z1", "example.com/rack": "r7"}
    assert all(r.matches(inside) for r in reqs)
    assert not all(r.matches(inside | {"topology.kubernetes.io/zone": "z2"}) for r in reqs)
    assert not all(r.matches({"topology.kubernetes.io/zone": "z1"}) for r in reqs)
    assert domain_requirements(()) == ()
