"""Every relative link of the user docs leads somewhere (issue 31: anchors broke on any rename).

Links in README.md, docs/**/*.md and the chart's and local cluster's READMEs must name a file
of the repository, and an anchor (``page.md#section``, ``#section``) a heading of that page, by
GitHub's rule for heading anchors. Pages that other branches are writing at the same time
(:data:`PENDING`) may be linked before they exist; once one exists, its anchors are checked too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Pages that may be linked before they exist (none: every page of the docs layout exists).
PENDING: frozenset[str] = frozenset()

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def pages() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "charts" / "cogate" / "README.md", ROOT / "localcluster" / "README.md",
             *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in found if p.is_file()]


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces to ``-``."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        m = None if in_code else re.match(r"#{1,6} (.+)", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [a or b for a, b in LINK.findall(text)]


@pytest.mark.parametrize("text,anchor", [
    ('Capacity planning: what "fits" means', "capacity-planning-what-fits-means"),
    ("Departures from scheduler-plugins' schema", "departures-from-scheduler-plugins-schema"),
    ("Side by side with Kubernetes' own gang scheduling (1.37.2, GenericWorkload on)",
     "side-by-side-with-kubernetes-own-gang-scheduling-1372-genericworkload-on"),
    ("Devices (DRA)", "devices-dra"),
])
def test_slug(text, anchor):
    assert slug(text) == anchor


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):           # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        rel = dest.relative_to(ROOT).as_posix() if dest.is_relative_to(ROOT) else str(dest)
        if not dest.exists():
            if rel not in PENDING:
                broken.append(f"{target}: no such file")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor} in {rel}")
    assert not broken, f"{page.relative_to(ROOT)}:\n" + "\n".join(broken)
