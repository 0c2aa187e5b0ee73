"""Build the local control plane's binaries from pinned Go modules, once, into a cache.

Each tool (see :mod:`versions`) gets a throw-away wrapper module that requires
the pinned release and copies that release's own ``replace`` directives (for
``k8s.io/kubernetes`` every ``./staging/src/k8s.io/<name>`` becomes
``k8s.io/<name> v0.<minor>.<patch>``, read from the release's go.mod, never a
hard-coded list). Modules come only from the Go module proxy that ``go``
reaches by default. Builds use ``CGO_ENABLED=0 GOTOOLCHAIN=local``.

Tools of :data:`versions.SOURCES` (cluster-autoscaler) are built instead in place from a read-only
source snapshot in the repository's ``third_party/`` (:func:`third_party_dir`), with
``GOFLAGS=-mod=readonly`` (the snapshot's go.sum as it is) and the tool's build tags.

The Kubernetes release (control plane, kubelet, kubectl, and the etcd and kwok that fit it:
:data:`versions.RELEASES`) is ``--kubernetes-version``, else ``$COGATE_KUBERNETES_VERSION``, else
:data:`versions.DEFAULT_RELEASE`; every release has its own cache directory.

A tool of :data:`versions.CRDS` (the operators) also gets those CRD manifests copied from its
downloaded module into its binary directory (:func:`crd_paths`); a directory without them is no
cached build.

Binaries land in ``$COGATE_CACHE_DIR/bin/<tool>-<version>/`` (default cache dir
``~/.cache/cogate``); a tool whose binaries are all present is not rebuilt, so a
second run takes well under a second.

Run ``python -m cogate.localcluster.build [TOOL...]`` (``make binaries`` adds the real node's
pause image, :mod:`cogate.localcluster.host.pauseimage`); without TOOL it builds every tool but
:data:`versions.BENCH_TOOLS` (Kueue: the topology benchmark builds it on first use). ``cogate demo``
and ``cogate dev up`` build only what they run (:data:`versions.CONTROL_PLANE_TOOLS`, plus :data:`versions.NODE_TOOLS`
with ``--real-node`` and :data:`versions.AUTOSCALER_TOOLS` with ``--autoscaler``).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import phases, versions

__all__ = ["cache_dir", "bin_dir", "binary", "outputs", "crd_paths", "ensure_binaries", "build_lock", "run_go",
           "BuildError", "third_party_dir", "source_dir", "MissingSource"]

#: Overrides where the third-party source snapshots are (a directory holding e.g.
#: ``cluster-autoscaler-1.36.1/``); default :func:`third_party_dir`'s search.
THIRD_PARTY_ENV = "COGATE_THIRD_PARTY_DIR"


class BuildError(RuntimeError):
    """A Go build step failed; the message carries the command and its output tail."""


class MissingSource(BuildError):
    """A tool of :data:`versions.SOURCES` has no source snapshot where it is looked for; the
    message names the path and how to point at another one."""


def third_party_dir() -> Path:
    """Directory of the third-party source snapshots: ``$COGATE_THIRD_PARTY_DIR``, else the
    repository's own ``third_party/`` (``<repo>/third_party``; where each snapshot comes from:
    ``third_party/README.md``). The directory may not exist (an installed package without its
    checkout); the build then fails naming it, see :func:`source_dir`."""
    env = os.environ.get(THIRD_PARTY_ENV)
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[1] / "third_party"


def source_dir(tool: str) -> Path:
    """The source snapshot of ``tool`` (a key of :data:`versions.SOURCES`), e.g.
    ``<third_party_dir>/cluster-autoscaler-1.36.1``. Raises :class:`MissingSource` naming the
    path when it has no go.mod, KeyError for a tool not built from a snapshot."""
    path = third_party_dir() / versions.SOURCES[tool]
    if not (path / "go.mod").is_file():
        raise MissingSource(
            f"{tool}: no source snapshot at {path} (no go.mod there). It is looked for in the "
            f"repository's third_party/ (a source checkout); set ${THIRD_PARTY_ENV} to the directory "
            f"that holds {versions.SOURCES[tool]}/")
    return path


def cache_dir() -> Path:
    """Root of cogate's cache: ``$COGATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/cogate``, else ``~/.cache/cogate``."""
    env = os.environ.get("COGATE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "cogate"


def bin_dir(tool: str, kubernetes_version: str | None = None) -> Path:
    """Directory holding the binaries of ``tool`` (a key of :data:`versions.TOOLS`) at its version for
    the selected Kubernetes release (:func:`versions.tool`: ``kubernetes_version``, else
    ``$COGATE_KUBERNETES_VERSION``, else the default), e.g. ``<cache>/bin/kubernetes-v1.37.2``.
    Raises :class:`versions.UnknownRelease`."""
    _, version, _ = versions.tool(tool, kubernetes_version)
    return cache_dir() / "bin" / f"{tool}-{version}"


def binary(name: str, kubernetes_version: str | None = None) -> Path:
    """Path of the cached binary ``name`` (e.g. ``"kube-apiserver"``) of the selected Kubernetes
    release (see :func:`bin_dir`); it may not be built yet."""
    for tool, names in versions.BINARIES.items():
        if name in names:
            return bin_dir(tool, kubernetes_version) / name
    raise KeyError(f"unknown binary {name!r}")


def _go_env(goflags: str = "-mod=mod") -> dict[str, str]:
    env = dict(os.environ)
    env.update(CGO_ENABLED="0", GOTOOLCHAIN="local", GOFLAGS=goflags)
    return env


def run_go(cmd: list[str], cwd: Path, log, goflags: str = "-mod=mod") -> None:
    """Run ``cmd`` (a ``go`` command) in ``cwd`` with ``CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=<goflags>``
    (default ``-mod=mod``); the command line and its output go to ``log``. Raises :class:`BuildError`
    with the output's tail."""
    print(f"+ (cd {cwd} && GOFLAGS={goflags} " + " ".join(cmd) + ")", file=log, flush=True)
    proc = subprocess.run(cmd, cwd=cwd, env=_go_env(goflags), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    log.write(proc.stdout)
    log.flush()
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-40:])
        raise BuildError(f"`{' '.join(cmd)}` in {cwd} failed with exit code {proc.returncode}:\n{tail}")


