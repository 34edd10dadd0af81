/*
 * Swivel: the private members of Spark's state stores that the prewarm reads or sets (the
 * executor's loaded providers, a RocksDB provider's database, the id and run a re-keyed
 * copy reports under, the oldest version its file manager knows of), in one place and
 * resolved once per JVM.
 *
 * Why: the follower (ChangelogFollower) looks up each copy's provider and database every
 * 0.2 s, and each look-up used to resolve its reflective member again. Checked against
 * Spark 4.3.0 only, like the rest of the helper: a member that is missing (another Spark)
 * makes the look-ups that need it fail as before, with the reason in MISSING.
 */
package io.swivel.spark;

import java.lang.reflect.Field;
import java.lang.reflect.Method;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.runtime.StreamExecution$;
import org.apache.spark.sql.execution.streaming.state.RocksDB;
import org.apache.spark.sql.execution.streaming.state.RocksDBEventForwarder;
import org.apache.spark.sql.execution.streaming.state.RocksDBFileManager;
import org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStore$;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import scala.Option;
import scala.collection.mutable.HashMap;

final class ProviderInternals {
  private ProviderInternals() {}

  /** The members every look-up uses, resolved when first needed; null where missing. */
  private static final class Members {
    static final Method LOADED_PROVIDERS;
    static final Field ROCKSDB;
    static final Field FILES_ROOT;
    static final Field FILES_MIN_SEEN;
    static final String MISSING;

    static {
      Method loaded = null;
      Field rocksDb = null;
      Field filesRoot = null;
      Field filesMinSeen = null;
      String missing = "";
      try {
        loaded = StateStore$.class.getDeclaredMethod("loadedProviders");
        loaded.setAccessible(true);
      } catch (ReflectiveOperationException | RuntimeException e) {
        loaded = null;
        missing += e + " ";
      }
      try {
        rocksDb = RocksDBStateStoreProvider.class.getDeclaredField("rocksDB");
        rocksDb.setAccessible(true);
      } catch (ReflectiveOperationException | RuntimeException e) {
        rocksDb = null;
        missing += e;
      }
      try {
        filesRoot = RocksDBFileManager.class.getDeclaredField("dfsRootDir");
        filesRoot.setAccessible(true);
        filesMinSeen = RocksDBFileManager.class.getDeclaredField("minSeenVersion");
        filesMinSeen.setAccessible(true);
        if (filesMinSeen.getType() != long.class || filesRoot.getType() != String.class) {
          throw new NoSuchFieldException("RocksDBFileManager's dfsRootDir or minSeenVersion "
              + "has another type than Spark 4.3.0's");
        }
      } catch (ReflectiveOperationException | RuntimeException e) {
        filesRoot = null;
        filesMinSeen = null;
        missing += " " + e;
      }
      LOADED_PROVIDERS = loaded;
      ROCKSDB = rocksDb;
      FILES_ROOT = filesRoot;
      FILES_MIN_SEEN = filesMinSeen;
      MISSING = missing.trim();
    }
  }

  /**
   * Makes a re-keyed shadow provider the real id's provider in what it tells the driver. The
   * HDFS and RocksDB providers keep (a) the provider id they were created under, built at
   * init from the run id in their Hadoop conf, for their snapshot-upload reports, and (b) that
   * Hadoop conf, whose run id every commit is reported under
   * (StateStore.reportCommitToCoordinator): the driver's BatchCommitTracker waits for the
   * real run's commits, and a commit reported under the shadow run id fails the batch. Both
   * are set to the real id (reflection). False when the provider class has either missing.
   */
  static boolean renameProvider(StateStoreProvider provider, StateStoreProviderId real) {
    boolean idSet = false;
    boolean confSet = false;
    String runIdKey = StreamExecution$.MODULE$.RUN_ID_KEY();
    for (Class<?> c = provider.getClass(); c != null; c = c.getSuperclass()) {
      try {
        if (!idSet) {
          Field field = c.getDeclaredField("stateStoreProviderId");
          field.setAccessible(true);
          field.set(provider, real);
          idSet = true;
        }
      } catch (NoSuchFieldException e) {
        // try the superclass
      } catch (ReflectiveOperationException | RuntimeException e) {
        return false;
      }
      for (Method method : c.getDeclaredMethods()) {
        if (!confSet && method.getName().endsWith("$$hadoopConf")
            && method.getParameterCount() == 0
            && Configuration.class.isAssignableFrom(method.getReturnType())) {
          try {
            method.setAccessible(true);
            Configuration conf = (Configuration) method.invoke(provider);
            conf.set(runIdKey, real.queryRunId().toString());
            confSet = true;
          } catch (ReflectiveOperationException | RuntimeException e) {
            return false;
          }
        }
      }
    }
    return idSet && confSet;
  }

