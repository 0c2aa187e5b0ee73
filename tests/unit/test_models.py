"""cogate.models: PodGroup from API JSON, validation naming the field, round trip."""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from cogate.models import (
    Condition,
    PodGroup,
    PodGroupSpec,
    PodGroupStatus,
    format_time,
    parse_time,
)

FULL = {
    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
    "kind": "PodGroup",
    "metadata": {
        "name": "train",
        "namespace": "ml",
        "uid": "6f1c-uid",
        "creationTimestamp": "2024-05-01T10:00:00Z",
        "resourceVersion": "42",
        "generation": 3,
        "labels": {"team": "a"},
        "annotations": {"note": "x"},
        "managedFields": [{"manager": "kubectl"}],
    },
    "spec": {"minMember": 4, "minResources": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": 4},
             "scheduleTimeoutSeconds": 120},
    "status": {
        "phase": "Scheduling",
        "scheduled": 2,
        "running": 1,
        "succeeded": 0,
        "failed": 0,
        "scheduleStartTime": "2024-05-01T10:01:00Z",
        "occupiedBy": "job-uid",
        "conditions": [
            {"type": "Released", "status": "True", "reason": "Released", "message": "fits 4 of 4",
             "lastTransitionTime": "2024-05-01T10:01:00Z", "observedGeneration": 3},
        ],
    },
}


def _with(path: str, value):
    obj = copy.deepcopy(FULL)
    node = obj
    parts = path.split(".")
    for p in parts[:-1]:
        node = node[p]
    node[parts[-1]] = value
    return obj


def test_round_trip_keeps_every_known_field_and_drops_unknown():
    pg = PodGroup.from_api(FULL)
    out = pg.to_api()
    expected = copy.deepcopy(FULL)
    del expected["metadata"]["managedFields"]
    assert out == expected
    assert pg.key == ("ml", "train")
    assert pg.spec.minMember == 4
    assert pg.status.condition("Released").message == "fits 4 of 4"
    assert pg.status.condition("TimedOut") is None


def test_minimal_object_defaults_like_the_crd():
    pg = PodGroup.from_api({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                            "metadata": {"name": "g", "namespace": "d"}})
    assert pg.spec.minMember == 1
    assert pg.spec.minResources is None and pg.spec.scheduleTimeoutSeconds is None
    assert pg.status.phase is None and pg.status.conditions == []
    out = pg.to_api()
    assert out["spec"] == {"minMember": 1}
    assert out["status"] == {}  # no None, no empty conditions
    assert out["metadata"] == {"name": "g", "namespace": "d"}


@pytest.mark.parametrize("key", ["spec", "status"])
def test_null_spec_or_status_is_absent(key):
    pg = PodGroup.from_api(_with(key, None))
    assert pg.to_api()[key] == ({"minMember": 1} if key == "spec" else {})


@pytest.mark.parametrize(
    "path,value,loc",
    [
        ("spec.minMember", 0, ("spec", "minMember")),
        ("spec.minMember", -3, ("spec", "minMember")),
        ("spec.minMember", 2**31, ("spec", "minMember")),
        ("spec.minMember", "3", ("spec", "minMember")),
        ("spec.minMember", True, ("spec", "minMember")),
        ("spec.scheduleTimeoutSeconds", -1, ("spec", "scheduleTimeoutSeconds")),
        ("spec.minResources", {"cpu": "lots"}, ("spec", "minResources")),
        ("spec.minResources", {"cpu": True}, ("spec", "minResources")),
        ("status.phase", "Bogus", ("status", "phase")),
        ("status.running", -1, ("status", "running")),
        ("status.scheduleStartTime", "yesterday", ("status", "scheduleStartTime")),
        ("metadata.creationTimestamp", "2024-13", ("metadata", "creationTimestamp")),
        ("apiVersion", "scheduling.sigs.k8s.io/v1alpha1", ("apiVersion",)),
        ("kind", "Pod", ("kind",)),
        ("metadata", {"namespace": "x"}, ("metadata", "name")),
    ],
)
def test_bad_input_names_the_field(path, value, loc):
    with pytest.raises(ValidationError) as err:
        PodGroup.from_api(_with(path, value))
    locs = [e["loc"][: len(loc)] for e in err.value.errors()]
    assert loc in locs, locs


def test_bad_condition_names_the_field():
    obj = _with("status.conditions", [{"type": "Released", "status": "Yes", "reason": "has space",
                                       "message": "", "lastTransitionTime": "2024-05-01T10:01:00Z"}])
    with pytest.raises(ValidationError) as err:
        PodGroup.from_api(obj)
    fields = {e["loc"][-1] for e in err.value.errors()}
    assert {"status", "reason"} <= fields


def test_not_a_dict_raises_validation_error():
    with pytest.raises(ValidationError):
        PodGroup.from_api(["not", "an", "object"])  # type: ignore[arg-type]


def test_models_are_immutable():
    spec = PodGroupSpec(minMember=2)
    with pytest.raises(ValidationError):
        spec.minMember = 3  # type: ignore[misc]


def test_status_serialization_excludes_none_and_uses_api_names():
    st = PodGroupStatus(phase="Pending", scheduled=0, conditions=[
        Condition(type="Schedulable", status="False", reason="WaitingForMembers", message="2 of 3",
                  lastTransitionTime="2024-05-01T10:00:00Z")])
    assert st.to_api() == {"phase": "Pending", "scheduled": 0, "conditions": [
        {"type": "Schedulable", "status": "False", "reason": "WaitingForMembers", "message": "2 of 3",
         "lastTransitionTime": "2024-05-01T10:00:00Z"}]}


@pytest.mark.parametrize("text,epoch", [
    ("1970-01-01T00:00:00Z", 0.0),
    ("2024-05-01T10:00:00Z", 1714557600.0),
    ("2024-05-01T12:00:00+02:00", 1714557600.0),
    ("2024-05-01T10:00:00.5Z", 1714557600.5),
])
def test_parse_time(text, epoch):
    assert parse_time(text) == epoch


def test_format_time_is_second_precision_utc_and_inverts_parse():
    assert format_time(1714557600.9) == "2024-05-01T10:00:00Z"
    for t in ("2024-05-01T10:00:00Z", "1999-12-31T23:59:59Z"):
        assert format_time(parse_time(t)) == t


@pytest.mark.parametrize("bad", ["", "2024-05-01", "2024-05-01T10:00:00", "now", None])
def test_parse_time_rejects(bad):
    with pytest.raises(ValueError):
        parse_time(bad)  # type: ignore[arg-type]
