"""Build cogate's container image from the repository's ``Dockerfile`` with buildah, offline.

No container registry is reachable where the tests run (only package registries), so the
Dockerfile's public base (``python:3.11.x-slim-bookworm``) cannot be pulled. :func:`build_image` builds
the unchanged Dockerfile with a locally made stand-in for that base, passed as the build
argument ``BASE_IMAGE`` (whose default stays the public image):

1. **Base image** (:func:`ensure_base_image`): a Debian 12 (``bookworm``) root filesystem made
   with ``mmdebstrap`` from the host's apt sources (``/etc/apt/sources.list.d/*.sources``,
   ``/etc/apt/sources.list``), minbase variant plus :data:`BASE_PACKAGES`. Debian 12's Python
   is 3.11, like the public base. A virtual environment at ``/usr/local`` puts ``python`` and
   ``pip`` on the default ``PATH`` as the public image does (Debian's own ``pip`` refuses to
   install into the system Python, PEP 668). Cached as a tarball per release + package list +
   apt sources in ``<cache>/images/base/`` and as the buildah image
   ``localhost/cogate-base:bookworm-<hash>``.
2. **Build**: ``buildah build --isolation chroot --layers=false --pull=never`` (chroot
   isolation needs no OCI runtime). No per-step cache: the ``pip wheel`` step's inputs are
   the files the Dockerfile copies, i.e. the image's inputs hash below, so a step cache would
   only hit where the whole image is cached already, and each rebuild would leave ~200 MB of
   intermediate layers behind. ``pip`` inside the build needs the host's
   package-index settings: every setting ``pip config list`` reports on the host (its
   ``PIP_*`` environment and config files) is written to a private temporary ``pip.conf``
   bind-mounted read-only at ``/etc/pip.conf`` for the ``RUN`` steps only, and host paths
   named in those settings (a CA bundle, a find-links directory) are bind-mounted read-only
   at the same paths. Mounts are not part of any layer: the final image carries none of
   these settings (``/etc/pip.conf`` stays as the empty file buildah leaves for a mount point).
   ``HTTP_PROXY``/``HTTPS_PROXY``/``NO_PROXY`` (predefined build arguments) are passed through.
3. **Output**: the image ``localhost/cogate:<appVersion>`` in buildah's local storage
   (``appVersion`` from ``charts/cogate/Chart.yaml``, the tag the chart uses by default) and an
   OCI archive ``<cache>/images/cogate-<appVersion>-<inputs hash>.tar`` for a node's
   containerd: ``ctr -n k8s.io images import <archive>`` names it
   ``docker.io/library/cogate:<appVersion>`` (the archive's index carries containerd's
   ``io.containerd.image.name`` annotation), which is what a kubelet resolves the chart's
   default ``cogate:<appVersion>`` to.

The inputs hash covers the Dockerfile, ``.dockerignore``, every file its ``COPY``
instructions take from the build context, and the base image. When the archive for the
current hash exists and buildah's ``cogate:<appVersion>`` carries the same hash (label
:data:`INPUTS_LABEL`), :func:`build_image` returns at once.

Tools: ``buildah`` and ``mmdebstrap`` (Debian packages). :func:`ensure_tools` installs them
with ``apt-get`` when missing and running as root (CI runs as root on a fresh machine; this
mirrors how the Go binaries are built on first use), else raises :class:`ImageBuildError`
naming the packages. buildah uses its configured storage driver (overlay by default; set
``STORAGE_DRIVER=vfs`` where overlay is unavailable).

Run ``python -m cogate.localcluster.host.image`` (``make image``).
"""

from __future__ import annotations

import argparse
import ast
import glob
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from .. import build
from . import debian

__all__ = [
    "ImageBuildError",
    "ImageBuild",
    "build_image",
    "ensure_base_image",
    "ensure_tools",
    "app_version",
    "images_dir",
    "repo_root",
    "CONTAINERD_NAME_ANNOTATION",
    "image_config",
]

