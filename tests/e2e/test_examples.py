"""Every manifest of ``examples/`` applied as a user would, on the local control plane, with the real
operator that owns it (issue 31).

Each test applies exactly the file in ``examples/`` with the pinned kubectl (``kubectl apply -n <ns>
-f examples/<file>``) and asserts the gang outcome from the pods themselves: first on nodes too small
for the whole gang, where every member exists and stays gated, none bound, and the PodGroup says
``InsufficientCapacity``; then on a node with room, where the members are bound together (at every
poll, no member is bound while another member the release covers is still gated) and the PodGroup's
phase and counts say so. Pods run on kwok fake nodes (Running once bound; images are never pulled).

The operators are the ones of test_operators.py (MPI operator, KubeRay, training-operator, built from
their pinned modules) and JobSet's controller (sigs.k8s.io/jobset), each started once for this module.
:data:`COVERED` maps every file of ``examples/`` to the test that uses it;
:func:`test_every_example_is_applied_by_a_test` fails when a file is added without one.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from kubernetes import client

from cogate.localcluster.host import debian
from cogate.localcluster.operators import JOBSET, KUBERAY, MPI_OPERATOR, TRAINING_OPERATOR, Operator

from .conftest import running
from .kube import bound, condition, gated, get_pod_group, group_pods, hold_gated, status, wait_for
from .kube import pods as pods_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: Every file of examples/ -> the test of this module that applies (or, for Spark's pod templates, uses) it.
COVERED = {
    "README.md": "test_every_example_is_applied_by_a_test",
    "job.yaml": "test_job",
    "jobset.yaml": "test_jobset",
    "pytorchjob.yaml": "test_pytorchjob",
    "mpijob.yaml": "test_mpijob",
    "raycluster.yaml": "test_raycluster",
    "minresources.yaml": "test_min_resources",
    "spark.yaml": "test_spark",
    "spark-driver-template.yaml": "test_spark",
    "spark-executor-template.yaml": "test_spark",
}

#: A node too small for any of the gangs (each member asks 500m CPU): 2 members fit.
SMALL = dict(cpu="1", memory="8Gi", kwok_taint=False)
#: A node with room for every gang.
ROOMY = dict(cpu="10", memory="8Gi", kwok_taint=False)
DEFAULT_SCHEDULER = "default-scheduler"
#: The JRE spark-submit runs on (Spark 4 needs Java 17 or later): Debian package -> what shows it is installed.
JAVA = {"openjdk-17-jre-headless": "java"}


# ------------------------------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def mpi_operator(stack, cluster, built, tmp_path_factory) -> Iterator[Operator]:
    yield from running(MPI_OPERATOR, cluster, tmp_path_factory, DEFAULT_SCHEDULER)


@pytest.fixture(scope="module")
def kuberay(stack, cluster, built, tmp_path_factory) -> Iterator[Operator]:
    yield from running(KUBERAY, cluster, tmp_path_factory, "scheduler-plugins")


@pytest.fixture(scope="module")
def training_operator(stack, cluster, built, tmp_path_factory) -> Iterator[Operator]:
    yield from running(TRAINING_OPERATOR, cluster, tmp_path_factory, DEFAULT_SCHEDULER)


@pytest.fixture(scope="module")
def spark_submit() -> Path:
    """The real spark-submit of the pyspark package (a test dependency, pyproject.toml), with
    Java installed with apt-get when missing."""
    import pyspark

    debian.ensure_debian_packages(JAVA, "spark-submit (the Spark example's test)", log=sys.stderr)
    path = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    assert path.is_file(), f"pyspark {pyspark.__version__} has no {path}"
    return path


@pytest.fixture(scope="module")
def jobset(stack, cluster, built, tmp_path_factory) -> Iterator[Operator]:
    yield from running(JOBSET, cluster, tmp_path_factory, None)


# ------------------------------------------------------------------------------------------- helpers

def apply(cluster, namespace: str, name: str) -> None:
    """``kubectl apply -n <namespace> -f examples/<name>`` with the pinned kubectl."""
    cluster.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / name))


def shown(op: Operator | None) -> str:
    return f"\n--- last lines of {op.log}:\n{op.log_tail(25)}" if op else ""


def pod_group_of(kube, namespace: str, name: str, op: Operator | None = None) -> dict[str, Any]:
    """The PodGroup ``name`` once it exists (an operator makes some of them)."""
    def made():
        try:
            return get_pod_group(kube, namespace, name)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    try:
        return wait_for(made, 30, what=f"PodGroup {namespace}/{name}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}{shown(op)}") from None


def waits_whole(kube, namespace: str, group: str, count: int, *parts: str, op: Operator | None = None) -> dict:
    """All ``count`` members exist, every one gated and none bound, and the PodGroup says
    ``Released=False InsufficientCapacity`` naming ``parts``; that holds for 3 s. Returns the condition."""
    def says():
        ps = group_pods(kube, namespace, group)
        c = condition(status(kube, namespace, group), "Released")
        ok = len(ps) == count and c and c["status"] == "False" and c["reason"] == "InsufficientCapacity" \
            and all(p in c["message"] for p in parts)
        return c if ok else None

    try:
        cond = wait_for(says, 45, what=f"{count} members of {group}, Released=False InsufficientCapacity {parts}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- status: {status(kube, namespace, group)}\n--- pods: "
                             f"{[(p.metadata.name, gated(p), p.spec.node_name) for p in group_pods(kube, namespace, group)]}"
                             f"{shown(op)}") from None
    hold_gated(kube, namespace, group, 3, count)
    return cond


def binds_as_one(kube, namespace: str, group: str, count: int, op: Operator | None = None) -> list:
    """Poll until ``count`` members are bound. At every poll, while any member is bound: all
    ``count`` members exist and none is still gated (each example's release covers every member:
    as many as minMember and all of them fit the roomy node). Returns the pods."""
    def all_bound():
        ps = group_pods(kube, namespace, group)
        placed = [p.metadata.name for p in ps if bound(p)]
        if placed:
            still = [p.metadata.name for p in ps if gated(p)]
            assert len(ps) == count and not still, \
                f"{placed} bound while {still} still gated ({len(ps)} of {count} members exist)"
        return ps if len(placed) == count else None

    try:
        return wait_for(all_bound, 60, what=f"all {count} members of {group} bound")
    except AssertionError as exc:
        if "bound while" in str(exc):
            raise
        raise AssertionError(f"{exc}\n--- status: {status(kube, namespace, group)}{shown(op)}") from None


def tells_the_truth(kube, namespace: str, group: str, count: int) -> dict[str, Any]:
    """The PodGroup's status once its members run: phase Running, ``scheduled`` and ``running`` =
    ``count``, Released=True."""
    def settled():
        st = status(kube, namespace, group)
        released = condition(st, "Released")
        return st if st.get("phase") == "Running" and st.get("scheduled") == count and st.get("running") == count \
            and released and released["status"] == "True" else None

    return wait_for(settled, 30, what=f"PodGroup {group} Running with scheduled = running = {count}")


def gang_outcome(cluster, kube, namespace: str, group: str, count: int, only_nodes, *small_says: str,
                 op: Operator | None = None) -> list:
    """The two phases of the module doc for a gang applied while only a small node exists; what
    ``kubectl get pg`` shows in each goes to stdout (shown with a failure, or with ``-s``)."""
    cond = waits_whole(kube, namespace, group, count, *small_says, op=op)
    print(f"{cluster.kubectl('get', 'pg', '-n', namespace).stdout}Released: {cond['message']}")
    only_nodes(1, **ROOMY)
    pods = binds_as_one(kube, namespace, group, count, op=op)
    tells_the_truth(kube, namespace, group, count)
    print(cluster.kubectl("get", "pg", "-n", namespace).stdout)
    return pods


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


# --------------------------------------------------------------------------------------------- tests

def test_every_example_is_applied_by_a_test():
    """Each file of examples/ is in :data:`COVERED`, naming a test of this module that exists, and
    every manifest is namespace-less (applied with ``-n``)."""
    files = {p.name for p in EXAMPLES.iterdir() if p.is_file()}
    assert files == set(COVERED), f"files without a test: {sorted(files - set(COVERED))}; " \
                                  f"gone: {sorted(set(COVERED) - files)}"
    source = Path(__file__).read_text()
    functions = {n.name: n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
    assert set(COVERED.values()) <= set(functions), sorted(set(COVERED.values()) - set(functions))
    for name, test in COVERED.items():
        # the file is named in the test or in a function of this module that the test calls
        called = {c.func.id for c in ast.walk(functions[test]) if isinstance(c, ast.Call)
                  and isinstance(c.func, ast.Name) and c.func.id in functions}
        assert any(f'"{name}"' in ast.get_source_segment(source, functions[f]) for f in {test, *called}), \
            f"{test} does not use examples/{name}"
    for name in files - {"README.md"}:
        for doc in documents(name):
            assert "namespace" not in doc.get("metadata", {}), f"{name}: {doc['kind']} names a namespace"
    readme = (EXAMPLES / "README.md").read_text()
    assert all(name in readme for name in files - {"README.md"}), "examples/README.md misses a file"


def test_job(stack, cluster, kube, namespace, only_nodes):
    """job.yaml: a PodGroup (minMember 4) and an Indexed Job of 4 labelled pods."""
    only_nodes(1, **SMALL)
    apply(cluster, namespace, "job.yaml")
    gang_outcome(cluster, kube, namespace, "job-gang", 4, only_nodes, "fits 2 of 4")
    job = client.BatchV1Api(kube).read_namespaced_job("job-gang", namespace)
    assert job.status.active == 4, job.status


def test_min_resources(stack, cluster, kube, namespace, only_nodes):
    """minresources.yaml: both members fit a node of 2 CPU, the rest of minResources (2 CPU beyond
    them) does not: they wait gated and the PodGroup names minResources; on a roomy node they bind."""
    only_nodes(1, **(SMALL | {"cpu": "2"}))
    apply(cluster, namespace, "minresources.yaml")
    gang_outcome(cluster, kube, namespace, "min-resources", 2, only_nodes, "minResources cpu short by 1")


def test_jobset(stack, cluster, kube, namespace, only_nodes, jobset):
    """jobset.yaml with JobSet's real controller: its leader and worker Jobs' 4 pods are one gang."""
    only_nodes(1, **SMALL)
    apply(cluster, namespace, "jobset.yaml")
    pods = gang_outcome(cluster, kube, namespace, "jobset-gang", 4, only_nodes, "fits 2 of 4", op=jobset)
    jobs = sorted(p.metadata.labels.get("jobset.sigs.k8s.io/replicatedjob-name") for p in pods)
    assert jobs == ["leader", "workers", "workers", "workers"], jobs
    assert {p.metadata.labels.get("jobset.sigs.k8s.io/jobset-name") for p in pods} == {"jobset-gang"}


def test_pytorchjob(stack, cluster, kube, namespace, only_nodes, training_operator):
    """pytorchjob.yaml with the training-operator (``--gang-scheduler-name=default-scheduler``):
    its PodGroup (named after the job, minMember 4, owned by it) gates master and workers together."""
    only_nodes(1, **SMALL)
    apply(cluster, namespace, "pytorchjob.yaml")
    pg = pod_group_of(kube, namespace, "pytorch-gang", training_operator)
    assert pg["spec"]["minMember"] == 4, pg
    assert [o["kind"] for o in pg["metadata"]["ownerReferences"]] == ["PyTorchJob"], pg
    pods = gang_outcome(cluster, kube, namespace, "pytorch-gang", 4, only_nodes, "fits 2 of 4", op=training_operator)
    assert sorted(p.metadata.labels.get("training.kubeflow.org/replica-type") for p in pods) == \
        ["master", "worker", "worker", "worker"]


def test_mpijob(stack, cluster, kube, namespace, only_nodes, mpi_operator):
    """mpijob.yaml with the MPI operator (``--gang-scheduling=default-scheduler``): its PodGroup
    (minMember 3 = 2 workers + launcher) gates the launcher and the workers together."""
    only_nodes(1, **SMALL)
    apply(cluster, namespace, "mpijob.yaml")
    pg = pod_group_of(kube, namespace, "mpi-gang", mpi_operator)
    assert pg["spec"]["minMember"] == 3, pg
    pods = gang_outcome(cluster, kube, namespace, "mpi-gang", 3, only_nodes, "fits 2 of 3", op=mpi_operator)
    names = sorted(p.metadata.name.rsplit("-", 1)[0] for p in pods)
    assert names[0].startswith("mpi-gang-launcher") and names[1:] == ["mpi-gang-worker"] * 2, names


def test_raycluster(stack, cluster, kube, namespace, only_nodes, kuberay):
    """raycluster.yaml with KubeRay (``--batch-scheduler=scheduler-plugins``): its PodGroup (minMember
    3 = 2 workers + head) gates head and workers together; the scheduler name it sets is adopted."""
    only_nodes(1, **SMALL)
    apply(cluster, namespace, "raycluster.yaml")
    pg = pod_group_of(kube, namespace, "ray-gang", kuberay)
    assert pg["spec"]["minMember"] == 3, pg
    pods = gang_outcome(cluster, kube, namespace, "ray-gang", 3, only_nodes, "fits 2 of 3", op=kuberay)
    assert sorted(p.metadata.labels.get("ray.io/node-type") for p in pods) == ["head", "worker", "worker"]
    assert {p.spec.scheduler_name for p in pods} == {DEFAULT_SCHEDULER}


# ------------------------------------------------------------------------------------------- Spark

def spark_args(cluster, namespace: str, mode: str) -> list[str]:
    """spark-submit's options of examples/README.md (the image a placeholder: kwok never pulls)."""
    confs = {"spark.kubernetes.namespace": namespace,
             "spark.kubernetes.container.image": "registry.invalid/spark:4",
             "spark.kubernetes.driver.podTemplateFile": str(EXAMPLES / "spark-driver-template.yaml"),
             "spark.kubernetes.executor.podTemplateFile": str(EXAMPLES / "spark-executor-template.yaml"),
             "spark.kubernetes.driver.pod.name": "spark-pi-driver",
             "spark.kubernetes.executor.podNamePrefix": "spark-pi",
             "spark.kubernetes.driver.request.cores": "500m", "spark.kubernetes.executor.request.cores": "500m",
             "spark.driver.memory": "512m", "spark.executor.memory": "512m", "spark.executor.instances": "2",
             "spark.kubernetes.authenticate.driver.serviceAccountName": "spark",
             "spark.kubernetes.submission.waitAppCompletion": "false"}
    return ["--master", f"k8s://{cluster.server}", "--deploy-mode", mode, "--name", "spark-pi",
            *(a for k, v in confs.items() for a in ("--conf", f"{k}={v}"))]


