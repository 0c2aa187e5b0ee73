"""Words of the controller's messages (pure): lists of names cut short, counted nouns, and how
many members fit.

One place for the rule every message that names pods, nodes or replicas follows: the first few
names, then "and N more" (events and conditions stay readable, and within the API's limits); and
one for "fits N of minMember" (:func:`fits_of`), which never says more fit than minMember asks.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["NAMES_SHOWN", "name_list", "plural", "fits_of"]

#: How many names a message lists before "and N more".
NAMES_SHOWN = 3


def name_list(names: Sequence[str], limit: int = NAMES_SHOWN) -> str:
    """``"a, b, c and 2 more"``: the first ``limit`` names of a message, then how many are left out."""
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def plural(n: int, word: str) -> str:
    """``"1 member"``, ``"2 members"``: ``n`` and ``word``, with an ``s`` unless ``n`` is 1."""
    return f"{n} {word}{'s' if n != 1 else ''}"


def fits_of(fits: int, min_member: int) -> str:
    """How many members of a group fit (``fits``: bound and planned) against its ``min_member``:
    ``"fits 3 of 4"``, or ``"fits all 4 (room for 6)"`` when more than minMember fit (never "fits 6
    of 4"). Every planner and preemption message that counts members against minMember says it so."""
    if fits > min_member:
        return f"fits all {min_member} (room for {fits})"
    return f"fits {fits} of {min_member}"
