#!/usr/bin/env bash
# The image's entry point. Everything Swivel runs is a `swivel` command (operator, driver
# runtime, agent); the one exception is the executor: Spark on Kubernetes starts executor
# pods from the pod template with the single argument `executor` and describes the executor
# in SPARK_* environment variables, as Spark's own images expect.
set -euo pipefail

if [[ "${1:-}" != "executor" ]]; then
  exec swivel "$@"
fi

# spark.executor.extraJavaOptions and friends arrive as SPARK_JAVA_OPT_0, _1, ... in order.
java_opts=()
while IFS= read -r option; do
  java_opts+=("$option")
done < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | cut -d= -f2-)

classpath="${SPARK_HOME}/jars/*"
classpath+="${SPARK_CONF_DIR:+:$SPARK_CONF_DIR}"
classpath+="${SPARK_EXTRA_CLASSPATH:+:$SPARK_EXTRA_CLASSPATH}"
classpath+="${SPARK_DIST_CLASSPATH:+:$SPARK_DIST_CLASSPATH}"

exec "${JAVA_HOME}/bin/java" "${java_opts[@]}" \
  "-Xms${SPARK_EXECUTOR_MEMORY}" "-Xmx${SPARK_EXECUTOR_MEMORY}" \
  -cp "$classpath" \
  org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
  --driver-url "$SPARK_DRIVER_URL" \
  --executor-id "$SPARK_EXECUTOR_ID" \
  --cores "$SPARK_EXECUTOR_CORES" \
  --app-id "$SPARK_APPLICATION_ID" \
  --hostname "$SPARK_EXECUTOR_POD_IP" \
  --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" \
  --podName "$SPARK_EXECUTOR_POD_NAME"
