"""Local Kubernetes control plane (Go-built kube-apiserver, etcd, kube-scheduler, kube-controller-manager, kwok) for tests, the demo and `cogate dev up`."""
