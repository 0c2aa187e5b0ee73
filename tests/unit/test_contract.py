"""One contract: every user-facing statement of a rule says the same thing (issue 29 item 1).

A rule is stated for users in several places: docs/semantics.md (the user contract), the CRD's
descriptions and printer columns (what ``kubectl explain`` and ``kubectl get pg`` show), the
chart's values documentation (charts/cogate/README.md, values.yaml) and ``--help``. Each test
here takes one rule, checks that the code does what the contract says, and that every place
stating it says the same; the departures from scheduler-plugins' schema are checked against
upstream's CRD itself, so a new one cannot go unstated.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from cogate.controller import main as controller_main
from cogate.controller.model.verdicts import Outcome
from cogate.controller.status import conditions, status
from cogate.models import PodGroup, parse_time
from tests.e2e.test_scheduler_plugins_leftovers import SP_CRD, sp_file  # the snapshot the leftovers tests read
from tests.unit.controller.model import test_min_resources_holds as holds  # its Spark builders

ROOT = Path(__file__).resolve().parents[2]
SEMANTICS = ROOT / "docs" / "semantics.md"
CRD = ROOT / "charts" / "cogate" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"
CHART_README = ROOT / "charts" / "cogate" / "README.md"
VALUES = ROOT / "charts" / "cogate" / "values.yaml"

PHASES = ("Finished", "Failed", "Running", "Scheduled", "Scheduling", "Pending")

#: Words each phase's definition must hold wherever it is stated (docs/semantics.md "The PodGroup API"
#: table, the CRD's status.phase description), beside the phase's name.
PHASE_WORDS = {
    "Finished": ("succeeded", "minMember", "active"),
    "Failed": ("failed", "fewer than minMember"),
    "Running": ("running", "succeeded", "minMember"),
    "Scheduled": ("minMember", "bound"),
    "Scheduling": ("released", "fewer than minMember"),
    "Pending": ("not released",),
}

#: The timeout measures lack of progress: one of these wherever the timeout is stated.
TIMEOUT_RIGHT = re.compile(r"last time a member bound|no member binding|without a member binding")
#: Wordings retired because they contradict the code (issue 29): never again in a user-facing text.
RETIRED = {
    "timeout counted from the release": re.compile(
        r"within\s+(?:\S+\s+){0,3}of\s+(?:the\s+)?release|counted from release|after release within", re.I),
    "members beyond minMember released unpinned": re.compile(r"always released unpinned", re.I),
    "gated pods hold no resources": re.compile(r"gated pods hold no resources", re.I),
    "the nonexistent condition Schedulable": re.compile(r"\bSchedulable\b(?!\))"),
    "minResources room not held after the release": re.compile(
        r"room is not held for members created after the release", re.I),
}


def crd() -> dict:
    return yaml.safe_load(CRD.read_text())


def crd_version() -> dict:
    (version,) = crd()["spec"]["versions"]
    return version


def schema_node(schema: dict, dotted: str) -> dict:
    node = schema
    for part in dotted.split("."):
        node = node["properties"][part]
    return node


def column(name: str) -> dict:
    (col,) = [c for c in crd_version()["additionalPrinterColumns"] if c["name"] == name]
    return col


def one_line(text: str) -> str:
    return " ".join(text.split())


def semantics_section(title: str) -> str:
    """The text of docs/semantics.md under the heading ``title`` (any level), to the next heading."""
    text = SEMANTICS.read_text()
    m = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)", text, re.M | re.S)
    assert m, f"docs/semantics.md has no heading {title!r}"
    return m.group(1)


def table_rows(text: str) -> list[list[str]]:
    """Cells of every Markdown table row in ``text`` (header and separator rows included)."""
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith("|")]


def api_row(field: str) -> str:
    """The 'meaning' cell of ``field``'s row in docs/semantics.md "The PodGroup API"."""
    for row in table_rows(semantics_section("The PodGroup API")):
        if row[0] == f"`{field}`":
            return row[-1]
    raise AssertionError(f"docs/semantics.md 'The PodGroup API' has no row for {field}")


def chart_value_row(key: str) -> str:
    for row in table_rows(CHART_README.read_text()):
        if row and row[0] == f"`{key}`":
            return row[-1]
    raise AssertionError(f"charts/cogate/README.md has no values row for {key}")


