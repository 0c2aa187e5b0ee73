"""Topology constraints of a gang (pure): the levels and what a PodGroup asks of them (issue 32 item 1).

Levels are node labels, coarse to fine (``zone``, ``block``, ``rack``); the hostname label
(:data:`HOSTNAME_LABEL`) is implied last. A *domain* of a level is the set of nodes that share the
values of that level's label and of every coarser level's (as Kueue's Topology Aware Scheduling
counts them); a node lacking one of those labels belongs to no domain of that level.

Where the levels come from, first that applies (:func:`resolve_levels`):

1. the PodGroup's annotation :data:`LEVELS` (comma-separated node labels, coarse to fine);
2. for constraints read from Kueue's pod annotations: the first Kueue ``Topology`` (by name) whose
   ``levels[].nodeLabel`` include every label named; then the controller's levels
   (``--topology-levels``, the chart's ``topology.levels``) when they include them;
3. for cogate's annotations: the controller's levels, then a Kueue ``Topology``, the same test;
4. else the named labels alone, coarse to fine as the constraint implies (a required level named by a
   node label alone needs no configuration: a domain is the nodes sharing that label's value).

What a PodGroup asks (annotations on the PodGroup, names in :data:`ANNOTATIONS`; each value a node
label that must be one of the levels):

* :data:`REQUIRED`: a hard fence: every member in one domain of that level;
* :data:`PREFERRED`: start at that level, widen one level at a time up to the required level (or
  the whole cluster without one);
* :data:`SLICE_SIZE` and :data:`SLICE_LEVEL`: members in slices of that size by rank, each slice in
  one domain of the slice level (ranks: :data:`RANK_LABELS`);
* :data:`BALANCED` (``"true"``): split evenly across the fewest domains of the preferred level (else
  of the level just finer than the required one) that hold it (:meth:`Constraint.balance_level`);
* :data:`EXCLUSIVE` (``"true"``): no other cogate gang planned into the chosen required-level domain.

Without any of these on the PodGroup, members' Kueue annotations (:data:`KUEUE_ANNOTATIONS`:
``kueue.x-k8s.io/podset-required-topology``, ``podset-preferred-topology``,
``podset-slice-required-topology``, ``podset-slice-size``) are honoured the same way; members that
disagree are an error. Errors are :class:`TopologyError` naming the annotation and the value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["HOSTNAME_LABEL", "PREFIX", "LEVELS", "REQUIRED", "PREFERRED", "SLICE_SIZE", "SLICE_LEVEL", "BALANCED",
           "EXCLUSIVE", "ANNOTATIONS", "KUEUE_REQUIRED", "KUEUE_PREFERRED", "KUEUE_SLICE_REQUIRED", "KUEUE_SLICE_SIZE",
           "KUEUE_ANNOTATIONS", "RANK_LABELS", "DOMAIN_ANNOTATION", "recorded_domain", "TopologyError", "Constraint", "parse_levels",
           "resolve_levels", "parse", "kueue_topology_levels", "domain_annotations", "rank_of"]

#: The node label kube-scheduler and the kubelet set to the node's name: the finest level, implied.
HOSTNAME_LABEL = "kubernetes.io/hostname"
PREFIX = "topology.cogate.dev/"
#: Per-PodGroup levels, comma-separated node labels coarse to fine (overrides the controller's).
LEVELS = PREFIX + "levels"
#: The level every member must share one domain of (a node label).
REQUIRED = PREFIX + "required"
#: The level to start from (a node label); widened one level at a time up to :data:`REQUIRED`.
PREFERRED = PREFIX + "preferred"
#: Members per slice (an integer >= 1), with :data:`SLICE_LEVEL`.
SLICE_SIZE = PREFIX + "slice-size"
#: The level each slice must fit in one domain of.
SLICE_LEVEL = PREFIX + "slice-level"
#: ``"true"``: members split evenly across the chosen domains.
BALANCED = PREFIX + "balanced"
#: ``"true"``: no other cogate gang is planned into the chosen required-level domain.
EXCLUSIVE = PREFIX + "exclusive"
ANNOTATIONS = (LEVELS, REQUIRED, PREFERRED, SLICE_SIZE, SLICE_LEVEL, BALANCED, EXCLUSIVE)
#: Where the controller records the chosen domain (``label=value,...`` of its levels).
DOMAIN_ANNOTATION = PREFIX + "domain"

KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
KUEUE_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
KUEUE_ANNOTATIONS = (KUEUE_REQUIRED, KUEUE_PREFERRED, KUEUE_SLICE_REQUIRED, KUEUE_SLICE_SIZE)

#: The labels operators set to a member's rank, first present wins: Job's completion index, JobSet's
#: job index, LeaderWorkerSet's worker index, Kubeflow's replica index.
RANK_LABELS = ("batch.kubernetes.io/job-completion-index", "jobset.sigs.k8s.io/job-index",
               "leaderworkerset.sigs.k8s.io/worker-index", "training.kubeflow.org/replica-index")

_TRUE = {"true": True, "false": False}


class TopologyError(ValueError):
    """An annotation that cannot be honoured; the message names the annotation and its value."""


@dataclass(frozen=True)
class Constraint:
    """What a gang asks of the topology.

    ``levels``: node labels coarse to fine, :data:`HOSTNAME_LABEL` last. ``required``,
    ``preferred``, ``slice_level``: indexes into ``levels`` (None: not asked); ``required`` is
    coarser than or equal to ``preferred`` and ``slice_level`` (equal or larger index).
    ``slice_size``: members per slice (0: no slices). ``source``: ``"cogate"`` or ``"kueue"``
    (which annotations were read), for messages.
    """

    levels: tuple[str, ...]
    required: int | None = None
    preferred: int | None = None
    slice_size: int = 0
    slice_level: int | None = None
    balanced: bool = False
    exclusive: bool = False
    source: str = "cogate"

    def label(self, level: int | None) -> str:
        """The node label of ``level`` (``"cluster"`` for None: the whole cluster)."""
        return "cluster" if level is None else self.levels[level]

    def start(self) -> int | None:
        """The finest level to try first: preferred, else required."""
        return self.preferred if self.preferred is not None else self.required

    def balance_level(self) -> int | None:
        """The level a ``balanced`` gang is split evenly across: the preferred level, else the level
        just finer than the required one; None when not balanced (or neither is asked)."""
        if not self.balanced:
            return None
        if self.preferred is not None:
            return self.preferred
        if self.required is not None and self.required + 1 < len(self.levels):
            return self.required + 1
        return None

    def tried(self) -> list[int | None]:
        """The levels tried, tightest first: from :meth:`start` widening one level at a time up to
        ``required`` (included) or, without one, the whole cluster (None)."""
        start = self.start()
        if start is None:
            return [None]
        stop = self.required if self.required is not None else 0
        out: list[int | None] = list(range(start, stop - 1, -1))
        if self.required is None:
            out.append(None)
        return out


def parse_levels(text: str, where: str) -> tuple[str, ...]:
    """``"zone,block,rack"`` -> the labels, :data:`HOSTNAME_LABEL` appended when missing. Raises
    :class:`TopologyError` naming ``where`` on an empty entry, a repeated label or the hostname label
    anywhere but last."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise TopologyError(f"{where}: {text!r} is not a comma-separated list of node labels")
    if len(set(parts)) != len(parts):
        raise TopologyError(f"{where}: {text!r} names a label twice")
    if HOSTNAME_LABEL in parts[:-1]:
        raise TopologyError(f"{where}: {HOSTNAME_LABEL} must be the last (finest) level")
    for p in parts:
        _check_label(p, where)
    return tuple(parts) if parts[-1] == HOSTNAME_LABEL else (*parts, HOSTNAME_LABEL)


