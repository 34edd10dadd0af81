/*
 * Swivel: one helper call's work on an executor, for one bin and store (docs/migration.md,
 * "Prewarmed moves: what Spark allows"): start a load, poll it, activate a loaded copy at
 * the switch, probe, release. Run by a helper job's task or by the executor's helper
 * endpoint (HelperEndpoint); the loads' state it works on is PrewarmLoads'.
 */
package io.swivel.spark;

import static io.swivel.spark.PrewarmLoads.LOADER;
import static io.swivel.spark.PrewarmLoads.LOADS;
import static io.swivel.spark.PrewarmLoads.LOAD_HOLD_KEY;
import static io.swivel.spark.PrewarmLoads.PREWARMED;
import static io.swivel.spark.PrewarmLoads.RUNNING;
import static io.swivel.spark.PrewarmLoads.announce;
import static io.swivel.spark.PrewarmLoads.doneLoading;
import static io.swivel.spark.PrewarmLoads.dropLoad;
import static io.swivel.spark.PrewarmLoads.followerPriority;
import static io.swivel.spark.PrewarmLoads.holdWhileExists;
import static io.swivel.spark.PrewarmLoads.loaderPriority;
import static io.swivel.spark.PrewarmLoads.removeQuietly;
import static io.swivel.spark.PrewarmLoads.unrecord;
import static io.swivel.spark.StatePrewarm.REPLAY_REFUSED_KEY;
import static io.swivel.spark.StatePrewarm.describe;

import io.swivel.spark.PrewarmLoads.Load;
import io.swivel.spark.StatePrewarm.Json;
import io.swivel.spark.StatePrewarm.Spec;
import java.lang.ref.WeakReference;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.function.Function;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.NoPrefixKeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.RocksDB;
import org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStore$;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.storage.BlockId;
import org.apache.spark.util.SerializableConfiguration;
import scala.Option;
import scala.collection.mutable.HashMap;
import scala.jdk.javaapi.CollectionConverters;

final class PrewarmRunner implements Function<Spec, String> {
  private static final long serialVersionUID = 1L;
  private final StateStoreConf storeConf;
  // broadcast: fetched once per executor, not shipped and deserialised with every task
  private final Broadcast<SerializableConfiguration> shippedConf;

  PrewarmRunner(StateStoreConf storeConf, Broadcast<SerializableConfiguration> shippedConf) {
    this.storeConf = storeConf;
    this.shippedConf = shippedConf;
  }

  /**
   * The session's Hadoop conf, shared by every helper task of the executor (one broadcast
   * value): read it, never change it; Spark is handed a copy (StateStore sets the run id
   * on the conf it is given).
   */
  private Configuration hadoopConf() {
    return shippedConf.value().value();
  }

  /** A boolean session setting (the failure switches), false where unset. */
  boolean setting(String key) {
    return hadoopConf().getBoolean(key, false);
  }

  @Override
  public String call(Spec spec) throws Exception {
    HelperEndpoint.ensure();  // then the driver's next call to it needs no job
    return answer(spec);
  }

  /** The actions `answer` dispatches (HelperEndpoint refuses a call naming another). */
  static final java.util.Set<String> ACTIONS =
      java.util.Set.of("load", "poll", "activate", "probe", "release");

  /** The call's work, on the job's task or on the executor's endpoint (HelperEndpoint). */
  String answer(Spec spec) throws Exception {
    String here = SparkEnv.get().executorId();
    Json out = new Json().put("partition", spec.partition).put("store", spec.storeName)
        .put("operator", spec.operatorId).put("executor", here).put("action", spec.action);
    if (!here.equals(spec.executorId)) {
      return out.put("status", "wrong-executor").put("wanted", spec.executorId).toString();
    }
    switch (spec.action) {
      case "load":
        return load(spec, out);
      case "poll":
        return poll(spec, out);
      case "activate":
        try {
          return activate(spec, out);
        } catch (Throwable e) {  // answered, not thrown: one bin's failure fails no job
          return out.put("status", "failed").put("error", describe(e)).toString();
        }
      case "probe":
        return probe(spec, out);
      case "release":
        return release(spec, out);
      default:
        return out.put("status", "unknown-action").toString();
    }
  }

