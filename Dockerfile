# One image for everything Swivel runs: the operator, the driver-side job runtime (PySpark
# on Java 17) and the sidecar agent. Non-root.
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install --no-install-recommends -y openjdk-17-jre-headless procps tini \
 && rm -rf /var/lib/apt/lists/*

ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /opt/swivel
COPY pyproject.toml README.md ./
COPY swivel ./swivel
COPY operator ./operator
COPY controllers ./controllers
COPY jobs ./jobs
RUN pip install . && rm -rf /opt/swivel/build

RUN useradd --create-home --uid 10001 swivel
USER 10001
WORKDIR /home/swivel

ENTRYPOINT ["/usr/bin/tini", "--", "swivel"]
CMD ["--help"]