def values_comment(key: str) -> str:
    """The ``# --`` comment block above ``key:`` in values.yaml (helm-docs style)."""
    lines = VALUES.read_text().splitlines()
    (i,) = [n for n, line in enumerate(lines) if re.match(rf"\s+{re.escape(key)}:", line)]
    block = []
    while lines[i - 1].strip().startswith("#"):
        i -= 1
        block.insert(0, lines[i].strip().lstrip("#").strip())
    return " ".join(block)


def help_text(flag: str) -> str:
    parser = controller_main.build_parser()
    (action,) = [a for a in parser._actions if flag in a.option_strings]
    return action.help


# -- the timeout ----------------------------------------------------------------------------------

def timeout_statements() -> dict[str, str]:
    """Every user-facing statement of the timeout rule, by where it is."""
    version = crd_version()
    spec = schema_node(version["schema"]["openAPIV3Schema"], "spec")
    return {
        "CRD spec.scheduleTimeoutSeconds (kubectl explain)": spec["properties"]["scheduleTimeoutSeconds"]["description"],
        "CRD printer column Timeout": column("Timeout")["description"],
        "docs/semantics.md, The PodGroup API": api_row("spec.scheduleTimeoutSeconds"),
        "docs/semantics.md, Waiting, quotas and timeouts": semantics_section("Waiting, quotas and timeouts"),
        "charts/cogate/README.md controller.evictOnTimeout": chart_value_row("controller.evictOnTimeout"),
        "charts/cogate/values.yaml controller.evictOnTimeout": values_comment("evictOnTimeout"),
        "cogate controller --help --evict-on-timeout": help_text("--evict-on-timeout"),
    }


@pytest.mark.parametrize("where", list(timeout_statements()))
def test_every_statement_of_the_timeout_measures_lack_of_progress(where):
    text = one_line(timeout_statements()[where])
    assert TIMEOUT_RIGHT.search(text), f"{where} does not say the timeout measures lack of progress: {text!r}"
    assert not RETIRED["timeout counted from the release"].search(text), f"{where}: {text!r}"


def _pg(timeout: int, start: str, phase: str = "Scheduling") -> PodGroup:
    return PodGroup.from_api({"metadata": {"name": "g", "namespace": "ns"},
                              "spec": {"minMember": 3, "scheduleTimeoutSeconds": timeout},
                              "status": {"phase": phase, "scheduleStartTime": start}})


def test_the_code_measures_lack_of_progress_as_stated():
    """The deadline moves with the last binding, not with the release alone; it is gone once
    minMember were bound; 0 means no timeout."""
    start = "2026-01-01T00:00:00Z"
    t0 = parse_time(start)
    progress = status.track_progress(None, start, 0, t0)
    assert status.timeout_deadline(_pg(30, start), progress) == t0 + 30
    later = status.track_progress(progress, start, 1, t0 + 25)          # a member bound at +25 s
    assert status.timeout_deadline(_pg(30, start), later) == t0 + 55
    assert status.timeout_deadline(_pg(30, start, phase="Scheduled"), later) is None
    assert status.timeout_deadline(_pg(0, start), later) is None


# -- the room held for the rest of minResources -------------------------------------------------

#: Where the hold is stated, it ends when the later members are placed or the flag's seconds pass.
HOLD_ENDS = {"placed": re.compile(r"\bplaced\b"),
             "its seconds pass": re.compile(r"min-resources-hold-seconds|seconds after its release|how long after its release",
                                      re.I)}


def hold_statements() -> dict[str, str]:
    """Every user-facing statement of how long the rest of minResources stays held, by where it is."""
    spec = schema_node(crd_version()["schema"]["openAPIV3Schema"], "spec")
    limitations = (ROOT / "docs" / "limitations.md").read_text()
    (limit,) = [p for p in limitations.split("\n- ") if p.startswith("**`minResources` room")]
    section = semantics_section("minResources")
    (held,) = [p for p in section.split("\n- ") if p.startswith("**The room is held after the release")]
    return {
        "CRD spec.minResources (kubectl explain)": spec["properties"]["minResources"]["description"],
        "docs/semantics.md, The PodGroup API": api_row("spec.minResources"),
        "docs/semantics.md, minResources": held,
        "docs/limitations.md": limit,
        "charts/cogate/README.md controller.minResourcesHoldSeconds": chart_value_row("controller.minResourcesHoldSeconds"),
        "charts/cogate/values.yaml controller.minResourcesHoldSeconds": values_comment("minResourcesHoldSeconds"),
        "cogate controller --help --min-resources-hold-seconds": help_text("--min-resources-hold-seconds"),
    }


