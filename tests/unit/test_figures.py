"""Every figure in README.md, the chart README and docs/ has a source (issue 29 item 2): a reviewer who picks a
number finds the results file that holds it, at a commit named there.

What a *figure* is, precisely. In the prose of README.md, charts/cogate/README.md and every docs/**/*.md page (fenced code
blocks and `inline code` are commands and settings, not prose), a figure is a number (``1.24``,
``1,021``, ``0.30``) directly followed by the unit of a measured quantity:

- a ratio: ``x`` or ``×`` (``1.24x``);
- a rate: ``/s``, ``per second`` (``85/s``, ``6,125 reviews/s`` counts through ``reviews/s``);
- a size: ``B``, ``KB``, ``KiB``, ``MB``, ``MiB``, ``GB``, ``GiB``, ``bytes``;
- a share: ``%``;
- a duration: ``µs``, ``ms``, ``s``, ``min``.

Not figures: the value of a setting named by inline code just before it (``--port`` (9443),
``timeoutSeconds`` 5 s), a duration a rule waits (directly after *for*, *after*, *within*, or
before *later*, *late*, *after*), a number in a *setting clause* (the text between two of ``; , ( ) | .`` and line
ends around it holds one of :data:`SETTING_WORDS`: a default, a target, a back-off, a period, a
cap; those are rules the code and docs/semantics.md state, not measurements), and the end of a
range (``0.5–1.5×``, ``2–5 s``: a generator's parameters or a spread, whose ends are then figures
only when the range is). Pages that are results themselves (docs/results/, generated from or
holding raw results) and pages generated from the code (docs/reference/) are not scanned;
docs/benchmarks.md is held to its results files by tests/unit/test_bench_quick.py.

A figure has a source when its *block* (the paragraph, or for a table row: the row, then the
paragraph just before the table) links a source that holds it (1; the links of the figure's own
sentence when it has any, else the block's), or when its *sentence* marks it (2):

1. the block links a results source and the figure's value is a number in it: a results file
   (``docs/benchmarks/results/<module>.json``, ``docs/results/...``) or a section of
   docs/benchmarks.md (``benchmarks.md#<anchor>``: the results file of the benchmark with that
   title; the page without a section names no source: every small number is in some section). The value matches a number of the file rounded
   to the figure's decimals, also after a change of unit (ms and s, s and min, bytes and MB/MiB);
   or
2. the sentence (for a table row: the row or the paragraph before the table) says ``estimate``,
   or ``historical`` followed by a commit (7 to 12 hex digits)
   it was measured at; or the block starts with ``<!-- settings -->`` (a paragraph
   that lists a generator's parameters, e.g. docs/differential.md's families).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Unit of a measured quantity (longest first), directly after the number.
_UNIT = r"(?:x|×|(?:[a-z]+ ?)?/s|per second|bytes|KiB|KB|MiB|MB|GiB|GB|B|%|µs|ms|min|s)"
FIGURE = re.compile(r"(?<![\w.,/–-])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?\s?(" + _UNIT + r")(?![\w/])")

#: A clause holding one of these states a setting or a rule, not a measurement.
SETTING_WORDS = ("default", "target", "back-off", "backs off", "doubling", "every", "at most", "at least",
                 "grace", "ttl", "cap ", "timeout", "debounce", "deadline",
                 "budget", "up to", "expires", "drain",
                 "threshold", "interval", "period", "while", "max(", "min(", "<", ">", "≤", "≥")
_CLAUSE_END = re.compile(r"[;,|]|\.(?:\s|$)")
#: What inline code becomes in prose: a command, a flag or a field, never a figure.
CODE = "⟨code⟩"
#: A figure in parentheses right after inline code is the value of the setting the code names.
_SETTING_VALUE = re.compile(re.escape(CODE) + r"\s*(?:\(|,|:|=)?\s*(?:default\s*)?$")
#: A duration a rule waits: "for 30 s", "after 2 min", "within 2 s", "5 s later", "2 s late".
_RULE_BEFORE = re.compile(r"\b(?:for|after|within|within those)\s*$", re.I)
_RULE_AFTER = re.compile(r"\s*(?:later|late|after)\b")
#: A block that starts with this comment states settings (a generator's parameters), not measurements.
SETTINGS_BLOCK = "<!-- settings -->"
_COMMIT = re.compile(r"\b[0-9a-f]{7,12}\b")

SKIP = ("docs/results/", "docs/reference/", "docs/benchmarks.md")
BENCH_RESULTS = ROOT / "docs" / "benchmarks" / "results"


def pages() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "charts" / "cogate" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in found if not str(p.relative_to(ROOT)).startswith(SKIP)]


def _prose(text: str) -> list[str]:
    """The page's lines with fenced code blocks emptied and inline code removed (line numbers kept)."""
    out, fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
            out.append("")
            continue
        out.append("" if fence else re.sub(r"`[^`]*`", CODE, line))
    return out


