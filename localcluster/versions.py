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
    "containerd": ("urfave_cli_no_docs", "osusergo", "netgo", "static_build",
                   "no_btrfs", "no_devmapper", "no_zfs", "no_tracing"),
}

#: Tools the control plane needs (``LocalCluster``); the real node needs :data:`NODE_TOOLS` too.
CONTROL_PLANE_TOOLS = ("etcd", "kubernetes", "kwok")
NODE_TOOLS = ("kubernetes-node", "containerd")

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
}
