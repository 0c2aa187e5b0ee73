"""Pinned versions of every Go-built binary of the local control plane.

One place for them: the build (``build.py``), the README and the CI read these.
"""

from __future__ import annotations

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
#: cloud provider from the source snapshot in ``shared/third_party`` (see :data:`SOURCES`): the
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
#: the snapshot's directory name in ``shared/third_party`` beside the repository (or in
#: ``$COGATE_THIRD_PARTY_DIR``; see ``build.third_party_dir``), built with ``GOFLAGS=-mod=readonly``
#: (its go.mod and go.sum as they are; the modules still come from the module proxy).
SOURCES: dict[str, str] = {"cluster-autoscaler": f"cluster-autoscaler-{CLUSTER_AUTOSCALER}"}

#: Tools the control plane needs (``LocalCluster``); the real node needs :data:`NODE_TOOLS` too.
CONTROL_PLANE_TOOLS = ("etcd", "kubernetes", "kwok")
NODE_TOOLS = ("kubernetes-node", "containerd")
#: Tools of the optional cluster-autoscaler (``LocalCluster(autoscaler=...)``, ``cogate dev up --autoscaler``).
AUTOSCALER_TOOLS = ("cluster-autoscaler",)
#: Operators the e2e tests run against cogate (:mod:`operators`); ``make binaries`` builds them,
#: ``cogate demo`` and ``cogate dev up`` do not.
OPERATOR_TOOLS = ("mpi-operator", "kuberay", "training-operator")

#: CRD manifests a tool's build copies from its module's source (paths inside the module) into
#: its binary directory, beside the binaries (same base names); the operators need them applied
#: before they start (:mod:`operators`).
CRDS: dict[str, tuple[str, ...]] = {
    "mpi-operator": ("manifests/base/kubeflow.org_mpijobs.yaml",),
    "kuberay": ("config/crd/bases/ray.io_rayclusters.yaml", "config/crd/bases/ray.io_rayjobs.yaml",
                "config/crd/bases/ray.io_rayservices.yaml"),  # its three controllers' kinds (RayCronJob: gated off)
    # PyTorchJob only: its kubeflow.org_mpijobs.yaml (v1) has the MPI operator's CRD name.
    "training-operator": ("manifests/base/crds/kubeflow.org_pytorchjobs.yaml",),
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
}