def blocks(text: str) -> list[tuple[int, str, str]]:
    """``(line number, line, block)`` for every prose line: the block is the line's paragraph, or
    for a table row the row and the paragraph before the table."""
    lines = _prose(text)
    raw = lines  # links and marks are prose: the block is read with code taken out
    out = []
    para_start = 0
    before_table = ""
    for i, line in enumerate(lines):
        if not line.strip():
            para_start = i + 1
            continue
        if line.lstrip().startswith("|"):
            if i == 0 or not lines[i - 1].lstrip().startswith("|"):
                j = i - 1
                while j >= 0 and not lines[j].strip():
                    j -= 1
                k = j
                while k >= 0 and lines[k].strip() and not lines[k].lstrip().startswith("|"):
                    k -= 1
                before_table = "\n".join(raw[k + 1:j + 1])
            out.append((i + 1, line, raw[i] + "\n" + before_table))
            continue
        end = i
        while end + 1 < len(lines) and lines[end + 1].strip() and not lines[end + 1].lstrip().startswith("|"):
            end += 1
        out.append((i + 1, line, "\n".join(raw[para_start:end + 1])))
    return out


def _is_setting(line: str, start: int, end: int) -> bool:
    if _SETTING_VALUE.search(line[:start]) or _RULE_BEFORE.search(line[:start]) or _RULE_AFTER.match(line[end:]):
        return True
    left = max((m.end() for m in _CLAUSE_END.finditer(line, 0, start)), default=0)
    right = next((m.start() for m in _CLAUSE_END.finditer(line, end)), len(line))
    clause = line[left:right].lower()
    return any(w in clause for w in SETTING_WORDS)


def figures(line: str, limit: int | None = None) -> list[tuple[str, float, int]]:
    """``(text, value, decimals)`` of every figure in a prose line (module docstring) that starts
    before ``limit`` (the line joined with the next one: a unit on the next line counts)."""
    return [f[1:] for f in figure_spans(line, limit)]


def figure_spans(line: str, limit: int | None = None) -> list[tuple[int, str, float, int]]:
    """:func:`figures` with each one's start in ``line``."""
    out = []
    for m in FIGURE.finditer(line):
        if limit is not None and m.start() >= limit:
            break
        after = line[m.end():m.end() + 1]
        if after in "–-" and after:  # the start of a range
            continue
        if _is_setting(line, m.start(), m.end()):
            continue
        value = float(m.group(1).replace(",", "") + (m.group(2) or ""))
        out.append((m.start(), m.group(0), value, len(m.group(2) or ".") - 1))
    return out


def _anchor(title: str) -> str:
    keep = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return keep.replace(" ", "-")


def _bench_files() -> dict[str, Path]:
    """anchor of a benchmark's section in docs/benchmarks.md -> its results file."""
    return {_anchor(json.loads(p.read_text())["result"]["title"]): p for p in sorted(BENCH_RESULTS.glob("*.json"))}


_LINK = re.compile(r"\]\(([^)\s]+)\)")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_SCALES = (1, 1e-3, 1e3, 1 / 60, 60, 1e-6, 2 ** -20, 2 ** -10, 1e-9, 2 ** -30)


def sources(page: Path, block: str, bench: dict[str, Path]) -> list[Path]:
    """The results files a block links (module docstring, rule 1)."""
    out: list[Path] = []
    for target in _LINK.findall(block):
        path, _, anchor = target.partition("#")
        if not path:
            continue
        resolved = (page.parent / path).resolve()
        if resolved == ROOT / "docs" / "benchmarks.md":
            out += [bench[anchor]] if anchor in bench else []  # the page as a whole is no source
        elif resolved.is_relative_to(ROOT / "docs" / "results") or resolved.is_relative_to(BENCH_RESULTS):
            out += [resolved] if resolved.is_file() else sorted(p for p in resolved.rglob("*") if p.is_file())
    return out


_numbers_cache: dict[Path, list[float]] = {}


def numbers(path: Path) -> list[float]:
    if path not in _numbers_cache:
        _numbers_cache[path] = [float(n.replace(",", "")) for n in _NUMBER.findall(path.read_text())]
    return _numbers_cache[path]


def found_in(value: float, decimals: int, files: list[Path]) -> bool:
    for f in files:
        for n in numbers(f):
            if any(abs(round(n * s, decimals) - value) < 1e-9 for s in _SCALES):
                return True
    return False


def marked(block: str) -> bool:
    if block.lstrip().startswith(SETTINGS_BLOCK):
        return True
    low = block.lower()
    return "estimate" in low or ("historical" in low and bool(_COMMIT.search(block[low.index("historical"):])))