#: Debian release of the stand-in base image; its Python (3.11) matches ``python:3.11-slim``.
DEBIAN_RELEASE = "bookworm"
#: Packages added to the minbase variant: the interpreter, venv + ensurepip (pip, setuptools
#: wheels), and the CA bundle the public base carries too. ``useradd``/``groupadd`` (the
#: Dockerfile runs them) come with minbase (package ``passwd``).
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates")
#: Commands run in the new root filesystem (mmdebstrap customize hooks).
BASE_CUSTOMIZE = ("python3 -m venv /usr/local",)
#: Documentation and translations are left out of the base, as in the public slim image.
BASE_DPKG_OPTS = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
)
#: Image configuration of the base, as the public image sets it.
BASE_ENV = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8")
BASE_REPOSITORY = "localhost/cogate-base"
#: Repository of the built image in buildah's storage (``cogate:<v>`` resolves to it).
IMAGE_REPOSITORY = "localhost/cogate"
#: Name containerd gives the image on import: the chart's default ``cogate:<appVersion>``
#: as a kubelet normalises it.
CONTAINERD_REPOSITORY = "docker.io/library/cogate"
#: containerd's image-name annotation (``images.AnnotationImageName``), read by ``ctr images import``.
CONTAINERD_NAME_ANNOTATION = "io.containerd.image.name"
#: Image label holding the inputs hash, to tell whether the image in storage is current.
INPUTS_LABEL = "io.cogate.build-inputs"
#: Tools the build runs, and the Debian package of each.
TOOLS = {"buildah": "buildah", "mmdebstrap": "mmdebstrap"}
#: pip settings never passed into the build: they describe the host's own installation.
PIP_HOST_ONLY = frozenset({"user", "target", "prefix", "root", "require-virtualenv", "break-system-packages"})
#: Build arguments Docker and buildah define without an ``ARG`` line.
PROXY_ARGS = ("HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY", "ALL_PROXY",
              "http_proxy", "https_proxy", "ftp_proxy", "no_proxy", "all_proxy")


class ImageBuildError(RuntimeError):
    """A tool is missing or a build step failed; the message has the command and its output tail."""


@dataclass(frozen=True)
class ImageBuild:
    """Result of :func:`build_image`.

    ``archive``: the OCI archive; ``tag``: the image in buildah's storage; ``containerd_name``:
    the name ``ctr images import`` gives it; ``inputs``: the inputs hash; ``cached``: nothing was
    built; ``seconds``: wall time of this call; ``image_bytes``: uncompressed size of the
    image's layers; ``archive_bytes``: size of the archive (compressed layers).
    """

    archive: Path
    tag: str
    containerd_name: str
    base: str
    inputs: str
    cached: bool
    seconds: float
    image_bytes: int
    archive_bytes: int


# ------------------------------------------------------------------ locations

def repo_root() -> Path:
    """The checkout holding the Dockerfile (this module is ``<root>/localcluster/host/image.py``).

    Raises :class:`ImageBuildError` when cogate runs from an installed wheel without sources.
    """
    root = Path(__file__).resolve().parents[2]
    if not (root / "Dockerfile").is_file():
        raise ImageBuildError(f"no Dockerfile in {root}: building the image needs a source checkout")
    return root


def images_dir() -> Path:
    """``<cache dir>/images``: base tarballs, OCI archives and their build records."""
    return build.cache_dir() / "images"


def app_version(root: Path | None = None) -> str:
    """``appVersion`` of ``charts/cogate/Chart.yaml``: the image tag the chart uses by default."""
    chart = yaml.safe_load(((root or repo_root()) / "charts" / "cogate" / "Chart.yaml").read_text())
    return str(chart["appVersion"])


# ---------------------------------------------------------------------- tools

def _run(cmd: list[str], *, log=None, env: dict[str, str] | None = None, cwd: Path | None = None,
         capture: bool = False) -> str:
    """Run ``cmd``; output goes to ``log`` (or is returned with ``capture``). Raises ImageBuildError."""
    if log is not None:
        print("+ " + " ".join(cmd), file=log, flush=True)
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE if capture else subprocess.STDOUT, text=True)
    if not capture and log is not None:
        log.write(proc.stdout)
        log.flush()
    if proc.returncode != 0:
        out = (proc.stdout or "") + (proc.stderr or "" if capture else "")
        tail = "\n".join(out.splitlines()[-40:])
        raise ImageBuildError(f"`{' '.join(cmd)}` failed with exit code {proc.returncode}:\n{tail}")
    return proc.stdout


