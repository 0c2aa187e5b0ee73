"""Local Kubernetes control plane (Go-built kube-apiserver, etcd, kube-scheduler, kube-controller-manager, kwok) for tests, the demo and `cogate dev up`.

Its host tooling (real node, pause image, image build: run as root) is the subpackage ``host``, imported only where asked for.
Neither is in the container image (a source checkout installs them; see setup.py and README.md).
"""
