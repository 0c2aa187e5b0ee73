"""Container images made here, without a registry: the real node's pause image as an OCI archive.

No image can be pulled on the machines cogate is tested on, so the real node's sandbox
("pause") image is built locally: ``pause/main.go`` (Go standard library only) compiled
with ``CGO_ENABLED=0`` into one static binary, packed by :func:`write_oci_archive` as a
one-layer OCI image (``/pause``, entry point ``["/pause"]``), named
``localhost/cogate/pause:<first 12 hex digits of the source's sha256>``. The same binary is
the probe of the end-to-end tests (``/pause apicheck``, ``/pause webhook CERT KEY``; see
``pause/main.go``).

Both the binary and the archive are cached in ``$COGATE_CACHE_DIR`` (``bin/pause-<tag>/``,
``images/pause-<tag>.tar``): built once per source version, in about 10 s cold.
:meth:`cogate.localcluster.cluster.LocalCluster.load_image` imports any OCI or Docker
archive into the real node's containerd.

Run ``python -m cogate.localcluster.host.pauseimage`` to build it ahead (``make binaries``).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import platform
import shutil
import sys
import tarfile
from pathlib import Path
from typing import Mapping

from .. import build

__all__ = ["PAUSE_SOURCE", "pause_tag", "pause_ref", "ensure_pause_image", "write_oci_archive"]

#: Source of the pause/probe binary.
PAUSE_SOURCE = Path(__file__).with_name("pause") / "main.go"
#: Repository part of the pause image's reference.
PAUSE_REPOSITORY = "localhost/cogate/pause"

_GOARCH = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64", "amd64": "amd64"}


def _goarch() -> str:
    machine = platform.machine().lower()
    if machine not in _GOARCH:
        raise build.BuildError(f"unsupported machine {machine!r} for the pause image")
    return _GOARCH[machine]


def pause_tag() -> str:
    """Tag of the pause image: first 12 hex digits of sha256(main.go + GOARCH)."""
    return hashlib.sha256(PAUSE_SOURCE.read_bytes() + _goarch().encode()).hexdigest()[:12]


def pause_ref() -> str:
    """Full reference, e.g. ``localhost/cogate/pause:0123456789ab``."""
    return f"{PAUSE_REPOSITORY}:{pause_tag()}"


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _layer(files: Mapping[str, tuple[bytes, int]]) -> bytes:
    """Uncompressed tar of ``files`` ({path in image: (content, mode)}), reproducible (mtime 0, root)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            data, mode = files[name]
            info = tarfile.TarInfo(name.lstrip("/"))
            info.size, info.mode, info.mtime, info.uid, info.gid = len(data), mode, 0, 0, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def write_oci_archive(path: Path, ref: str, files: Mapping[str, tuple[bytes, int]],
                      entrypoint: list[str], arch: str | None = None) -> Path:
    """Write a one-layer OCI image archive (``oci-layout``, ``index.json``, ``blobs/sha256/*``) to ``path``.

    ``ref``: the image name containerd gives it on import (annotation ``io.containerd.image.name``).
    ``files``: {absolute path in the image: (content bytes, file mode)}. Returns ``path``.
    The archive is byte-for-byte reproducible for the same input.
    """
    arch = arch or _goarch()
    layer_tar = _layer(files)
    layer_gz = gzip.compress(layer_tar, mtime=0)
    config = json.dumps({
        "architecture": arch, "os": "linux",
        "config": {"Entrypoint": entrypoint, "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [_sha(layer_tar)]},
        "history": [{"created_by": "cogate.localcluster.host.pauseimage.write_oci_archive"}],
    }, sort_keys=True).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": _sha(config),
                   "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": _sha(layer_gz),
                    "size": len(layer_gz)}],
    }, sort_keys=True).encode()
    index = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": _sha(manifest),
            "size": len(manifest), "platform": {"architecture": arch, "os": "linux"},
            "annotations": {"io.containerd.image.name": ref,
                            "org.opencontainers.image.ref.name": ref.rpartition(":")[2]},
        }],
    }, sort_keys=True).encode()
    entries = {"oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(), "index.json": index}
    for blob in (layer_gz, config, manifest):
        entries[f"blobs/sha256/{_sha(blob).split(':', 1)[1]}"] = blob
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for name in ("oci-layout", "index.json", *sorted(n for n in entries if n.startswith("blobs/"))):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(entries[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(entries[name]))
    tmp.replace(path)
    return path


def ensure_pause_image(log=sys.stderr) -> tuple[Path, str]:
    """Build (or find cached) the pause binary and its OCI archive; returns ``(archive path, ref)``.

    Raises :class:`cogate.localcluster.build.BuildError` when ``go build`` fails.
    """
    tag = pause_tag()
    ref = f"{PAUSE_REPOSITORY}:{tag}"
    archive = build.cache_dir() / "images" / f"pause-{tag}.tar"
    if archive.is_file():
        return archive, ref
    binary = build.cache_dir() / "bin" / f"pause-{tag}" / "pause"
    work = build.cache_dir() / "build" / f"pause-{tag}"
    with build.build_lock(f"pause-{tag}"):
        if archive.is_file():
            return archive, ref
        if not binary.is_file():
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            shutil.copyfile(PAUSE_SOURCE, work / "main.go")
            (work / "go.mod").write_text("module cogate.local/pause\n\ngo 1.26\n")
            binary.parent.mkdir(parents=True, exist_ok=True)
            build.run_go(["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(binary), "."], work, log)
            shutil.rmtree(work, ignore_errors=True)
        write_oci_archive(archive, ref, {"/pause": (binary.read_bytes(), 0o755)}, ["/pause"])
    return archive, ref


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build (or find cached) the real node's pause image, "
                                                 "an OCI archive, and print where it is.")
    parser.parse_args(argv)
    try:
        archive, ref = ensure_pause_image()
    except build.BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"pause image {ref} -> {archive}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
