"""Operators whose size can never complete their group (controller/release/operators.py)."""

from __future__ import annotations

import pytest

from cogate.controller.release import operators as ops


def ray(*groups, suspend=None, autoscaling=None):
    spec = {"headGroupSpec": {"template": {}}, "workerGroupSpecs": list(groups)}
    if suspend is not None:
        spec["suspend"] = suspend
    if autoscaling is not None:
        spec["enableInTreeAutoscaling"] = autoscaling
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": spec}


@pytest.mark.parametrize("raw,pods", [
    (ray({"groupName": "w", "replicas": 4}), 5),
    (ray({"groupName": "w", "replicas": 2}), 3),
    (ray({"groupName": "w", "minReplicas": 3}), 4),  # replicas defaults to minReplicas
    (ray({"groupName": "w", "replicas": 2, "numOfHosts": 2}, {"groupName": "v", "replicas": 1}), 6),
    (ray({"groupName": "w", "replicas": 2, "suspend": True}, {"groupName": "v", "replicas": 1}), 2),
    (ray({"groupName": "w", "replicas": 1, "maxReplicas": 4}, autoscaling=True), 5),
    (ray(), 1),
    (ray({"groupName": "w", "replicas": 4}, suspend=True), 0),
])
def test_raycluster_size(raw, pods):
    assert ops.size(ops.RAYCLUSTER, raw).pods == pods


def mpi(workers, launcher=None, suspend=False):
    specs = {"Worker": {"replicas": workers}}
    if launcher is not None:
        specs["Launcher"] = {"replicas": launcher}
    return {"spec": {"mpiReplicaSpecs": specs, "runPolicy": {"suspend": suspend}}}


def test_mpijob_and_pytorchjob_sizes():
    assert ops.size(ops.MPIJOB, mpi(4)).pods == 5
    assert ops.size(ops.MPIJOB, mpi(2, launcher=1)).detail == "launcher 1 + workers 2"
    assert ops.size(ops.MPIJOB, mpi(4, suspend=True)).suspended
    pt = {"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}}}
    assert ops.size(ops.PYTORCHJOB, pt).pods == 4
    pt["spec"]["pytorchReplicaSpecs"]["Worker"] = {}  # replicas default 1
    assert ops.size(ops.PYTORCHJOB, pt).pods == 2
    pt["spec"]["elasticPolicy"] = {"maxReplicas": 5}
    assert ops.size(ops.PYTORCHJOB, pt).pods == 6
    assert ops.size(("batch", "Job"), {"spec": {}}) is None


@pytest.mark.parametrize("raw", [
    {"spec": {"workerGroupSpecs": {"w": 1}}},
    {"spec": {"workerGroupSpecs": [{"replicas": "four"}]}},
    {"spec": {"workerGroupSpecs": [{"replicas": -1}]}},
    {"spec": []},
    [],
])
def test_a_malformed_owner_raises_naming_the_field(raw):
    with pytest.raises(ValueError):
        ops.size(ops.RAYCLUSTER, raw)


def test_judge_says_when_and_how_to_fix():
    s = ops.size(ops.RAYCLUSTER, ray({"groupName": "small", "replicas": 2}))
    assert ops.judge("RayCluster team/rc", s, 3) is None
    v = ops.judge("RayCluster team/rc", s, 5)
    assert v is not None and v.warning and v.most == 3
    assert v.message.startswith("RayCluster team/rc keeps at most 3 pods (head 1 + workers 2 (spec.workerGroupSpecs[0] "
                                "'small' replicas 2)), fewer than minMember 5: the gang can never form")
    assert "cogate.dev/follow-owner-size=true" in v.message
    following = ops.judge("RayCluster team/rc", s, 5, following=True)
    assert following is not None and not following.warning and "forms with 3" in following.message
    suspended = ops.judge("MPIJob team/pi", ops.size(ops.MPIJOB, mpi(4, suspend=True)), 5)
    assert suspended is not None and not suspended.warning and "until resumed" in suspended.message


# -- the room: read, judge, tell the PodGroup and the owner, follow --------------------------------

from cogate.controller.kube.events import Emitter  # noqa: E402
from cogate.controller.kube.metrics import Metrics  # noqa: E402
from cogate.controller.model.records import pod_info  # noqa: E402
from cogate.controller.release.sizing import OwnerSizes  # noqa: E402
from cogate.controller.status.inputs import group_object  # noqa: E402
from cogate.models import PodGroupStatus  # noqa: E402
from tests.builders import pod, raw_pg  # noqa: E402
from tests.builders.objects import NS  # noqa: E402


class Recorded:
    def __init__(self):
        self.events = []

    def record(self, ref, notice):
        self.events.append((ref.kind, ref.name, notice.type, notice.reason, notice.message))


def sizes_room(objects):
    events = Emitter(None)
    rec = Recorded()
    events.recorder = rec
    events.record = rec.record  # type: ignore[method-assign]
    reads = []

    def read(kind, namespace, name):
        reads.append((kind, name))
        return objects.get((kind, name))

    return OwnerSizes(read, events, Metrics(), lambda: 0.0), rec, reads


def ray_group(min_member=5, follow=False, pods=3):
    raw = raw_pg("rc", min_member)
    raw["metadata"]["ownerReferences"] = [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc",
                                           "uid": "rc-1", "controller": True}]
    raw["spec"]["minResources"] = {"cpu": "10"}  # KubeRay sums every pod's requests
    if follow:
        raw["metadata"]["annotations"] = {"cogate.dev/follow-owner-size": "true"}
    g = group_object(raw)
    ms = [pod_info(pod(f"rc-{i}").group("rc").owner("RayCluster", "rc", "rc-1", "ray.io/v1").gated().raw())
          for i in range(pods)]
    return g, ms


