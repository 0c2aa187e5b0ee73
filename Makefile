# The two commands the README starts with:
#   make demo   -> local control plane + the example, printing what a user sees
#   make test   -> every test (unit, webhook, end-to-end on the local control plane)
# Both work on a fresh machine with Python 3.11+ and Go 1.26 (Go only builds the
# test control plane: kube-apiserver, etcd, kube-scheduler, kube-controller-manager,
# kubectl, kwok, helm, cluster-autoscaler (from the repository's third_party/, see third_party/README.md),
# the MPI operator, KubeRay's operator, the training-operator and JobSet's controller (with
# their CRDs) for the operator and examples tests, cert-manager's controller and cainjector (with
# its CRDs) for the chart's cert-manager mode test,
# and containerd, kubelet, kube-proxy for the real node, pinned in
# localcluster/versions.py, cached under ~/.cache/cogate or $COGATE_CACHE_DIR). The real
# node's tests run as root and install Debian's runc, containernetworking-plugins and
# iptables with apt-get when missing (localcluster/host/realnode.py).
# `make demo` and `make dev-up` build only what they run (the control plane: etcd,
# kubernetes, kwok; `cogate demo` and `cogate dev up` build it themselves; `dev up --autoscaler`
# adds cluster-autoscaler); `make binaries` builds everything `make test` needs: every Go tool
# (the operators too) and the real node's pause image, and the control plane of each release in
# OTHER_RELEASES, on which `make test` then runs a representative end-to-end subset (RELEASE_SUBSET),
# and NATIVE_SUBSET with GenericWorkload on where NATIVE_RELEASES says (localcluster/versions.py RELEASES).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# Test workers (pytest-xdist): each test file runs whole on one worker, with its own local control
# plane per worker; the files that use the host's one real node or image build share one worker
# (tests/conftest.py HOST_EXCLUSIVE). PYTEST_WORKERS=0 runs in this process, one file after another.
PYTEST_WORKERS ?= 2
PYTEST := $(VENV)/bin/pytest $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadgroup)
# Releases besides the default (localcluster/versions.py DEFAULT_RELEASE) that `make test` covers with
# RELEASE_SUBSET (the README example, release, lifecycle, native gang scheduling), and those of them
# run again with Kubernetes' own gang scheduling on (GenericWorkload, 1.37 beta) for NATIVE_SUBSET.
OTHER_RELEASES ?= 1.30.14 1.37.2
NATIVE_RELEASES ?= 1.37.2
RELEASE_SUBSET ?= tests/e2e/test_example.py tests/e2e/test_lifecycle_release.py tests/e2e/test_lifecycle.py \
	tests/e2e/test_native.py
NATIVE_SUBSET ?= tests/e2e/test_example.py tests/e2e/test_native.py tests/e2e/test_native_preemption.py

.PHONY: demo test test-releases unit e2e binaries binaries-default binaries-releases image chart bench dev-up dev-down clean docs soak

$(VENV)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	@echo "installing cogate and its test dependencies into $(VENV) (log: $(VENV)/install.log)"
	@( $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q -e '.[test]' ) > $(VENV)/install.log 2>&1 \
		|| { cat $(VENV)/install.log; exit 1; }
	touch $@

binaries: binaries-default binaries-releases

# What the full suite needs: every Go tool of the default release and the real node's pause image.
binaries-default: $(VENV)/.installed
	$(PY) -m cogate.localcluster.build
	$(PHASE) "build pause image" -- $(PY) -m cogate.localcluster.host.pauseimage

# The control plane of each of OTHER_RELEASES (only the release subsets need them).
binaries-releases: $(VENV)/.installed
	@for r in $(OTHER_RELEASES); do $(PY) -m cogate.localcluster.build --kubernetes-version $$r etcd kubernetes kwok || exit 1; done

# The container image from the Dockerfile with buildah (installed with apt-get when missing
# and run as root), a local Debian 12 stand-in for the python:3.11.x-slim-bookworm base; prints the
# OCI archive for containerd (localcluster/host/image.py).
image: $(VENV)/.installed
	$(PY) -m cogate.localcluster.host.image

# The chart as a versioned archive, dist/cogate-<version>.tgz (version: charts/cogate/Chart.yaml, the
# one version of package, chart and image; CONTRIBUTING.md "Releasing"), with the pinned helm (built
# on first use into the cache, localcluster/versions.py HELM). Install from it: charts/cogate/README.md.
chart: $(VENV)/.installed
	@$(PY) -m cogate.localcluster.build helm
	@mkdir -p dist
	@"$$($(PY) -c 'from cogate.localcluster.build import binary; print(binary("helm"))')" package charts/cogate --destination dist
	@sha256sum dist/cogate-$$($(PY) -c 'import cogate; print(cogate.__version__)').tgz

