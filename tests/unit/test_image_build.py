"""Pure parts of the image build (localcluster/host/image.py): pip settings passed into the build,
and the files whose hash decides whether the image is rebuilt."""

from __future__ import annotations

from pathlib import Path

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
    assert "ARG BASE_IMAGE=python:3.11-slim" in text
    froms = [ln.split()[1] for ln in text.splitlines() if ln.startswith("FROM ")]
    assert froms == ["${BASE_IMAGE}", "${BASE_IMAGE}"]