def _module_info(module: str, version: str, cwd: Path) -> dict:
    """``go mod download -json module@version`` (the module's zip is downloaded and extracted:
    ``Dir``, and its ``GoMod``). Raises :class:`BuildError` with go's output."""
    proc = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        cwd=cwd, env=_go_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    if proc.returncode != 0:
        raise BuildError(f"go mod download {module}@{version} failed:\n{proc.stderr}{proc.stdout}")
    return json.loads(proc.stdout)


_REPLACE_LINE = re.compile(r"^\s*(\S+)(?:\s+(\S+))?\s+=>\s+(\S+)(?:\s+(\S+))?\s*$")


def _replaces(gomod: str, version: str) -> list[str]:
    """Replace directives of a dependency's go.mod, rewritten for a wrapper module.

    Local-path targets ``./staging/src/k8s.io/<name>`` become ``k8s.io/<name> v0.<minor>.<patch>``
    (the published staging module of that Kubernetes release); other local paths are dropped.
    """
    out: list[str] = []
    lines: list[str] = []
    in_block = False
    for raw in gomod.splitlines():
        line = raw.split("//", 1)[0].strip()
        if in_block:
            if line == ")":
                in_block = False
            elif line:
                lines.append(line)
        elif line.startswith("replace ("):
            in_block = True
        elif line.startswith("replace "):
            lines.append(line[len("replace "):])
    staging_version = "v0." + version.lstrip("v").split(".", 1)[1]
    for line in lines:
        m = _REPLACE_LINE.match(line)
        if not m:
            continue
        old, old_v, new, new_v = m.groups()
        lhs = f"{old} {old_v}" if old_v else old
        if new.startswith("./staging/src/"):
            out.append(f"{lhs} => {new[len('./staging/src/'):]} {staging_version}")
        elif new.startswith(".") or new.startswith("/"):
            continue
        else:
            out.append(f"{lhs} => {new} {new_v}" if new_v else f"{lhs} => {new}")
    return out