def spark_kubeconfig(cluster, namespace: str, tmp_path: Path) -> Path:
    """What examples/README.md has a user do: ServiceAccount ``spark`` bound to ClusterRole ``edit``
    in the namespace; here a kubeconfig with its token (Spark's Kubernetes client, fabric8, reads
    ``$KUBECONFIG``; it cannot parse the admin kubeconfig's EC client key: "Invalid DER")."""
    cluster.kubectl("create", "serviceaccount", "spark", "-n", namespace)
    cluster.kubectl("create", "rolebinding", "spark", "--clusterrole=edit", f"--serviceaccount={namespace}:spark",
                    "-n", namespace)
    token = cluster.kubectl("create", "token", "spark", "-n", namespace, "--duration=1h").stdout.strip()
    path = tmp_path / "spark-kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "spark",
        "clusters": [{"name": "local", "cluster": {"server": cluster.server,
                                                   "certificate-authority": str(cluster.ca_file)}}],
        "users": [{"name": "spark", "user": {"token": token}}],
        "contexts": [{"name": "spark", "context": {"cluster": "local", "user": "spark", "namespace": namespace}}]}))
    return path


def requests_of(pod: client.V1Pod) -> tuple[str, str]:
    r = pod.spec.containers[0].resources.requests
    return r["cpu"], r["memory"]


