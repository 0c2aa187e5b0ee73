"""Host tooling of the local cluster: what runs as root on this machine, beside the control plane.

- :mod:`.realnode`: a real kubelet node (containerd, runc, CNI, kubelet, kube-proxy; a bridge,
  iptables rules and cgroups on this host), for ``LocalCluster(real_node=True)`` and
  ``cogate dev up --real-node``.
- :mod:`.pauseimage` (+ ``pause/main.go``): the node's pause/probe image as an OCI archive.
- :mod:`.image`: cogate's container image from the Dockerfile with buildah (``make image``).
- :mod:`.debian`: the Debian packages those need, installed with apt-get when missing.

Why a part of its own: the control plane (``cogate.localcluster``: ``cogate demo``,
``cogate dev up`` without ``--real-node``, most end-to-end tests) runs unprivileged child
processes only and never imports these modules; they are imported lazily by ``--real-node``,
``make image`` and the tests that need them. Dependencies point one way: these modules use
the control plane's ``build``, ``procs``, ``nodes``, ``versions`` and ``kubeconfig``; none of
those imports them.

Importing this package loads no code: it holds only the real node's names and address, which
the control plane (the API server's address with a real node) and ``cogate dev`` (its help
and output) show without loading :mod:`.realnode`.
"""

from __future__ import annotations

#: The real node's name (kubelet's ``--hostname-override``).
NODE_NAME = "cogate-real-node"
#: The node's address on its bridge: its InternalIP, the pods' gateway, and the address
#: kube-apiserver binds and advertises when the cluster has a real node.
NODE_IP = "10.244.0.1"
#: Label and taint of the real node (kubelet registers with them).
NODE_LABEL = ("cogate.dev/real-node", "true")
NODE_TAINT = {"key": "cogate.dev/real-node", "value": "true", "effect": "NoSchedule"}
#: Processes of the node, in start order (they stop in reverse); ``LocalCluster(extra_args=...)`` keys.
NODE_COMPONENTS = ("containerd", "kubelet", "kube-proxy")
