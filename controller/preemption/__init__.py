"""Gang-aware preemption: victim selection (`victims`, pure: its candidates and rooms in `candidates`,
the node-by-node choice in `selection`, PodDisruptionBudgets in `budgets`), a preemption in flight
(`inflight`, pure) and the room that acts on it (`room`, I/O: hold, nominate, mark, delete, judge,
end); what it remembers per group (`memory`, pure).

The folder map and import rule: docs/internals.md."""