def test_spark(stack, cluster, kube, namespace, only_nodes, spark_submit, tmp_path):
    """spark.yaml and both pod templates with the real spark-submit: in cluster mode it creates the
    driver pod from the driver template; minResources (driver + 2 executors) holds the driver gated
    on a node of 1 CPU and releases it on a roomy one. The executors come from Spark's own driver
    code: spark-submit in client mode on this machine, for the driver pod ``spark-pi-driver`` (as the
    driver inside that pod would, were kwok's pods running anything), from the executor template;
    they join the released group and are bound."""
    env = dict(os.environ, KUBECONFIG=str(spark_kubeconfig(cluster, namespace, tmp_path)),
               PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    only_nodes(1, **SMALL)
    apply(cluster, namespace, "spark.yaml")
    submitted = subprocess.run([str(spark_submit), *spark_args(cluster, namespace, "cluster"),
                                "--class", "org.apache.spark.examples.SparkPi",
                                "local:///opt/spark/examples/jars/spark-examples.jar", "100"],
                               env=env, capture_output=True, text=True, timeout=180)
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    waits_whole(kube, namespace, "spark-pi", 1, "minResources cpu short by")
    only_nodes(1, **ROOMY)
    (driver,) = binds_as_one(kube, namespace, "spark-pi", 1)
    assert driver.metadata.name == "spark-pi-driver" and driver.metadata.labels["spark-role"] == "driver"
    assert requests_of(driver) == ("500m", "896Mi"), requests_of(driver)  # spark.yaml's minResources / 3

    app = tmp_path / "wait.py"
    app.write_text("import time\nfrom pyspark.sql import SparkSession\nSparkSession.builder.getOrCreate()\n"
                   "time.sleep(600)\n")
    log = tmp_path / "spark-client.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(spark_submit), *spark_args(cluster, namespace, "client"), str(app)],
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def executors_bound():
            ps = [p for p in group_pods(kube, namespace, "spark-pi") if p.metadata.labels.get("spark-role") == "executor"]
            return ps if len(ps) == 2 and all(bound(p) and not gated(p) for p in ps) else None

        try:
            executors = wait_for(executors_bound, 120, what="2 executors of spark-pi bound")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- pods: {[p.metadata.name for p in pods_of(kube, namespace)]}"
                                 f"\n--- {log}:\n{log.read_text()[-3000:]}") from None
        for p in executors:
            assert requests_of(p) == ("500m", "896Mi"), requests_of(p)
            assert [(o.kind, o.name) for o in p.metadata.owner_references or []] == [("Pod", "spark-pi-driver")]
        tells_the_truth(kube, namespace, "spark-pi", 3)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
