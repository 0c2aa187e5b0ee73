"""Pinned versions of every Go-built binary of the local control plane.

One place for them: the build (``build.py``), the README and the CI read these.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

#: Kubernetes release built for kube-apiserver, kube-scheduler,
#: kube-controller-manager and kubectl. v1.36's go.mod says ``go 1.26.0``,
#: which matches the Go 1.26 toolchain installed on our machines.
KUBERNETES = "v1.36.3"
#: etcd server (go.etcd.io/etcd/server/v3), 3.6 line as kube-apiserver 1.36 expects.
ETCD = "v3.6.16"
#: kwok (sigs.k8s.io/kwok), fake kubelets for nodes annotated kwok.x-k8s.io/node=fake.
KWOK = "v0.8.0"
#: Helm v3 CLI, used to lint and template the chart.
HELM = "v3.22.0"
#: containerd for the optional real node (github.com/containerd/containerd/v2). kubelet 1.36
#: needs containerd 2.0 or later; Debian 12 ships 1.6, so it is built here like the rest.
CONTAINERD = "v2.4.2"
#: cluster-autoscaler (kubernetes/autoscaler, tag ``cluster-autoscaler-1.36.1``), built with its kwok
#: cloud provider from the source snapshot in the repository's ``third_party/`` (see :data:`SOURCES`): the
#: optional autoscaler of the local control plane (``LocalCluster(autoscaler=...)``).
CLUSTER_AUTOSCALER = "1.36.1"
#: Kubeflow MPI operator (github.com/kubeflow/mpi-operator), run by the e2e tests against cogate
#: with ``--gang-scheduling`` (it creates scheduler-plugins PodGroups; :mod:`operators`).
MPI_OPERATOR = "v0.8.0"
#: KubeRay's operator (module github.com/ray-project/kuberay/ray-operator, tag
#: ``ray-operator/<version>``), run with ``--batch-scheduler=scheduler-plugins``. Issue 20 names
#: v1.7.0, but the module proxy refuses its zip ("403 This module version is not available", for
#: v1.7.0 and v1.7.1); v1.6.2 is the newest it serves. Its scheduler-plugins batch scheduler
#: (``controllers/ray/batchscheduler/scheduler-plugins/scheduler_plugins.go``: PodGroup named
#: after the RayCluster, minMember = desired workers + 1 head, minResources = their requests,
#: ``schedulerName: scheduler-plugins-scheduler`` on every pod) makes the same PodGroup and
#: scheduler name in a later version of that file read from a snapshot of the upstream
#: repository (not checked against the v1.7.0 tag itself).
KUBERAY = "v1.6.2"
#: Kubeflow training-operator v1 (github.com/kubeflow/training-operator), run with
#: ``--gang-scheduler-name`` for PyTorchJobs (its webhook certificates from cogate's CA code).
TRAINING_OPERATOR = "v1.9.4"
#: JobSet's controller (sigs.k8s.io/jobset; its main package is the module root), run by the examples'
#: e2e test (issue 31) with its webhooks served on 127.0.0.1. v0.12.0 is the newest version the module
#: proxy serves (its version list and v0.12.1, v0.12.2, v0.13.0 answer "403 This module version is not
#: available").
JOBSET = "v0.12.0"
#: cert-manager (github.com/cert-manager/cert-manager): its controller and cainjector, run as host
#: processes by the e2e test of the chart's cert-manager mode (:mod:`certmanager`). v1.11.5 is the
#: newest release whose binaries the module proxy serves: from v1.12 on, ``cmd/controller`` and
#: ``cmd/cainjector`` are separate modules (``.../controller-binary``, ``.../cainjector-binary``, whose
#: path is not their directory) that the proxy does not serve; the root module (v1.21.2 is served)
#: holds no main package. The ``cert-manager.io/v1`` API the chart uses is the same in both.
CERT_MANAGER = "v1.11.5"
#: Kueue's controller manager (sigs.k8s.io/kueue, main package ``cmd/kueue``), for the topology
#: benchmark only (``bench/bench_topology_native.py``, issue 32 item 6: its Topology Aware Scheduling,
#: beta and on by default in 0.17, beside cogate's and kube-scheduler's own). Not built by ``make
#: binaries``, ``make test``, ``make demo`` or the CI (:data:`BENCH_TOOLS`): the benchmark builds it on
#: first use.
KUEUE = "v0.17.0"

#: name -> (wrapper module requirement, version, go package paths to build)
TOOLS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "kubernetes": (
        "k8s.io/kubernetes",
        KUBERNETES,
        (
            "k8s.io/kubernetes/cmd/kube-apiserver",
            "k8s.io/kubernetes/cmd/kube-scheduler",
            "k8s.io/kubernetes/cmd/kube-controller-manager",
            "k8s.io/kubernetes/cmd/kubectl",
        ),
    ),
    "etcd": ("go.etcd.io/etcd/server/v3", ETCD, ("go.etcd.io/etcd/server/v3",)),
    "kwok": ("sigs.k8s.io/kwok", KWOK, ("sigs.k8s.io/kwok/cmd/kwok",)),
    "helm": ("helm.sh/helm/v3", HELM, ("helm.sh/helm/v3/cmd/helm",)),
    # The real node's binaries: a separate tool so that adding them did not change the cached
    # "kubernetes" directory; same module and version as the control plane.
    "kubernetes-node": (
        "k8s.io/kubernetes",
        KUBERNETES,
        ("k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kube-proxy"),
    ),
    # Built from a source snapshot (SOURCES), not a wrapper module: "." is the snapshot's main package.
    "cluster-autoscaler": ("k8s.io/autoscaler/cluster-autoscaler", CLUSTER_AUTOSCALER, (".",)),
    # Operators that create scheduler-plugins PodGroups, for the e2e tests (OPERATOR_TOOLS).
    "mpi-operator": ("github.com/kubeflow/mpi-operator", MPI_OPERATOR,
                     ("github.com/kubeflow/mpi-operator/cmd/mpi-operator",)),
    # The module root is KubeRay's main package (main.go).
    "kuberay": ("github.com/ray-project/kuberay/ray-operator", KUBERAY,
                ("github.com/ray-project/kuberay/ray-operator",)),
    "training-operator": ("github.com/kubeflow/training-operator", TRAINING_OPERATOR,
                          ("github.com/kubeflow/training-operator/cmd/training-operator.v1",)),
    # The module root is JobSet's main package (main.go).
    "jobset": ("sigs.k8s.io/jobset", JOBSET, ("sigs.k8s.io/jobset",)),
    # Controller and CA injector only: the test installs no cert-manager webhook configuration.
    "cert-manager": ("github.com/cert-manager/cert-manager", CERT_MANAGER,
                     ("github.com/cert-manager/cert-manager/cmd/controller",
                      "github.com/cert-manager/cert-manager/cmd/cainjector")),
    # Benchmark only (BENCH_TOOLS).
    "kueue": ("sigs.k8s.io/kueue", KUEUE, ("sigs.k8s.io/kueue/cmd/kueue",)),
    "containerd": (
        "github.com/containerd/containerd/v2",
        CONTAINERD,
        (
            "github.com/containerd/containerd/v2/cmd/containerd",
            "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
            "github.com/containerd/containerd/v2/cmd/ctr",
        ),
    ),
}

#: Go build tags per tool (default: none). containerd's static release build uses
#: ``osusergo netgo static_build`` (its Makefile, ``STATIC=1``); ``no_btrfs`` (needs cgo),
#: ``no_devmapper`` and ``no_zfs`` leave out snapshotters the real node does not use (it uses
#: overlayfs), ``no_tracing`` the OpenTelemetry exporter, ``urfave_cli_no_docs`` the man-page
#: generator.
BUILD_TAGS: dict[str, tuple[str, ...]] = {
    "cluster-autoscaler": ("kwok",),  # its kwok cloud provider (the snapshot keeps no other)
    "containerd": ("urfave_cli_no_docs", "osusergo", "netgo", "static_build",
                   "no_btrfs", "no_devmapper", "no_zfs", "no_tracing"),
}

#: Tools built in place from a read-only source snapshot instead of the module proxy: name ->
#: the snapshot's directory name in the repository's ``third_party/`` (or in
#: ``$COGATE_THIRD_PARTY_DIR``; see ``build.third_party_dir``), built with ``GOFLAGS=-mod=readonly``
#: (its go.mod and go.sum as they are; the modules still come from the module proxy).
SOURCES: dict[str, str] = {"cluster-autoscaler": f"cluster-autoscaler-{CLUSTER_AUTOSCALER}"}

# ---------------------------------------------------------------- Kubernetes releases (issue 18)

#: Environment variable naming the Kubernetes release where no explicit one is given
#: (``LocalCluster``, ``cogate dev up``, the test fixtures, ``python -m cogate.localcluster.build``),
#: e.g. ``COGATE_KUBERNETES_VERSION=1.37.2 make test``.
KUBERNETES_VERSION_ENV = "COGATE_KUBERNETES_VERSION"
#: Environment variable of feature gates turned on or off in the control plane where none are given,
#: as kube-apiserver's ``--feature-gates`` writes them: ``GenericWorkload=true[,Name=false...]``.
FEATURE_GATES_ENV = "COGATE_FEATURE_GATES"


@dataclass(frozen=True)
class Release:
    """One Kubernetes release the local control plane runs, with the versions that fit it.

    ``kubernetes``: the k8s.io/kubernetes tag (control plane, kubectl, kubelet, kube-proxy);
    ``etcd``: the etcd server of the line kube-apiserver's go.mod requires (its client) and
    ``hack/lib/etcd.sh`` runs; ``kwok``: the kwok release (it talks to the API server through
    client-go only, so one release fits several); ``runtime_config``: feature gate -> the
    ``--runtime-config`` entries of kube-apiserver the gate needs to serve its API (a beta or alpha
    API version is off by default even when its gate is on); ``loopback_flags``: kube-apiserver
    flags the release needs when it binds and advertises 127.0.0.1 (no real node);
    ``cloud_controllers``: kube-controller-manager's cloud-provider controllers of the release,
    turned off explicitly (``--controllers=*,-<name>``; a name the release does not know is an error).
    """

    kubernetes: str
    etcd: str
    kwok: str
    runtime_config: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    loopback_flags: tuple[str, ...] = ()
    cloud_controllers: tuple[str, ...] = ("cloud-node-lifecycle-controller", "service-lb-controller",
                                          "node-route-controller")


#: The releases, by k8s.io/kubernetes tag. The go.mod files of 1.36 and 1.37 say ``go 1.26.0``, 1.30's
#: ``go 1.22.0`` (the Go 1.26 toolchain builds them all). GenericWorkload (native gang scheduling, KEP-4671): alpha in 1.35-1.36 with the
#: ``scheduling.k8s.io/v1alpha2`` Workload and PodGroup, beta (still off by default) in 1.37 with
#: ``scheduling.k8s.io/v1beta1`` (k8s.io/kubernetes pkg/registry/scheduling/rest).
RELEASES: dict[str, Release] = {
    # The oldest release the README claims (issue 18 item 2). Its go.mod says ``go 1.22.0`` (Go 1.26
    # builds it) and requires go.etcd.io/etcd/client/v3 v3.5.10 (hack/lib/etcd.sh: 3.5.15), so etcd
    # is of the 3.5 line. It has no GenericWorkload gate (no native gang scheduling: alpha in 1.35).
    "v1.30.14": Release("v1.30.14", etcd="v3.5.35", kwok=KWOK),
    "v1.36.3": Release("v1.36.3", etcd=ETCD, kwok=KWOK,
                       runtime_config={"GenericWorkload": ("scheduling.k8s.io/v1alpha2=true",)}),
    # kube-apiserver 1.37's go.mod requires go.etcd.io/etcd/client/v3 v3.7.0 (hack/lib/etcd.sh: 3.7.0).
    # kube-apiserver 1.37 refuses a loopback advertise address with an endpoint reconciler ("cannot
    # use public IP 127.0.0.1 with endpoint reconciler", pkg/controlplane/instance.go ValidateIP;
    # 1.36 only warned): without a real node it runs with none, so the `kubernetes` Service has no
    # endpoints (nothing uses them there: kwok's pods run nothing).
    "v1.37.2": Release("v1.37.2", etcd="v3.7.3", kwok=KWOK,
                       # CompositePodGroup (KEP-6012, alpha in 1.37; kube_features.go makes it need
                       # GenericWorkload and TopologyAwareWorkloadScheduling): scheduling.k8s.io/v1alpha3
                       # compositepodgroups (and v1alpha3 podgroups with parentCompositePodGroupName)
                       runtime_config={"GenericWorkload": ("scheduling.k8s.io/v1beta1=true",),
                                       "CompositePodGroup": ("scheduling.k8s.io/v1alpha3=true",)},
                       loopback_flags=("--endpoint-reconciler-type=none",),
                       # kube-controller-manager 1.37 no longer has the cloud controllers ("... is not in
                       # the list of known controllers")
                       cloud_controllers=()),
}
#: The release used when none is selected.
DEFAULT_RELEASE = KUBERNETES
#: Tools whose version follows the release (the others have one pin for every release).
RELEASE_TOOLS = ("kubernetes", "kubernetes-node", "etcd", "kwok")


class UnknownRelease(ValueError):
    """A Kubernetes version that is not in :data:`RELEASES`; the message lists the supported ones."""


def release(version: str | None = None, environ: Mapping[str, str] = os.environ) -> Release:
    """The :class:`Release` of ``version`` (``1.37.2`` or ``v1.37.2``); when ``version`` is None or
    empty, of ``$COGATE_KUBERNETES_VERSION``, else :data:`DEFAULT_RELEASE`. Raises
    :class:`UnknownRelease` naming the version, where it came from and the supported ones."""
    source = "kubernetes version"
    if not version:
        version, source = environ.get(KUBERNETES_VERSION_ENV, ""), f"${KUBERNETES_VERSION_ENV}"
    if not version:
        return RELEASES[DEFAULT_RELEASE]
    tag = version if version.startswith("v") else f"v{version}"
    if tag not in RELEASES:
        raise UnknownRelease(f"{source} {version!r} is not supported; choose one of "
                             f"{', '.join(t.lstrip('v') for t in RELEASES)} (default {DEFAULT_RELEASE.lstrip('v')})")
    return RELEASES[tag]


def tool(name: str, kubernetes_version: str | None = None) -> tuple[str, str, tuple[str, ...]]:
    """``(module, version, packages)`` of tool ``name`` (a key of :data:`TOOLS`) for the selected
    release (:func:`release`): :data:`RELEASE_TOOLS` take the release's version, the others their
    one pin. Raises KeyError for an unknown tool, :class:`UnknownRelease`."""
    module, version, packages = TOOLS[name]
    if name in RELEASE_TOOLS:
        r = release(kubernetes_version)
        version = {"kubernetes": r.kubernetes, "kubernetes-node": r.kubernetes, "etcd": r.etcd, "kwok": r.kwok}[name]
    return module, version, packages


_GATE = re.compile(r"^[A-Z][A-Za-z0-9]*$")


def feature_gates(text: str | Mapping[str, bool] | None = None,
                  environ: Mapping[str, str] = os.environ) -> dict[str, bool]:
    """Feature gates as ``{name: enabled}``, from ``text`` (``"GenericWorkload=true,Foo=false"``,
    as ``--feature-gates`` writes them, or a mapping); when None, from ``$COGATE_FEATURE_GATES``
    (empty: none). Raises ``ValueError`` naming the entry that is not ``Name=true|false``."""
    if text is None:
        text = environ.get(FEATURE_GATES_ENV, "")
    if isinstance(text, Mapping):
        items = [(k, v) for k, v in text.items()]
    else:
        items = []
        for entry in (e.strip() for e in text.split(",")):
            if not entry:
                continue
            name, sep, value = entry.partition("=")
            if not sep or value.lower() not in ("true", "false"):
                raise ValueError(f"feature gate {entry!r}: expected Name=true or Name=false")
            items.append((name.strip(), value.lower() == "true"))
    out: dict[str, bool] = {}
    for name, value in items:
        if not _GATE.match(name) or not isinstance(value, bool):
            raise ValueError(f"feature gate {name!r}={value!r}: expected a gate name (e.g. GenericWorkload) "
                             "and true or false")
        out[name] = value
    return out


def feature_gate_flags(r: Release, gates: Mapping[str, bool]) -> dict[str, list[str]]:
    """Extra flags per component for ``gates`` on release ``r``: ``--feature-gates`` for
    kube-apiserver, kube-scheduler and kube-controller-manager (the gates are per process), and
    ``--runtime-config`` for kube-apiserver with the API versions an enabled gate needs
    (:attr:`Release.runtime_config`). ``{}`` without gates. Pure."""
    if not gates:
        return {}
    flag = "--feature-gates=" + ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(gates.items()))
    runtime = [rc for k, v in sorted(gates.items()) if v for rc in r.runtime_config.get(k, ())]
    return {"kube-apiserver": [flag, *([f"--runtime-config={','.join(runtime)}"] if runtime else [])],
            "kube-scheduler": [flag], "kube-controller-manager": [flag]}


#: Tools the control plane needs (``LocalCluster``); the real node needs :data:`NODE_TOOLS` too.
CONTROL_PLANE_TOOLS = ("etcd", "kubernetes", "kwok")
NODE_TOOLS = ("kubernetes-node", "containerd")
#: Tools of the optional cluster-autoscaler (``LocalCluster(autoscaler=...)``, ``cogate dev up --autoscaler``).
AUTOSCALER_TOOLS = ("cluster-autoscaler",)
#: Operators the e2e tests run against cogate (:mod:`operators`); ``make binaries`` builds them,
#: ``cogate demo`` and ``cogate dev up`` do not.
OPERATOR_TOOLS = ("mpi-operator", "kuberay", "training-operator", "jobset")
#: cert-manager, for the chart's cert-manager mode test (:mod:`certmanager`); ``make binaries`` builds
#: it, ``cogate demo`` and ``cogate dev up`` do not.
CERT_MANAGER_TOOLS = ("cert-manager",)
#: Tools only a benchmark runs (Kueue, for ``bench/bench_topology_native.py``): left out of a build
#: that names no tools (``python -m cogate.localcluster.build``, so ``make binaries`` and ``make
#: test``); the benchmark builds them on first use.
BENCH_TOOLS = ("kueue",)

#: CRD manifests a tool's build copies from its module's source (paths inside the module) into
#: its binary directory, beside the binaries (same base names); the operators need them applied
#: before they start (:mod:`operators`).
CRDS: dict[str, tuple[str, ...]] = {
    "mpi-operator": ("manifests/base/kubeflow.org_mpijobs.yaml",),
    "kuberay": ("config/crd/bases/ray.io_rayclusters.yaml", "config/crd/bases/ray.io_rayjobs.yaml",
                "config/crd/bases/ray.io_rayservices.yaml"),  # its three controllers' kinds (RayCronJob: gated off)
    # PyTorchJob only: its kubeflow.org_mpijobs.yaml (v1) has the MPI operator's CRD name.
    "training-operator": ("manifests/base/crds/kubeflow.org_pytorchjobs.yaml",),
    "jobset": ("config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",),
    # All six: the controller's default controllers include ACME's (Order, Challenge), whose
    # informers never sync without their CRDs. Their labels are Helm template text
    # (``'{{ template "cert-manager.name" . }}'``): :mod:`certmanager` drops them.
    "cert-manager": tuple(f"deploy/crds/crd-{k}.yaml" for k in ("certificates", "certificaterequests", "issuers",
                                                                 "clusterissuers", "orders", "challenges")),
    # All eleven (its controllers start for every kind), and its webhook manifests last
    # (config/components/webhook/manifests.yaml: :mod:`kueue` registers some entries, never applies it).
    "kueue": tuple(f"config/components/crd/bases/kueue.x-k8s.io_{k}.yaml" for k in (
        "admissionchecks", "clusterqueues", "cohorts", "localqueues", "multikueueclusters", "multikueueconfigs",
        "provisioningrequestconfigs", "resourceflavors", "topologies", "workloadpriorityclasses", "workloads"))
    + ("config/components/webhook/manifests.yaml",),
}

#: Debian packages the real node runs from the host (installed with apt-get when missing,
#: see ``realnode.ensure_host_packages``): the OCI runtime, the CNI plugins (bridge,
#: host-local, loopback, portmap in /usr/lib/cni) and iptables for kube-proxy.
NODE_PACKAGES = {"runc": "/usr/sbin/runc", "containernetworking-plugins": "/usr/lib/cni/bridge",
                 "iptables": "/usr/sbin/iptables"}

#: Binary file names each tool produces (the last element of each package path,
#: except etcd whose main package is the module root).
BINARIES: dict[str, tuple[str, ...]] = {
    "kubernetes": ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl"),
    "etcd": ("etcd",),
    "kwok": ("kwok",),
    "helm": ("helm",),
    "kubernetes-node": ("kubelet", "kube-proxy"),
    "containerd": ("containerd", "containerd-shim-runc-v2", "ctr"),
    "cluster-autoscaler": ("cluster-autoscaler",),
    "mpi-operator": ("mpi-operator",),
    "kuberay": ("ray-operator",),
    "training-operator": ("training-operator.v1",),
    "jobset": ("jobset",),
    "cert-manager": ("controller", "cainjector"),
    "kueue": ("kueue",),
}
