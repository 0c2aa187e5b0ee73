"""API constants shared by the webhook, the controller, the chart and the tests.

One place for each name: change a constant here and every component follows.
The group, version, kind and label match kubernetes-sigs/scheduler-plugins'
Coscheduling PodGroup, so existing manifests apply unchanged.
"""

from __future__ import annotations

GROUP = "scheduling.x-k8s.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "PodGroup"
PLURAL = "podgroups"
SINGULAR = "podgroup"
SHORT_NAMES = ("pg", "pgs")

#: Label a pod carries to join the PodGroup of that name in its own namespace.
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
#: Default scheduling gate added by the webhook and removed by the controller
#: (configurable with ``--gate-name`` on both; they must agree).
DEFAULT_GATE_NAME = "scheduling.x-k8s.io/pod-group"

#: Field manager / event source name used for every write cogate makes.
COMPONENT = "cogate"
