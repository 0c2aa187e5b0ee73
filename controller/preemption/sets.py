"""Preemption for groups with role minimums or in a set of PodGroups (pure; issue 33).

Victim selection (:func:`cogate.controller.preemption.victims.select_victims`) judges one group
and counts minMember members. Two rules of issue 33 change what a release needs, so victims chosen
that way could go in vain:

* **Sets** (:mod:`cogate.controller.model.groupsets`): a group of a set is released only with its
  set. Room freed for one group while a sibling can never fit is taken in vain, so a group of a
  set that is not released preempts nothing (:func:`alone`; reason ``InSet``). Preempting for a
  whole set at once is not built yet (docs/semantics.md, "Gangs of gangs").
* **Role minimums** (:mod:`cogate.controller.planning.roles`): a release needs every role's
  minimum as well as minMember. Victims are asked for ``max(minMember, sum of the role
  minimums)`` members (:func:`~cogate.controller.planning.roles.for_role_minimums`), and a
  selection whose plan still leaves a role below its minimum preempts nothing (reason
  ``RoleMinimums``, :func:`with_roles`).

A released group (new members joining it, kind 3) is judged as before: after a release neither
rule applies.
"""

from __future__ import annotations

from collections.abc import Callable

from cogate.controller.model.groupsets import not_alone
from cogate.controller.model.verdicts import GroupRequest
from cogate.controller.planning.roles import for_role_minimums, role_text, roles_short_of
from cogate.controller.preemption.victims import NoPreemption, Preemption, Reason

__all__ = ["alone", "with_roles"]


def alone(r: GroupRequest) -> NoPreemption | None:
    """``InSet`` for a group of a set that is not released (module doc), else None."""
    text = "" if r.released else not_alone(r.group_set, r.namespace, "preempts nothing")
    return NoPreemption(Reason.IN_SET, f"PodGroup {r.namespace}/{r.name} {text}") if text else None


def with_roles(r: GroupRequest, select: Callable[[GroupRequest], Preemption | NoPreemption]
               ) -> Preemption | NoPreemption:
    """``select`` (victim selection for a request) asked for ``r``'s role minimums too, and its
    answer refused (``RoleMinimums``) when its plan leaves a role of ``r`` below its minimum."""
    if r.released or r.roles is None:
        return select(r)
    answer = select(for_role_minimums(r))
    if not isinstance(answer, Preemption):
        return answer
    short = roles_short_of(r, list(answer.plan), [m for m in r.members if m.bound])
    if not short:
        return answer
    return NoPreemption(Reason.ROLE_MINIMUMS,
                        f"PodGroup {r.namespace}/{r.name} preempts nothing: with the victims found, {role_text(short)} "
                        "(the group is released only with every role's minimum, so they would go in vain)")
