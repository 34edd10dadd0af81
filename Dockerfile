# syntax=docker/dockerfile:1
# One image for everything Swivel runs: the operator, the Spark driver with the job runtime,
# the Spark executors (PySpark on Java 17) and the sidecar agent. Non-root (uid 10001).
# Built in CI or on any machine with Docker/BuildKit: `docker build -t ghcr.io/swivel-dev/swivel:0.1.0 .`
# (docs/packaging.md); tests/chart/test_dockerfile.py checks this file statically.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build: a virtualenv with swivel and its dependencies ------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH
# A JDK here only: javac compiles the prewarm helper (jobs/jvm/src) against PySpark's jars;
# the runtime stage keeps the JRE.
RUN apt-get update \
 && apt-get install --no-install-recommends -y openjdk-17-jdk-headless \
 && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/venv
WORKDIR /src
# Dependencies first, from pyproject.toml alone (pyspark is most of the image): this layer
# is only rebuilt when the dependencies change, not on every source edit.
COPY pyproject.toml README.md ./
RUN mkdir swivel && touch swivel/__init__.py \
 && pip install . \
 && pip uninstall --yes swivel \
 && rm -rf swivel build
# Then the sources. `swivel/operator`, `swivel/controllers` and `swivel/jobs` are relative
# symlinks to the top-level folders, so those are copied beside it. `tools/` (the sandbox
# and the benchmarks, the swivel-tools distribution) is not: the image is the product.
COPY swivel ./swivel
COPY operator ./operator
COPY controllers ./controllers
COPY jobs ./jobs
# The helper jar is written into the installed package (swivel/jobs/jvm/swivel-spark.jar).
RUN pip install --no-deps . \
 && python -m swivel.jobs.jvm.build --src jobs/jvm/src \
 && swivel --version

# --- runtime ---------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
# Java 17 for Spark; tini as PID 1; procps because Spark's scripts call `ps`. JAVA_HOME is
# a stable link, whatever the architecture's JVM directory is called.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install --no-install-recommends -y openjdk-17-jre-headless procps tini \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "$(dirname "$(dirname "$(readlink -f /usr/bin/java)")")" /opt/java

COPY --from=build /opt/venv /opt/venv
COPY --chmod=0755 docker/entrypoint.sh /usr/local/bin/swivel-entrypoint

ENV JAVA_HOME=/opt/java \
    SPARK_HOME=/opt/venv/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/opt/venv/bin/python \
    PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

RUN useradd --uid 10001 --user-group --create-home --home-dir /home/swivel \
      --shell /usr/sbin/nologin swivel \
 && mkdir -p /var/lib/swivel \
 && chown 10001:10001 /var/lib/swivel \
 && java -version \
 && swivel --version
USER 10001:10001
WORKDIR /home/swivel

ENTRYPOINT ["/usr/bin/tini", "--", "swivel-entrypoint"]
CMD ["--help"]
