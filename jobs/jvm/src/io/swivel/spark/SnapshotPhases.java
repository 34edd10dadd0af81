/*
 * Swivel: spread RocksDB's snapshots over the versions instead of every bin taking its
 * snapshot in the same batch (docs/migration.md, "Staggered snapshots").
 *
 * Written against Spark 4.3.0 (the adapter, SparkInternals, accepts 4.3.x only).
 *
 * Why: with changelog checkpointing a RocksDB store takes a snapshot inside its task's
 * commit (a memtable flush and a local checkpoint) when the version it commits is
 * `minDeltasForSnapshot` past its last snapshot. Every bin of a query commits the same
 * version in the same batch, so every bin snapshots in the same batch: one batch in
 * `minDeltasForSnapshot` pays all of them at once (measured at 160 k keys, 64 bins, 2 cores:
 * 2.6-4.5 s against a p50 of 1.6 s). Spark has no setting that offsets them.
 *
 * How: RocksDB decides with `(loadedVersion + 1) - lastSnapshotVersion >= minDeltas`
 * (RocksDB.shouldCreateSnapshot, its only reader of `lastSnapshotVersion`). For a bin whose
 * last snapshot is not in its phase (`partition % every`), this sets `lastSnapshotVersion`
 * to `next - every`, where `next` is the first version after the loaded one in the bin's
 * phase: the bin then snapshots at `next` and every `every` versions after it, and a
 * reload (a restart, a migration) starts from such a snapshot, so the phase persists.
 * Nothing else reads the field; the checkpoint's files are untouched. The one cost: a
 * bin's first offset snapshot can come up to `every - 1` versions later than Spark's
 * schedule, so until then a reload may replay that many more changelogs.
 */
package io.swivel.spark;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.function.Function;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.execution.streaming.state.RocksDB;
import org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import scala.Tuple2;
import scala.collection.mutable.HashMap;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;

public final class SnapshotPhases {
  /** Bumped when the wire format of `run` or `fileNames` changes; the Python side checks it. */
  public static final int API = 4;

  private static final String LAST_SNAPSHOT =
      "org$apache$spark$sql$execution$streaming$state$RocksDB$$lastSnapshotVersion";

  private SnapshotPhases() {}

  public static int api() {
    return API;
  }

  /** The first version after `loaded` in `phase` (mod `every`). */
  public static long nextInPhase(long loaded, int phase, int every) {
    long first = loaded + 1;
    return first + Math.floorMod(phase - first, (long) every);
  }

  /**
   * One task per `executors` entry "executorId\thost[\tpartition,partition...]", preferring
   * exactly that executor. `mode` "phase": each offsets the RocksDB stores of checkpoint
   * `root` loaded there into their phase. `mode` "next": each makes the listed partitions'
   * stores take a snapshot at their next commit (a giver's bins ahead of a prewarmed switch:
   * the switch's top-up then replays from that snapshot). Returns one JSON object per entry:
   * `stores` seen, `offset` (changed now), `in_phase` (already were), or `wrong-executor`
   * when the task ran elsewhere.
   */
  public static List<String> run(SparkContext sc, List<String> executors, String root,
      String runId, String mode) {
    List<Tuple2<String[], scala.collection.immutable.Seq<String>>> items = new ArrayList<>();
    for (String entry : executors) {
      String[] parts = entry.split("\t", -1);
      String partitions = parts.length > 2 ? parts[2] : "";
      String[] spec = {parts[0], root, runId, mode, partitions};
      List<String> where = new ArrayList<>();
      where.add("executor_" + parts[1] + "_" + parts[0]);
      items.add(new Tuple2<>(spec, CollectionConverters.asScala(where).toList()));
    }
    @SuppressWarnings("unchecked")
    RDD<String[]> rdd = sc.makeRDD(CollectionConverters.asScala(items).toList(),
        ClassTag$.MODULE$.apply((Class<String[]>) (Class<?>) String[].class));
    String description = sc.getLocalProperty("spark.job.description");
    sc.setJobDescription("swivel: snapshot phases on " + executors.size() + " executor(s)");
    try {
      return rdd.toJavaRDD().map(new Offset()).collect();
    } finally {
      sc.setLocalProperty("spark.job.description", description);
    }
  }

