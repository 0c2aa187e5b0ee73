"""What cogate can do on which Kubernetes release, and what was tested where (pure).

One table for three readers: the controller's start-up check (:func:`unsupported`, logged and
exported as ``cogate_controller_cluster_feature_supported{feature}``), the generated page
docs/reference/releases.md (``make docs``), and the unit test that every release a feature is
said to be tested on runs that feature's tests (tests/unit/controller/model/test_releases.py reads
the Makefile's ``RELEASE_SUBSET``/``NATIVE_SUBSET``).

Versions are ``(major, minor)``; :func:`parse` reads ``/version``'s ``gitVersion``
(``"v1.36.3"``, ``"v1.30.14-eks-1234"``, ``"v1.31.2-gke.100"``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Feature", "FEATURES", "TESTED_RELEASES", "DEFAULT_TESTED", "MINIMUM", "Run", "RUNS", "parse",
           "unsupported", "makefile_subsets", "tested_on", "run_on", "status_on"]

Version = tuple[int, int]

#: The oldest release cogate runs on: scheduling gates (PodSchedulingReadiness, GA in 1.30) and
#: the node affinity of a gated pod made narrower in the gate's removal (KEP-3838, GA in 1.30).
MINIMUM: Version = (1, 30)

#: The releases ``make test`` runs on (localcluster/versions.py RELEASES): the default runs the
#: whole suite, the others the subsets the Makefile names.
TESTED_RELEASES = ("1.30.14", "1.36.3", "1.37.2")
DEFAULT_TESTED = "1.36.3"


@dataclass(frozen=True)
class Feature:
    """One capability: ``name`` (metric label), ``title``; ``since``: the first release that has
    what it needs (``None``: every supported release); ``below``: what happens on an older
    release; ``source``: the upstream rule; ``tests``: the e2e files that exercise it (the
    releases it is tested on are the default plus those whose Makefile subset holds one of them
    — :func:`tested_on`); ``needs``: what else it needs (an add-on, a feature gate);
    ``gated``: its e2e tests need the feature gate ``NATIVE_SUBSET`` runs with and skip elsewhere,
    so the default release counts only when its subset holds them."""

    name: str
    title: str
    since: Version | None
    below: str
    source: str
    tests: tuple[str, ...]
    needs: str = ""
    gated: bool = False


FEATURES: tuple[Feature, ...] = (
    Feature("gang_release", "Gated admission and the release of a whole gang (the README example)", None, "",
            "PodSchedulingReadiness GA 1.30; KEP-3838 mutable scheduling directives GA 1.30",
            ("tests/e2e/test_example.py", "tests/e2e/test_lifecycle_release.py", "tests/e2e/test_lifecycle.py")),
    Feature("native_gangs", "Leaving Kubernetes' own gangs (spec.schedulingGroup) to kube-scheduler", (1, 36),
            "no pod can name a native gang (the field does not exist): nothing to leave alone",
            "KEP-4671 gang scheduling: spec.schedulingGroup 1.36 (alpha), 1.37 (beta, GenericWorkload off by default)",
            ("tests/e2e/test_native.py",), "GenericWorkload feature gate for native gangs to exist"),
    Feature("native_preemption", "Preemption that takes a native gang in disruption mode all whole or not at all",
            (1, 36), "no scheduling.k8s.io PodGroups are served: no pod can name one, and nothing changes",
            "KEP-5710 workload-aware preemption: PodGroup spec.disruptionMode, scheduling.k8s.io/v1beta1 in 1.37 "
            "(v1alpha2 in 1.36 behind WorkloadAwarePreemption)", ("tests/e2e/test_native_preemption.py",),
            "GenericWorkload feature gate (on 1.36 also WorkloadAwarePreemption for disruptionMode); the "
            "tests skip where the API is not served", gated=True),
    Feature("preemption", "Preemption for a gang that fits only if lower-priority pods go (victims chosen and evicted)",
            None, "", "the Eviction API (policy/v1) and kube-scheduler's DefaultPreemption rules (MoreImportantPod)",
            ("tests/e2e/test_preemption.py",)),
    Feature("preemption_nomination", "Preemption's freed room counted by kube-scheduler (cogate's nominations)",
            (1, 35), "cogate still holds the freed room in its own plan, but kube-scheduler does not count "
            "cogate's status.nominatedNodeName, so it may bind lower-priority pods (a ReplicaSet's replacements "
            "of the victims) there; the gang then ends DoesNotFitAfterPreemption and may preempt again after "
            "its back-off", "KEP-5278 NominatedNodeNameForExpectation, beta and on in 1.35",
            ("tests/e2e/test_preemption.py",)),
    Feature("dra", "Planning members that ask for DRA devices (resource.k8s.io/v1)", (1, 34),
            "resource.k8s.io/v1 is not served: a member's resource claims cannot be checked, and the gang is "
            "held or released unchecked as --unchecked-constraints says", "KEP-4381 DRA structured parameters, GA 1.34",
            ("tests/e2e/test_devices.py",), "a DRA driver publishing ResourceSlices"),
    Feature("provisioning_requests", "ProvisioningRequests for gangs that need new nodes", None, "",
            "cluster-autoscaler --enable-provisioning-requests (autoscaling.x-k8s.io/v1 ProvisioningRequest)",
            ("tests/e2e/test_provisioning.py", "tests/e2e/test_autoscaler.py"),
            "cluster-autoscaler with ProvisioningRequests on, of the cluster's minor release as upstream pairs them "
            "(tested with 1.36.1 only, on 1.36.3 and 1.37.2: against 1.30.14 it never syncs, waiting for "
            "resource.k8s.io/v1 DeviceClasses, ResourceClaims and ResourceSlices that 1.30 does not serve)"),
    Feature("late_labels", "Pods labelled after their creation (late-label admission)", None, "",
            "AdmissionWebhookMatchConditions (the webhook entry's matchConditions) GA 1.30", ("tests/e2e/test_admission_late_labels.py",)),
    Feature("never_gated_report", "Members that were never gated named on their PodGroup (UngatedWithoutRelease)",
            (1, 33), "pods carry no metadata.generation: a member labelled after cogate's webhook ran (or that "
            "skipped it) is scheduled ungated and not recognised, so the PodGroup does not name it",
            "KEP-5067 metadata.generation on pods, 1.33 (cogate's never_gated reads generation 1)",
            ("tests/e2e/test_admission_late_labels.py",)),
    Feature("chart", "The Helm chart, its RBAC and a real node install", None, "", "Helm 3; Kubernetes >= 1.30",
            ("tests/e2e/test_helm_install.py", "tests/e2e/test_rbac.py")),
    Feature("operators", "Gangs of the MPI operator, KubeRay and the training-operator", None, "",
            "each operator's scheduler-plugins integration", ("tests/e2e/test_operators.py",),
            "the operator (MPI operator v0.8.0, KubeRay v1.6.2, training-operator v1.9.4 tested)"),
)

_VERSION = re.compile(r"^v?(\d+)\.(\d+)")


def parse(git_version: str) -> Version | None:
    """``(major, minor)`` of a ``gitVersion`` such as ``"v1.36.3"`` or ``"v1.30.14-eks-1234"``;
    ``None`` when it does not start with ``[v]<major>.<minor>``."""
    m = _VERSION.match(git_version.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def unsupported(version: Version, features: Sequence[Feature] = FEATURES) -> list[Feature]:
    """The features the release ``version`` cannot support (its ``since`` is later)."""
    return [f for f in features if f.since is not None and version < f.since]


def makefile_subsets(makefile: str) -> dict[str, list[str]]:
    """release -> the e2e files ``make test`` runs there, from the Makefile's text: its
    ``RELEASE_SUBSET`` on every ``OTHER_RELEASES``, plus ``NATIVE_SUBSET`` on ``NATIVE_RELEASES``."""
    text = makefile.replace("\\\n", " ")

    def var(name: str) -> list[str]:
        m = re.search(rf"^{name} \?=(.*)$", text, re.M)
        return m.group(1).split() if m else []

    subsets: dict[str, list[str]] = {r: var("RELEASE_SUBSET") for r in var("OTHER_RELEASES")}
    for r in var("NATIVE_RELEASES"):
        subsets[r] = subsets.get(r, []) + var("NATIVE_SUBSET")
    return subsets


def tested_on(feature: Feature, subsets: dict[str, Sequence[str]]) -> list[str]:
    """The releases of :data:`TESTED_RELEASES` ``feature`` is tested on: the default (the whole
    suite runs there) and each release whose subset (``subsets``: release -> the e2e files
    ``make test`` runs there) holds one of its test files."""
    return [r for r in TESTED_RELEASES
            if (r == DEFAULT_TESTED and not feature.gated) or any(t in subsets.get(r, ()) for t in feature.tests)]


@dataclass(frozen=True)
class Run:
    """One recorded run of e2e files on a release outside ``make test``'s subsets (issue 29 item
    5): ``COGATE_KUBERNETES_VERSION=<release> .venv/bin/pytest -m e2e <tests>`` at ``commit``
    (short hash) on ``date`` (UTC), ``seconds`` of wall time at ``load`` (1-minute load average at
    its end, 2 cores); ``passed`` / ``total`` tests; ``note``: why it failed, if it did;
    ``gates``: the API server's feature gates of the run (``COGATE_FEATURE_GATES``), the only
    reason to record a run on the default release (whose full suite runs without them)."""

    release: str
    tests: tuple[str, ...]
    commit: str
    date: str
    seconds: int
    load: float
    passed: int
    total: int
    note: str = ""
    gates: str = ""

    @property
    def ok(self) -> bool:
        return self.total > 0 and self.passed == self.total

    @property
    def command(self) -> str:
        gates = f" COGATE_FEATURE_GATES={self.gates}" if self.gates else ""
        return f"COGATE_KUBERNETES_VERSION={self.release}{gates} .venv/bin/pytest -m e2e " + " ".join(self.tests)


#: Runs recorded by hand, one per (release, test file); a release passes a feature's run when
#: every one of its test files that ran there passed (:func:`run_on`).
RUNS: tuple[Run, ...] = (
    Run("1.37.2", ("tests/e2e/test_admission_late_labels.py",), "b4bf501", "2026-12-06 16:28 UTC", 91, 14.3, 9, 9),
    Run("1.37.2", ("tests/e2e/test_provisioning.py",), "b4bf501", "2026-12-06 16:30 UTC", 119, 16.6, 5, 5),
    Run("1.37.2", ("tests/e2e/test_rbac.py",), "00b03a9", "2026-12-06 16:32 UTC", 130, 21.3, 7, 7),
    Run("1.37.2", ("tests/e2e/test_preemption.py",), "ff6b04b", "2026-12-06 16:38 UTC", 360, 20.9, 9, 9),
    Run("1.37.2", ("tests/e2e/test_autoscaler.py",), "ff6b04b", "2026-12-06 16:40 UTC", 106, 16.4, 5, 5),
    Run("1.30.14", ("tests/e2e/test_preemption.py",), "08a87a2", "2026-12-06 17:00 UTC", 480, 26.6, 9, 9),
    Run("1.30.14", ("tests/e2e/test_admission_late_labels.py",), "4e487ee", "2026-12-06 17:15 UTC", 153, 25.7, 9, 9,
        "after two test fixes the first runs found: the second mutator's MutatingAdmissionPolicy exists from 1.36, "
        "pods carry no generation before 1.33 (never_gated_report: not available)"),
    Run("1.30.14", ("tests/e2e/test_rbac.py",), "c667368", "2026-12-06 17:17 UTC", 146, 23.0, 7, 7,
        "after a test fix: without resource.k8s.io/v1 the controller only checks for it (one list, 404)"),
    Run("1.37.2", ("tests/e2e/test_devices.py",), "6494494", "2026-12-06 22:44 UTC", 39, 10.3, 4, 4),
    Run("1.37.2", ("tests/e2e/test_operators.py",), "6494494", "2026-12-06 22:46 UTC", 89, 10.4, 8, 8),
    Run("1.30.14", ("tests/e2e/test_operators.py",), "6494494", "2026-12-06 22:47 UTC", 87, 10.4, 8, 8),
    Run("1.36.3", ("tests/e2e/test_native_preemption.py",), "6494494", "2026-12-06 22:48 UTC", 33, 8.2, 3, 3,
        "1.36 serves the PodGroups as scheduling.k8s.io/v1alpha2; WorkloadAwarePreemption needs GangScheduling",
        gates="GenericWorkload=true,GangScheduling=true,WorkloadAwarePreemption=true"),
)


def run_on(feature: Feature, release: str, runs: Sequence[Run] = RUNS) -> list[Run]:
    """The recorded runs on ``release`` of ``feature``'s test files."""
    return [r for r in runs if r.release == release and set(r.tests) & set(feature.tests)]


def status_on(feature: Feature, release: str, subsets: dict[str, Sequence[str]],
              runs: Sequence[Run] = RUNS) -> str:
    """``"tested"`` (``make test`` runs its tests there), ``"not available"`` (the release predates
    ``since``), ``"tested once (<commit>: <files>)"`` (a recorded run of some of its test files
    passed there, none failed: :data:`RUNS`), ``"failed once (<commit>)"`` or ``"not tested"``."""
    version = parse(release)
    if feature.since is not None and version is not None and version < feature.since:
        return "not available"
    if release in tested_on(feature, subsets):
        return "tested"
    recorded = run_on(feature, release, runs)
    if recorded:
        files = ", ".join(t.rsplit("/", 1)[-1] for r in recorded for t in r.tests if t in feature.tests)
        commits = "/".join(sorted({r.commit for r in recorded}))
        return (f"tested once ({commits}: {files})" if all(r.ok for r in recorded)
                else f"failed once ({commits}: {files})")
    return "not tested"
