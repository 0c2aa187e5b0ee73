"""Run cogate's benchmarks (issue 10) and write the report.

    python bench/run.py                       # every benchmark -> docs/benchmarks.md
    python bench/run.py --quick --out /tmp/b/benchmarks.md   # tiny sizes (the smoke test)
    python bench/run.py --only planning_pass webhook   # re-run two; keep the others' last results
    python bench/run.py --no-cluster          # skip the benchmarks that need the local control plane
    python bench/run.py --report              # run nothing: docs/benchmarks.md from the results files

Each benchmark is a module in bench/ (listed in :data:`BENCHMARKS`) with
``run(quick: bool, out_dir: pathlib.Path) -> dict`` returning one result dict (the
contract: name, title, what, baseline, tables, plots, targets, notes; see
bench/README.md) and writing its PNG plots into ``out_dir``. A module that needs the
local control plane sets ``NEEDS_CLUSTER = True``; it is skipped, with a note in the
report, under ``--no-cluster`` or when the Go-built binaries are not in the cache. A
module may also define ``unavailable() -> str | None`` giving a reason to skip it
(e.g. a missing source directory).

Output: next to the Markdown report (``--out``, default docs/benchmarks.md) a directory of
the same stem (docs/benchmarks/) holding the plots and, in ``results/``, one results file per
benchmark (``<module>.json``: its result dict with ``run``, the commit, date, load average,
cores, machine and settings of that run; :func:`section_facts`), written as soon as it
finishes. The report is rendered from those files only (:func:`render`, also ``--report``),
so a section re-run with ``--only`` replaces its file and the others keep theirs, each naming
its own commit. A benchmark that raises is reported as failed (its traceback in the notes)
and the run goes on; the exit code is then 1; a skipped one keeps its previous results file.
No file names this machine's directories (:func:`portable`): the repository's path is
written relative to it, the home directory as ``~``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from cogate.localcluster import provenance

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

#: Benchmark modules (bench/<name>.py), in report order. Cluster benchmarks set NEEDS_CLUSTER.
BENCHMARKS: list[str] = [
    "planning_pass",  # 1
    "webhook",  # 5
    "controller_memory",  # 6a
    "preemption",  # issue 15 item 6: victim selection time
    "devices_pass",  # issue 17 item 7: the pass with DRA devices
    "topology_pass",  # issue 32 item 5: the pass with topology constraints on 1,024 nodes
    "explain",  # issue 31 item 1: cogate explain on 1,000 nodes (the pure part)
    "bench_release_latency",  # 2
    "bench_end_to_end",  # 3
    "bench_release_throughput",  # 4
    "bench_controller_memory_cluster",  # 6b
    "bench_coscheduling",  # 7 (needs the scheduler-plugins source: $COGATE_COSCHEDULING_SRC)
    "bench_preemption_cluster",  # issue 15 item 6: cogate, kube-scheduler alone, Coscheduling preempting
    "bench_autoscaler_cluster",  # issue 16 item 6: cogate's ProvisioningRequests against cluster-autoscaler alone
    "bench_native",  # issue 18 item 4: against kube-scheduler 1.37's own gang scheduling (builds v1.37.2)
    "bench_topology_native",  # issue 32 item 6: topology-aware gangs against kube-scheduler 1.37's own (v1.37.2)
    "bench_admission_rate",  # issue 40 item 1: pod creation through the API server with and without the webhook
    "bench_small_gangs",  # issue 40 item 3: sub-second groups and 100 x 8 against kube-scheduler alone and native
    "soak",  # issue 35: the chaos soak (make soak SOAK_MINUTES=30 SOAK_SEED="1 2 3"); 10 min of seed 1 without them
    "bench_composite",  # issue 33: roles and sets of gangs beside kube-scheduler 1.37's CompositePodGroup
]

#: Binaries the local control plane runs (what a NEEDS_CLUSTER benchmark needs).
CLUSTER_BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok")

RESULT_KEYS = ("name", "title", "what", "baseline", "tables", "plots", "targets", "notes")


# -- machine facts ------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _cmd(*args: str) -> str:
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=20, check=False)
        return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def machine_facts() -> dict[str, str]:
    """The machine's lasting facts: CPU model, cores, memory, kernel, Python, Go. What changes from
    one section to the next (commit, date, load, Kubernetes release) is in :func:`section_facts`."""
    cpu = next((line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo").splitlines()
                if line.startswith("model name")), platform.processor() or "unknown")
    mem_kb = next((int(line.split()[1]) for line in _read("/proc/meminfo").splitlines()
                   if line.startswith("MemTotal:")), 0)
    go = _cmd("go", "version") if shutil.which("go") else "not installed"
    return {
        "CPU": cpu,
        "cores": str(os.cpu_count()),
        "memory": f"{mem_kb / 2**20:.1f} GiB",
        "kernel": f"{platform.system()} {platform.release()}",
        "Python": platform.python_version(),
        "Go": go,
    }


def git_commit(outputs: tuple[str, ...] = provenance.RECORDED) -> str:
    """The checkout's short commit, with ``-dirty`` when tracked files other than the recorded
    evidence (``outputs``, paths relative to the repository: a run rewrites its plots and results
    files as it goes, and a sitting's differential writes its own) differ from it: a section run on
    uncommitted code names no commit that reproduces it (:func:`cogate.localcluster.provenance.git_commit`)."""
    return provenance.git_commit(REPO, outputs)


def section_facts(mod: Any, quick: bool, outputs: tuple[str, ...] = ()) -> dict[str, Any]:
    """What one benchmark's result records of its run, taken at its start: ``commit``
    (:func:`git_commit`), ``date`` (UTC, minutes), ``load_average`` (1/5/15 min), ``cores`` and
    ``machine`` (:func:`machine_facts`) and ``settings``: ``quick``, the local control plane's Kubernetes release (a module's
    ``RELEASE`` when it pins its own), the controller's default ``--workers``, every
    ``COGATE_*`` environment variable, and the module's own ``SETTINGS`` dict (its sizes) if any."""
    settings: dict[str, Any] = {"quick": quick}
    try:
        from cogate.localcluster import versions

        settings["kubernetes"] = getattr(mod, "RELEASE", None) or versions.KUBERNETES
    except ImportError:
        settings["kubernetes"] = "unknown"
    try:
        from cogate.controller.model.config import DEFAULT_WORKERS

        settings["controller --workers (default)"] = DEFAULT_WORKERS
    except ImportError:
        pass
    settings["env"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith("COGATE_")}
    settings.update(getattr(mod, "SETTINGS", {}) or {})
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {"commit": git_commit((*outputs, *provenance.RECORDED)),
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load_average": [round(x, 1) for x in load], "cores": os.cpu_count(), "settings": settings,
            "machine": machine_facts()}


