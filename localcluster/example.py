"""The example of the README, as manifests: a PodGroup and a ReplicaSet of 6 pods.

Used by ``cogate demo`` and by the end-to-end tests, so both show the same thing:
one node with allocatable cpu 10, memory 8Gi, pods 110; 6 pods of 3 CPU / 500Mi
(requests = limits) labelled for PodGroup ``nginx``. With minMember 3 the group is
released: 3 pods run, 3 stay Pending, gated (no room: the PodGroup says they wait for capacity).
With minMember 4 nothing is released: all 6 stay Pending (SchedulingGated).
"""

from __future__ import annotations

from typing import Any

from cogate.api import API_VERSION, KIND, POD_GROUP_LABEL

#: The example node: fits exactly 3 pods of 3 CPU.
NODE_SHAPE = {"cpu": "10", "memory": "8Gi", "pods": 110}


def pod_group(name: str, min_member: int, *, namespace: str, timeout_seconds: int | None = 10) -> dict[str, Any]:
    """A PodGroup manifest (scheduler-plugins compatible)."""
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout_seconds is not None:
        spec["scheduleTimeoutSeconds"] = timeout_seconds
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def pod_template(group: str | None, *, cpu: str = "3", memory: str = "500Mi", app: str = "nginx") -> dict[str, Any]:
    """A pod template requesting (and limited to) ``cpu``/``memory``; labelled for ``group`` unless None."""
    labels = {"app": app}
    if group is not None:
        labels[POD_GROUP_LABEL] = group
    resources = {"cpu": cpu, "memory": memory}
    return {
        "metadata": {"labels": labels},
        "spec": {
            "containers": [
                {"name": "nginx", "image": "nginx:1.27", "resources": {"requests": resources, "limits": resources}}
            ],
            "terminationGracePeriodSeconds": 0,
        },
    }


def replica_set(name: str, replicas: int, *, namespace: str, group: str | None, cpu: str = "3",
                memory: str = "500Mi") -> dict[str, Any]:
    """A ReplicaSet of ``replicas`` pods from :func:`pod_template`."""
    template = pod_template(group, cpu=cpu, memory=memory, app=name)
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template},
    }
