/*
 * Swivel: keep each prewarmed RocksDB copy within one version of the query while it waits for
 * its switch (docs/migration.md, "The design", the follower).
 *
 * Why: a copy is loaded two steps ahead of its switch, so by the switch it was 2-7 versions
 * behind, and the switch's top-up (ChangelogCatchUp) replayed them inside the boundary, on the
 * batch path, ~45 ms a version. Here one background thread per executor replays each version
 * into every followed copy as soon as it may: the switch is then left one version to replay,
 * the one the batch that switches has just written.
 *
 * Two rules keep it right:
 * - A version is replayed only once the batch that wrote it is in the query's commit log
 *   (`<checkpoint>/commits/<v-1>`): until then a retried batch may write that version's
 *   changelog again.
 * - The copy is held as a read store of its own provider (`getReadStore` on the provider,
 *   never StateStore.getReadOnly, which would load a new provider where the copy has gone)
 *   while it is replayed: Spark 4.3's RocksDBStateMachine then makes a concurrent close (a
 *   release, maintenance) wait for it, and refuses to hand a closed copy out. A switch, a
 *   release or a new load of the bin first `stop`s following it, which waits for a replay
 *   under way; a pass checks under the same lock that it is still following, and that the
 *   copy is still the one loaded under the shadow id.
 */
package io.swivel.spark;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.RocksDB;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import scala.Option;

final class ChangelogFollower {
  private ChangelogFollower() {}

  /** How often the follower looks for newly committed versions. */
  static final long PERIOD_MS = 200;

  /** At most this many versions per copy and pass: a pass holds a copy for a bounded time. */
  static final int MAX_VERSIONS_PER_PASS = 4;

  /** One followed copy: the shadow id it is loaded under and the provider object. */
  static final class Followed {
    final StateStoreProviderId shadow;
    final StateStoreProvider provider;
    final Path commits;
    final Configuration conf;
    /** Versions replayed into the copy so far. */
    volatile long replayed;
    /** Why it is no longer followed (null: followed). */
    volatile String stopped;

    Followed(StateStoreProviderId shadow, StateStoreProvider provider, Path commits,
        Configuration conf) {
      this.shadow = shadow;
      this.provider = provider;
      this.commits = commits;
      this.conf = conf;
    }
  }

  /** By the bin's key (StatePrewarm.Spec.key): the copies followed now. */
  private static final ConcurrentHashMap<String, Followed> FOLLOWED = new ConcurrentHashMap<>();

  /** The executor's follower thread, at the loader's lowered priority; started on first use. */
  private static final ScheduledExecutorService THREAD =
      Executors.newSingleThreadScheduledExecutor(task -> {
        Thread thread = new Thread(() -> {
          StatePrewarm.followerPriority = StatePrewarm.lowerPriority();
          task.run();
        }, "swivel-prewarm-follower");
        thread.setDaemon(true);
        return thread;
      });

  private static volatile boolean scheduled;

  /**
   * Follows `provider`, loaded under `shadow` from the state checkpoint at `stateRoot`
   * (`<checkpoint>/state`; its commit log is `<checkpoint>/commits`), from now on. A copy
   * followed already under `key` is stopped first.
   */
  static void follow(String key, StateStoreProviderId shadow, StateStoreProvider provider,
      String stateRoot, Configuration conf) {
    Path commits = new Path(new Path(stateRoot).getParent(), "commits");
    stop(key, "replaced by a new load");
    FOLLOWED.put(key, new Followed(shadow, provider, commits, conf));
    if (!scheduled) {
      synchronized (ChangelogFollower.class) {
        if (!scheduled) {
          THREAD.scheduleWithFixedDelay(ChangelogFollower::pass, PERIOD_MS, PERIOD_MS,
              TimeUnit.MILLISECONDS);
          scheduled = true;
        }
      }
    }
  }

  /**
   * Stops following the copy of `key`, after a replay under way ends; returns what was
   * followed (null: nothing). Called before the copy is switched, released or reloaded.
   */
  static Followed stop(String key, String why) {
    Followed followed = FOLLOWED.remove(key);
    if (followed != null) {
      synchronized (followed) {
        if (followed.stopped == null) {
          followed.stopped = why;
        }
      }
    }
    return followed;
  }

  /** What is followed under `key` (stopped or not, until a switch or release), or null. */
  static Followed followed(String key) {
    return FOLLOWED.get(key);
  }

  /**
   * One pass over the followed copies; nothing it meets may end the schedule. A copy that
   * stops being followed stays listed, with why, until its switch or release reads it.
   */
  static void pass() {
    for (Followed followed : FOLLOWED.values()) {
      if (followed.stopped != null) {
        continue;
      }
      String why;
      try {
        why = advance(followed);
      } catch (Throwable e) {
        why = "failed: " + StatePrewarm.describe(e);
      }
      if (why != null) {
        synchronized (followed) {
          if (followed.stopped == null) {
            followed.stopped = why;
          }
        }
      }
    }
  }

  /**
   * Replays the copy's committed versions not yet replayed. Returns why the copy is no longer
   * to be followed, or null.
   */
  static String advance(Followed followed) throws Exception {
    RocksDB db = StatePrewarm.rocksDbOf(followed.provider);
    if (db == null) {
      return "no database";
    }
    long from = db.loadedVersion();
    long to = newestCommitted(followed, from);
    if (to <= from) {
      return null;  // nothing committed since: look again next pass
    }
    synchronized (followed) {
      if (followed.stopped != null) {
        return followed.stopped;
      }
      if (StatePrewarm.loaded(followed.shadow) != followed.provider) {
        return "its copy is no longer loaded under the shadow id";
      }
      String why = ChangelogCatchUp.refusal(db, from, to);
      if (why != null) {
        return "refused: " + why;
      }
      ReadStateStore held = followed.provider.getReadStore(from, Option.empty());
      try {
        if (db.loadedVersion() != from) {
          return null;  // changed before it was acquired: look again next pass
        }
        ChangelogCatchUp.replay(db, from, to);
        followed.replayed += to - from;
      } finally {
        held.release();
      }
    }
    return null;
  }

  /**
   * The newest version after `from`, at most MAX_VERSIONS_PER_PASS on, whose batch is in the
   * commit log, or `from`: version v is written by batch v - 1.
   */
  static long newestCommitted(Followed followed, long from) throws Exception {
    FileSystem fs = followed.commits.getFileSystem(followed.conf);
    long to = from;
    while (to - from < MAX_VERSIONS_PER_PASS
        && fs.exists(new Path(followed.commits, Long.toString(to)))) {
      to++;
    }
    return to;
  }
}