def test_room_tells_the_podgroup_and_the_raycluster_in_one_pass():
    cluster = ray({"groupName": "small", "replicas": 2})
    cluster["metadata"] = {"uid": "rc-1"}
    r, rec, reads = sizes_room({(ops.RAYCLUSTER, "rc"): cluster})
    g, ms = ray_group()
    out = r.adjust({g.key: g}, {g.key: ms}, 100.0)
    assert out[g.key] is g, "not following: minMember as written"
    assert [(e[0], e[3]) for e in rec.events] == [("PodGroup", "OwnerCannotComplete"),
                                                  ("RayCluster", "OwnerCannotComplete")]
    assert rec.events[1][4] == f"PodGroup {NS}/rc: {rec.events[0][4]}"
    assert rec.events[0][4].startswith(f"RayCluster {NS}/rc keeps at most 3 pods")
    st = r.conditions(PodGroupStatus(), g, 100.0)
    c = st.condition("OwnerCanComplete")
    assert (c.status, c.reason) == ("False", "OwnerTooSmall") and "keeps at most 3 pods" in c.message
    r.adjust({g.key: g}, {g.key: ms}, 101.0)
    assert len(rec.events) == 2, "told once per situation"
    assert len(reads) == 1, "read once while the members are unchanged"
    # scaled back up: the condition turns True, nothing more is said
    cluster["spec"]["workerGroupSpecs"][0]["replicas"] = 4
    ms5 = ms + [pod_info(pod(f"rc-{i}").group("rc").owner("RayCluster", "rc", "rc-1", "ray.io/v1").gated().raw())
                for i in (3, 4)]
    r.adjust({g.key: g}, {g.key: ms5}, 102.0)
    assert r.conditions(st, g, 102.0).condition("OwnerCanComplete").status == "True"


