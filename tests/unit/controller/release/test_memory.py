"""What the release guard and the after-release duties remember per group (controller/release/memory.py, pure)."""

from __future__ import annotations

from cogate.controller.release.memory import BUDGET_DELETED, BUDGET_FOREIGN, Budget, BudgetState, ReleaseMemory


def test_budget_states_are_typed():
    assert Budget.ensured(3) == Budget(BudgetState.ENSURED, 3) != Budget.ensured(2)
    assert BUDGET_DELETED.state is BudgetState.DELETED and BUDGET_FOREIGN.state == "foreign"
    assert Budget.ensured(3) not in (BUDGET_DELETED, BUDGET_FOREIGN)


def test_a_blank_release_record_remembers_nothing():
    r = ReleaseMemory()
    assert (r.refusal, r.budget, r.timeout_evicted, r.quorum_evicted) == (None, None, set(), set())
    r.timeout_evicted.add("t")
    assert ReleaseMemory().timeout_evicted == set(), "records share nothing"