@pytest.mark.parametrize("where", list(hold_statements()))
def test_every_statement_of_the_min_resources_hold_says_when_it_ends(where):
    text = one_line(hold_statements()[where])
    assert re.search(r"\bheld\b", text), f"{where} does not say the rest of minResources is held: {text!r}"
    for end, pattern in HOLD_ENDS.items():
        assert pattern.search(text), f"{where} does not say the hold ends when {end}: {text!r}"


def test_the_code_holds_the_rest_until_placed_or_the_deadline():
    """The flag feeds the planner's hold; another group's release is refused while the hold stands,
    and allowed once its seconds have passed or once the later members are placed (the planner's
    holds in full: tests/unit/controller/model/test_min_resources_holds.py)."""
    args = controller_main.build_parser().parse_args(["--min-resources-hold-seconds", "42"])
    cfg = controller_main.configure(args).planner_config
    assert cfg.min_resources_hold_seconds == 42
    driver = holds.bound_driver("a")
    b = holds.spark({"cpu": "14"}, name="b", created=2.0)

    def b_outcome(since: float) -> Outcome:
        a = holds.released(holds.spark({"cpu": "14"}, name="a", members=[driver]), since)
        return holds.run(holds.nodes16(), [a, b], pods=[driver], cfg=cfg).verdicts[1].outcome

    assert b_outcome(holds.NOW - 41) == Outcome.INSUFFICIENT_CAPACITY
    assert b_outcome(holds.NOW - 42) == Outcome.RELEASED
    # the executors placed (13 of the rest 13): nothing more is held, a 2-cpu group takes the 2 left
    executors = [holds.pod(group="a", cpu=cpu, mem=1, name=f"a-exec-{n}", node_name=n)
                 for n, cpu in (("n1", 7), ("n2", 6))]
    a = holds.released(holds.spark({"cpu": "14"}, name="a", members=[driver, *executors]), holds.NOW - 1)
    small = holds.spark(None, name="s", members=[holds.pod(group="s", cpu=2, mem=1, name="s-0")], created=3.0)
    verdict = holds.run(holds.nodes16(), [a, small], pods=[driver, *executors], cfg=cfg).verdicts[1]
    assert verdict.outcome == Outcome.RELEASED, verdict.message


# -- the phases -----------------------------------------------------------------------------------

def phase_clauses_crd() -> dict[str, str]:
    text = one_line(schema_node(crd_version()["schema"]["openAPIV3Schema"], "status.phase")["description"])
    return {m.group(1): m.group(2) for m in re.finditer(r"(\w+) \(([^()]*)\)", text)}


def phase_clauses_semantics() -> dict[str, str]:
    rows = table_rows(semantics_section("The PodGroup API"))
    return {row[0].strip("`"): row[1] for row in rows if row[0].strip("`") in PHASES}


@pytest.mark.parametrize("where,clauses", [("CRD status.phase", phase_clauses_crd),
                                           ("docs/semantics.md phases table", phase_clauses_semantics)])
def test_phases_are_defined_alike(where, clauses):
    found = clauses()
    assert set(found) == set(PHASES), f"{where} names {sorted(found)}"
    for phase, words in PHASE_WORDS.items():
        for word in words:
            assert word in found[phase], f"{where}: {phase} ({found[phase]!r}) lacks {word!r}"


def test_phase_column_lists_the_phases():
    described = re.findall(r"\b[A-Z][a-z]+\b", column("Phase")["description"])
    assert set(PHASES) <= set(described)


def _counts(**kw) -> status.Counts:
    base = dict(members=0, bound=0, placed=0, active=0, running=0, succeeded=0, failed=0)
    return status.Counts(**{**base, **kw})


@pytest.mark.parametrize("counts,released,previous,phase", [
    (_counts(members=3, bound=3, placed=3, succeeded=3), True, None, "Finished"),
    (_counts(members=3, bound=3, placed=2, active=2, running=2, failed=1), True, None, "Failed"),
    # running + succeeded >= minMember with one running: Running (the documented rule)
    (_counts(members=3, bound=3, placed=3, active=1, running=1, succeeded=2, bound_succeeded=2), True, None, "Running"),
    # ... but a group not released counts no Succeeded member
    (_counts(members=3, bound=3, placed=3, active=1, running=1, succeeded=2, bound_succeeded=2), False, None, "Pending"),
    (_counts(members=3, bound=3, placed=3, active=3), True, None, "Scheduled"),
    (_counts(members=3, bound=2, placed=2, active=3), True, None, "Scheduling"),
    (_counts(members=3, active=3), False, None, "Pending"),
    (_counts(members=0), False, "Finished", "Finished"),   # kept while no member is active
])
def test_the_code_decides_phases_as_documented(counts, released, previous, phase):
    assert status.decide_phase(3, counts, released, previous) == phase


