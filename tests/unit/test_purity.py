"""The pure modules stay pure: no Kubernetes client, no threads, no aiohttp (issue 7).

Two checks: importing each pure module in a fresh interpreter loads neither ``kubernetes``
nor ``aiohttp``; and no cogate module reachable from it imports ``threading``,
``kubernetes``, ``aiohttp``, ``concurrent`` or ``queue``, even lazily inside a function.
(Third-party libraries may use threads internally: pydantic imports ``threading``, so the
second check reads cogate's own import statements instead of ``sys.modules``.)
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

PURE = [
    "cogate.controller.topology.constraints",
    "cogate.controller.topology.domains",
    "cogate.controller.planning.fenced",
    "cogate.controller.planning.planner",
    "cogate.controller.planning.members",
    "cogate.controller.planning.basis",
    "cogate.controller.planning.released",
    "cogate.controller.planning.starvation",
    "cogate.controller.planning.minimum",
    "cogate.controller.model.verdicts",
    "cogate.controller.planning.filters",
    "cogate.controller.planning.capacity",
    "cogate.controller.planning.room",
    "cogate.controller.planning.explanations",
    "cogate.controller.model.records",
    "cogate.controller.model.resources",
    "cogate.controller.status.status",
    "cogate.controller.status.writes",
    "cogate.controller.status.conditions",
    "cogate.controller.planning.patches",
    "cogate.controller.status.notices",
    "cogate.controller.planning.spread",
    "cogate.controller.model.volumes",
    "cogate.controller.model.quota",
    "cogate.controller.release.native",
    "cogate.controller.status.lifecycle",
    "cogate.controller.planning.planstate",
    "cogate.controller.planning.incremental",
    "cogate.controller.release.refusers",
    "cogate.controller.model.leftovers",
    "cogate.controller.status.inputs",
    "cogate.controller.memory",
    "cogate.controller.kube.results",
    "cogate.controller.status.memory",
    "cogate.controller.status.waiting",
    "cogate.controller.release.memory",
    "cogate.controller.preemption.memory",
    "cogate.controller.provisioning.memory",
    "cogate.controller.preemption.inflight",
    "cogate.controller.model.wakeups",
    "cogate.controller.model.config",
    "cogate.controller.model.replicas",
    "cogate.controller.model.minresources",
    "cogate.controller.model.releases",
    "cogate.localcluster.demojudge",
    "cogate.controller.release.owners",
    "cogate.controller.release.stages",
    "cogate.controller.release.relays",
    "cogate.controller.preemption.victims",
    "cogate.controller.provisioning.provreq",
    "cogate.controller.devices.cel",
    "cogate.controller.devices.records",
    "cogate.controller.devices.dra",
    "cogate.controller.model.readers",
    "cogate.controller.model.constraints",
    "cogate.controller.devices.accountant",
    "cogate.controller.preemption.budgets",
    "cogate.controller.preemption.candidates",
    "cogate.controller.preemption.selection",
    "cogate.controller.explain.explanation",
    "cogate.controller.explain.report",
    "cogate.explain_manifests",
    "cogate.webhook.admission",
    "cogate.gates",
]
FORBIDDEN = {"kubernetes", "threading", "aiohttp", "concurrent", "queue"}


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _imports(module: str) -> tuple[Path, set[str]]:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, module
    path = Path(spec.origin)
    tree = ast.parse(path.read_text(), str(path))
    package = module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            out.add(name)
            if name.startswith("cogate"):  # ``from cogate.controller import planner``: a submodule
                out.update(f"{name}.{a.name}" for a in node.names if _is_module(f"{name}.{a.name}"))
    return path, out


def _reachable(module: str) -> dict[str, set[str]]:
    """cogate module -> its imports, for every cogate module reachable from ``module``."""
    seen: dict[str, set[str]] = {}
    todo = [module]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        _, imps = _imports(m)
        seen[m] = imps
        todo.extend(i for i in imps if i.startswith("cogate.") and i not in seen and _is_module(i))
    return seen


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_no_io_or_threads(module):
    bad = {m: sorted(i for i in imps if i.split(".")[0] in FORBIDDEN)
           for m, imps in _reachable(module).items()}
    assert {m: v for m, v in bad.items() if v} == {}


@pytest.mark.parametrize("module", PURE)
def test_importing_a_pure_module_loads_no_client(module):
    code = (f"import sys, json, {module}; "
            "print(json.dumps(sorted(m for m in ('kubernetes', 'aiohttp') if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_the_check_can_fail():
    """The graph walk sees the I/O modules' imports (so an empty result above means something)."""
    reach = _reachable("cogate.controller.reconciler")
    assert "threading" in reach["cogate.controller.reconciler"]
    assert any("kubernetes" in i for i in reach["cogate.controller.kube.writer"])