def _check_label(label: str, where: str) -> None:
    """A label key: an optional DNS prefix and ``/``, then a name of at most 63 characters."""
    prefix, _, name = label.rpartition("/")
    ok = 0 < len(name) <= 63 and all(c.isalnum() or c in "-_." for c in name) and name[0].isalnum() and name[-1].isalnum()
    ok = ok and (not prefix or (len(prefix) <= 253 and all(c.isalnum() or c in "-." for c in prefix)))
    if not ok:
        raise TopologyError(f"{where}: {label!r} is not a node label key")


def resolve_levels(named: Sequence[str], override: tuple[str, ...] | None, configured: tuple[str, ...],
                   kueue: Sequence[tuple[str, ...]], kueue_first: bool) -> tuple[str, ...]:
    """The levels a constraint naming the labels ``named`` (coarse to fine as asked) is read
    against (module doc, order 1-4). ``override``: the PodGroup's :data:`LEVELS`; ``configured``: the
    controller's levels; ``kueue``: each Kueue Topology's levels, in name order."""
    if override is not None:
        return override
    candidates = [*kueue, configured] if kueue_first else [configured, *kueue]
    for levels in candidates:
        full = levels if not levels or levels[-1] == HOSTNAME_LABEL else (*levels, HOSTNAME_LABEL)
        if levels and all(n in full for n in named):
            return full
    alone: list[str] = []
    for n in named:
        if n not in alone and n != HOSTNAME_LABEL:
            alone.append(n)
    return (*alone, HOSTNAME_LABEL)


