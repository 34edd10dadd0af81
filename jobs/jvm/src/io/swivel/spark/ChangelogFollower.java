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
 *   release, maintenance unloading a released shadow) wait for it, and refuses to hand a
 *   closed copy out (its snapshot and cleanup maintenance do not wait, and touch neither
 *   the loaded version nor the database's contents). Acquired at the version it holds, the
 *   copy reloads nothing (RocksDB.load skips the reopen at the loaded version); at another
 *   version Spark would reopen it, so the version is checked under our lock just before.
 *   A switch, a release or a new load of the bin first `stop`s following it, which waits
 *   for a replay under way; a pass checks under the same lock that it is still following,
 *   and that the copy is still the one loaded under the shadow id. A load registers its
 *   copy only while it is still the bin's load (under the loads' lock, as its answer is
 *   announced), so a switch that took the load's record first never meets a follower.
 */
package io.swivel.spark;

import java.io.IOException;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.state.RocksDB;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;

final class ChangelogFollower {
  private ChangelogFollower() {}

  /** How often the follower looks for newly committed versions. */
  static final long PERIOD_MS = 200;

  /** At most this many versions per copy and pass: a pass holds a copy for a bounded time. */
  static final int MAX_VERSIONS_PER_PASS = 4;

  /** One followed copy: the shadow id it is loaded under and the provider object. */
  static final class Followed {
    final StateStoreProviderId shadow;
    final Path commits;
    final Configuration conf;
    /** The copy; null once it is no longer followed (nothing here keeps it alive then). */
    private volatile StateStoreProvider provider;
    /** Versions replayed into the copy since its load (on the loader thread, then here). */
    volatile long replayed;
    /** Why it is no longer followed (null: followed). */
    volatile String stopped;

    /** `stateRoot` is `<checkpoint>/state`; the commit log is `<checkpoint>/commits`. */
    Followed(StateStoreProviderId shadow, StateStoreProvider provider, String stateRoot,
        Configuration conf) {
      this.shadow = shadow;
      this.provider = provider;
      this.commits = new Path(new Path(stateRoot).getParent(), "commits");
      this.conf = conf;
    }

    /** Ends the following, once, with `why` (the caller holds this object's monitor). */
    private void end(String why) {
      if (stopped == null) {
        stopped = why;
      }
      provider = null;
    }
  }

  /**
   * Per query run and commit log: the newest batch seen in it. A batch once committed stays
   * committed for the run (a purge of old commit files removes the file, not the fact), and
   * a stateful query commits its batches in order, so what was seen is not asked again; a
   * new run (a restart) has a key of its own. One entry per run and checkpoint. Without it
   * each pass asked the store once per followed copy whether the next batch had committed:
   * on S3 a request for a missing key per copy every 0.2 s, where one per checkpoint and
   * pass answers for all.
   */
  private static final ConcurrentHashMap<String, Long> NEWEST_COMMITTED =
      new ConcurrentHashMap<>();

  /** By the bin's key (StatePrewarm.Spec.key): the copies followed now, or stopped by a pass. */
  private static final ConcurrentHashMap<String, Followed> FOLLOWED = new ConcurrentHashMap<>();

  /** The executor's follower thread, at the loader's lowered priority; started on first use. */
  private static final ScheduledExecutorService THREAD =
      Executors.newSingleThreadScheduledExecutor(task -> {
        Thread thread = new Thread(() -> {
          PrewarmLoads.followerPriority = PrewarmLoads.lowerPriority();
          task.run();
        }, "swivel-prewarm-follower");
        thread.setDaemon(true);
        return thread;
      });

  private static ScheduledFuture<?> schedule;

  /**
   * Follows `followed` under `key` from now on (it replaces what was followed there: a new
   * load stops the old one first). Does not wait: callers hold the loads' lock.
   */
  static void add(String key, Followed followed) {
    FOLLOWED.put(key, followed);
    synchronized (ChangelogFollower.class) {
      if (schedule == null || schedule.isDone()) {
        schedule = THREAD.scheduleWithFixedDelay(ChangelogFollower::pass, PERIOD_MS, PERIOD_MS,
            TimeUnit.MILLISECONDS);
      }
    }
  }