def _ldflags(module: str, version: str) -> str:
    flags = ["-s", "-w"]
    if module == "github.com/containerd/containerd/v2":
        # kubelet reads the runtime version over CRI; without this it says "2.x+unknown".
        flags += [f"-X {module}/version.Version={version}", f"-X {module}/version.Package={module}"]
    if module == "k8s.io/kubernetes":
        major, minor = version.lstrip("v").split(".")[:2]
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
            flags += [
                f"-X {pkg}.gitVersion={version}",
                f"-X {pkg}.gitMajor={major}",
                f"-X {pkg}.gitMinor={minor}",
                f"-X {pkg}.gitTreeState=clean",
            ]
    return " ".join(flags)


def outputs(tool: str) -> tuple[str, ...]:
    """File names a built ``tool`` has in :func:`bin_dir`: its binaries (:data:`versions.BINARIES`)
    and the CRD manifests copied from its module (:data:`versions.CRDS`, base names)."""
    return versions.BINARIES[tool] + tuple(Path(c).name for c in versions.CRDS.get(tool, ()))


def crd_paths(tool: str) -> list[Path]:
    """The cached CRD manifests of ``tool`` (:data:`versions.CRDS`), in order; they exist once the
    tool is built."""
    return [bin_dir(tool) / Path(c).name for c in versions.CRDS.get(tool, ())]


def build_tool(tool: str, log=sys.stderr, kubernetes_version: str | None = None) -> float:
    """Build one tool's binaries (and copy its CRDs, :func:`outputs`) for the selected Kubernetes
    release into :func:`bin_dir`; returns seconds spent (0 when cached). Builds of one tool (any
    version) take turns (:func:`build_lock`).

    Raises :class:`BuildError` with the failing command and its output tail.
    """
    module, version, packages = versions.tool(tool, kubernetes_version)
    out = bin_dir(tool, kubernetes_version)
    names = versions.BINARIES[tool]
    if all((out / n).is_file() for n in outputs(tool)):
        return 0.0
    start = time.monotonic()
    with build_lock(tool):
        # Another process (a parallel test run, `cogate dev build`) may have built it while we waited.
        if all((out / n).is_file() for n in outputs(tool)):
            return 0.0
        _build(tool, module, version, packages, out, names, log)
    return time.monotonic() - start