def sentence(line: str, start: int, block: str) -> str:
    """Where a mark must be for the figure at ``line[start:]``: a table row and its caption; in a
    paragraph, the figure's sentence (between ". " boundaries, across the paragraph's lines)."""
    if line.lstrip().startswith("|"):  # the row, and the table's caption (the paragraph before it)
        return block
    lines = block.split("\n")
    flat = " ".join(lines)
    at = next((sum(len(x) + 1 for x in lines[:i]) for i, x in enumerate(lines) if x == line), 0)
    pos = at + start
    begin = max((m.end() for m in re.finditer(r"\.\s", flat[:pos])), default=0)
    end = next((m.start() for m in re.finditer(r"\.(\s|$)", flat[pos:])), len(flat) - pos) + pos
    return flat[begin:end + 1]


def unsourced() -> list[str]:
    bench = _bench_files()
    problems = []
    for page in pages():
        rel = page.relative_to(ROOT)
        for lineno, line, block in blocks(page.read_text()):
            rest = block.split("\n")
            nxt = rest[rest.index(line) + 1] if line in rest and rest.index(line) + 1 < len(rest) else ""
            figs = figure_spans(f"{line} {nxt.strip()}" if not line.lstrip().startswith("|") else line, len(line))
            if not figs or block.lstrip().startswith(SETTINGS_BLOCK):
                continue
            for start, text, value, decimals in figs:
                own = sentence(line, start, block)
                if marked(own):
                    continue
                files = sources(page, own, bench) or sources(page, block, bench)
                if not files:
                    problems.append(f"{rel}:{lineno}: {text!r} has no source (no results file linked, not marked)")
                elif not found_in(value, decimals, files):
                    problems.append(f"{rel}:{lineno}: {text!r} is not in {', '.join(str(f.relative_to(ROOT)) for f in files)}")
    return problems


def test_every_figure_in_readme_and_docs_has_a_source():
    problems = unsourced()
    assert not problems, "figures without a source (see tests/unit/test_figures.py):\n" + "\n".join(problems)


# -- the definition itself ------------------------------------------------------------------------


def test_what_is_a_figure():
    got = [t for t, _, _ in figures("took 22.6 s against 18.2 s, 1.24x; 85/s and 6,125 reviews/s; 180 MB; 40 % here")]
    assert got == ["22.6 s", "18.2 s", "1.24x", "85/s", "6,125 reviews/s", "180 MB", "40 %"]
    assert figures("the timeout (default 300 s) and a back-off of 5 s doubling to 300 s") == []
    assert figures("a plain init container (0.5–1.5× the main one), 2–5 s") == []
    assert figures("v1.36.3, 3 pods, 1,000 nodes, x86_64, 16x16") == []
    assert figures("`--tls-reload-interval` 5 s and `--port` (9443 s)") == []
    assert figures("held for 3 s, after 60 s, within 2 s, 5 s later, 2 s late") == []
    assert [t for t, _, _ in figures("a shorter path for small groups (0.09 s)")] == ["0.09 s"]
    assert figures("a 10 ms target") == []
    assert [t for t, _, _ in figures("ran at 85 per second", 13)] == ["85 per second"]
    assert figures("ran at 85 per second", 5) == [] and [t for t, _, _ in figures("measured 12 ms")] == ["12 ms"]
    assert figures("1.24x")[0][1:] == (1.24, 2) and figures("1,021 bytes")[0][1:] == (1021.0, 0)


def test_blocks_give_a_table_row_the_paragraph_before_the_table():
    text = "From [x](benchmarks.md#a):\n\n| a | b |\n|---|---|\n| one | 2 s |\n\nOther 3 s.\n"
    got = {n: b for n, _, b in blocks(text)}
    assert got[5].startswith("| one | 2 s |") and "benchmarks.md#a" in got[5]
    assert got[7] == "Other 3 s."
    assert all(n != 2 for n in got)  # code and blank lines are no blocks
    assert blocks("```\nran 3 s\n```\n") == []


def test_a_figure_matches_at_its_precision_and_after_a_change_of_unit(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"ms": 2817.5, "bytes": 1021, "s": "22.63 s"}))
    _numbers_cache.pop(f, None)
    assert found_in(2.8, 1, [f]) and found_in(22.6, 1, [f]) and found_in(1.0, 0, [f])
    assert not found_in(2.9, 1, [f]) and not found_in(22.7, 1, [f])


def test_marks():
    assert marked("about 8 min (an estimate)") and marked("1.24x (historical: run at commit 3872e2d)")
    assert not marked("1.24x (historical)") and not marked("took 3 s")
    assert marked("<!-- settings -->\n25 % of the nodes") and not marked("25 % <!-- settings -->")