  /**
   * Loads the bin's copy (`loadShadow`); a RocksDB copy then replays in place the versions
   * committed while it loaded (ChangelogFollower.catchUp) and is followed from here on,
   * registered only while `current` (under the loads' lock) says this is the bin's load.
   */
  private String prewarm(Spec spec, Json out, java.util.function.BooleanSupplier current,
      Configuration conf) throws Exception {
    StateStoreProviderId real = spec.real();
    StateStoreProviderId shadow = spec.shadow();
    if (StateStore$.MODULE$.isLoaded(real)) {
      return out.put("status", "already-loaded").toString();  // it serves (served) the bin
    }
    long start = System.nanoTime();
    holdWhileExists(conf.get(LOAD_HOLD_KEY, ""));
    ChangelogFollower.stop(spec.key(), "reloaded");  // the load below may replace its version
    loadShadow(spec, conf);
    double ms = (System.nanoTime() - start) / 1e6;
    StateStoreProvider provider = ProviderInternals.loaded(shadow);
    if (provider != null) {
      PREWARMED.put(spec.key(), new WeakReference<>(provider));
      out.put("cleanup_floor", ProviderInternals.setCleanupFloor(provider, conf));
      if (ProviderInternals.rocksDbOf(provider) != null
          && !conf.getBoolean(REPLAY_REFUSED_KEY, false)) {
        ChangelogFollower.Followed followed = new ChangelogFollower.Followed(shadow, provider,
            spec.root, new Configuration(conf));
        ChangelogFollower.catchUp(followed);
        synchronized (LOADS) {
          if (current.getAsBoolean()) {
            ChangelogFollower.add(spec.key(), followed);
          }
        }
        out.put("caught_up", followed.replayed);
      }
    }
    return out.put("status", provider != null ? "loaded" : "evicted")
        .put("version", spec.version).put("load_ms", ms).put("loader", loaderPriority)
        .put("provider", provider == null ? 0 : System.identityHashCode(provider))
        .put("rocksdb_version", ProviderInternals.rocksDbVersion(provider))
        .toString();
  }

  /**
   * Starts `prewarm` on the executor's loader thread and answers at once (`loading`, or
   * `already-loaded` as `prewarm` says it): the task frees its slot while the bin loads.
   */
  private String load(Spec spec, Json out) throws Exception {
    String key = spec.key();
    out.put("load_id", spec.loadId);
    if (StateStore$.MODULE$.isLoaded(spec.real())) {
      // an earlier step's load of the bin is of no use here (the target serves the bin):
      // a poll must not answer with it, and its copy goes (now, or when it ends)
      dropLoad(spec, false);
      return out.put("status", "already-loaded").toString();
    }
    Json answer = new Json().put("partition", spec.partition).put("store", spec.storeName)
        .put("operator", spec.operatorId).put("executor", SparkEnv.get().executorId())
        .put("action", "prewarm").put("load_id", spec.loadId);
    // read on the calling thread (the job's task or the endpoint's pool) while the driver's
    // call holds the broadcast: a load may wait in the loader's queue after a changed
    // setting has replaced the broadcast and Spark's cleaner has removed the old one's blocks
    Configuration conf = hadoopConf();
    boolean overRpc = !conf.getBoolean(HelperEndpoint.DROP_ANSWERS_KEY, false);
    AtomicReference<Load> self = new AtomicReference<>();
    Load task = new Load(spec.loadId, () -> {
      synchronized (LOADS) {
        if (LOADS.get(key) != self.get()) {  // released, or replaced, while it was queued
          return answer.put("status", "released").toString();
        }
        RUNNING.add(key);
      }
      String result;
      boolean orphan;
      try {
        result = prewarm(spec, answer, () -> LOADS.get(key) == self.get(), conf);
      } catch (Throwable e) {  // a Scala assert's AssertionError too: answered, not thrown
        result = answer.put("status", "failed").put("error", describe(e)).toString();
      } finally {
        // released (or its record dropped by the already-loaded path) while it loaded:
        // the copy it made has no owner left, so it goes now instead of staying loaded
        orphan = doneLoading(spec);
      }
      if (orphan) {
        return result;  // nobody reads it: the record that poll and announce need is gone
      }
      // announced only while this is still the key's load
      announce(key, spec.loadId, result, () -> LOADS.get(key) == self.get(), overRpc);
      return result;
    });
    self.set(task);
    BlockId earlier;
    synchronized (LOADS) {  // recorded before it can run: it looks itself up
      LOADS.put(key, task);
      earlier = unrecord(key);  // an earlier load's answer for the bin
    }
    removeQuietly(earlier);
    LOADER.execute(task);
    return out.put("status", "loading").toString();
  }

