"""One version for the package, the chart and the image, and a new chart version for every change
of the chart's values or templates (issue 30 item 1; the rules and commands: ``tools/version.py``)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

import cogate
from cogate.localcluster.host import image

REPO = Path(__file__).resolve().parents[2]


def _load_tool():
    spec = importlib.util.spec_from_file_location("cogate_version_tool", REPO / "tools" / "version.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and friends look modules up by name
    spec.loader.exec_module(module)
    return module


version = _load_tool()


@pytest.fixture
def repo(tmp_path) -> Path:
    """A copy of what tools/version.py reads and writes."""
    for rel in (version.PACKAGE_INIT, version.FINGERPRINTS):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / rel, tmp_path / rel)
    shutil.copytree(REPO / version.CHART, tmp_path / version.CHART)
    return tmp_path


def test_package_chart_and_image_share_one_semver():
    chart = yaml.safe_load((REPO / "charts" / "cogate" / "Chart.yaml").read_text())
    assert version.SEMVER.match(cogate.__version__)
    assert cogate.__version__ == chart["version"] == chart["appVersion"] == version.package_version()
    assert image.app_version(REPO) == cogate.__version__  # `make image` tags cogate:<this>
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" in project["project"]["dynamic"] and "version" not in project["project"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "cogate.__version__"}


def test_the_changelog_has_a_section_for_the_current_version():
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in changelog
    assert f"## [{cogate.__version__}] - " in changelog, f"CHANGELOG.md has no section for {cogate.__version__}"


def test_the_charts_values_and_templates_match_the_fingerprint_of_its_version():
    assert version.problems(REPO) == []


def test_a_changed_template_without_a_bump_is_named_with_the_fix(repo):
    assert version.problems(repo) == []
    template = next((repo / version.CHART / "templates").glob("*.yaml"))
    template.write_text(template.read_text() + "\n# changed\n")
    (found,) = version.problems(repo)
    assert "changed but the chart version is still" in found and "python tools/version.py set" in found
    with pytest.raises(version.VersionError, match="recorded with another fingerprint"):
        version.record(repo)  # recording over a released version is refused
    old = version.chart_versions(repo)[0]
    major, minor, _ = (int(p) for p in old.split("."))
    new = f"{major}.{minor + 1}.0"
    version.set_version(new, repo)
    assert version.problems(repo) == []
    assert version.package_version(repo) == new and version.chart_versions(repo) == (new, new)
    assert list(version.recorded(repo))[-2:] == [old, new]


@pytest.mark.parametrize("change", ["values.yaml", "crds", "new-template"])
def test_values_crds_and_new_templates_change_the_fingerprint(repo, change):
    chart = repo / version.CHART
    before = version.fingerprint(chart)
    if change == "values.yaml":
        (chart / "values.yaml").write_text((chart / "values.yaml").read_text().replace(":", ":  ", 1))
    elif change == "crds":
        crd = next((chart / "crds").glob("*.yaml"))
        crd.write_text(crd.read_text() + "\n")
    else:
        (chart / "templates" / "extra.yaml").write_text("kind: ConfigMap\n")
    assert version.fingerprint(chart) != before


def test_the_readme_and_ci_values_are_not_fingerprinted(repo):
    chart = repo / version.CHART
    before = version.fingerprint(chart)
    (chart / "README.md").write_text("docs only\n")
    (chart / "Chart.yaml").write_text((chart / "Chart.yaml").read_text() + "# a comment\n")
    assert version.fingerprint(chart) == before


def test_disagreeing_versions_are_named(repo):
    init = repo / version.PACKAGE_INIT
    init.write_text(init.read_text().replace(f'"{cogate.__version__}"', '"9.9.9"'))
    (found,) = version.problems(repo)
    assert "the versions disagree" in found and "9.9.9" in found


def test_a_version_older_than_one_recorded_is_named(repo):
    prints = repo / version.FINGERPRINTS
    prints.write_text(prints.read_text() + f"99.0.0 {'0' * 64}\n")
    assert any("versions only go up" in p for p in version.problems(repo))


@pytest.mark.parametrize("new", ["0.1.9", "1.2", "v1.0.0", "1.0.0+build"])
def test_set_refuses_older_or_malformed_versions(repo, new):
    with pytest.raises(version.VersionError):
        version.set_version(new, repo)
    assert version.package_version(repo) == cogate.__version__  # nothing written


def test_semver_precedence():
    order = ["0.9.9", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
             "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.10.0"]
    assert sorted(order, key=version.parse) == order  # semver 2.0.0, section 11's example and more


def test_a_malformed_fingerprints_file_is_refused():
    with pytest.raises(version.VersionError, match="expected"):
        version.read_fingerprints("0.2.0 nothex\n")
    with pytest.raises(version.VersionError, match="twice"):
        version.read_fingerprints(f"0.2.0 {'a' * 64}\n0.2.0 {'b' * 64}\n")
    assert version.read_fingerprints(f"# c\n\n0.2.0 {'a' * 64}  # note\n") == {"0.2.0": "a" * 64}


def test_make_chart_packages_the_version_everyone_shares(tmp_path):
    """What ``make chart`` runs: ``helm package`` names the archive after the one version, and the
    archive holds the fingerprinted files as they are here."""
    import subprocess
    import tarfile

    from cogate.localcluster.build import binary, ensure_binaries

    helm = binary("helm")
    if not helm.is_file():
        ensure_binaries(["helm"], log=sys.stderr)
    subprocess.run([str(helm), "package", str(REPO / version.CHART), "--destination", str(tmp_path)],
                   check=True, capture_output=True)
    (archive,) = tmp_path.glob("*.tgz")
    assert archive.name == f"cogate-{cogate.__version__}.tgz"
    with tarfile.open(archive) as tar:
        values = tar.extractfile("cogate/values.yaml").read()
        chart = yaml.safe_load(tar.extractfile("cogate/Chart.yaml"))
    assert values == (REPO / version.CHART / "values.yaml").read_bytes()
    assert chart["version"] == chart["appVersion"] == cogate.__version__
