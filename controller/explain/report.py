"""``cogate explain``'s text output (pure): an :class:`~cogate.controller.explain.explanation.Explanation`
as lines for a terminal, in the words of the PodGroup's ``Released`` condition.

Layout (docs/explain.md): the verdict line (``PodGroup ns/name: released|would start|would not start``), the
condition (``Released=False InsufficientCapacity: fits 3 of 4: ...``), what fits where, the node
groups with their first shortfall, then what preemption and ``--add-nodes`` would change.
"""

from __future__ import annotations

from cogate.controller.explain.explanation import Explanation, WhatIf

__all__ = ["text", "MEMBERS_SHOWN"]

#: How many (member, node) placements the text lists before "and N more".
MEMBERS_SHOWN = 20


def _what_if(title: str, w: WhatIf) -> list[str]:
    verdict = "it would start" if w.starts else "it would still not start"
    lines = [f"{title}: {w.change}: {verdict} ({w.reason}: {w.message})"]
    lines += [f"  victim {v}" for v in w.victims]
    return lines


def text(e: Explanation) -> str:
    """The report as text (module doc), ending in a newline."""
    c = e.condition
    lines = [f"PodGroup {e.namespace}/{e.name} (minMember {e.min_member}): "
             + ("released" if e.released else "would start" if e.starts else "would not start")
             + f" (phase {e.phase})",
             f"{c['type']}={c['status']} {c['reason']}: {c['message']}"]
    if e.placements:
        lines.append(f"fits where ({len(e.placements)}):")
        lines += [f"  {m} -> {n or '(unpinned: kube-scheduler places it)'}" for m, n in e.placements[:MEMBERS_SHOWN]]
        if len(e.placements) > MEMBERS_SHOWN:
            lines.append(f"  ... and {len(e.placements) - MEMBERS_SHOWN} more")
    if e.left_out:
        shown = ", ".join(e.left_out[:MEMBERS_SHOWN]) + (f" and {len(e.left_out) - MEMBERS_SHOWN} more"
                                                          if len(e.left_out) > MEMBERS_SHOWN else "")
        lines.append(f"left gated ({len(e.left_out)}): {shown}")
    if e.node_groups:
        lines.append(f"node groups ({len(e.node_groups)})" + (f", for {e.left_out[0]}:" if e.left_out else ":"))
        for g in e.node_groups:
            names = ", ".join(g.nodes[:3]) + (f" and {len(g.nodes) - 3} more" if len(g.nodes) > 3 else "")
            room = f"room for {g.room_for} more" if not g.shortfall else f"first shortfall: {g.shortfall}"
            lines.append(f"  {len(g.nodes)} node{'s' if len(g.nodes) != 1 else ''} [{g.shape}] ({names}): {room}")
    if e.preemption is not None:
        lines += _what_if("with preemption", e.preemption)
    if e.add_nodes is not None:
        lines += _what_if("with", e.add_nodes)
    lines += [f"note: {n}" for n in e.notes]
    return "\n".join(lines) + "\n"