demo: $(VENV)/.installed
	$(VENV)/bin/cogate demo

# The reference pages docs/reference/*.md, generated from the code (metrics, events, conditions,
# chart values); tests/unit/test_docsgen.py fails when a committed page differs.
docs: $(VENV)/.installed
	$(PY) -m cogate.docsgen

# Each test phase's elapsed time goes to $$COGATE_PHASES_FILE when set (.ci/run prints the table;
# localcluster/phases.py), as does each Go build (cogate.localcluster.build).
PHASE := $(PYTHON) localcluster/phases.py run

# `make test` builds the other releases' control planes in the background (nice 19: the tests come
# first) while the full suite runs on the default release, whose end-to-end files leave most of the
# 2 cores idle waiting on the API server; then it waits for that build and runs the release subsets.
# The build's log: $(RELEASES_BUILD).log; a failed build prints it and fails `make test`.
RELEASES_BUILD := $(VENV)/releases-build
test: binaries-default
	@rm -f $(RELEASES_BUILD).rc; setsid sh -c 'COGATE_PHASES_PREFIX="(background) " nice -n 19 \
		$(MAKE) --no-print-directory binaries-releases > $(RELEASES_BUILD).log 2>&1; echo $$? > $(RELEASES_BUILD).rc' \
		& echo $$! > $(RELEASES_BUILD).pid
	@$(PHASE) "tests: full suite on the default release" -- $(PYTEST) $(PYTEST_ARGS) \
		|| { kill -- -$$(cat $(RELEASES_BUILD).pid) 2>/dev/null; exit 1; }
	@$(PHASE) "waiting for the other releases' build" -- sh -c 'while [ ! -f $(RELEASES_BUILD).rc ]; do sleep 2; done; \
		rc=$$(cat $(RELEASES_BUILD).rc); [ "$$rc" = 0 ] || cat $(RELEASES_BUILD).log; exit $$rc'
	@$(MAKE) --no-print-directory test-releases

# RELEASE_SUBSET on each of OTHER_RELEASES, then NATIVE_SUBSET with GenericWorkload on for NATIVE_RELEASES.
test-releases: binaries-releases
	@for r in $(OTHER_RELEASES); do \
		echo "== Kubernetes $$r: $(RELEASE_SUBSET)"; \
		COGATE_KUBERNETES_VERSION=$$r $(PHASE) "tests: release subset on $$r" -- \
			$(PYTEST) -m e2e $(PYTEST_ARGS) $(RELEASE_SUBSET) || exit 1; \
	done
	@for r in $(NATIVE_RELEASES); do \
		echo "== Kubernetes $$r with GenericWorkload=true: $(NATIVE_SUBSET)"; \
		COGATE_KUBERNETES_VERSION=$$r COGATE_FEATURE_GATES=GenericWorkload=true \
			$(PHASE) "tests: native subset on $$r" -- $(PYTEST) -m e2e $(PYTEST_ARGS) $(NATIVE_SUBSET) || exit 1; \
	done

unit: $(VENV)/.installed
	$(PYTEST) -m 'not e2e' $(PYTEST_ARGS)

e2e: binaries-default
	$(PYTEST) -m e2e $(PYTEST_ARGS)

$(VENV)/.bench-installed: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $@

# Every benchmark (bench/README.md) -> docs/benchmarks.md and docs/benchmarks/*.png.
# BENCH_ARGS: e.g. --no-cluster, --only planning_pass, --quick.
BENCH_ARGS ?=
bench: $(VENV)/.bench-installed
	$(PY) bench/run.py $(BENCH_ARGS)

# The chaos soak (issue 35, bench/soak.py): SOAK_MINUTES per seed, SOAK_SEED one seed or several
# ("1 2 3", run one after the other) -> docs/benchmarks/results/soak.json and docs/benchmarks.md.
SOAK_MINUTES ?= 30
SOAK_SEED ?= 1
soak: $(VENV)/.bench-installed
	SOAK_MINUTES=$(SOAK_MINUTES) SOAK_SEED="$(SOAK_SEED)" $(PY) bench/run.py --only soak

dev-up: $(VENV)/.installed
	$(VENV)/bin/cogate dev up

dev-down: $(VENV)/.installed
	$(VENV)/bin/cogate dev down

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
