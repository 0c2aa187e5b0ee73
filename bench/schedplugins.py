"""Build scheduler-plugins (Coscheduling) from a source snapshot, once, into cogate's cache.

The snapshot (default ``$COGATE_COSCHEDULING_SRC``, else the repository's
``third_party/scheduler-plugins-v0.34.7``; see ``third_party/README.md`` for where it comes
from) is never built in place: it is copied into a throw-away build directory under the cache (``go build
-mod=mod`` may rewrite go.sum) and built with ``CGO_ENABLED=0 GOTOOLCHAIN=local``.
Binaries land in ``<cache>/bin/scheduler-plugins-<version>-<hash>/`` where ``<hash>`` is
a digest of the snapshot's go.mod and version; present binaries are not rebuilt.

Run ``python bench/schedplugins.py [SRC]`` to build ahead of the benchmark.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

try:
    from cogate.localcluster.build import build_lock, cache_dir
except ImportError:  # pragma: no cover - run from a checkout without install
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from localcluster.build import build_lock, cache_dir  # type: ignore

#: The source snapshot: ``$COGATE_COSCHEDULING_SRC``, else the repository's
#: ``third_party/scheduler-plugins-v0.34.7`` (kubernetes-sigs/scheduler-plugins at tag v0.34.7;
#: see ``third_party/README.md``).
DEFAULT_SRC = Path(os.environ.get("COGATE_COSCHEDULING_SRC")
                   or Path(__file__).resolve().parents[1] / "third_party" / "scheduler-plugins-v0.34.7")
# binary name -> Go package inside the snapshot
BINARIES = {"kube-scheduler": "./cmd/scheduler", "controller": "./cmd/controller"}


def version_of(src: Path) -> str:
    """The release tag in the snapshot directory's name (``v0.34.7``), else ``unknown``."""
    m = re.search(r"v\d+\.\d+\.\d+", src.name)
    return m.group(0) if m else "unknown"


def bin_dir(src: Path) -> Path:
    """Cache directory for the binaries built from ``src`` (keyed by go.mod digest + version)."""
    version = version_of(src)
    digest = hashlib.sha256((src / "go.mod").read_bytes() + version.encode()).hexdigest()[:12]
    return cache_dir() / "bin" / f"scheduler-plugins-{version}-{digest}"


def ensure_built(src: Path = DEFAULT_SRC, log=sys.stderr, names: tuple[str, ...] = tuple(BINARIES)) -> dict[str, Path]:
    """Build the binaries ``names`` (of :data:`BINARIES`: the scheduler and the PodGroup
    controller) if missing, one build at a time per snapshot (``build_lock``); returns name -> path.

    Raises FileNotFoundError when ``src`` has no go.mod, KeyError for a name not in BINARIES,
    RuntimeError when a build fails (with the command and its output tail).
    """
    src = Path(src).resolve()
    if not (src / "go.mod").is_file():
        raise FileNotFoundError(f"{src} is not a scheduler-plugins source snapshot (no go.mod)")
    out = bin_dir(src)
    paths = {name: out / name for name in names if BINARIES[name]}
    if all(p.is_file() for p in paths.values()):
        return paths
    with build_lock(out.name):
        return _build(src, out, paths, log)


def _build(src: Path, out: Path, paths: dict[str, Path], log) -> dict[str, Path]:
    missing = [n for n, p in paths.items() if not p.is_file()]
    if not missing:
        return paths
    work = cache_dir() / "build" / out.name
    if not (work / "go.mod").is_file():
        tmp = work.with_suffix(".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src, tmp)
        for p in [tmp, *tmp.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)
        shutil.rmtree(work, ignore_errors=True)
        tmp.rename(work)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CGO_ENABLED="0", GOTOOLCHAIN="local", GOFLAGS="-mod=mod")
    for name in missing:
        cmd = ["go", "build", "-trimpath", "-o", str(paths[name]) + ".tmp", BINARIES[name]]
        print(f"+ (cd {work} && {' '.join(cmd)})", file=log, flush=True)
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            tail = "\n".join(proc.stdout.splitlines()[-40:])
            raise RuntimeError(f"`{' '.join(cmd)}` in {work} failed ({proc.returncode}):\n{tail}")
        Path(str(paths[name]) + ".tmp").rename(paths[name])
        print(f"  built {name} in {time.monotonic() - t0:.0f} s", file=log, flush=True)
    return paths


if __name__ == "__main__":
    print(ensure_built(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SRC))
