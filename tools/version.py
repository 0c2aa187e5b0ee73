"""cogate's one version, and the chart fingerprints that say when the chart needs a new one.

One version (semantic versioning, https://semver.org) names a release everywhere:
``cogate.__version__`` (pyproject.toml reads the package's version from it), the Helm chart's
``version`` and ``appVersion`` (``charts/cogate/Chart.yaml``) and the image tag (the chart's
default tag is its ``appVersion``; ``make image`` tags ``cogate:<appVersion>``).

A chart version is a promise: the same version always means the same values and templates.
``charts/fingerprints.txt`` records, per chart version, the SHA-256 of what the chart installs
and how it is configured (:data:`FINGERPRINTED`: ``values.yaml``, ``templates/``, ``crds/``);
``tests/unit/test_version.py`` fails when the current version's recorded fingerprint differs
from the files, i.e. they changed without a version bump.

Commands (run from the repository root with any Python 3.11+ that has PyYAML, e.g. ``.venv/bin/python``):

- ``python tools/version.py show``: the versions and the chart's fingerprint, recorded and current.
- ``python tools/version.py set X.Y.Z``: write X.Y.Z into ``cogate/__init__.py`` and Chart.yaml
  (``version`` and ``appVersion``) and record the chart's fingerprint under it. X.Y.Z must be
  greater than the current version. Add its section to CHANGELOG.md yourself.
- ``python tools/version.py record``: record the fingerprint under the current version, which must
  not have one yet (``--replace``: overwrite it, only for a version never released).

Exit status 0, or 1 with a message on stderr (``VersionError``).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHART = Path("charts") / "cogate"
PACKAGE_INIT = Path("cogate") / "__init__.py"
#: ``<version> <sha256>`` lines, oldest first; ``#`` starts a comment.
FINGERPRINTS = Path("charts") / "fingerprints.txt"
#: Files and directories of the chart whose content a chart version stands for (relative to the chart).
FINGERPRINTED = ("values.yaml", "templates", "crds")
#: MAJOR.MINOR.PATCH with an optional pre-release (semver 2.0.0 section 9); no build metadata
#: (Helm would turn ``+`` into ``_`` in image tags).
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$")

HEADER = ("# Chart version -> SHA-256 of charts/cogate/values.yaml, templates/ and crds/ (tools/version.py).\n"
          "# A version's values and templates never change: change them under a new version\n"
          "# (python tools/version.py set X.Y.Z). Oldest first.\n")


class VersionError(Exception):
    """A version is malformed, not newer, inconsistent, or its fingerprint is already recorded."""


def parse(version: str) -> tuple:
    """Sort key of a semver string: (major, minor, patch, pre-release rank). A release sorts after
    its pre-releases (semver section 11). Raises :class:`VersionError` for a malformed version."""
    m = SEMVER.match(version)
    if not m:
        raise VersionError(f"{version!r} is not a semantic version MAJOR.MINOR.PATCH[-PRERELEASE]")
    major, minor, patch, pre = m.groups()
    ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")) if pre else ()
    return int(major), int(minor), int(patch), 0 if pre else 1, ids


def fingerprint(chart: Path) -> str:
    """SHA-256 (hex) over every file of :data:`FINGERPRINTED` in ``chart``: relative path and bytes,
    in sorted path order. Raises FileNotFoundError when ``values.yaml`` is missing."""
    if not (chart / "values.yaml").is_file():
        raise FileNotFoundError(f"{chart / 'values.yaml'}: not a chart directory")
    files: list[Path] = []
    for name in FINGERPRINTED:
        path = chart / name
        files += [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    h = hashlib.sha256()
    for f in sorted(files, key=lambda p: p.relative_to(chart).as_posix()):
        h.update(f.relative_to(chart).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def read_fingerprints(text: str) -> dict[str, str]:
    """``version -> sha256`` of a fingerprints file's text (insertion order kept). Raises
    :class:`VersionError` for a malformed line or a version listed twice."""
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2 or not re.fullmatch(r"[0-9a-f]{64}", parts[1]):
            raise VersionError(f"{FINGERPRINTS}:{n}: expected '<version> <sha256>', got {raw!r}")
        parse(parts[0])
        if parts[0] in out:
            raise VersionError(f"{FINGERPRINTS}:{n}: version {parts[0]} listed twice")
        out[parts[0]] = parts[1]
    return out


def package_version(root: Path = ROOT) -> str:
    """``__version__`` of ``cogate/__init__.py`` (read, not imported)."""
    for node in ast.parse((root / PACKAGE_INIT).read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return ast.literal_eval(node.value)
    raise VersionError(f"{root / PACKAGE_INIT} has no __version__")


def chart_versions(root: Path = ROOT) -> tuple[str, str]:
    """(``version``, ``appVersion``) of Chart.yaml."""
    import yaml

    chart = yaml.safe_load((root / CHART / "Chart.yaml").read_text())
    return str(chart["version"]), str(chart["appVersion"])


def recorded(root: Path = ROOT) -> dict[str, str]:
    """The fingerprints file of ``root`` as :func:`read_fingerprints` reads it ({} when absent)."""
    path = root / FINGERPRINTS
    return read_fingerprints(path.read_text()) if path.is_file() else {}


def problems(root: Path = ROOT) -> list[str]:
    """What is wrong with the versions of ``root``, each with what to do; [] when all agree."""
    out: list[str] = []
    package = package_version(root)
    version, app = chart_versions(root)
    if not package == version == app:
        out.append(f"the versions disagree: cogate.__version__ {package}, Chart.yaml version {version}, "
                   f"appVersion {app}; make them one with: python tools/version.py set X.Y.Z")
        return out
    try:
        parse(version)
    except VersionError as exc:
        return [str(exc)]
    prints = recorded(root)
    current = fingerprint(root / CHART)
    if version not in prints:
        out.append(f"chart version {version} has no recorded fingerprint in {FINGERPRINTS}; "
                   f"record it with: python tools/version.py record")
    elif prints[version] != current:
        out.append(f"charts/cogate/values.yaml, templates/ or crds/ changed but the chart version is still "
                   f"{version} (recorded fingerprint {prints[version][:12]}, now {current[:12]}): bump the "
                   f"version with: python tools/version.py set <next version> (semver: a new or changed value "
                   f"is a minor bump while 0.x), add its CHANGELOG.md section, commit {FINGERPRINTS}")
    newest = max(prints, key=parse, default=version)
    if parse(newest) > parse(version):
        out.append(f"{FINGERPRINTS} records {newest}, newer than the chart's {version}: versions only go up")
    return out


def _write_fingerprint(root: Path, version: str, value: str, replace: bool) -> None:
    prints = recorded(root)
    if version in prints and prints[version] != value and not replace:
        raise VersionError(f"chart version {version} is recorded with another fingerprint ({prints[version][:12]}): "
                           f"its values or templates changed; bump it: python tools/version.py set <next version>")
    prints[version] = value
    (root / FINGERPRINTS).write_text(HEADER + "".join(f"{v} {h}\n" for v, h in prints.items()))


def _substitute(path: Path, pattern: str, repl: str) -> None:
    text, n = re.subn(pattern, repl, path.read_text(), count=1, flags=re.M)
    if n != 1:
        raise VersionError(f"{path}: no line matching {pattern!r}")
    path.write_text(text)


def set_version(new: str, root: Path = ROOT) -> None:
    """Write ``new`` as the package's, the chart's and the app's version and record the chart's
    fingerprint under it. Raises :class:`VersionError` when ``new`` is malformed or not newer than
    the current chart version."""
    old, _ = chart_versions(root)
    if parse(new) <= parse(old):
        raise VersionError(f"{new} is not newer than the current version {old}")
    _substitute(root / PACKAGE_INIT, r'^__version__ = "[^"]*"$', f'__version__ = "{new}"')
    _substitute(root / CHART / "Chart.yaml", r"^version: .*$", f"version: {new}")
    _substitute(root / CHART / "Chart.yaml", r"^appVersion: .*$", f'appVersion: "{new}"')
    _write_fingerprint(root, new, fingerprint(root / CHART), replace=False)


def record(root: Path = ROOT, replace: bool = False) -> str:
    """Record the chart's fingerprint under its current version; returns the version. Raises
    :class:`VersionError` when another fingerprint is recorded for it and not ``replace``."""
    version, _ = chart_versions(root)
    parse(version)
    _write_fingerprint(root, version, fingerprint(root / CHART), replace)
    return version


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("show", help="the versions and the chart's fingerprint")
    p_set = sub.add_parser("set", help="set the one version everywhere and record the chart's fingerprint")
    p_set.add_argument("version")
    p_rec = sub.add_parser("record", help="record the chart's fingerprint under its current version")
    p_rec.add_argument("--replace", action="store_true", help="overwrite it (only for a version never released)")
    args = parser.parse_args(argv)
    try:
        if args.command == "set":
            set_version(args.version)
            print(f"version {args.version}: cogate/__init__.py, Chart.yaml, {FINGERPRINTS}; "
                  "now add its section to CHANGELOG.md")
        elif args.command == "record":
            print(f"recorded the chart's fingerprint under {record(replace=args.replace)} in {FINGERPRINTS}")
        else:
            version, app = chart_versions()
            print(f"package {package_version()}, chart {version}, appVersion {app}")
            print(f"chart fingerprint: {fingerprint(ROOT / CHART)} (recorded: {recorded().get(version, 'none')})")
            for line in problems():
                print(f"problem: {line}")
    except VersionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
