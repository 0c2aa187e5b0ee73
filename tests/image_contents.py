"""What the container image's Python package holds: shared by the wheel's unit test and the image's e2e test.

The image must not carry code that runs the host tooling of the local cluster (apt-get,
buildah, iptables, mmdebstrap: ``cogate.localcluster.host``), which needs root and a Debian
host the non-root image never is. :func:`host_tool_modules` finds such code in a set of files:
a Python module whose code, not its docstrings or comments, names one of :data:`HOST_TOOLS`.
"""

from __future__ import annotations

import ast
import re
from typing import Mapping

#: Commands of the local cluster's host tooling (the real node, the image build).
HOST_TOOLS = ("apt-get", "buildah", "iptables", "mmdebstrap")
_TOOL_WORD = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, HOST_TOOLS)) + r")(?![\w-])")
#: The distribution's own files: the package ``cogate/...`` and its ``cogate-<version>.dist-info/...``,
#: at the top of a wheel or below ``site-packages/`` in the image.
PACKAGE_FILE = re.compile(r"(?:^|/site-packages/)((?:cogate|cogate-[^/]+\.dist-info)(?:/.*)?)$")


def package_path(name: str) -> str | None:
    """The path of a wheel entry or image file relative to ``site-packages`` when it belongs to the
    ``cogate`` distribution (``cogate/cli.py``, ``cogate-0.1.0.dist-info/RECORD``), else None."""
    m = PACKAGE_FILE.search(name.removeprefix("./"))
    return m.group(1) if m else None


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


def host_tool_modules(files: Mapping[str, bytes]) -> dict[str, list[str]]:
    """``{path: [tools named]}`` of the ``.py`` files among ``files`` ({path: content}) whose code
    (string constants other than docstrings) names a command of :data:`HOST_TOOLS`."""
    found: dict[str, list[str]] = {}
    for path, data in sorted(files.items()):
        if not path.endswith(".py"):
            continue
        tree = ast.parse(data, filename=path)
        docs = _docstrings(tree)
        tools = {m for node in ast.walk(tree)
                 if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                 for m in _TOOL_WORD.findall(node.value)}
        if tools:
            found[path] = sorted(tools)
    return found
