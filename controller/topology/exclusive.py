"""Exclusive gangs (pure, issue 32 item 1, ``topology.cogate.dev/exclusive``): which nodes other
gangs claim, and why a domain is refused.

A gang is *placed* on a node when one of its members is bound there (not terminal), pinned there and
waiting to bind, or holds a reservation there (planned earlier in the pass included). An exclusive
gang *holds* the domain of its required level around each node it is placed on (a node lacking that
level's label holds only itself). The rules (docs/topology.md, "Exclusive"):

- an exclusive gang is placed only in a required-level domain none of whose nodes carries another
  gang's member or is held by another exclusive gang (:func:`refusal`);
- no gang, exclusive or not, is planned onto nodes another exclusive gang holds
  (:meth:`Claims.held_by_others`).

Pods that are no gang member never count: cogate does not place them. Everything here is plain data:
the planner's shell (:mod:`cogate.controller.planning.exclusion`) says where members are placed and
which nodes make up each domain.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Key", "Claims", "claims", "refusal", "group_text"]

#: A gang: its PodGroup's (namespace, name).
Key = tuple[str, str]


def group_text(key: Key) -> str:
    """``"PodGroup ns/name"``."""
    return f"PodGroup {key[0]}/{key[1]}"


@dataclass
class Claims:
    """Who claims each node: ``placed`` node -> the gangs with a member placed there; ``held`` node ->
    the exclusive gangs whose domain holds it. Grown in place by :meth:`place` (a pass adds the
    gangs it releases)."""

    placed: dict[str, set[Key]] = field(default_factory=dict)
    held: dict[str, set[Key]] = field(default_factory=dict)

    def place(self, key: Key, node: str, domain: Mapping[str, Sequence[str]] | None) -> None:
        """Gang ``key`` placed on ``node``; ``domain`` (exclusive gangs only): node -> the nodes of its
        required-level domain (a node absent from it holds only itself)."""
        self.placed.setdefault(node, set()).add(key)
        if domain is not None:
            for n in domain.get(node, (node,)):
                self.held.setdefault(n, set()).add(key)

    def held_by_others(self, own: Key) -> dict[str, Key]:
        """node -> the first (by namespace, name) exclusive gang other than ``own`` holding it: where
        ``own`` may not go."""
        out: dict[str, Key] = {}
        for node, keys in self.held.items():
            other = min((k for k in keys if k != own), default=None)
            if other is not None:
                out[node] = other
        return out


def claims(placed: Mapping[Key, Iterable[str]], exclusive: Mapping[Key, Mapping[str, Sequence[str]]]) -> Claims:
    """The claims of ``placed`` (gang -> the nodes its members are placed on). ``exclusive``: for each
    exclusive gang, node -> the nodes of the required-level domain that node is in (a node absent
    from it is in no domain of that level and holds only itself)."""
    out = Claims()
    for key, nodes in placed.items():
        for node in nodes:
            out.place(key, node, exclusive.get(key))
    return out


def refusal(own: Key, nodes: Sequence[str], c: Claims) -> str:
    """Why exclusive gang ``own`` may not take the domain of ``nodes`` (its required-level domain):
    ``"holds members of PodGroup ns/x"`` (the first node, in order, with another gang's member),
    else ``"held by exclusive PodGroup ns/x"``; ``""`` when the domain is free for it."""
    for n in nodes:
        other = min((k for k in c.placed.get(n, ()) if k != own), default=None)
        if other is not None:
            return f"holds members of {group_text(other)}"
    for n in nodes:
        other = min((k for k in c.held.get(n, ()) if k != own), default=None)
        if other is not None:
            return f"held by exclusive {group_text(other)}"
    return ""
