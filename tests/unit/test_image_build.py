"""Pure parts of the image build (localcluster/host/image.py): pip settings passed into the build,
and the files whose hash decides whether the image is rebuilt."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cogate.localcluster.host import image


def test_pip_environment_wins_over_files_and_host_only_keys_are_dropped():
    text = "\n".join([
        "global.cert='/etc/ssl/certs/ca-certificates.crt'",
        "global.timeout='60'",
        "install.user='yes'",
        "global.require-virtualenv='true'",
        ":env:.timeout='180'",
        ":env:.find-links='/opt/wheels /srv/more'",
        "not a setting",
    ])
    assert image.parse_pip_config_list(text) == {
        "global": {"cert": "/etc/ssl/certs/ca-certificates.crt", "timeout": "180",
                   "find-links": "/opt/wheels /srv/more"},
    }


def test_pip_conf_names_existing_host_paths_to_mount(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    conf, paths = image.pip_conf({"global": {"cert": str(ca), "find-links": f"{tmp_path} /no/such/dir",
                                             "timeout": "180"}})
    assert conf.splitlines() == ["[global]", f"cert = {ca}", f"find-links = {tmp_path} /no/such/dir",
                                 "timeout = 180"]
    assert paths == [str(ca), str(tmp_path)]


def _context(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_inputs_are_what_copy_takes_minus_dockerignore(tmp_path):
    _context(tmp_path, {
        "Dockerfile": "FROM base AS build\nCOPY a.txt pkg/ ./\nCOPY --from=build /x /y\nRUN true\n",
        ".dockerignore": "**/__pycache__\n**/*.pyc\n",
        "a.txt": "a", "pkg/m.py": "m", "pkg/__pycache__/m.cpython-311.pyc": "c", "pkg/sub/n.py": "n",
        "unrelated.txt": "u",
    })
    names = [p.relative_to(tmp_path).as_posix() for p in image.dockerfile_inputs(tmp_path)]
    assert names == [".dockerignore", "Dockerfile", "a.txt", "pkg/m.py", "pkg/sub/n.py"]


def test_inputs_hash_changes_with_a_copied_file_or_the_base_only(tmp_path):
    _context(tmp_path, {"Dockerfile": "FROM b\nCOPY src/ src/\n", "src/x.py": "1", "other.txt": "o"})
    first = image.inputs_hash(tmp_path, "base:1")
    (tmp_path / "other.txt").write_text("changed")
    assert image.inputs_hash(tmp_path, "base:1") == first
    assert image.inputs_hash(tmp_path, "base:2") != first
    (tmp_path / "src/x.py").write_text("2")
    assert image.inputs_hash(tmp_path, "base:1") != first


def test_the_repository_dockerfile_keeps_the_public_base_as_default():
    text = (image.repo_root() / "Dockerfile").read_text()
    # the official image at one Python patch release on one Debian release (a digest may follow)
    assert re.search(r"^ARG BASE_IMAGE=python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?$", text, re.M)
    froms = [ln.split()[1] for ln in text.splitlines() if ln.startswith("FROM ")]
    assert froms == ["${BASE_IMAGE}", "${BASE_IMAGE}"]


@pytest.mark.parametrize("patterns, path, ignored", [
    (["*", "!src/"], "src/a/b.py", False),
    (["*", "!src/"], "srcs/a.py", True),
    (["*", "!src/"], "other/src/a.py", True),
    (["*", "!src/", "**/__pycache__"], "src/a/__pycache__/b.pyc", True),
    (["*", "!src/", "**/*.pyc"], "src/b.pyc", True),
    (["*", "!src/", "**/*.pyc", "!src/keep.pyc"], "src/keep.pyc", False),
    (["*.txt"], "a.txt", True),
    (["*.txt"], "dir/a.txt", False),  # Docker: `*` stays within one path element, from the root
    (["dir/*/x"], "dir/a/x", True),
    (["dir/*/x"], "dir/a/b/x", False),
    (["/dir/"], "dir/a", True),  # leading and trailing slashes do not matter
    (["d?r"], "dir/a", True),
    (["**/x"], "x", True),
    (["a.b"], "axb", False),  # a dot is a dot
])
def test_dockerignore_patterns_are_matched_as_docker_does(patterns, path, ignored):
    assert image._ignored(path, patterns) is ignored


def test_the_dockerignore_lets_in_exactly_what_the_dockerfile_copies():
    root = image.repo_root()
    copied = set()
    for line in (root / "Dockerfile").read_text().splitlines():
        words = line.split()
        if words and words[0] == "COPY" and not any(w.startswith("--from") for w in words):
            copied |= {w.rstrip("/") for w in words[1:-1]}
    allowed = {ln[1:].rstrip("/") for ln in image._dockerignore(root) if ln.startswith("!")}
    assert allowed == copied, "every COPY source allowed in .dockerignore, and nothing else"
    patterns = image._dockerignore(root)
    for outside in (".git/HEAD", ".venv/bin/python", "tests/conftest.py", "localcluster/build.py",
                    "third_party/README.md", "charts/cogate/values.yaml", "docs/semantics.md"):
        assert image._ignored(outside, patterns), outside
    inputs = {p.relative_to(root).parts[0] for p in image.dockerfile_inputs(root)}
    assert inputs == copied | {"Dockerfile", ".dockerignore"}
    assert not [p for p in image.dockerfile_inputs(root) if "__pycache__" in p.parts or p.suffix == ".pyc"]
