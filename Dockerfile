# ragline as a container: the HTTP API, web UI and MCP endpoint of `ragline serve`.
#
# Multi-stage: the build stage installs ragline and its model packages (the embedder,
# the reader and the tokenizer are package data; nothing is downloaded when the
# container starts) into a virtual environment that the runtime stage copies. The
# runtime stage runs as an unprivileged user and keeps its index on the /data volume.
#
#   docker build -t ragline .            (or: podman build -t ragline .)
#   docker run -p 8000:8000 -v ragline-data:/data ragline
#   docker run -v "$PWD/docs:/docs:ro" -v ragline-data:/data ragline ingest /docs
#
# EXTRAS picks the optional extras baked in (pyproject.toml): the default serves
# LanceDB or PostgreSQL (deploy/compose.yaml), office files, PDFs with tables and the
# multilingual embedder. BASE is any Debian bookworm image with Python 3.11 and pip.
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE} AS build
ARG EXTRAS=postgres,office,pdf,multilingual
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python3 -m venv /opt/ragline
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# A regular (not editable) install: the runtime stage gets no source tree.
RUN /opt/ragline/bin/pip install ".[${EXTRAS}]" \
    && /opt/ragline/bin/python -c "import ragline.cli, ragline.reader.model"

FROM ${BASE}
ENV PATH=/opt/ragline/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/home/ragline \
    RAGLINE_INDEX_DIR=/data/index \
    RAGLINE_SERVE_HOST=0.0.0.0 \
    RAGLINE_SERVE_PORT=8000 \
    ORT_DISABLE_TELEMETRY=1
RUN groupadd --system --gid 10001 ragline \
    && useradd --system --uid 10001 --gid ragline --create-home --home-dir /home/ragline ragline \
    && mkdir -p /data \
    && chown ragline:ragline /data
COPY --from=build /opt/ragline /opt/ragline
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
ENTRYPOINT ["ragline"]
# --create: a fresh volume starts as an empty index that POST /api/documents fills.
CMD ["serve", "--create"]
