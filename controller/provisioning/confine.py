"""New nodes for a gang confined to a topology domain (pure, issue 32 item 2: "ProvisioningRequests
ask for nodes with the domain's labels"): which node labels a ProvisioningRequest's templates
require, how the request records them, and how messages say them (docs/topology.md, "Preemption and
new nodes stay in the domain").

A *carry* is a tuple of ``(node label, value)`` pairs, coarse to fine; a value of ``None`` means any
value (the label must exist). :func:`cogate.controller.provisioning.provreq.exclude_nodes` ANDs
``label In [value]`` (``label Exists``) into every required node-affinity term of each template, so
cluster-autoscaler can answer only with a node group whose template carries them; a group whose
nodes lack them is never grown for the gang (its request stays ``Provisioned=False
CapacityIsNotFound``): such a node would be in no domain of the required level and could never hold
a member.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cogate.controller.model.constraints import domain_requirements
from cogate.controller.model.records import HOSTNAME_LABEL
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict
from cogate.controller.planning.fenced import waiting_fence
from cogate.controller.topology.constraints import DOMAIN_ANNOTATION

__all__ = ["Carry", "new_node_labels", "requirements", "annotations", "parse", "words"]

#: ``(node label, value or None for any value)`` pairs, coarse to fine.
Carry = tuple[tuple[str, "str | None"], ...]


def new_node_labels(v: GroupVerdict, r: GroupRequest) -> Carry:
    """The node labels the new nodes asked for waiting group ``r`` (verdict ``v``) must carry: its
    :func:`~cogate.controller.planning.fenced.waiting_fence` (the closest domain of its required
    level, each label with its value, as for preemption; with no closest domain, the level's labels
    with any value, so that each new node is in some domain of that level and the node group's
    template says which), less the hostname label (a new node never has an existing node's name:
    under ``required: kubernetes.io/hostname`` only the coarser labels are asked for). ``()`` without a
    required level (preferred only: the gang may end anywhere in the cluster) or for a verdict that
    does not wait."""
    return tuple((k, val) for k, val in waiting_fence(v, r) if k != HOSTNAME_LABEL)


def requirements(carry: Carry) -> list[dict[str, Any]]:
    """The node selector requirements (API JSON) of ``carry``: ``In [value]``, or ``Exists``."""
    return [r.api() for r in domain_requirements(carry)]


def annotations(carry: Carry) -> dict[str, str]:
    """``{topology.cogate.dev/domain: "label=value,label2"}`` (a label alone: any value) for a request's
    metadata, so its status can say where it asks; ``{}`` for none."""
    return {DOMAIN_ANNOTATION: ",".join(k if v is None else f"{k}={v}" for k, v in carry)} if carry else {}


def parse(meta_annotations: Mapping[str, Any] | None) -> Carry:
    """:func:`annotations` read back from a request's ``metadata.annotations``; ``()`` when absent
    or not a string. Never raises: an edited value is read as far as it goes (empty entries skipped)."""
    raw = (meta_annotations or {}).get(DOMAIN_ANNOTATION) if isinstance(meta_annotations, Mapping) else None
    if not isinstance(raw, str):
        return ()
    out = []
    for entry in raw.split(","):
        key, eq, value = entry.strip().partition("=")
        if key:
            out.append((key, value if eq else None))
    return tuple(out)


def words(carry: Carry) -> str:
    """``" in rack rb"`` (the finest label's name part and its value), ``" in any rack"`` when any value
    goes; ``""`` for none. For the ``Provisioning`` condition and the ``ProvisioningRequested`` event."""
    if not carry:
        return ""
    label, value = carry[-1]
    word = label.rpartition("/")[2]
    return f" in {word} {value}" if value is not None else f" in any {word}"