def parse(pg_annotations: Mapping[str, str], member_annotations: Iterable[Mapping[str, str]],
          configured: tuple[str, ...] = (), kueue: Sequence[tuple[str, ...]] = ()) -> Constraint | None:
    """The constraint a PodGroup asks for: from its own annotations (:data:`ANNOTATIONS`), else from
    its members' Kueue annotations, else None. ``configured``: the controller's levels (coarse to
    fine); ``kueue``: the levels of each Kueue ``Topology``. Raises :class:`TopologyError`."""
    own = {k: v for k, v in pg_annotations.items() if k in ANNOTATIONS}
    if any(k != LEVELS for k in own):
        return _from_cogate(own, configured, kueue)
    override = parse_levels(own[LEVELS], LEVELS) if LEVELS in own else None
    asked = _kueue_asked(member_annotations)
    if not asked:
        return None
    return _from_kueue(asked, override, configured, kueue)


def _from_cogate(own: Mapping[str, str], configured: tuple[str, ...],
                 kueue: Sequence[tuple[str, ...]]) -> Constraint:
    override = parse_levels(own[LEVELS], LEVELS) if LEVELS in own else None
    named = [own[k].strip() for k in (REQUIRED, PREFERRED, SLICE_LEVEL) if k in own]
    for k in (REQUIRED, PREFERRED, SLICE_LEVEL):
        if k in own:
            _check_label(own[k].strip(), k)
    levels = resolve_levels(sorted(set(named), key=named.index), override, configured, kueue, kueue_first=False)
    size = _size(own, SLICE_SIZE)
    if size and SLICE_LEVEL not in own:
        raise TopologyError(f"{SLICE_SIZE}: slices need {SLICE_LEVEL} (the level each slice must fit in)")
    if SLICE_LEVEL in own and not size:
        raise TopologyError(f"{SLICE_LEVEL}: slices need {SLICE_SIZE} (members per slice)")
    return _checked(Constraint(
        levels=levels,
        required=_index(own, REQUIRED, levels),
        preferred=_index(own, PREFERRED, levels),
        slice_size=size,
        slice_level=_index(own, SLICE_LEVEL, levels),
        balanced=_flag(own, BALANCED),
        exclusive=_flag(own, EXCLUSIVE),
        source="cogate",
    ), REQUIRED, PREFERRED, SLICE_LEVEL)


