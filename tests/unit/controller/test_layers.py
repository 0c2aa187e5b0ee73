"""controller/'s walls (issue 28): a folder imports only folders below it, no module reaches itself
through imports (no loop), none imports another module's private name, and modules and functions
stay short enough to read.

The order, bottom up, is :data:`LAYERS` (docs/internals.md "Folders"): the pure records and
vocabularies, planning, what is said about a group, the API server, then the features (devices,
preemption, provisioning, release), and the loop on top (``main``, ``reconciler``, ``memory``). A
feature folder may import the features before it in that order (provisioning reads preemption's
notes); nothing imports upward. Every import counts: lazy imports inside functions and those under
``TYPE_CHECKING`` too, since an arrow drawn only for a type still ties the lower folder to the higher.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CONTROLLER = ROOT / "controller"
#: Bottom up; "" is the loop at the top of controller/.
LAYERS = ("topology", "model", "planning", "status", "kube", "devices", "preemption", "provisioning", "release", "explain", "")


def _folder(module: str) -> str | None:
    """The folder of ``cogate.controller.<folder>.<module>`` ('' for the loop files), None outside."""
    if not module.startswith("cogate.controller"):
        return None
    parts = module.split(".")[2:]
    if not parts:
        return ""
    return parts[0] if parts[0] in LAYERS else ""


def _module_name(path: Path) -> str:
    rel = path.relative_to(CONTROLLER).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(["cogate", "controller", *parts])


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """``(module, names, line)`` of every import in ``path`` (relative ones resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, [], node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            out.append((base, [a.name for a in node.names], node.lineno))
    return out


MODULES = sorted(CONTROLLER.rglob("*.py"))


def test_every_folder_has_a_layer():
    folders = {p.name for p in CONTROLLER.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(LAYERS) - {""}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(CONTROLLER)))
def test_no_import_points_up(path: Path):
    here = _folder(_module_name(path))
    assert here is not None
    upward = []
    for module, names, line in _imports(path):
        targets = [module] if names == [] else [module] + [f"{module}.{n}" for n in names]
        for target in targets:
            there = _folder(target)
            if there is None or there == here:
                continue
            if LAYERS.index(there) > LAYERS.index(here):
                upward.append(f"line {line}: {target} ({there or 'the loop'})")
                break
    assert not upward, f"{path.relative_to(ROOT)} ({here or 'the loop'}) imports a higher folder: {upward}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(CONTROLLER)))
def test_no_private_name_crosses_modules(path: Path):
    private = [f"line {line}: {module}.{n}" for module, names, line in _imports(path)
               if module.startswith("cogate") for n in names if n.startswith("_") and not n.startswith("__")]
    assert not private, f"{path.relative_to(ROOT)} imports private names: {private}"


def test_the_walls_are_checked():
    """The check itself: an upward arrow and a private name are found."""
    assert _folder("cogate.controller.memory") == "" and _folder("cogate.controller.model.records") == "model"
    assert LAYERS.index(_folder("cogate.controller.reconciler")) > LAYERS.index(_folder("cogate.controller.kube"))


#: A module longer than this is split along its responsibilities (issue 28).
MODULE_LINES = 600
#: No function longer than this; at most :data:`LONG_FUNCTIONS` longer than :data:`FUNCTION_LINES`
#: (declarations such as the argument parser and the metrics table may be long; rules are named steps).
FUNCTION_LINES, MAX_FUNCTION_LINES, LONG_FUNCTIONS = 60, 100, 5


def _functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), str(path))
    return [(f"{path.relative_to(ROOT)}:{n.lineno} {n.name}", n.end_lineno - n.lineno + 1)
            for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_no_module_is_too_long():
    long = {str(p.relative_to(ROOT)): n for p in MODULES if (n := len(p.read_text().splitlines())) > MODULE_LINES}
    assert long == {}


def test_functions_are_short():
    spans = [f for p in MODULES for f in _functions(p)]
    assert [f for f in spans if f[1] > MAX_FUNCTION_LINES] == []
    long = sorted((f for f in spans if f[1] > FUNCTION_LINES), key=lambda f: -f[1])
    assert len(long) <= LONG_FUNCTIONS, long


def test_no_import_loop_between_modules():
    """No module reaches itself through imports (TYPE_CHECKING ones included: a type-only loop
    still ties two modules into one; a Protocol of what is read breaks it)."""
    names = {_module_name(p): p for p in MODULES}
    graph = {m: set() for m in names}
    for m, path in names.items():
        for module, imported, _ in _imports(path):
            for target in [f"{module}.{n}" for n in imported] + [module]:
                if target in names and target != m:
                    graph[m].add(target)
                    break
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(m: str, path: tuple[str, ...]) -> tuple[str, ...] | None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                return path + (m, d)
            if d not in state and (loop := visit(d, path + (m,))):
                return loop
        state[m] = 2
        return None

    loops = [loop for m in sorted(graph) if m not in state and (loop := visit(m, ()))]
    assert loops == []