  /**
   * A RocksDB provider (and its database) report each snapshot upload to the driver under the
   * run id they were created with (RocksDBEventForwarder): a re-keyed shadow provider would
   * report the shadow run, and the coordinator would count the real bin's snapshots as
   * lagging. Both forwarders are replaced by one for the real id (reflection; the database's
   * field is final, which Java 17 still lets reflection set on an ordinary class). True when
   * not RocksDB, or when both were replaced.
   */
  static boolean renameForwarder(StateStoreProvider provider, StateStoreProviderId real) {
    if (!(provider instanceof RocksDBStateStoreProvider)) {
      return true;
    }
    if (Members.ROCKSDB == null) {  // the database's forwarder could not be replaced
      return false;
    }
    try {
      Option<RocksDBEventForwarder> forwarder = Option.apply(new RocksDBEventForwarder(
          real.queryRunId().toString(), real.storeId()));
      Field onProvider = RocksDBStateStoreProvider.class.getDeclaredField("rocksDBEventForwarder");
      onProvider.setAccessible(true);
      onProvider.set(provider, forwarder);
      RocksDB db = rocksDbOf(provider);
      if (db != null) {
        Field onDb = RocksDB.class.getDeclaredField("eventForwarder");
        onDb.setAccessible(true);
        onDb.set(db, forwarder);
      }
      return true;
    } catch (ReflectiveOperationException | RuntimeException e) {
      return false;
    }
  }

  /**
   * The version a RocksDB provider's database holds (-1: none, or not RocksDB).
   */
  static long rocksDbVersion(StateStoreProvider provider) {
    RocksDB db = rocksDbOf(provider);
    return db == null ? -1 : db.loadedVersion();
  }

  /**
   * A RocksDB provider's database, or null (none yet, not RocksDB, or not readable). Read
   * without `rocksDB()`, which would create the database of a provider that has none yet.
   */
  static RocksDB rocksDbOf(StateStoreProvider provider) {
    if (!(provider instanceof RocksDBStateStoreProvider) || Members.ROCKSDB == null) {
      return null;
    }
    try {
      return (RocksDB) Members.ROCKSDB.get(provider);
    } catch (ReflectiveOperationException | RuntimeException e) {
      return null;
    }
  }

  /**
   * Tells a loaded copy's file manager the oldest snapshot version its bin's checkpoint holds,
   * as Spark's own owner of the bin knows it, and answers that version (-1: not RocksDB, no
   * snapshot yet, or a member missing; nothing is changed then).
   *
   * Why: Spark 4.3's maintenance deletes a bin's old versions only when enough have gathered
   * since the oldest it saw (`minVersionsToDelete`, SPARK-48931, so that a pass does not list
   * the checkpoint folder). A file manager learns that oldest version only from a pass that
   * deleted something, and starts from 1. A new copy of a bin whose old versions its previous
   * owner already deleted finds nothing to delete, learns nothing, and so lists the bin's whole
   * folder on every maintenance pass until the next deletion is due, up to a snapshot interval
   * later (docs/migration.md, "Spark's futile cleanup listings": there most listings were the
   * unmoved bins' own, a separate cause). With the oldest version set, the copy skips those
   * passes exactly as the previous owner did. Setting it to the oldest snapshot present is
   * what Spark's own deletion sets (its `minVersionToRetain` is the oldest snapshot it keeps),
   * so no version is kept longer than under the previous owner. One listing, on the loader
   * thread, off the batch path.
   */
  static long setCleanupFloor(StateStoreProvider provider, Configuration conf) {
    RocksDB db = rocksDbOf(provider);
    if (db == null || Members.FILES_MIN_SEEN == null) {
      return -1;
    }
    try {
      RocksDBFileManager files = db.fileManager();
      Path root = new Path((String) Members.FILES_ROOT.get(files));
      long oldest = -1;
      for (FileStatus status : root.getFileSystem(conf).listStatus(root)) {
        long version = snapshotVersion(status.getPath().getName());
        if (version >= 0 && (oldest < 0 || version < oldest)) {
          oldest = version;
        }
      }
      if (oldest > 0) {
        Members.FILES_MIN_SEEN.setLong(files, oldest);
      }
      return oldest;
    } catch (java.io.IOException | ReflectiveOperationException | RuntimeException e) {
      return -1;
    }
  }

  /** The oldest version a RocksDB provider's file manager knows of (-1: none readable). */
  static long cleanupFloor(StateStoreProvider provider) {
    RocksDB db = rocksDbOf(provider);
    if (db == null || Members.FILES_MIN_SEEN == null) {
      return -1;
    }
    try {
      return Members.FILES_MIN_SEEN.getLong(db.fileManager());
    } catch (ReflectiveOperationException | RuntimeException e) {
      return -1;
    }
  }

  /** `12.zip` or `12_<checkpoint id>.zip` (Spark's two snapshot names): 12; else -1. */
  static long snapshotVersion(String name) {
    if (!name.endsWith(".zip")) {
      return -1;
    }
    String stem = name.substring(0, name.length() - ".zip".length());
    int cut = stem.indexOf('_');
    try {
      return Long.parseLong(cut < 0 ? stem : stem.substring(0, cut));
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  /** The provider the executor holds under `id`, or null. */
  static StateStoreProvider loaded(StateStoreProviderId id) throws Exception {
    HashMap<StateStoreProviderId, StateStoreProvider> providers = loadedProviders();
    synchronized (providers) {
      Option<StateStoreProvider> found = providers.get(id);
      return found.isDefined() ? found.get() : null;
    }
  }

  /** The executor's `StateStore.loadedProviders` map (private in Spark; lock it to use it). */
  @SuppressWarnings("unchecked")
  static HashMap<StateStoreProviderId, StateStoreProvider> loadedProviders() throws Exception {
    if (Members.LOADED_PROVIDERS == null) {
      throw new NoSuchMethodException("StateStore.loadedProviders: " + Members.MISSING);
    }
    return (HashMap<StateStoreProviderId, StateStoreProvider>) Members.LOADED_PROVIDERS.invoke(
        StateStore$.MODULE$);
  }
}
