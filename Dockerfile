# One image for both Deployments of the chart: `cogate webhook ...`, `cogate controller ...`,
# `cogate certs bootstrap ...` (the webhook's certificate init container / sidecar).
# Tag it as the chart expects, <repository>:<chart appVersion>, push it, and install with
# --set image.repository=<registry>/cogate (see charts/cogate/README.md):
#   docker build -t <registry>/cogate:0.1.0 .
#   docker push <registry>/cogate:0.1.0
# The image holds only the Python distribution: no Go binaries, no tests, and not the
# local control plane (localcluster/: `cogate demo`, `cogate dev`, the real node and the image
# build, which need Go-built binaries and run apt-get, iptables and buildah as root); in the
# image those two commands say that it is not installed.

# Base image: the public python:3.11-slim; `make image` passes a locally built stand-in
# (Debian 12 + Python 3.11 + pip, localcluster/host/image.py) where no registry is reachable.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
WORKDIR /src
# What the webhook, the controller and the certificate bootstrap run (top-level component
# dirs install as subpackages, see pyproject.toml; without localcluster/ setup.py leaves
# cogate.localcluster out of the wheel). The CRD is installed by the chart (charts/cogate/crds/), not by the image.
COPY pyproject.toml setup.py README.md ./
COPY cogate/ cogate/
COPY controller/ controller/
COPY webhook/ webhook/
COPY certs/ certs/
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${BASE_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN groupadd --system --gid 10001 cogate \
 && useradd --system --uid 10001 --gid cogate --no-create-home --shell /usr/sbin/nologin cogate
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
# Numeric user so `runAsNonRoot: true` can be verified by the kubelet.
USER 10001:10001
EXPOSE 9443 8080
ENTRYPOINT ["cogate"]
CMD ["--help"]