# -- the printer columns --------------------------------------------------------------------------

#: Where ``kubectl get pg``'s columns are listed: the pattern's groups hold the default columns and,
#: where stated, what ``-o wide`` adds.
COLUMN_LISTS = {
    "docs/semantics.md": ("docs/semantics.md", r"`kubectl get pg` shows (.*?); `-o wide` adds (.*?)\."),
    "charts/cogate/README.md": ("charts/cogate/README.md",
                                r"kubectl get pg -A +# ([^\n]*)\nkubectl get pg -A -o wide +# \+ ([^\n]*)"),
    "docs/troubleshooting.md": ("docs/troubleshooting.md",
                                r"kubectl get pg -n NS +# ([^\n]*)\nkubectl get pg -n NS -o wide +# \+ ([^\n]*)"),
    "README.md": ("README.md", r"kubectl get pg +# ([^\n]*)"),
}


def crd_columns(wide: bool) -> list[str]:
    return [c["name"].lower() for c in crd_version()["additionalPrinterColumns"] if bool(c.get("priority")) == wide]


@pytest.mark.parametrize("where", list(COLUMN_LISTS))
def test_column_lists_are_the_crd_s(where):
    path, pattern = COLUMN_LISTS[where]
    m = re.search(pattern, (ROOT / path).read_text(), re.S)
    assert m, f"{where} no longer lists kubectl get pg's columns where this test looks ({pattern!r})"
    names = set(crd_columns(False) + crd_columns(True))
    for wide, text in enumerate(m.groups()):
        listed = [w.lower() for w in re.findall(r"[A-Za-z]+", text) if w.lower() in names]
        assert listed == crd_columns(bool(wide)), (f"{where} lists {listed} for kubectl get pg{' -o wide' * wide}; "
                                                   f"the CRD prints {crd_columns(bool(wide))}")


# -- the conditions -------------------------------------------------------------------------------

CONDITION_TYPES = {value for name, value in vars(conditions).items() if name.startswith("CONDITION_")}


def named_condition_types(text: str) -> set[str]:
    return {word for word in re.findall(r"`?\b([A-Z][A-Za-z]+)\b`?", text) if word in CONDITION_TYPES or
            word.endswith(("Released", "Cluster", "Out", "Usable", "Accepted", "Disrupted", "Waiting",
                           "Preempting", "Provisioning", "Schedulable"))}


def test_condition_types_are_the_code_s():
    crd_text = schema_node(crd_version()["schema"]["openAPIV3Schema"], "status.conditions")["description"]
    m = re.search(r"^Conditions: (.*?)\n\n", semantics_section("The PodGroup API"), re.M | re.S)
    assert m, "docs/semantics.md 'The PodGroup API' lacks its 'Conditions:' paragraph"
    for where, text in (("CRD status.conditions", crd_text), ("docs/semantics.md", m.group(1))):
        named = named_condition_types(text)
        assert named == CONDITION_TYPES, (f"{where} names {sorted(named - CONDITION_TYPES)} that do not exist "
                                          f"and misses {sorted(CONDITION_TYPES - named)}")


# -- departures from scheduler-plugins' schema ----------------------------------------------------

#: Schema keywords that accept or refuse a manifest, or fill it in.
RULE_KEYWORDS = ("minimum", "maximum", "default", "pattern", "enum", "maxLength", "minLength", "required",
                 "x-kubernetes-validations", "type", "format", "anyOf")


def rules(node: dict, path: str = "") -> dict[str, object]:
    """``path:keyword`` -> value for every rule keyword of the schema below ``node``; a property
    present on one side only is ``path:present``."""
    out: dict[str, object] = {f"{path or '$'}:present": True}
    for kw in RULE_KEYWORDS:
        if kw in node:
            out[f"{path or '$'}:{kw}"] = node[kw]
    for name, child in (node.get("properties") or {}).items():
        if path == "" and name in ("apiVersion", "kind"):
            continue
        out.update(rules(child, f"{path}.{name}" if path else name))
    if isinstance(node.get("additionalProperties"), dict):
        out.update(rules(node["additionalProperties"], f"{path}{{}}"))
    if isinstance(node.get("items"), dict):
        out.update(rules(node["items"], f"{path}[]"))
    return out