def ensure_tools(tools: dict[str, str] | None = None, *, install: bool = True, log=sys.stderr) -> None:
    """Make sure ``tools`` (``{command: Debian package}``, default :data:`TOOLS`: ``buildah`` and
    ``mmdebstrap``) are on ``PATH``.

    Missing ones are installed with :func:`.debian.ensure_debian_packages` (with recommended
    packages: tested that way, and all are small) when ``install`` is true; otherwise, or when
    that fails, :class:`ImageBuildError` names the Debian packages to install.
    """
    wanted = {pkg: tool for tool, pkg in (tools or TOOLS).items()}
    if not install:
        missing = sorted(pkg for pkg, tool in wanted.items() if shutil.which(tool) is None)
        if missing:
            raise ImageBuildError(f"the image build or its checks need {', '.join(missing)} (Debian packages); "
                                  f"install them with `apt-get install {' '.join(missing)}` as root")
        return
    try:
        debian.ensure_debian_packages(wanted, "the image build or its checks", recommends=True, log=log)
    except debian.MissingPackages as exc:
        raise ImageBuildError(str(exc)) from exc


def _image_exists(ref: str) -> bool:
    return subprocess.run(["buildah", "inspect", "--type", "image", ref], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def _inspect(ref: str) -> dict:
    return json.loads(_run(["buildah", "inspect", "--type", "image", ref], capture=True))


def _labels(ref: str) -> dict[str, str]:
    return (_inspect(ref).get("OCIv1", {}).get("config", {}) or {}).get("Labels") or {}


def image_config(ref: str) -> dict:
    """OCI image configuration (``config`` of the image config blob: Env, User, Entrypoint, ...)."""
    return _inspect(ref).get("OCIv1", {}).get("config", {}) or {}


def _uncompressed_layers_size(layout: Path) -> int:
    """Sum of the uncompressed sizes of the image's layers in an OCI layout directory, in bytes."""
    index = json.loads((layout / "index.json").read_text())
    total = 0
    for desc in index["manifests"]:
        manifest = json.loads((layout / "blobs" / desc["digest"].replace(":", "/")).read_bytes())
        for layer in manifest["layers"]:
            opener = gzip.open if layer["mediaType"].endswith("gzip") else open
            with opener(layout / "blobs" / layer["digest"].replace(":", "/"), "rb") as fh:
                while chunk := fh.read(1 << 20):
                    total += len(chunk)
    return total


# ----------------------------------------------------------------- base image

def _apt_sources() -> list[Path]:
    """The host's apt source files (deb822 ``*.sources`` and one-line ``*.list``), in apt's order."""
    files = [Path("/etc/apt/sources.list")] + sorted(Path(p) for p in glob.glob("/etc/apt/sources.list.d/*"))
    return [f for f in files if f.is_file() and f.suffix in (".list", ".sources") and f.read_text().strip()]


def _base_key(sources: list[Path]) -> str:
    h = hashlib.sha256()
    for part in (DEBIAN_RELEASE, *BASE_PACKAGES, *BASE_CUSTOMIZE, *BASE_DPKG_OPTS, *BASE_ENV):
        h.update(part.encode() + b"\0")
    for src in sources:  # the mirror (a snapshot date, say) decides which packages come
        h.update(src.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def ensure_base_image(*, log=sys.stderr) -> str:
    """The stand-in base image's reference in buildah's storage, made if missing.

    Made once per Debian release + package list + apt sources: ``mmdebstrap`` (root mode) writes
    a tarball to ``<cache>/images/base/``; it is imported with ``buildah from scratch`` +
    ``buildah add`` + ``buildah commit``. Raises :class:`ImageBuildError`.
    """
    sources = _apt_sources()
    if not sources:
        raise ImageBuildError("no apt sources in /etc/apt/sources.list or /etc/apt/sources.list.d/: "
                              "mmdebstrap needs a Debian mirror")
    key = _base_key(sources)
    ref = f"{BASE_REPOSITORY}:{DEBIAN_RELEASE}-{key}"
    if _image_exists(ref):
        return ref
    base_dir = images_dir() / "base"
    base_dir.mkdir(parents=True, exist_ok=True)
    tarball = base_dir / f"{DEBIAN_RELEASE}-{key}.tar"
    if not tarball.is_file():
        with tempfile.TemporaryDirectory(prefix="cogate-base-") as tmp:
            # mmdebstrap reads a mirror argument that names a file as that file's content.
            mirrors = [str(s) for s in sources]
            part = Path(tmp) / "rootfs.tar"
            cmd = ["mmdebstrap", "--variant=minbase", "--mode=root", "--format=tar",
                   "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
                   # A snapshot mirror's Release files are past their Valid-Until date.
                   "--aptopt=Acquire::Check-Valid-Until \"false\"",
                   f"--include={','.join(BASE_PACKAGES)}",
                   *[f"--dpkgopt={o}" for o in BASE_DPKG_OPTS],
                   *[f"--customize-hook=chroot \"$1\" {c}" for c in BASE_CUSTOMIZE],
                   DEBIAN_RELEASE, str(part), *mirrors]
            _run(cmd, log=log)
            shutil.move(part, tarball)
    container = _run(["buildah", "from", "--pull=never", "scratch"], capture=True).strip()
    try:
        _run(["buildah", "add", container, str(tarball), "/"], capture=True)
        config = ["buildah", "config", "--cmd", '["python3"]', "--label", f"{INPUTS_LABEL}={key}"]
        for env in BASE_ENV:
            config += ["--env", env]
        _run([*config, container], capture=True)
        _run(["buildah", "commit", "--rm", "-q", container, ref], capture=True, log=log)
    except ImageBuildError:
        subprocess.run(["buildah", "rm", container], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        raise
    return ref


# ------------------------------------------------------------ pip settings

def host_pip_settings(python: str = sys.executable) -> dict[str, dict[str, str]]:
    """pip's settings on this host, ``{section: {key: value}}``: :func:`parse_pip_config_list`
    of ``<python> -m pip config list``."""
    out = subprocess.run([python, "-m", "pip", "config", "list"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    return parse_pip_config_list(out)


def parse_pip_config_list(text: str) -> dict[str, dict[str, str]]:
    """``pip config list`` output (lines ``section.key='value'``) as ``{section: {key: value}}``.

    ``PIP_*`` variables appear as section ``:env:`` and become ``global`` settings that win
    over the files' ``global`` ones (pip's own precedence); keys in :data:`PIP_HOST_ONLY`
    are left out.
    """
    settings: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        name, sep, raw = line.partition("=")
        if not sep or "." not in name:
            continue
        section, _, key = name.rpartition(".")
        from_env = section == ":env:"
        section = "global" if from_env else section
        try:
            value = str(ast.literal_eval(raw))
        except (ValueError, SyntaxError):
            value = raw
        if key in PIP_HOST_ONLY:
            continue
        target = settings.setdefault(section, {})
        if from_env or key not in target:
            target[key] = value
    return settings


def pip_conf(settings: dict[str, dict[str, str]]) -> tuple[str, list[str]]:
    """``pip.conf`` text and the host paths it names that exist (to bind-mount read-only)."""
    lines: list[str] = []
    paths: list[str] = []
    for section in sorted(settings):
        lines.append(f"[{section}]")
        for key, value in sorted(settings[section].items()):
            lines.append(f"{key} = {value}")
            for word in value.split():
                if word.startswith("/") and os.path.exists(word) and word not in paths:
                    paths.append(word)
        lines.append("")
    return "\n".join(lines), paths


# --------------------------------------------------------------------- inputs

def _dockerignore(root: Path) -> list[str]:
    path = root / ".dockerignore"
    if not path.is_file():
        return []
    return [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def _pattern(pat: str) -> re.Pattern:
    """A ``.dockerignore`` pattern as a regular expression over a slash-separated relative path:
    ``*`` and ``?`` within one path element, ``**`` any number of elements (Docker's syntax, moby
    ``patternmatcher``; character classes are taken literally). Leading and trailing ``/`` are dropped."""
    pat, out, i = pat.strip("/"), "", 0
    while i < len(pat):
        if pat.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pat.startswith("**", i):
            out, i = out + ".*", i + 2
        else:
            out, i = out + {"*": "[^/]*", "?": "[^/]"}.get(pat[i], re.escape(pat[i])), i + 1
    return re.compile(out + r"\Z")


def _ignored(rel: str, patterns: list[str]) -> bool:
    """Whether ``.dockerignore`` ``patterns`` leave the file ``rel`` out of the build context, as Docker
    and buildah decide: a pattern matches a path or one of its parent directories, the last matching
    pattern wins, and ``!pattern`` lets a path back in (so ``*`` then ``!src/`` is an allow-list)."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[:k]) for k in range(1, len(parts) + 1)]
    ignored = False
    for pat in patterns:
        allow = pat.startswith("!")
        regex = _pattern(pat[1:] if allow else pat)
        if any(regex.match(p) for p in prefixes):
            ignored = not allow
    return ignored


def dockerfile_inputs(root: Path) -> list[Path]:
    """Files the Dockerfile's ``COPY`` instructions take from the build context, plus the
    Dockerfile and ``.dockerignore`` themselves, sorted; ``.dockerignore`` patterns apply.

    ``COPY --from=<stage>`` copies between stages and takes nothing from the context.
    """
    patterns = _dockerignore(root)
    files: set[Path] = {root / "Dockerfile"}
    if (root / ".dockerignore").is_file():
        files.add(root / ".dockerignore")
    for line in (root / "Dockerfile").read_text().splitlines():
        words = line.split()
        if not words or words[0].upper() not in ("COPY", "ADD"):
            continue
        args = [w for w in words[1:] if not w.startswith("--")]
        if any(w.startswith("--from") for w in words[1:]):
            continue
        for src in args[:-1]:
            for match in sorted(glob.glob(str(root / src))):
                p = Path(match)
                candidates = [p] if p.is_file() else [q for q in p.rglob("*") if q.is_file()]
                for q in candidates:
                    if not _ignored(q.relative_to(root).as_posix(), patterns):
                        files.add(q)
    return sorted(files)


def inputs_hash(root: Path, base_ref: str) -> str:
    """SHA-256 (16 hex digits) over the build's inputs: :func:`dockerfile_inputs` (path, mode,
    content) and the base image reference (which carries its own hash)."""
    h = hashlib.sha256(base_ref.encode() + b"\0")
    for f in dockerfile_inputs(root):
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(b"x" if os.access(f, os.X_OK) else b"-")
        h.update(f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------- export

def _tar_dir(src: Path, dest: Path) -> None:
    """Tar ``src``'s contents into ``dest`` reproducibly (sorted names, zero times, root owner)."""
    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(src.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(src).as_posix())
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if info.isfile():
                with open(path, "rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)


def export_archive(ref: str, dest: Path, *, tag: str, log=sys.stderr) -> int:
    """Write ``ref`` as an OCI archive at ``dest`` (layers gzip-compressed) whose index names
    the image ``docker.io/library/cogate:<tag>`` for containerd (:data:`CONTAINERD_NAME_ANNOTATION`);
    ``org.opencontainers.image.ref.name`` is ``tag``. Returns the image's uncompressed size in bytes."""
    with tempfile.TemporaryDirectory(prefix="cogate-oci-", dir=dest.parent) as tmp:
        layout = Path(tmp) / "layout"
        _run(["buildah", "push", "-q", "--format", "oci", "--remove-signatures", ref, f"oci:{layout}:{tag}"],
             log=log)
        index_path = layout / "index.json"
        index = json.loads(index_path.read_text())
        for desc in index.get("manifests", []):
            desc.setdefault("annotations", {})[CONTAINERD_NAME_ANNOTATION] = f"{CONTAINERD_REPOSITORY}:{tag}"
        index_path.write_text(json.dumps(index, separators=(",", ":")))
        part = Path(tmp) / "image.tar"
        _tar_dir(layout, part)
        os.replace(part, dest)
        return _uncompressed_layers_size(layout)


# ----------------------------------------------------------------------- build

def build_image(*, root: Path | None = None, force: bool = False, log=sys.stderr) -> ImageBuild:
    """Build (or find cached) the image and its OCI archive; see the module docstring.

    ``force`` rebuilds even when the archive and the image are current. Old archives of
    the same version are removed. Next to the archive, ``<archive>.json`` records the inputs,
    sizes and the seconds the build took. Raises :class:`ImageBuildError`.
    """
    t0 = time.monotonic()
    root = root or repo_root()
    ensure_tools(log=log)
    version = app_version(root)
    tag = f"{IMAGE_REPOSITORY}:{version}"
    base = ensure_base_image(log=log)
    key = inputs_hash(root, base)
    out_dir = images_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    archive = out_dir / f"cogate-{version}-{key}.tar"
    record = archive.with_suffix(".json")
    cached = (not force and archive.is_file() and record.is_file() and _image_exists(tag)
              and _labels(tag).get(INPUTS_LABEL) == key)
    if cached:
        image_bytes = json.loads(record.read_text())["image_bytes"]
    else:
        previous = _inspect(tag).get("FromImageID") if _image_exists(tag) else None
        with tempfile.TemporaryDirectory(prefix="cogate-pip-") as tmp:
            conf, paths = pip_conf(host_pip_settings())
            conf_path = Path(tmp) / "pip.conf"
            conf_path.touch(mode=0o600)
            conf_path.write_text(conf)
            cmd = ["buildah", "build", "--isolation", "chroot", "--layers=false", "--pull=never",
                   "--build-arg", f"BASE_IMAGE={base}", "--label", f"{INPUTS_LABEL}={key}",
                   "--volume", f"{conf_path}:/etc/pip.conf:ro"]
            for p in paths:
                cmd += ["--volume", f"{p}:{p}:ro"]
            for name in PROXY_ARGS:
                if os.environ.get(name):
                    cmd += ["--build-arg", name]  # value taken from the environment, not written out
            cmd += ["-f", str(root / "Dockerfile"), "-t", tag, str(root)]
            _run(cmd, log=log, cwd=root)
        if previous and previous != _inspect(tag).get("FromImageID"):
            # the image this tag named before, now untagged
            subprocess.run(["buildah", "rmi", previous], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for old in out_dir.glob(f"cogate-{version}-*"):
            if old.suffix in (".tar", ".json") and old.stem != archive.stem:
                old.unlink()
        image_bytes = export_archive(tag, archive, tag=version, log=log)
        record.write_text(json.dumps({"tag": tag, "base": base, "inputs": key, "image_bytes": image_bytes,
                                      "archive_bytes": archive.stat().st_size,
                                      "build_seconds": round(time.monotonic() - t0, 1)}, indent=2) + "\n")
    return ImageBuild(archive=archive, tag=tag, containerd_name=f"{CONTAINERD_REPOSITORY}:{version}",
                      base=base, inputs=key, cached=cached, seconds=time.monotonic() - t0,
                      image_bytes=image_bytes, archive_bytes=archive.stat().st_size)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild the image (not the base) even if cached")
    parser.add_argument("--print-path", action="store_true", help="print only the archive path")
    args = parser.parse_args(argv)
    try:
        result = build_image(force=args.force)
    except ImageBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.print_path:
        print(result.archive)
        return 0
    mib = 1024 * 1024
    print(f"{result.tag}: {'cached' if result.cached else 'built'} in {result.seconds:.1f}s, "
          f"{result.image_bytes / mib:.0f} MiB uncompressed (base {result.base})")
    print(f"OCI archive ({result.archive_bytes / mib:.0f} MiB): {result.archive}")
    print(f"  load into a node: ctr -n k8s.io images import {result.archive}  -> {result.containerd_name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