# -- running ------------------------------------------------------------------------------


def cluster_unavailable() -> str | None:
    """Why the local control plane cannot run here (binaries missing), or None."""
    try:
        from cogate.localcluster.build import binary
    except ImportError as exc:
        return f"cogate.localcluster is not importable ({exc})"
    missing = [b for b in CLUSTER_BINARIES if not binary(b).exists()]
    if missing:
        return f"Go-built binaries not in the cache ({', '.join(missing)}); run `make binaries` first"
    return None


def module_of(result: dict[str, Any]) -> str:
    """The benchmark module (an entry of :data:`BENCHMARKS`) that produced ``result``: its
    ``module`` field, or for results written before that field existed, its ``name`` (a module
    may name its result differently, e.g. ``bench_end_to_end`` -> ``end_to_end``)."""
    if result.get("module"):
        return result["module"]
    name = result["name"]
    return name if name in BENCHMARKS else f"bench_{name}"


def _skipped(name: str, title: str, reason: str) -> dict[str, Any]:
    return {"name": name, "module": name, "title": title, "what": "", "baseline": "", "tables": [], "plots": [], "targets": [],
            "notes": [f"Skipped: {reason}."], "status": "skipped"}


def validate(result: Any, out_dir: Path) -> list[str]:
    """Problems with a result dict (empty when it follows the contract)."""
    if not isinstance(result, dict):
        return [f"result is a {type(result).__name__}, not a dict"]
    errs = [f"missing key {k!r}" for k in RESULT_KEYS if k not in result]
    for t in result.get("tables", []):
        cols = t.get("columns", [])
        for i, row in enumerate(t.get("rows", [])):
            if len(row) != len(cols):
                errs.append(f"table {t.get('caption', '')!r}: row {i} has {len(row)} cells for {len(cols)} columns")
    for p in result.get("plots", []):
        if not (out_dir / p.get("file", "")).is_file():
            errs.append(f"plot {p.get('file')!r} was not written")
    for t in result.get("targets", []):
        if t.get("met") is None:
            if not str(t.get("target", "")).startswith("none"):
                errs.append(f"target {t.get('what')!r}: 'met' is None (reported only) but the target is "
                            f"{t.get('target')!r}, not 'none ...'")
        elif not isinstance(t.get("met"), bool):
            errs.append(f"target {t.get('what')!r}: 'met' is not a boolean or None")
        elif not t["met"] and not t.get("explanation"):
            errs.append(f"target {t.get('what')!r}: missed without an explanation")
    try:
        json.dumps(result)
    except (TypeError, ValueError) as exc:
        errs.append(f"not JSON-serialisable: {exc}")
    return errs