  /** Drops the key's load record and its announced answer, in one step. */
  private Load forget(String key) {
    Load pending;
    BlockId answered;
    synchronized (LOADS) {
      answered = unrecord(key);
      pending = LOADS.remove(key);
    }
    removeQuietly(answered);
    return pending;
  }

  /**
   * A started load's answer (as `prewarm`'s), `loading` while it runs, `no-load`, or
   * `superseded` when the bin's load is another one than `spec.loadId`.
   */
  private String poll(Spec spec, Json out) throws Exception {
    Load pending = LOADS.get(spec.key());
    out.put("load_id", spec.loadId);
    if (pending == null) {
      return out.put("status", "no-load").toString();
    }
    if (!pending.loadId.equals(spec.loadId)) {
      return out.put("status", "superseded").toString();
    }
    if (!pending.isDone()) {
      return out.put("status", "loading").toString();
    }
    return pending.get();
  }

  /**
   * Loads (or reuses) the provider under the shadow id at `spec.version`:
   * getStateStoreProvider reports the shadow id active here, so neither eviction path
   * touches it; getReadStore loads the version (HDFS: snapshot + deltas into loadedMaps;
   * RocksDB: the checkpoint's files into the provider's local database). A transformWithState
   * store is opened as its operator opens it (dummy binary key and value schemas, column
   * families, several values per key); its state variables are column families that the
   * checkpoint brings back. The read store is then released: on RocksDB `abort()` is a
   * rollback that throws the loaded version away, `release()` keeps it.
   */
  private void loadShadow(Spec spec, Configuration conf) throws Exception {
    ReadStateStore store = openShadow(spec, spec.version, conf);
    if (ProviderInternals.loaded(spec.shadow()) instanceof RocksDBStateStoreProvider) {
      store.release();
    } else {
      store.abort();
    }
  }

  /** A read store of the shadow copy at `version` (loaded first where it is not). */
  private ReadStateStore openShadow(Spec spec, long version, Configuration conf)
      throws Exception {
    StructType keySchema = (StructType) DataType.fromJson(spec.keySchema);
    StructType valueSchema = (StructType) DataType.fromJson(spec.valueSchema);
    KeyStateEncoderSpec encoder = new NoPrefixKeyStateEncoderSpec(keySchema);
    return StateStore$.MODULE$.getReadOnly(spec.shadow(), keySchema, valueSchema, encoder,
        version, Option.empty(), Option.empty(), spec.columnFamilies, storeConf,
        new Configuration(conf), spec.columnFamilies);
  }

  private String activate(Spec spec, Json out) throws Exception {
    forget(spec.key());
    // no replay of the follower's may run into the copy from here on (it waits for one)
    long stopping = System.nanoTime();
    ChangelogFollower.Followed followed = ChangelogFollower.stop(spec.key(), "switched");
    if (followed != null) {
      out.put("followed", followed.replayed).put("follow_stopped", followed.stopped)
          .put("stop_wait_ms", (System.nanoTime() - stopping) / 1e6);
    }
    StateStoreProviderId real = spec.real();
    StateStoreProviderId shadow = spec.shadow();
    if (spec.version > 0
        && ProviderInternals.loaded(shadow) instanceof RocksDBStateStoreProvider) {
      long start = System.nanoTime();
      String how = topUp(spec);
      out.put("topup_ms", (System.nanoTime() - start) / 1e6).put("topup_version", spec.version)
          .put("topup", how);
    }
    HashMap<StateStoreProviderId, StateStoreProvider> providers =
        ProviderInternals.loadedProviders();
    StateStoreProvider leftover = null;
    String status;
    StateStoreProvider moved = null;
    synchronized (providers) {  // StateStore's own lock on loadedProviders
      Option<StateStoreProvider> found = providers.remove(shadow);
      if (found.isEmpty()) {
        status = "no-shadow";
      } else if (providers.contains(real)) {
        leftover = found.get();
        status = "real-already-loaded";
      } else {
        moved = found.get();
        providers.put(real, moved);
        status = "activated";
      }
    }
    if (leftover != null) {
      StateStore$.MODULE$.closeProvider(shadow, leftover);
    }
    out.put("status", status);
    if (moved != null) {
      out.put("provider", System.identityHashCode(moved))
          .put("provider_id_fixed", ProviderInternals.renameProvider(moved, real))
          .put("rocksdb_version", ProviderInternals.rocksDbVersion(moved))
          .put("forwarder_fixed", ProviderInternals.renameForwarder(moved, real));
    }
    return out.toString();
  }

