/*
 * Swivel: one Spark job of a task per item, each task preferring exactly its item's
 * executor: the helpers' way of running code on chosen executors (StatePrewarm's calls
 * without an RPC endpoint, HelperRpc's registration, SnapshotPhases' pass).
 */
package io.swivel.spark;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.SparkContext;
import org.apache.spark.api.java.function.Function;
import org.apache.spark.rdd.RDD;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;

final class PinnedJob {
  /** SparkContext.SPARK_JOB_DESCRIPTION (private[spark] in Scala). */
  private static final String JOB_DESCRIPTION = "spark.job.description";

  private PinnedJob() {}

  /** A preferred location on exactly that executor (Spark's ExecutorCacheTaskLocation). */
  static String on(String executorId, String host) {
    return "executor_" + host + "_" + executorId;
  }

  /**
   * Runs `body` on each item's `_1` in one job, its task preferring location `_2` (`on`),
   * under `description`; returns the answers in item order. Inside foreachBatch the
   * calling thread carries the batch's description ("... batch = N"), which the adapter
   * uses to find a batch's jobs: this job gets its own, then that one is restored.
   */
  static <T> List<String> run(SparkContext sc, String description, Class<T> type,
      List<Tuple2<T, String>> items, Function<T, String> body) {
    List<Tuple2<T, scala.collection.immutable.Seq<String>>> placed = new ArrayList<>();
    for (Tuple2<T, String> item : items) {
      placed.add(new Tuple2<>(item._1(),
          CollectionConverters.asScala(List.of(item._2())).toList()));
    }
    RDD<T> rdd = sc.makeRDD(CollectionConverters.asScala(placed).toList(),
        ClassTag$.MODULE$.apply(type));
    String previous = sc.getLocalProperty(JOB_DESCRIPTION);
    sc.setJobDescription(description);
    try {
      return rdd.toJavaRDD().map(body).collect();
    } finally {
      sc.setLocalProperty(JOB_DESCRIPTION, previous);
    }
  }
}