def _outputs(out_dir: Path) -> tuple[str, ...]:
    """The report's outputs inside the repository (plots and results directory, the report),
    relative to it; none when the report is written elsewhere."""
    try:
        rel = out_dir.resolve().relative_to(REPO)
    except ValueError:
        return ()
    return (str(rel), f"{rel}.md")


def run_one(name: str, quick: bool, out_dir: Path, no_cluster: bool) -> dict[str, Any]:
    try:
        mod = importlib.import_module(name)
    except Exception:  # noqa: BLE001 - report it, run the others
        return {**_skipped(name, name, "import failed"), "status": "failed",
                "notes": ["Import failed:", traceback.format_exc()]}
    title = getattr(mod, "TITLE", name.replace("_", " ").capitalize())
    if getattr(mod, "NEEDS_CLUSTER", False):
        if no_cluster:
            return _skipped(name, title, "needs the local control plane; run without --no-cluster")
        reason = cluster_unavailable()
        if reason:
            return _skipped(name, title, reason)
    unavailable = getattr(mod, "unavailable", None)
    reason = unavailable() if callable(unavailable) else None
    if reason:
        return _skipped(name, title, reason)
    facts = section_facts(mod, quick, _outputs(out_dir))
    t0 = time.monotonic()
    try:
        result = mod.run(quick, out_dir)
    except Exception:  # noqa: BLE001
        return {**_skipped(name, title, "failed"), "status": "failed", "run": facts,
                "notes": ["The benchmark raised:", traceback.format_exc()]}
    errs = validate(result, out_dir)
    if errs:
        return {**_skipped(name, title, "its result does not follow the contract"), "status": "failed",
                "run": facts, "notes": ["Malformed result: " + "; ".join(errs)]}
    result.setdefault("status", "ok")
    result["module"] = name
    result["seconds"] = round(time.monotonic() - t0, 1)
    result["load_average"] = facts["load_average"][0]
    result["ran_at"] = facts["date"]
    result["run"] = {**facts, "load_average_end": [round(x, 1) for x in os.getloadavg()]}
    return result


# -- the report ---------------------------------------------------------------------------


def portable(value: Any, repo: Path = REPO, home: Path | None = None) -> Any:
    """``value`` (a result or the facts: dicts and lists of strings and numbers) with this
    machine's directories taken out of its strings: a path in the repository becomes relative
    to it (``./bench/run.py``), the home directory (default ``Path.home()``) becomes ``~``
    (a traceback's site-packages, cogate's cache)."""
    home = Path.home() if home is None else home
    subs = [(re.compile(re.escape(str(path)) + r"(?![\w-]|\.\w)"), short)
            for path, short in ((repo, "."), (home, "~")) if len(path.parts) > 1]

    def strip(v: Any) -> Any:
        if isinstance(v, str):
            for pattern, short in subs:
                v = pattern.sub(lambda _m, s=short: s, v)
            return v
        if isinstance(v, list):
            return [strip(x) for x in v]
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items()}
        return v

    return strip(value)