def test_a_scale_down_back_to_a_member_set_seen_before_is_judged_in_the_pass_that_sees_it():
    """The CI flake of tests/e2e/test_operator_sizes.py, as a unit test of its kind: while a RayCluster's
    5 pods arrive, a pass sees its first 3 (short: the owner is read, 4 workers, it can complete); the 5
    arrive; the RayCluster is scaled to 2 workers and KubeRay deletes the last 2 pods, leaving exactly
    those 3. The owner was cached with "the members then", which matched again, so cogate judged the
    old size for up to CACHE_SECONDS (10 s). Now any change of members between passes reads it again:
    told in the pass that sees the pods go, whatever members remain, at any time inside the cache window."""
    cluster = ray({"groupName": "small", "replicas": 4})
    cluster["metadata"] = {"uid": "rc-1"}
    for left in ((0, 1, 2), (0, 3, 4), (1, 2, 4)):
        r, rec, reads = sizes_room({(ops.RAYCLUSTER, "rc"): cluster})
        g, ms5 = ray_group(pods=5)
        first = [ms5[i] for i in left]
        r.adjust({g.key: g}, {g.key: first}, 100.0)  # arriving: 3 of 5, read, can complete
        assert rec.events == [] and len(reads) == 1
        r.adjust({g.key: g}, {g.key: ms5}, 100.5)  # all 5: not short, not read
        cluster["spec"]["workerGroupSpecs"][0]["replicas"] = 2
        r.adjust({g.key: g}, {g.key: first}, 101.0)  # scaled down to the same 3
        assert len(reads) == 2, (left, "the owner read again in the pass that saw the pods go")
        assert [(e[0], e[3]) for e in rec.events] == [("PodGroup", "OwnerCannotComplete"),
                                                      ("RayCluster", "OwnerCannotComplete")], left
        c = r.conditions(PodGroupStatus(), g, 101.0).condition("OwnerCanComplete")
        assert (c.status, c.reason) == ("False", "OwnerTooSmall") and "keeps at most 3 pods" in c.message
        r.adjust({g.key: g}, {g.key: first}, 102.0)
        assert len(reads) == 2, "unchanged members: the read is kept"
        cluster["spec"]["workerGroupSpecs"][0]["replicas"] = 4


def test_following_lowers_minmember_to_the_owners_size():
    cluster = ray({"groupName": "small", "replicas": 2})
    r, rec, _ = sizes_room({(ops.RAYCLUSTER, "rc"): cluster})
    g, ms = ray_group(follow=True)
    out = r.adjust({g.key: g}, {g.key: ms}, 100.0)
    assert out[g.key].pg.spec.minMember == 3 and g.pg.spec.minMember == 5
    assert out[g.key].pg.spec.minResources is None and g.pg.spec.minResources == {"cpu": "10"}
    assert [e[3] for e in rec.events] == ["FollowingOwnerSize", "FollowingOwnerSize"]
    c = r.conditions(PodGroupStatus(), g, 100.0).condition("OwnerCanComplete")
    assert (c.status, c.reason) == ("True", "FollowingOwnerSize") and "forms with 3" in c.message


def test_room_says_nothing_without_an_operator_a_full_group_or_an_unreadable_owner():
    r, rec, reads = sizes_room({})
    g, ms = ray_group(pods=5)
    r.adjust({g.key: g}, {g.key: ms}, 100.0)  # 5 of 5 present: not read
    g3, ms3 = ray_group()
    r.adjust({g3.key: g3}, {g3.key: ms3}, 100.0)  # 404: quiet
    bad = {(ops.RAYCLUSTER, "rc"): {"spec": {"workerGroupSpecs": "x"}}}
    r2, rec2, _ = sizes_room(bad)
    r2.adjust({g3.key: g3}, {g3.key: ms3}, 100.0)
    assert rec.events == [] and rec2.events == [] and reads == [(ops.RAYCLUSTER, "rc")]
    told = PodGroupStatus(conditions=[{"type": "OwnerCanComplete", "status": "False", "reason": "OwnerTooSmall",
                                       "message": "x", "lastTransitionTime": "2024-01-01T00:00:00Z"}])
    assert r2.conditions(told, g3, 100.0) is told, "an owner that cannot be read leaves the condition as it is"
