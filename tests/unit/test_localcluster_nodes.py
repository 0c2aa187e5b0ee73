"""cogate.localcluster.nodes.node_manifest: the shape of a kwok fake node (pure)."""

from __future__ import annotations

import pytest

from cogate.localcluster.nodes import KWOK_TAINT, node_manifest, node_ready


def test_default_manifest_is_kwok_managed_and_tainted():
    m = node_manifest("n1")
    assert m["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
    assert m["metadata"]["labels"]["type"] == "kwok"
    assert m["metadata"]["labels"]["kubernetes.io/hostname"] == "n1"
    assert m["spec"]["taints"] == [KWOK_TAINT]
    assert m["status"]["capacity"] == m["status"]["allocatable"] == {"cpu": "10", "memory": "8Gi", "pods": "110"}


def test_shape_labels_extended_and_extra_taints():
    m = node_manifest("gpu-1", cpu="500m", memory=2**30, pods=4, extended={"nvidia.com/gpu": 8},
                      labels={"zone": "a", "type": "custom"}, kwok_taint=False,
                      taints=[{"key": "dedicated", "value": "ml", "effect": "NoExecute"}])
    assert m["status"]["allocatable"] == {"cpu": "500m", "memory": str(2**30), "pods": "4", "nvidia.com/gpu": "8"}
    assert m["metadata"]["labels"]["zone"] == "a" and m["metadata"]["labels"]["type"] == "custom"
    assert m["spec"]["taints"] == [{"key": "dedicated", "value": "ml", "effect": "NoExecute"}]


def test_manifests_are_independent():
    a, b = node_manifest("a"), node_manifest("b")
    a["spec"]["taints"].append({"key": "x", "effect": "NoSchedule"})
    assert b["spec"]["taints"] == [KWOK_TAINT]


@pytest.mark.parametrize("kwargs, field", [
    ({"name": "Bad_Name"}, "name"),
    ({"cpu": "ten"}, "cpu"),
    ({"memory": 1.5}, "memory"),
    ({"pods": -1}, "pods"),
    ({"extended": {"nvidia.com/gpu": "x"}}, "extended"),
    ({"taints": [{"key": "k", "effect": "Sometimes"}]}, "effect"),
    ({"taints": [{"effect": "NoSchedule"}]}, "taints"),
])
def test_bad_shapes_name_the_field(kwargs, field):
    args = {"name": "n"} | kwargs
    with pytest.raises(ValueError, match=field):
        node_manifest(**args)


def test_node_ready_needs_condition_and_no_not_ready_taint():
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}, "spec": {}}
    assert node_ready(ready)
    assert not node_ready(ready | {"spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}})
    assert not node_ready({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
    assert not node_ready({})
