/*
 * Swivel: the Hadoop configuration a helper job's tasks read, broadcast once and reused
 * while it is unchanged (docs/migration.md, "One broadcast Hadoop conf, and waits woken
 * by the answers").
 *
 * Why: every helper job (a step's load starts, a switch's activation, polls, probes,
 * releases) used to ship the session's whole Hadoop configuration inside its task closure
 * (~114 KB, ~1 000 entries): the driver serialised it twice per job (the closure check and
 * the task binary) and every task deserialised it again. Measured in local mode, that was
 * ~40 of the ~65 ms of JVM CPU a one-task helper job took, against ~25 ms for an empty
 * job; on the batch path (a switch's activation job) and beside the batches (the loads)
 * on machines whose cores the batches already fill. Spark's own StateStoreRDD broadcasts
 * its Hadoop conf for the same reason; a broadcast is fetched once per executor and its
 * value shared by the executor's tasks.
 *
 * Reused only while the configuration's entries are exactly the ones broadcast (compared
 * entry by entry, ~0.2 ms): a setting changed in the session (the tests' failure switches
 * are such settings) gives the next job a new broadcast. A replaced broadcast is removed by
 * Spark's ContextCleaner once no job holds it; so a load reads the conf on its task's
 * thread, not later on the loader thread, where the broadcast's blocks may be gone.
 */
package io.swivel.spark;

import java.lang.ref.WeakReference;
import java.util.HashMap;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.SparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.util.SerializableConfiguration;
import scala.reflect.ClassTag$;

final class ShippedConf {
  private ShippedConf() {}

  // weak: a stopped context (and what it holds) is not kept for the next one's sake
  private static WeakReference<SparkContext> context = new WeakReference<>(null);
  private static Map<String, String> entries;
  private static Broadcast<SerializableConfiguration> shipped;
  private static long broadcasts;

  /** The broadcast of `conf` for `sc`'s jobs: the last one, while `conf` still equals it. */
  static synchronized Broadcast<SerializableConfiguration> of(SparkContext sc,
      Configuration conf) {
    Map<String, String> now = entriesOf(conf);
    if (shipped == null || context.get() != sc || !now.equals(entries)) {
      shipped = sc.broadcast(new SerializableConfiguration(conf),
          ClassTag$.MODULE$.apply(SerializableConfiguration.class));
      context = new WeakReference<>(sc);
      entries = now;
      broadcasts++;
    }
    return shipped;
  }

  /** How many broadcasts this driver JVM has made (a test reads it: reuse is the point). */
  static synchronized long broadcasts() {
    return broadcasts;
  }

  private static Map<String, String> entriesOf(Configuration conf) {
    Map<String, String> out = new HashMap<>();
    for (Map.Entry<String, String> entry : conf) {
      out.put(entry.getKey(), entry.getValue());
    }
    return out;
  }
}