  /**
   * Brings the shadow RocksDB copy to `spec.version`: in place when its changelogs allow
   * (`ChangelogCatchUp`: only the versions it misses are read), otherwise by Spark's own
   * load, which reopens the database from the bin's newest snapshot. Says which: `current`,
   * `replayed N` (versions) or `reopened: <why not in place>`.
   */
  private String topUp(Spec spec) throws Exception {
    StateStoreProvider copy = ProviderInternals.loaded(spec.shadow());
    RocksDB db = ProviderInternals.rocksDbOf(copy);
    long from = db == null ? -1 : db.loadedVersion();
    if (from == spec.version) {
      return "current";
    }
    String why = db == null ? "no database" : ChangelogCatchUp.refusal(db, from, spec.version);
    if (why == null && hadoopConf().getBoolean(REPLAY_REFUSED_KEY, false)) {
      why = "refused by " + REPLAY_REFUSED_KEY;
    }
    if (why == null) {
      try {  // held as a read store of the copy itself (a closed copy throws: reopened below)
        ChangelogCatchUp.replayHeld(copy, db, from, spec.version);
        return "replayed " + (spec.version - from);
      } catch (Exception e) {  // it then holds nothing: the load below reopens it whole
        why = "replay failed: " + describe(e);
      }
    }
    loadShadow(spec, hadoopConf());
    return "reopened: " + why;
  }

  private String probe(Spec spec, Json out) throws Exception {
    StateStoreProvider provider = ProviderInternals.loaded(spec.real());
    WeakReference<StateStoreProvider> ref = PREWARMED.get(spec.key());
    StateStoreProvider prewarmed = ref == null ? null : ref.get();
    StateStoreProvider shadow = ProviderInternals.loaded(spec.shadow());
    ChangelogFollower.Followed followed = ChangelogFollower.followed(spec.key());
    out.put("loaded", provider != null)
        .put("prewarmed_provider", provider != null && provider == prewarmed)
        .put("shadow_loaded", shadow != null)
        .put("shadow_version", ProviderInternals.rocksDbVersion(shadow))
        .put("shadow_cleanup_floor", ProviderInternals.cleanupFloor(shadow))
        .put("followed", followed == null ? -1 : followed.replayed)
        .put("follow_stopped", followed == null ? "not followed"
            : followed.stopped == null ? "" : followed.stopped)
        .put("follower", followerPriority);
    if (provider != null) {
      out.put("provider", System.identityHashCode(provider))
          .put("provider_class", provider.getClass().getSimpleName())
          .put("rocksdb_version", ProviderInternals.rocksDbVersion(provider));
    }
    if (provider instanceof HDFSBackedStateStoreProvider) {
      HDFSBackedStateStoreProvider hdfs = (HDFSBackedStateStoreProvider) provider;
      scala.collection.immutable.Map<String, Object> metrics = hdfs.getMetricsForProvider();
      for (String name : CollectionConverters.asJava(metrics.keySet())) {
        out.put(name, ((Number) metrics.apply(name)).longValue());
      }
      StringBuilder versions = new StringBuilder();
      for (Object version : hdfs.getLoadedMaps().keySet()) {
        versions.append(versions.length() == 0 ? "" : ",").append(version);
      }
      out.put("loaded_versions", versions.toString());
    }
    return out.put("status", "probed").toString();
  }

  /** Drops load `spec.loadId` of the bin and its copy, as `dropLoad` says. */
  private String release(Spec spec, Json out) throws Exception {
    out.put("load_id", spec.loadId);
    return out.put("status", dropLoad(spec, true)).toString();
  }
}
