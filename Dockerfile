# One image for both Deployments of the chart: `cogate webhook ...`, `cogate controller ...`,
# `cogate certs bootstrap ...` (the webhook's certificate init container / sidecar).
# Tag it as the chart expects, <repository>:<chart appVersion> (= cogate.__version__), push it,
# and install with --set image.repository=<registry>/cogate (see charts/cogate/README.md):
#   docker build -t <registry>/cogate:<version> .      (<version>: appVersion in charts/cogate/Chart.yaml)
# or for two architectures at once (buildx; the lock has wheels for both, see below):
#   docker buildx build --platform linux/amd64,linux/arm64 -t <registry>/cogate:<version> --push .
# The image holds only the Python distribution: no Go binaries, no tests, and not the
# local control plane (localcluster/: `cogate demo`, `cogate dev`, the real node and the image
# build, which need Go-built binaries and run apt-get, iptables and buildah as root); in the
# image those two commands say that it is not installed.
#
# Reproducible: two builds of one commit install the same files.
# - The base is pinned to one Python patch release on one Debian release. Pin its digest too where
#   you build (docker buildx imagetools inspect python:3.11.15-slim-bookworm prints the index digest):
#   --build-arg BASE_IMAGE=python:3.11.15-slim-bookworm@sha256:<digest>. CONTRIBUTING.md, "Releasing".
# - Every Python dependency comes from constraints.txt (pip-compile, every version pinned, the SHA-256
#   of every file the index serves for it, all platforms): `pip wheel --require-hashes` refuses
#   anything else, and only wheels (no build from source). The image installs exactly those wheels
#   and cogate's own, offline (--no-index); setuptools, the build backend, is locked there too and
#   stays in the build stage.
# - The build context is an allow-list (.dockerignore): only what the COPY lines below take.
#
# `make image` passes a locally built stand-in for the base (Debian 12 + Python 3.11 + pip,
# localcluster/host/image.py) where no container registry is reachable.
ARG BASE_IMAGE=python:3.11.15-slim-bookworm

FROM ${BASE_IMAGE} AS build
WORKDIR /src
# The locked dependencies' wheels, hash-checked, before the sources (a source change keeps this step's cache).
COPY constraints.txt ./
RUN pip wheel --no-cache-dir --no-deps --require-hashes --only-binary=:all: --wheel-dir /wheels \
        -r constraints.txt \
 && pip install --no-cache-dir --no-index --no-deps /wheels/setuptools-*.whl \
 && mkdir /build-wheels && mv /wheels/setuptools-*.whl /build-wheels/
# What the webhook, the controller and the certificate bootstrap run (top-level component
# dirs install as subpackages, see pyproject.toml; without localcluster/ setup.py leaves
# cogate.localcluster out of the wheel). The CRD is installed by the chart (charts/cogate/crds/), not by the image.
COPY pyproject.toml setup.py README.md LICENSE ./
COPY cogate/ cogate/
COPY controller/ controller/
COPY webhook/ webhook/
COPY certs/ certs/
# cogate's own wheel with the locked setuptools (no build isolation: nothing fetched).
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /wheels .

FROM ${BASE_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN groupadd --system --gid 10001 cogate \
 && useradd --system --uid 10001 --gid cogate --no-create-home --shell /usr/sbin/nologin cogate
COPY --from=build /wheels /wheels
# Exactly the wheels of the build stage, nothing resolved or fetched; pip check: they fit together.
RUN pip install --no-cache-dir --no-index --no-deps /wheels/*.whl && pip check && rm -rf /wheels
# Numeric user so `runAsNonRoot: true` can be verified by the kubelet.
USER 10001:10001
EXPOSE 9443 8080
ENTRYPOINT ["cogate"]
CMD ["--help"]
