/*
 * Swivel: the private members of Spark's state stores that the prewarm reads or sets (the
 * executor's loaded providers, a RocksDB provider's database, the id and run a re-keyed
 * copy reports under), in one place and resolved once per JVM.
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
import org.apache.spark.sql.execution.streaming.runtime.StreamExecution$;
import org.apache.spark.sql.execution.streaming.state.RocksDB;
import org.apache.spark.sql.execution.streaming.state.RocksDBEventForwarder;
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
    static final String MISSING;

    static {
      Method loaded = null;
      Field rocksDb = null;
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
      LOADED_PROVIDERS = loaded;
      ROCKSDB = rocksDb;
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