  /**
   * Driver side: the names of the files in each of `folders`, as one string: a line per
   * folder, in order, its names joined by '/'; an empty line for a folder that does not exist
   * (yet). A name holding '/' or a line break is left out (no snapshot's name does). One call
   * and one string for all of them: listed from Python, each file's name took three py4j
   * round trips (~150 ms, ~80 ms of them the driver's Python CPU, to check two folders of 120
   * changelogs), and even a returned list costs a round trip per element; a prewarmed step's
   * wait for its givers' snapshots lists its bins' folders every 0.2 s.
   */
  public static String fileNames(FileSystem fs, List<String> folders) throws IOException {
    StringBuilder listed = new StringBuilder();
    for (int i = 0; i < folders.size(); i++) {
      if (i > 0) {
        listed.append('\n');
      }
      FileStatus[] statuses;
      try {
        statuses = fs.listStatus(new Path(folders.get(i)));
      } catch (FileNotFoundException e) {
        continue;  // not created yet: no snapshot in it
      }
      boolean first = true;
      for (FileStatus status : statuses) {
        String name = status.getPath().getName();
        if (name.indexOf('/') >= 0 || name.indexOf('\n') >= 0 || name.indexOf('\r') >= 0) {
          continue;
        }
        if (!first) {
          listed.append('/');
        }
        listed.append(name);
        first = false;
      }
    }
    return listed.toString();
  }

  /**
   * Sets `lastSnapshotVersion` to `value` computed from the loaded version, and again if a
   * commit moved that version meanwhile (the task of a running batch may commit beside this
   * pass): the value then never lags the store by a version, which would make it snapshot
   * once more out of phase.
   */
  static void setLast(RocksDB db, java.util.function.LongSupplier value) {
    for (int attempt = 0; attempt < 3; attempt++) {
      long loaded = db.loadedVersion();
      db.org$apache$spark$sql$execution$streaming$state$RocksDB$$lastSnapshotVersion_$eq(
          value.getAsLong());
      if (db.loadedVersion() == loaded) {
        return;
      }
    }
  }

  /** The task body. */
  static final class Offset implements Function<String[], String> {
    private static final long serialVersionUID = 1L;

    @Override
    public String call(String[] spec) throws Exception {
      String here = SparkEnv.get().executorId();
      StatePrewarm.Json out = new StatePrewarm.Json().put("executor", here);
      if (!here.equals(spec[0])) {
        return out.put("status", "wrong-executor").put("wanted", spec[0]).toString();
      }
      String root = spec[1];
      String runId = spec[2];
      boolean snapshotNext = "next".equals(spec[3]);
      java.util.Set<Integer> listed = new java.util.HashSet<>();
      for (String part : spec[4].split(",")) {
        if (!part.isEmpty()) {
          listed.add(Integer.parseInt(part));
        }
      }
      List<Tuple2<StateStoreProviderId, StateStoreProvider>> found = new ArrayList<>();
      HashMap<StateStoreProviderId, StateStoreProvider> providers =
          StatePrewarm.loadedProviders();
      synchronized (providers) {
        found.addAll(CollectionConverters.asJava(providers.toList()));
      }
      Field dbField = RocksDBStateStoreProvider.class.getDeclaredField("rocksDB");
      dbField.setAccessible(true);
      Field lastField = RocksDB.class.getDeclaredField(LAST_SNAPSHOT);
      lastField.setAccessible(true);
      int stores = 0;
      int offset = 0;
      int inPhase = 0;
      for (Tuple2<StateStoreProviderId, StateStoreProvider> pair : found) {
        StateStoreProviderId id = pair._1();
        // this run's stores only: not a prewarm's shadow copy, not an earlier run's leftovers
        if (!(pair._2() instanceof RocksDBStateStoreProvider)
            || !root.equals(id.storeId().checkpointRootLocation())
            || !runId.equals(id.queryRunId().toString())) {
          continue;
        }
        Object held = dbField.get(pair._2());  // not rocksDB(): it would create one
        if (held == null || ((RocksDB) held).loadedVersion() < 0) {
          continue;
        }
        RocksDB db = (RocksDB) held;
        int every = db.conf().minDeltasForSnapshot();  // the store's own interval
        int partition = id.storeId().partitionId();
        if (snapshotNext) {
          if (listed.contains(partition)) {
            stores++;
            offset++;
            setLast(db, () -> db.loadedVersion() + 1 - every);
          }
          continue;
        }
        stores++;
        int phase = partition % every;
        if (Math.floorMod(lastField.getLong(db), (long) every) == phase) {
          inPhase++;
          continue;
        }
        offset++;
        setLast(db, () -> nextInPhase(db.loadedVersion(), phase, every) - every);
      }
      return out.put("status", "done").put("stores", stores).put("offset", offset)
          .put("in_phase", inPhase).toString();
    }
  }
}