def upstream_schema() -> dict:
    docs = [d for d in yaml.safe_load_all(sp_file(SP_CRD).read_text()) if d]
    (version,) = docs[0]["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def departures() -> set[str]:
    """The fields where cogate's schema differs from upstream's in a rule (not in a description);
    a field upstream lacks stands for everything below it."""
    ours, theirs = rules(crd_version()["schema"]["openAPIV3Schema"]), rules(upstream_schema())
    differing = {key for key in ours.keys() | theirs.keys() if ours.get(key) != theirs.get(key)}
    fields = set()
    for key in differing:
        path, kw = key.rsplit(":", 1)
        if path == "$" and kw == "x-kubernetes-validations":
            fields.add("metadata.name")          # the one CEL rule at the root reads metadata.name
        else:
            fields.add(re.split(r"[\[{]", path)[0])
    added = {f for f in fields if f"{f}:present" not in theirs}
    return {f for f in fields if not any(f.startswith(g + ".") for g in added)}


def test_departures_from_upstream_are_the_known_ones():
    """If this fails, a rule of the schema changed: state it (or drop it) in the table below."""
    assert departures() == {"metadata.name", "spec", "spec.minMember", "spec.scheduleTimeoutSeconds",
                            "status.scheduled", "status.conditions"}


def test_each_departure_is_stated_with_its_reason():
    rows = table_rows(semantics_section("Departures from scheduler-plugins' schema"))
    stated: dict[str, str] = {}
    for row in rows[2:]:
        assert len(row) == 4 and all(row), f"a departure row needs where, cogate, upstream and why: {row}"
        for field in re.findall(r"`([^`]+)`", row[0]):
            stated[field] = row[3]
    missing = departures() - set(stated)
    assert not missing, f"docs/semantics.md 'Departures from scheduler-plugins' schema' does not state {missing}"
    header = CRD.read_text().split("apiVersion:", 1)[0]
    for field in ("63 characters", "negative", "defaults to 1", "int32", "scheduled", "conditions"):
        assert field in header, f"the CRD's header comment does not state {field!r}"


def test_the_crd_refusals_are_the_stated_ones():
    spec = schema_node(crd_version()["schema"]["openAPIV3Schema"], "spec")
    assert spec["properties"]["scheduleTimeoutSeconds"]["minimum"] == 0
    assert spec["properties"]["minMember"]["default"] == 1
    (rule,) = crd_version()["schema"]["openAPIV3Schema"]["x-kubernetes-validations"]
    assert "63" in rule["rule"]
    (row,) = [r for r in table_rows(semantics_section("The PodGroup API")) if r[0] == "`spec.minMember`"]
    assert "default 1" in row[1] and "≥ 1" in row[1]


# -- retired wordings and documented defaults -----------------------------------------------------

def user_texts() -> dict[str, str]:
    """Every user-facing text: README, docs/*.md (benchmarks and recorded results aside: they
    quote runs), the chart's README and values, the CRD, the controller's and webhook's --help."""
    texts = {p.relative_to(ROOT).as_posix(): p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
             if "results" not in p.parts and p.name not in ("benchmarks.md", "internals.md")}
    texts["charts/cogate/README.md"] = CHART_README.read_text()
    texts["charts/cogate/values.yaml"] = VALUES.read_text()
    texts["CRD"] = CRD.read_text()
    texts["cogate controller --help"] = controller_main.build_parser().format_help()
    return texts


@pytest.mark.parametrize("wording", list(RETIRED))
def test_retired_wordings_are_gone(wording):
    found = [where for where, text in user_texts().items() if RETIRED[wording].search(one_line(text))]
    assert not found, f"{wording!r} is still stated in {found}"


@pytest.mark.parametrize("flag,value_key,unit", [
    ("--starvation-seconds", "starvationSeconds", "s"),
    ("--reservation-ttl", "reservationTTL", "s"),
    ("--min-resources-hold-seconds", "minResourcesHoldSeconds", "s"),
])
def test_documented_defaults_are_the_code_s(flag, value_key, unit):
    parser = controller_main.build_parser()
    (action,) = [a for a in parser._actions if flag in a.option_strings]
    values = yaml.safe_load(VALUES.read_text())["controller"]
    assert float(values[value_key]) == action.default, f"values.yaml {value_key} differs from {flag}'s default"
    text = one_line(SEMANTICS.read_text())
    m = re.search(rf"`{re.escape(flag)}`[^.]{{0,40}}?default (\d+(?:\.\d+)?) {unit}", text)
    assert m, f"docs/semantics.md does not state {flag}'s default"
    assert float(m.group(1)) == action.default