@contextlib.contextmanager
def build_lock(name: str):
    """Hold an exclusive lock on ``<cache>/locks/<name>.lock`` (``fcntl.flock``) while building ``name``.

    Concurrent builds of one tool share a work directory and an output directory; without the lock
    they delete each other's files. The lock is released when the process exits, so a killed build
    never leaves it held.
    """
    path = cache_dir() / "locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _build(tool: str, module: str, version: str, packages: tuple[str, ...], out: Path,
           names: tuple[str, ...], log) -> None:
    if tool in versions.SOURCES:
        _build_from_source(tool, packages, out, names, log)
        return
    work = cache_dir() / "build" / f"{tool}-{version}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    info = _module_info(module, version, work)
    gomod = Path(info["GoMod"]).read_text()
    go_line = re.search(r"^go\s+(\S+)", gomod, re.M)
    reps = _replaces(gomod, version)
    text = [f"module cogate.local/build/{tool}", "", f"go {go_line.group(1) if go_line else '1.26'}", "",
            f"require {module} {version}", ""]
    if reps:
        text += ["replace ("] + [f"\t{r}" for r in reps] + [")", ""]
    (work / "go.mod").write_text("\n".join(text))
    imports = "\n".join(f'\t_ "{p}"' for p in packages)
    (work / "tools.go").write_text(f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n")
    run_go(["go", "mod", "tidy"], work, log)
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    flags = ["-trimpath", "-ldflags", _ldflags(module, version)]
    tags = versions.BUILD_TAGS.get(tool)
    if tags:
        flags += ["-tags", ",".join(tags)]
    if tool == "etcd":
        run_go(["go", "build", *flags, "-o", str(tmp / "etcd"), packages[0]], work, log)
    else:
        run_go(["go", "build", *flags, "-o", str(tmp) + "/", *packages], work, log)
    for crd in versions.CRDS.get(tool, ()):
        src = Path(info["Dir"]) / crd
        if not src.is_file():
            raise BuildError(f"{tool}: {module}@{version} has no {crd}")
        shutil.copyfile(src, tmp / src.name)
    missing = [n for n in names if not (tmp / n).is_file()]
    if missing:
        raise BuildError(f"build of {tool} produced no {missing} in {tmp}")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    shutil.rmtree(work, ignore_errors=True)


def _build_from_source(tool: str, packages: tuple[str, ...], out: Path, names: tuple[str, ...], log) -> None:
    """Build ``tool`` in its read-only source snapshot (:func:`source_dir`): ``go build -tags <tags>
    -trimpath`` with ``GOFLAGS=-mod=readonly -buildvcs=false`` (nothing is written into the snapshot;
    no VCS stamp, the snapshot is no checkout), output into ``<out>.tmp`` then renamed to ``out``."""
    src = source_dir(tool)
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    flags = ["-trimpath", "-ldflags", "-s -w"]
    tags = versions.BUILD_TAGS.get(tool)
    if tags:
        flags += ["-tags", ",".join(tags)]
    (name,) = names  # one main package per snapshot tool
    run_go(["go", "build", *flags, "-o", str(tmp / name), *packages], src, log,
           goflags="-mod=readonly -buildvcs=false")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)


def ensure_binaries(tools: list[str] | None = None, log=sys.stderr,
                    kubernetes_version: str | None = None) -> dict[str, float]:
    """Build every tool of ``tools`` not yet cached (default: every tool but
    :data:`versions.BENCH_TOOLS`), for the selected Kubernetes release (:func:`bin_dir`); returns
    ``{tool: seconds}`` (0.0 for a cache hit)."""
    spent: dict[str, float] = {}
    for tool in tools or [t for t in versions.TOOLS if t not in versions.BENCH_TOOLS]:
        spent[tool] = build_tool(tool, log=log, kubernetes_version=kubernetes_version)
        if spent[tool]:
            phases.record(f"build {tool} {versions.tool(tool, kubernetes_version)[1]}", spent[tool])
        print(f"{tool} {versions.tool(tool, kubernetes_version)[1]}: "
              + ("cached" if spent[tool] == 0 else f"built in {spent[tool]:.0f}s")
              + f" -> {bin_dir(tool, kubernetes_version)}", file=log, flush=True)
    return spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tools", nargs="*", metavar="TOOL",
                        help=f"tools to build, of {sorted(versions.TOOLS)} (default: all but the "
                             f"benchmark's {', '.join(versions.BENCH_TOOLS)})")
    parser.add_argument("--print-dir", action="store_true", help="print the cache directory and exit")
    parser.add_argument("--kubernetes-version", metavar="VERSION", default=None,
                        help=f"Kubernetes release to build, of {', '.join(v.lstrip('v') for v in versions.RELEASES)} "
                             f"(default: ${versions.KUBERNETES_VERSION_ENV}, else "
                             f"{versions.DEFAULT_RELEASE.lstrip('v')})")
    args = parser.parse_args(argv)
    if args.print_dir:
        print(cache_dir())
        return 0
    unknown = [t for t in args.tools if t not in versions.TOOLS]
    if unknown:
        parser.error(f"unknown tool(s) {unknown}; choose from {sorted(versions.TOOLS)}")
    try:
        versions.release(args.kubernetes_version)
    except versions.UnknownRelease as exc:
        parser.error(str(exc))
    try:
        ensure_binaries(args.tools or None, kubernetes_version=args.kubernetes_version)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
