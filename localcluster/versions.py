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
}

#: Binary file names each tool produces (the last element of each package path,
#: except etcd whose main package is the module root).
BINARIES: dict[str, tuple[str, ...]] = {
    "kubernetes": ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl"),
    "etcd": ("etcd",),
    "kwok": ("kwok",),
    "helm": ("helm",),
}
