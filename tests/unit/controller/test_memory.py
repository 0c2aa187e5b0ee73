"""One memory record per PodGroup (controller/memory.py, pure) and the reconciler keeping it."""

from __future__ import annotations

import math

from cogate.controller.memory import BUDGET_DELETED, BUDGET_FOREIGN, Budget, BudgetState, GroupMemory, Memories

from tests.builders import ApiError, Harness, raw_pg, raw_pod, verdict


def test_recall_gives_one_record_per_uid_and_forget_drops_the_gone():
    memories = Memories()
    a = memories.recall("uid-a")
    assert a == GroupMemory() and a.progress_written == -math.inf and a.budget is None
    a.timeout_evicted.add("2024-01-01T00:00:00Z")
    assert memories.recall("uid-a") is a
    memories.recall("uid-b").quorum_evicted.add("t")
    assert memories.recall("uid-a").quorum_evicted == set(), "records share nothing"
    memories.forget({"uid-b"})
    assert len(memories) == 1 and [uid for uid, _ in memories.items()] == ["uid-b"]
    assert memories.recall("uid-a") == GroupMemory(), "a forgotten group starts blank"


def test_budget_states_are_typed():
    assert Budget.ensured(3) == Budget(BudgetState.ENSURED, 3) != Budget.ensured(2)
    assert BUDGET_DELETED.state is BudgetState.DELETED and BUDGET_FOREIGN.state == "foreign"
    assert Budget.ensured(3) not in (BUDGET_DELETED, BUDGET_FOREIGN)


def test_the_reconciler_remembers_a_refusal_by_podgroup_uid_until_the_group_is_gone():
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], [verdict("Released", {"uid-a": "n1", "uid-b": "n1"}, 2)])
    h.cluster.dry_errors["b"] = [ApiError(403)] * 5
    h.run()
    refusal = h.rec.memory.recall("pg-uid-pg").refusal
    assert refusal is not None and refusal.attempts == 1 and refusal.whole_group
    assert refusal.until == h.now + 5.0 and refusal.uids == {"uid-b"}
    h.caches.podgroups._handle_event({"type": "DELETED", "object": h.cluster.pgs["pg"]})
    h.verdicts = []
    h.run()
    assert len(h.rec.memory) == 0