def _kueue_asked(member_annotations: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """The Kueue topology annotations members carry, one value each; members disagreeing is an error."""
    asked: dict[str, str] = {}
    for annotations in member_annotations:
        for k in KUEUE_ANNOTATIONS:
            v = annotations.get(k)
            if v is None:
                continue
            if k in asked and asked[k] != v:
                raise TopologyError(f"{k}: members disagree ({asked[k]!r} and {v!r}); one PodGroup asks one topology")
            asked[k] = v
    return asked


def _from_kueue(asked: Mapping[str, str], override: tuple[str, ...] | None, configured: tuple[str, ...],
                kueue: Sequence[tuple[str, ...]]) -> Constraint:
    if KUEUE_REQUIRED in asked and KUEUE_PREFERRED in asked:
        raise TopologyError(f"{KUEUE_REQUIRED} and {KUEUE_PREFERRED}: Kueue takes one of them (use {REQUIRED} and "
                            f"{PREFERRED} on the PodGroup for both)")
    for k in (KUEUE_REQUIRED, KUEUE_PREFERRED, KUEUE_SLICE_REQUIRED):
        if k in asked:
            _check_label(asked[k].strip(), k)
    named = [asked[k].strip() for k in (KUEUE_REQUIRED, KUEUE_PREFERRED, KUEUE_SLICE_REQUIRED) if k in asked]
    levels = resolve_levels(sorted(set(named), key=named.index), override, configured, kueue, kueue_first=True)
    size = _size(asked, KUEUE_SLICE_SIZE)
    if size and KUEUE_SLICE_REQUIRED not in asked:
        raise TopologyError(f"{KUEUE_SLICE_SIZE}: slices need {KUEUE_SLICE_REQUIRED}")
    if KUEUE_SLICE_REQUIRED in asked and not size:
        raise TopologyError(f"{KUEUE_SLICE_REQUIRED}: slices need {KUEUE_SLICE_SIZE}")
    return _checked(Constraint(
        levels=levels,
        required=_index(asked, KUEUE_REQUIRED, levels),
        preferred=_index(asked, KUEUE_PREFERRED, levels),
        slice_size=size,
        slice_level=_index(asked, KUEUE_SLICE_REQUIRED, levels),
        source="kueue",
    ), KUEUE_REQUIRED, KUEUE_PREFERRED, KUEUE_SLICE_REQUIRED)


def _checked(c: Constraint, required: str, preferred: str, slice_level: str) -> Constraint:
    """Preferred and slice level at or inside the required level."""
    if c.required is not None and c.preferred is not None and c.preferred < c.required:
        raise TopologyError(f"{preferred}: {c.label(c.preferred)} is coarser than the required "
                            f"{c.label(c.required)}: the preferred level must be the required one or finer")
    if c.required is not None and c.slice_level is not None and c.slice_level < c.required:
        raise TopologyError(f"{slice_level}: {c.label(c.slice_level)} is coarser than the required "
                            f"{c.label(c.required)}: a slice must fit inside the gang's domain")
    if c.exclusive and c.required is None:
        raise TopologyError(f"{EXCLUSIVE}: an exclusive gang needs {REQUIRED} (the level whose domain is its own)")
    if c.balanced and c.balance_level() is None:
        raise TopologyError(f"{BALANCED}: a balanced split needs {REQUIRED} coarser than {HOSTNAME_LABEL} or "
                            f"{PREFERRED} (the level whose domains share the members evenly)")
    return c


def _index(values: Mapping[str, str], key: str, levels: tuple[str, ...]) -> int | None:
    if key not in values:
        return None
    label = values[key].strip()
    if label not in levels:
        raise TopologyError(f"{key}: {label!r} is not one of the levels ({', '.join(levels)})")
    return levels.index(label)


def _size(values: Mapping[str, str], key: str) -> int:
    if key not in values:
        return 0
    text = values[key].strip()
    if not text.isdigit() or int(text) < 1:
        raise TopologyError(f"{key}: {values[key]!r} is not an integer >= 1")
    return int(text)


def _flag(values: Mapping[str, str], key: str) -> bool:
    if key not in values:
        return False
    v = _TRUE.get(values[key].strip().lower())
    if v is None:
        raise TopologyError(f"{key}: {values[key]!r} is not true or false")
    return v


def kueue_topology_levels(raw: Mapping[str, Any]) -> tuple[str, ...]:
    """A Kueue ``Topology`` object's ``spec.levels[].nodeLabel`` (API JSON, ``kueue.x-k8s.io``
    v1beta1 or v1beta2), coarse to fine, :data:`HOSTNAME_LABEL` appended when missing; raises
    :class:`TopologyError` naming the object on a malformed one (the informer's converter)."""
    name = (raw.get("metadata") or {}).get("name", "?")
    levels = (raw.get("spec") or {}).get("levels")
    if not isinstance(levels, list) or not levels:
        raise TopologyError(f"Topology {name}: spec.levels is not a non-empty list")
    labels = [lv.get("nodeLabel") if isinstance(lv, Mapping) else None for lv in levels]
    if not all(isinstance(label, str) and label for label in labels):
        raise TopologyError(f"Topology {name}: every spec.levels entry needs a nodeLabel")
    return parse_levels(",".join(labels), f"Topology {name} spec.levels")  # type: ignore[arg-type]


def domain_annotations(domain: Sequence[tuple[str, str]]) -> dict[str, str]:
    """``{DOMAIN_ANNOTATION: "label=value,..."}`` for a chosen domain (``(node label, value)`` coarse to
    fine), set on each member released into it; ``{}`` for none."""
    return {DOMAIN_ANNOTATION: ",".join(f"{k}={v}" for k, v in domain)} if domain else {}


def recorded_domain(current: str | None, domain: Sequence[tuple[str, str]], *, stands: bool, fresh: bool,
                    constrained: bool) -> str | None:
    """The value of :data:`DOMAIN_ANNOTATION` a PodGroup should carry (``None``: none), given the value
    it carries now (``current``), the verdict's domain (``(node label, value)`` coarse to fine: the one
    a release goes to, or the home of a released group's members), whether the group's release stands
    after this verdict (``stands``: released now, or already released), whether it is released now
    (``fresh``) and whether the group asks a topology constraint (``constrained``). Issue 32 item 3: the chosen domain is recorded on the
    PodGroup at the release, in the members' format (:func:`domain_annotations`); it is cleared when
    the release no longer stands (the group is re-placed as a whole, in any domain) or the group asks
    no constraint (or is released now into no one domain: placed in the whole cluster); a group
    released earlier whose home is not known in this pass (no member placed, or they span more than
    its levels) keeps what it carries."""
    if not stands or not constrained:
        return None
    if domain:
        return domain_annotations(domain)[DOMAIN_ANNOTATION]
    return None if fresh else current


def rank_of(labels: Mapping[str, str]) -> int | None:
    """A member's rank: the first of :data:`RANK_LABELS` it carries holding an integer >= 0, else None."""
    for k in RANK_LABELS:
        v = labels.get(k)
        if v is not None and v.isdigit():
            return int(v)
    return None
