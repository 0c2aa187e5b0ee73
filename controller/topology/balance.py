"""Balanced gangs (pure, issue 32 item 2): a gang split evenly across the fewest domains that hold it.

Kueue's "preferred" packs a gang of 128 nodes into racks of 18 as 7 x 18 + 2: the last rack's two
members talk to the rest across the block's spine, and the step time is the slowest link's. A
gang annotated ``topology.cogate.dev/balanced: "true"`` is instead split into ``k`` parts as equal as
possible (sizes differ by one at most: 128 over 8 racks is 8 x 16), one part per domain of the
balance level (:meth:`~cogate.controller.topology.constraints.Constraint.balance_level`), ``k`` the
fewest for which every part fits a domain of its own (:func:`splits`). The units split are members,
or whole slices when slices are asked (a slice is never cut); consecutive units go together, so
ranks that are close stay in one domain. Whether a part fits a domain is the caller's answer (the
planner restricted to it), searched by :func:`cogate.controller.topology.slices.assign` with one part
per domain.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

__all__ = ["even_parts", "splits", "sizes_text"]


def even_parts(units: Sequence[Sequence[str]], k: int) -> list[tuple[str, ...]]:
    """``units`` (each a run of uids, in order) cut into ``k`` consecutive parts whose unit counts
    differ by one at most, the larger first; ``1 <= k <= len(units)``."""
    q, r = divmod(len(units), k)
    out, i = [], 0
    for j in range(k):
        n = q + (1 if j < r else 0)
        out.append(tuple(u for unit in units[i:i + n] for u in unit))
        i += n
    return out


def splits(units: Sequence[Sequence[str]], domains: int) -> Iterator[tuple[int, list[tuple[str, ...]]]]:
    """``(k, parts)`` for ``k`` = 1, 2, ... up to the number of units or of ``domains``, whichever is
    smaller: the splits tried, fewest domains first."""
    for k in range(1, min(len(units), domains) + 1):
        yield k, even_parts(units, k)


def sizes_text(parts: Sequence[Sequence[str]]) -> str:
    """``"16+16+16"``: the members in each part."""
    return "+".join(str(len(p)) for p in parts)
