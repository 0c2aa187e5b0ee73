"""The planner's modules (issue 14): planner.py re-exports the names the shell imports from it,
and the incremental planner imports public names only."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from cogate.controller.planning import capacity, explanations, members, planner
from cogate.controller.model import verdicts

#: Names other modules import from ``planner`` that live elsewhere, by home module.
REEXPORTED = {
    verdicts: ["Outcome", "GroupRequest", "PlannerConfig", "GroupVerdict", "Decision", "DEFAULT_SCHEDULER",
               "UNCHECKED_POLICIES", "complete_since", "mixed_priorities", "group_priority"],
    capacity: ["pinned_node_problems", "room_by_node"],
    explanations: ["held_by_other_gates", "NAMES_SHOWN"],
    members: ["Members", "classify", "members_anti", "members_spread"],
}


@pytest.mark.parametrize("home", list(REEXPORTED), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_planner_reexports_the_names_of_its_rooms(home):
    for name in REEXPORTED[home]:
        assert name in planner.__all__
        assert getattr(planner, name) is getattr(home, name)


def test_every_name_in_planner_all_exists():
    assert [n for n in planner.__all__ if not hasattr(planner, n)] == []


def test_planstate_imports_public_names_only():
    spec = importlib.util.find_spec("cogate.controller.planning.planstate")
    assert spec is not None and spec.origin
    tree = ast.parse(Path(spec.origin).read_text())
    private = [(node.module, a.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
               for a in node.names if (node.module or "").startswith("cogate") and a.name.startswith("_")]
    assert private == []
