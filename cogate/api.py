"""API constants shared by the webhook, the controller, the chart and the tests.

One place for each name: change a constant here and every component follows.
The group, version, kind and label match kubernetes-sigs/scheduler-plugins'
Coscheduling PodGroup, so existing manifests apply unchanged except where the CRD departs
from upstream's schema (docs/semantics.md "Departures from scheduler-plugins' schema").
"""

from __future__ import annotations

import re
from collections.abc import Mapping

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
#: kube-scheduler's profile name and a pod's ``spec.schedulerName`` when it names none: the
#: scheduler cogate plans for (pins, reserves) without being told of any other.
DEFAULT_SCHEDULER_NAME = "default-scheduler"
#: The scheduler names the chart and the local stack adopt by default (webhook
#: ``--adopt-scheduler-name``: rewritten to :data:`DEFAULT_SCHEDULER_NAME` in gated members):
#: scheduler-plugins' second-scheduler name, which KubeRay v1.7.0 hard-codes
#: (``ray-operator/controllers/ray/batchscheduler/scheduler-plugins/scheduler_plugins.go``) and the
#: training-operator's, MPI operator's and Spark operator's docs tell users to set.
DEFAULT_ADOPTED_SCHEDULER_NAMES = ("scheduler-plugins-scheduler",)

#: Pod spec fields that put a pod in Kubernetes' own gang scheduling (GenericWorkload, KEP-4671):
#: ``schedulingGroup`` (1.36+, ``{podGroupName}`` of a ``scheduling.k8s.io`` PodGroup) and
#: ``workloadRef`` (the 1.35 alpha; tombstoned in 1.36's core/v1). The webhook gates a labelled pod
#: that sets one like any other (the API server drops the field after admission when GenericWorkload
#: is off); a stored pod that still has it is native's: the controller does not count it and removes
#: cogate's gate (:func:`native_gang_field`; docs/semantics.md, "Native gang scheduling").
NATIVE_GANG_FIELDS = ("schedulingGroup", "workloadRef")


def native_gang_field(spec: object) -> str:
    """``"spec.schedulingGroup"`` or ``"spec.workloadRef"`` when pod spec ``spec`` (API JSON) sets
    that field (any value but null), else ``""`` (also for a spec that is not an object). The one
    rule both the webhook and the controller apply; never raises."""
    if not isinstance(spec, Mapping):
        return ""
    for name in NATIVE_GANG_FIELDS:
        if spec.get(name) is not None:
            return f"spec.{name}"
    return ""


#: Annotation on a PodGroup that releases it without the gang rule (``"true"``; any other value
#: but ``"false"`` is reported and ignored): every gated member's gate is removed, unpinned, in
#: the controller's next pass, and members that come later too while it stays
#: (:mod:`cogate.controller.release.force`; docs/troubleshooting.md, "Force-release a group").
FORCE_RELEASE_ANNOTATION = "cogate.dev/force-release"

#: Annotations on a PodGroup that choose what happens after it lost members
#: (:mod:`cogate.controller.model.recovery`; docs/semantics.md, "Health after the start"):
#: ``free`` (the default: a replacement is released when it fits while the quorum holds) or
#: ``whole`` (a release that lost a member ends: the gang is decided again as a whole).
RECOVERY_ANNOTATION = "cogate.dev/recovery"
#: Seconds a group may stay below minMember after reaching it before its remaining members are
#: evicted (then again after 2x, 4x ... that, up to the limit); absent: never.
RECOVERY_DEADLINE_ANNOTATION = "cogate.dev/recovery-deadline"
#: Eviction rounds of the recovery deadline before the group is ``Failed`` (default 3).
RECOVERY_LIMIT_ANNOTATION = "cogate.dev/recovery-limit"

#: Field manager / event source name used for every write cogate makes.
COMPONENT = "cogate"


# ----------------------------------------------------------------- name validation
# Kubernetes qualified name (apimachinery validation.IsQualifiedName), the rule API
# validation applies to ``spec.schedulingGates[*].name`` (as to label keys):
# ``[prefix/]name`` where the optional prefix is a DNS-1123 subdomain (IsDNS1123Subdomain:
# at most 253 characters of lower-case alphanumerics, '-' and '.', each dot-separated
# part starting and ending with an alphanumeric) and the name part is at most 63
# characters of alphanumerics, '-', '_' and '.', starting and ending with an alphanumeric.
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
QUALIFIED_NAME_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253


def validate_qualified_name(value: object, field: str = "name") -> str:
    """Return ``value`` if it is a Kubernetes qualified name, else raise ``ValueError``.

    ``field`` names the value in the error message (e.g. ``"--gate-name"``).
    Source of the rule: apimachinery ``validation.IsQualifiedName``.
    """
    if not isinstance(value, str) or not value:
        raise ValueError(f"{field}: must be a non-empty string")
    parts = value.split("/")
    if len(parts) > 2:
        raise ValueError(f"{field} {value!r}: at most one '/' (an optional prefix, then the name)")
    if len(parts) == 2:
        prefix, short = parts
        if not prefix:
            raise ValueError(f"{field} {value!r}: prefix before '/' must not be empty")
        if len(prefix) > DNS1123_SUBDOMAIN_MAX_LENGTH or not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            raise ValueError(f"{field} {value!r}: prefix must be a DNS-1123 subdomain (lower-case alphanumerics, "
                             f"'-' and '.') of at most {DNS1123_SUBDOMAIN_MAX_LENGTH} characters")
    else:
        short = parts[0]
    if len(short) > QUALIFIED_NAME_MAX_LENGTH or not _QUALIFIED_NAME_PART.fullmatch(short):
        raise ValueError(f"{field} {value!r}: name part must be at most {QUALIFIED_NAME_MAX_LENGTH} characters of "
                         "[A-Za-z0-9-_.], starting and ending with an alphanumeric character")
    return value


def validate_gate_name(value: object) -> str:
    """Return ``value`` if it is a valid scheduling gate name, else raise ``ValueError``.

    The one rule for ``--gate-name`` of the webhook and the controller: a qualified
    name (:func:`validate_qualified_name`), as the API server validates
    ``spec.schedulingGates[*].name``; anything else would make every gated pod's
    creation fail.
    """
    return validate_qualified_name(value, "gate name")


#: Longest PodGroup name: a member names its group in a label value, which is at most 63
#: characters (apimachinery ``validation.IsValidLabelValue``); the CRD refuses longer names.
POD_GROUP_NAME_MAX_LENGTH = 63


def pod_group_name_error(value: object) -> str | None:
    """Why ``value`` cannot be a PodGroup name (a label value that can never match), or ``None``.

    A PodGroup name is an object name, a DNS-1123 subdomain (apimachinery
    ``validation.IsDNS1123Subdomain``: lower-case alphanumerics, '-' and '.', each
    dot-separated part starting and ending with an alphanumeric), and at most
    :data:`POD_GROUP_NAME_MAX_LENGTH` characters so that a label value can hold it (the
    CRD refuses longer names). The empty string is not handled here: it names no group.
    """
    if not isinstance(value, str) or not value:
        return "a PodGroup name must be a non-empty string"
    if len(value) > POD_GROUP_NAME_MAX_LENGTH:
        return f"a PodGroup name is at most {POD_GROUP_NAME_MAX_LENGTH} characters, this is {len(value)}"
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        return ("a PodGroup name is a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', "
                "each '.'-separated part starting and ending with a letter or digit")
    return None
