"""How ``cogate.localcluster`` hangs together: no import cycles (module-level or inside a function),
no module reaching for another's private names, and the control plane (``cogate demo``,
``cogate dev up`` without ``--real-node``) loading none of the host tooling
(``cogate.localcluster.host``: real node, pause image, image build, apt-get)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import cogate.localcluster

PACKAGE = "cogate.localcluster"
ROOT = Path(cogate.localcluster.__file__).parent


def _modules() -> dict[str, Path]:
    """{dotted module name: file} of every module of the package, subpackages included."""
    out = {}
    for f in sorted(ROOT.rglob("*.py")):
        parts = [p for p in f.relative_to(ROOT).with_suffix("").parts if p != "__init__"]
        out[".".join([PACKAGE, *parts])] = f
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> tuple[set[str], list[str]]:
    """Modules of the package that ``name`` imports anywhere in its code, and the private names it
    takes from them (``from .x import _y``, ``x._y``)."""
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    deps: set[str] = set()
    private: list[str] = []
    aliases: dict[str, str] = {}
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else node.module
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in modules:
                    deps.add(full)
                    aliases[alias.asname or alias.name] = full
                elif base in modules:
                    deps.add(base)
                    if alias.name.startswith("_"):
                        private.append(f"from {base} import {alias.name}")
        elif isinstance(node, ast.Import):
            deps.update(a.name for a in node.names if a.name in modules)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            private.append(f"{node.value.id}.{node.attr}")
    deps.discard(name)
    deps.discard(PACKAGE)  # the package's __init__ holds a docstring only
    return deps, private


def test_no_import_cycles_and_no_private_reaches():
    modules = _modules()
    graph, private = {}, {}
    for name, path in modules.items():
        graph[name], reaches = _imports(name, path, modules)
        if reaches:
            private[name] = reaches
    assert private == {}
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        for dep in sorted(graph[node]):
            if dep in path:
                cycles.append(" -> ".join(path[path.index(dep):] + [dep]))
            else:
                visit(dep, path + [dep])

    for name in graph:
        visit(name, [name])
    assert cycles == []


def test_the_control_plane_loads_no_host_tooling():
    """Importing the control plane's modules, making a LocalCluster and parsing ``dev up`` (its help
    names the real node) load only ``cogate.localcluster.host``'s constants, none of its modules."""
    code = f"""
import json, sys
from cogate import cli
from cogate.localcluster import build, cluster, demo, dev, example, nodes, procs, stack, versions
cluster.LocalCluster(extra_args={{"kube-apiserver": ["--v=2"]}})
dev.plan(dev.build_parser().parse_args(["up", "--no-cogate"]))
dev.build_parser().format_help()
print(json.dumps(sorted(m for m in sys.modules if m.startswith("{PACKAGE}.host."))))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []
