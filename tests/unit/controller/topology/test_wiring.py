"""Where the constraint is read and the levels come from (issue 32 item 1): the PodGroup's and its
members' annotations into ``GroupRequest`` (controller/status/inputs.py), ``--topology-levels``
(controller/main.py) and Kueue's Topology objects (controller/topologies.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from cogate.controller import main as controller_main
from cogate.controller import topologies
from cogate.controller.status.inputs import build_group_requests
from cogate.controller.topology import constraints as t
from tests.builders import pod, podgroup

RACK = "example.com/rack"


def _requests(pg_annotations, member_annotations=None, levels=(), kueue=()):
    g = podgroup("pg").annotations(pg_annotations)
    m = pod("m").group("pg").gated().annotations(member_annotations)
    return build_group_requests([g.info()], {("team", "pg"): [m.info()]}, levels=levels, kueue_levels=kueue)[0]


def test_pod_group_annotation_read_into_the_request():
    r = _requests({t.REQUIRED: RACK}, levels=("example.com/block", RACK, t.HOSTNAME_LABEL))
    assert r.topology == t.Constraint(("example.com/block", RACK, t.HOSTNAME_LABEL), required=1)
    assert r.topology_error == ""


def test_member_kueue_annotation_read_into_the_request():
    r = _requests({}, {t.KUEUE_PREFERRED: RACK, "other": "x"}, kueue=[("example.com/block", RACK, t.HOSTNAME_LABEL)])
    assert r.topology == t.Constraint(("example.com/block", RACK, t.HOSTNAME_LABEL), preferred=1, source="kueue")


def test_bad_annotation_is_the_request_error():
    r = _requests({t.REQUIRED: RACK, t.PREFERRED: "x/y/z"})
    assert r.topology is None and r.topology_error.startswith(t.PREFERRED)


def test_no_annotation_no_topology():
    r = _requests({})
    assert r.topology is None and r.topology_error == ""


def test_flag():
    args = controller_main.build_parser().parse_args(["--topology-levels", f"zone,{RACK}"])
    assert controller_main.configure(args).topology_levels == ("zone", RACK, t.HOSTNAME_LABEL)
    with pytest.raises(SystemExit):
        controller_main.build_parser().parse_args(["--topology-levels", "a,,b"])


class _Custom:
    def __init__(self, statuses):
        self.statuses = statuses
        self.asked = []

    def list_cluster_custom_object(self, group, version, plural, **kw):
        self.asked.append(version)
        status = self.statuses.get(version, 404)
        if status != 200:
            from kubernetes.client.exceptions import ApiException
            raise ApiException(status=status)
        return {"items": []}


@pytest.mark.parametrize("statuses, version, why", [
    ({"v1beta2": 200}, "v1beta2", ""),
    ({"v1beta1": 200}, "v1beta1", ""),
    ({}, "", "not served"),
    ({"v1beta2": 403, "v1beta1": 403}, "", "forbidden (RBAC: list and watch topologies.kueue.x-k8s.io)"),
])
def test_kueue_topologies_read_when_served(statuses, version, why):
    statuses_forbidden = "forbidden (RBAC: list and watch topologies.kueue.x-k8s.io)"
    custom = _Custom(statuses)
    assert topologies.served_version(custom) == (version, why)
    watches = topologies.informers(SimpleNamespace(custom=custom), None, None)
    # not served yet: watched until it is (a Topology CRD installed later); forbidden: not watched
    assert [s.cache for s in watches.informers] == (["kueue_topologies"] if why != statuses_forbidden else [])


def test_kueue_levels_in_name_order():
    assert topologies.kueue_levels(SimpleNamespace(kueue_topologies=None)) == []
    inf = SimpleNamespace(snapshot_map=lambda: {"b": ("y", t.HOSTNAME_LABEL), "a": ("x", t.HOSTNAME_LABEL)})
    assert topologies.kueue_levels(SimpleNamespace(kueue_topologies=inf)) == [("x", t.HOSTNAME_LABEL),
                                                                              ("y", t.HOSTNAME_LABEL)]


def test_released_event_names_the_domain():
    from cogate.controller.status import notices

    n = notices.released({"u1": "r3-0"}, "pinned", placed_in="block b1 (wider than the preferred rack: none holds 8 now)")
    assert n.message == ("released 1 member pinned to planned nodes: r3-0 x1; "
                         "in block b1 (wider than the preferred rack: none holds 8 now)")
    assert notices.released({"u1": "r3-0"}, "pinned").message == "released 1 member pinned to planned nodes: r3-0 x1"


class _Later(_Custom):
    """No version served until ``serve`` is called; then ``v1beta1`` lists one Topology."""

    def serve(self):
        self.statuses = {"v1beta1": 200}

    def list_cluster_custom_object(self, group, version, plural, **kw):
        super().list_cluster_custom_object(group, version, plural, **kw)
        if kw.get("watch"):
            return iter(())
        item = {"metadata": {"name": "t"}, "spec": {"levels": [{"nodeLabel": RACK}]}}
        body = {"items": [item], "metadata": {"resourceVersion": "7"}}
        return SimpleNamespace(data=json.dumps(body).encode()) if kw.get("_preload_content") is False else body


def test_a_topology_served_after_start_is_read_by_the_informer():
    """Not served at start: the informer is started anyway, syncs empty, and its watch ends with a 410
    once a version is served, so the next list reads the Topology (no restart)."""
    from cogate.controller.kube.informer import Gone, Informer

    custom = _Later({})
    watches = topologies.informers(SimpleNamespace(custom=custom), None, None)
    assert [s.cache for s in watches.informers] == ["kueue_topologies"]
    naps = []
    list_fn, watch_fn = topologies.until_served(custom, sleep=naps.append, poll=3)
    assert list_fn() == ([], "")
    events = watch_fn("")
    assert [next(events)["type"] for _ in range(4)] == ["BOOKMARK"] * 4  # asked at 3 s: still not served
    custom.serve()
    got = [next(events) for _ in range(3)]
    assert [e["type"] for e in got] == ["BOOKMARK", "BOOKMARK", "ERROR"] and got[-1]["object"]["code"] == 410
    assert sum(naps) == 6.0
    inf = Informer("kueue-topologies", list_fn, watch_fn, key=lambda raw: raw["metadata"]["name"],
                   convert=t.kueue_topology_levels)
    inf._relist()
    assert inf.store == {"t": (RACK, t.HOSTNAME_LABEL)}
    assert Gone  # the informer turns the ERROR 410 into Gone and lists again (controller/kube/informer.py)


def test_forbidden_topologies_are_not_watched():
    custom = _Custom({"v1beta2": 403, "v1beta1": 403})
    assert topologies.informers(SimpleNamespace(custom=custom), None, None).informers == ()
