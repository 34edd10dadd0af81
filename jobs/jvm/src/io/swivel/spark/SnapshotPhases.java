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

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.function.Function;
import org.apache.spark.sql.execution.streaming.state.RocksDB;
import org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import scala.Tuple2;
import scala.collection.mutable.HashMap;
import scala.jdk.javaapi.CollectionConverters;

public final class SnapshotPhases {
  /** Bumped when the wire format of `run` changes; the Python side checks it. */
  public static final int API = 5;

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
   * One task per `executors` entry "executorId\thost", preferring exactly that executor:
   * each offsets the RocksDB stores of checkpoint `root` loaded there into their phase.
   * Returns one JSON object per entry: `stores` seen, `offset` (changed now), `in_phase`
   * (already were), or `wrong-executor` when the task ran elsewhere.
   */
  public static List<String> run(SparkContext sc, List<String> executors, String root,
      String runId) {
    List<Tuple2<String[], String>> items = new ArrayList<>();
    for (String entry : executors) {
      String[] parts = entry.split("\t", -1);
      items.add(new Tuple2<>(new String[] {parts[0], root, runId},
          PinnedJob.on(parts[0], parts[1])));
    }
    return PinnedJob.run(sc, "swivel: snapshot phases on " + executors.size() + " executor(s)",
        String[].class, items, new Offset());
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
      List<Tuple2<StateStoreProviderId, StateStoreProvider>> found = new ArrayList<>();
      HashMap<StateStoreProviderId, StateStoreProvider> providers =
          ProviderInternals.loadedProviders();
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
        stores++;
        int phase = id.storeId().partitionId() % every;
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