def _cell(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 10 else f"{v:,.1f}" if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def _table(columns: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(_cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return out


def _settings_text(settings: dict[str, Any]) -> str:
    parts = []
    for k, v in settings.items():
        if k == "env":
            parts += [f"{e}={x}" for e, x in v.items()]
        else:
            parts.append(f"{k} {v}")
    return ", ".join(parts)


def ran_line(r: dict[str, Any]) -> str:
    """The line that ends a section: when, at which commit, how long, at what load, with what
    settings (a result written before the per-section facts existed says its commit was not
    recorded)."""
    run = r.get("run")
    if not run:
        since = f"; its figures entered the repository in commit {r['recorded_in']}" if r.get("recorded_in") else ""
        return (f"- Ran {r.get('ran_at', '?')} in {r.get('seconds', '?')} s (its commit was not recorded: "
                f"historical figures{since}); machine load average (1 min) at its start: "
                f"{r.get('load_average', '?')}.")
    load = " / ".join(str(x) for x in run["load_average"])
    took = f" in {r['seconds']} s" if r.get("seconds") is not None else ""
    end = (f", at its end: {' / '.join(str(x) for x in run['load_average_end'])}"
           if run.get("load_average_end") else "")
    return (f"- Ran {run['date']} at commit {run['commit']}{took}; machine load average (1/5/15 min) at its "
            f"start: {load}{end}, on {run['cores']} cores; settings: {_settings_text(run['settings'])}.")


def _runs_table(results: list[dict[str, Any]]) -> list[str]:
    rows = []
    for r in results:
        run = r.get("run") or {}
        unknown = f"not recorded (in the repository since {r['recorded_in']})" if r.get("recorded_in") else "not recorded"
        rows.append([f"[{r['title']}](#{_anchor(r['title'])})", run.get("commit", unknown),
                     run.get("date", r.get("ran_at", "")),
                     " / ".join(str(x) for x in run["load_average"]) if run else f"{r.get('load_average', '')} (1 min)",
                     run.get("cores", ""), "" if r.get("seconds") is None else r["seconds"],
                     (run.get("settings") or {}).get("kubernetes", ""), r.get("status", "")])
    return _table(["section", "commit", "date", "load average at its start (1/5/15 min)", "cores", "seconds",
                   "Kubernetes", "status"], rows)


def _machine_table(results: list[dict[str, Any]]) -> list[str]:
    values: dict[str, list[str]] = {}
    for r in results:
        for k, v in ((r.get("run") or {}).get("machine") or {}).items():
            if v not in values.setdefault(k, []):
                values[k].append(v)
    return _table(["fact", "value"], [[k, "; ".join(v)] for k, v in values.items()])


def render(results: list[dict[str, Any]], plots_rel: str, readme_rel: str, quick: bool) -> str:
    """The Markdown report from the sections' results (as :func:`load_results` gives them; every
    figure in it comes from them); ``plots_rel``/``readme_rel``: paths of the plots directory and
    of bench/README.md relative to the report. Pure."""
    lines = ["# Benchmarks", "",
             f"<!-- Generated from {plots_rel}/{RESULTS_SUBDIR}/*.json by `python bench/run.py --report` (or a "
             "run of `make bench`); do not edit. -->", ""]
    lines.append(f"Generated by `make bench` (`python bench/run.py`); see [bench/README.md]({readme_rel}) for "
                 "how to run them. Absolute times on a shared 2-core machine are noise: every figure that "
                 "matters is a ratio against a baseline measured in the same run. Each section is one run of "
                 f"its benchmark, whose raw result is `{plots_rel}/{RESULTS_SUBDIR}/<module>.json`: when, at which "
                 "commit, at what machine load and with what settings it ran is in the table below and at the end "
                 "of the section.")
    if quick:
        lines += ["", "**Quick run (`--quick`): tiny sizes, for the smoke test only. Not results.**"]
    lines += ["", "## Runs", ""] + _runs_table(results)
    lines += ["", "## Machine", "", "As the sections that record their run say it (a section whose commit was not "
              "recorded did not record its machine either):", ""] + _machine_table(results)
    lines += ["", "## Targets", ""]
    rows = []
    for r in results:
        for t in r.get("targets", []):
            rows.append([f"[{r['title']}](#{_anchor(r['title'])})", t["what"], t["target"], t["measured"],
                         "reported (no target)" if t["met"] is None else t["met"]])
        if r.get("status") != "ok":
            rows.append([f"[{r['title']}](#{_anchor(r['title'])})", r["status"], "", r["notes"][0], ""])
    lines += _table(["benchmark", "what", "target", "measured", "met"], rows)
    for r in results:
        lines += _section(r, plots_rel)
    return "\n".join(lines).rstrip() + "\n"


def _section(r: dict[str, Any], plots_rel: str) -> list[str]:
    lines = ["", f"## {r['title']}", ""]
    if r.get("what"):
        lines += [r["what"], ""]
    if r.get("baseline"):
        lines += [f"**Baseline:** {r['baseline']}", ""]
    for t in r.get("tables", []):
        if t.get("caption"):
            lines += [f"*{t['caption']}*", ""]
        lines += _table(t["columns"], t["rows"]) + [""]
    for p in r.get("plots", []):
        lines += [f"![{p.get('caption', '')}]({plots_rel}/{p['file']})", ""]
        if p.get("caption"):
            lines += [f"*{p['caption']}*", ""]
    for t in r.get("targets", []):
        verdict = "reported (no target)" if t["met"] is None else "met" if t["met"] else "**missed**"
        lines.append(f"- Target: {t['what']}: {t['target']}; measured {t['measured']} — {verdict}.")
        if t.get("explanation"):
            lines.append(f"  {t['explanation']}")
    if r.get("targets"):
        lines.append("")
    for n in r.get("notes", []):
        if "\n" in n.strip():
            lines += ["```", n.rstrip(), "```"]
        else:
            lines.append(f"- {n}")
    if r.get("status") != "skipped":
        lines.append(ran_line(r))
    return lines


def _anchor(title: str) -> str:
    keep = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return keep.replace(" ", "-")


#: Where each section's raw result lives, below the report's directory (docs/benchmarks/results/).
RESULTS_SUBDIR = "results"


def results_dir(out: Path) -> Path:
    """The directory of the sections' results files for the report ``out`` (docs/benchmarks.md ->
    docs/benchmarks/results/)."""
    return out.with_suffix("") / RESULTS_SUBDIR


def write_result(rdir: Path, result: dict[str, Any], quick: bool) -> Path:
    """Write one section's result to ``rdir/<module>.json`` (``{"quick": ..., "result": ...}``,
    machine directories taken out by :func:`portable`), replacing its previous result."""
    rdir.mkdir(parents=True, exist_ok=True)
    path = rdir / f"{module_of(result)}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"quick": quick, "result": portable(result)}, indent=1) + "\n")
    tmp.replace(path)
    return path


def load_results(rdir: Path, quick: bool) -> list[dict[str, Any]]:
    """The sections' results in ``rdir`` of the same kind (``quick`` or not), in :data:`BENCHMARKS`
    order; a file that is not a results file is skipped with a message on stderr."""
    results = []
    for name in BENCHMARKS:
        path = rdir / f"{name}.json"
        if not path.exists():
            continue
        try:
            doc = json.loads(path.read_text())
            if doc["quick"] == quick:
                results.append(doc["result"])
        except (ValueError, KeyError, TypeError):
            print(f"[bench] ignoring unreadable {path}", file=sys.stderr)
    return results


def write_report(out: Path, quick: bool) -> list[dict[str, Any]]:
    """Render ``out`` from the results files beside it; returns the results it holds."""
    results = load_results(results_dir(out), quick)
    out.write_text(render(results, os.path.relpath(out.with_suffix(""), out.parent),
                          os.path.relpath(BENCH_DIR / "README.md", out.parent), quick))
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test); not results")
    ap.add_argument("--only", nargs="+", metavar="NAME", choices=BENCHMARKS,
                    help="run only these benchmarks; the report keeps the other benchmarks' results files "
                         "(of the same --quick kind)")
    ap.add_argument("--no-cluster", action="store_true", help="skip benchmarks that need the local control plane")
    ap.add_argument("--report", action="store_true",
                    help="run nothing: write the report from the results files (docs/benchmarks/results/*.json)")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md",
                    help="Markdown report (default: %(default)s); plots and the results files go to a directory "
                         "of the same stem beside it")
    args = ap.parse_args(argv)
    out: Path = args.out.resolve()
    plots_dir = out.with_suffix("")
    rdir = results_dir(out)
    if args.report:
        results = write_report(out, args.quick)
        print(f"[bench] wrote {out} from {len(results)} results files in {rdir}/", file=sys.stderr)
        return 0
    plots_dir.mkdir(parents=True, exist_ok=True)
    failed = False
    for name in args.only or BENCHMARKS:
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        r = run_one(name, args.quick, plots_dir, args.no_cluster)
        print(f"[bench] {name}: {r['status']}" + (f" in {r['seconds']} s" if "seconds" in r else ""),
              file=sys.stderr, flush=True)
        for t in r.get("targets", []):
            print(f"[bench]   {t['what']}: {t['target']}; measured {t['measured']}: "
                  + ("reported" if t["met"] is None else "met" if t["met"] else "MISSED"), file=sys.stderr, flush=True)
        if r["status"] == "failed":
            failed = True
            print("\n".join(r["notes"]), file=sys.stderr)
        if r["status"] != "skipped" or not (rdir / f"{name}.json").exists():
            write_result(rdir, r, args.quick)  # a skipped section keeps its last run (which names its commit)
    write_report(out, args.quick)
    print(f"[bench] wrote {out} and {plots_dir}/", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