  /**
   * Replays into a copy just loaded the versions committed while it loaded, on the calling
   * (loader) thread, before it is announced: the switch may come at the next boundary.
   */
  static void catchUp(Followed followed) {
    for (int pass = 0; pass < 64; pass++) {
      long before = followed.replayed;
      if (step(followed, new HashSet<>()) != null || followed.replayed == before) {
        return;
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
        followed.end(why);
      }
    }
    return followed;
  }

  /** What is followed under `key` (stopped or not, until a switch or release), or null. */
  static Followed followed(String key) {
    return FOLLOWED.get(key);
  }

  /**
   * One pass over the followed copies. A copy that stops being followed stays listed, with
   * why and without its provider, until its switch, release or reload reads it. Nothing
   * may escape: an exception would end the schedule (`add` starts it again).
   */
  static void pass() {
    Set<String> notYet = new HashSet<>();  // batches this pass found uncommitted
    for (Followed followed : FOLLOWED.values()) {
      if (followed.stopped == null) {
        step(followed, notYet);
      }
    }
  }

  /** `advance`, and the end of the following where it says why; never throws. */
  private static String step(Followed followed, Set<String> notYet) {
    String why;
    try {
      why = advance(followed, notYet);
    } catch (Throwable e) {
      why = "failed: " + e;
    }
    if (why != null) {
      synchronized (followed) {
        followed.end(why);
      }
    }
    return why;
  }

  /**
   * Replays the copy's committed versions not yet replayed (at most MAX_VERSIONS_PER_PASS,
   * and fewer than a snapshot interval). Returns why the copy is no longer to be followed,
   * or null. `notYet`: the batches found uncommitted earlier in this pass (not asked again).
   */
  static String advance(Followed followed, Set<String> notYet) throws Exception {
    StateStoreProvider provider = followed.provider;
    RocksDB db = ProviderInternals.rocksDbOf(provider);
    if (db == null) {
      return followed.stopped != null ? followed.stopped : "no database";
    }
    long from = db.loadedVersion();
    if (from < 0) {
      return "no version loaded";
    }
    int most = Math.min(MAX_VERSIONS_PER_PASS, db.conf().minDeltasForSnapshot() - 1);
    long to = newestCommitted(followed, from, most, notYet);
    if (to <= from) {
      return null;  // nothing committed since (or the commit log unreadable): next pass
    }
    synchronized (followed) {
      if (followed.stopped != null) {
        return followed.stopped;
      }
      if (ProviderInternals.loaded(followed.shadow) != provider) {
        return "its copy is no longer loaded under the shadow id";
      }
      if (db.loadedVersion() != from) {
        return null;  // acquired at another version it would reopen: look again next pass
      }
      String why = ChangelogCatchUp.refusal(db, from, to);
      if (why != null) {
        return "refused: " + why;
      }
      ChangelogCatchUp.replayHeld(provider, db, from, to);
      followed.replayed += to - from;
    }
    return null;
  }

  /**
   * The newest version after `from`, at most `most` on, whose batch is in the commit log
   * (version v is written by batch v - 1), or `from`, also where the log cannot be read now
   * (a transient error of the store: the next pass asks again). Asks the store only about
   * batches after the newest seen committed in this run, and not about a batch this pass
   * already found uncommitted.
   */
  static long newestCommitted(Followed followed, long from, int most,
      Set<String> notYet) {
    String log = followed.shadow.queryRunId() + "|" + followed.commits;
    long newest = NEWEST_COMMITTED.getOrDefault(log, -1L);
    long to = Math.max(from, Math.min(from + most, newest + 1));  // batch to - 1 committed
    try {
      FileSystem fs = followed.commits.getFileSystem(followed.conf);
      while (to - from < most && !notYet.contains(log + "|" + to)) {
        if (!fs.exists(new Path(followed.commits, Long.toString(to)))) {
          notYet.add(log + "|" + to);
          break;
        }
        NEWEST_COMMITTED.merge(log, to, Math::max);
        to++;
      }
    } catch (IOException e) {
      // as if nothing more were committed yet
    }
    return to;
  }
}
