/*
 * Swivel: top a prewarmed RocksDB copy up to a later version in place, by replaying the
 * changelogs after the version it holds into its open database (docs/migration.md,
 * "The design", the switch's top-up).
 *
 * Why: Spark's RocksDB.load(version) reopens the database whenever the version it asks for is
 * not the one loaded: it closes it, brings the bin's newest snapshot from the checkpoint,
 * opens it and replays the changelogs after that snapshot (Spark 4.3.0,
 * loadWithoutCheckpointId). A prewarmed copy is a few versions behind at its switch, and
 * that reopen ran inside the switching boundary, on the batch path. With changelog
 * checkpointing every version has a changelog, so the copy can replay just the versions it
 * misses, as Spark itself replays them after a reopen: the same private `replayChangelog`,
 * then what loadWithoutCheckpointId sets after it (the loaded version and its key counts).
 * Not set, as a reopen would: `lastSnapshotVersion` stays the snapshot the copy was loaded
 * from (the target may then snapshot a bin earlier than Spark would), and the file
 * manager's metrics stay the load's (the first batch on the target reports them).
 *
 * Checked against Spark 4.3.0 only, like the rest of the helper. Where a piece is missing or
 * the store does not qualify, `refusal` says why and the caller reopens as Spark would.
 */
package io.swivel.spark;

import java.lang.reflect.AccessibleObject;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.RocksDB;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import scala.Option;
import scala.Tuple2;

final class ChangelogCatchUp {
  private ChangelogCatchUp() {}

  /**
   * The private members of Spark's RocksDB a top-up reads or calls, resolved once per JVM
   * (each top-up used to look them up again, twice); MISSING says why not, when a member
   * is not there (another Spark than the one checked).
   */
  private static final class Members {
    final Field changelogEnabled;
    final Field checkpointIds;
    final Field changelogWriter;
    final Method replay;
    final Method[] countGetters;
    final Method[] countSetters;

    Members() throws ReflectiveOperationException {
      changelogEnabled = accessible(RocksDB.class.getDeclaredField("enableChangelogCheckpointing"));
      checkpointIds = accessible(RocksDB.class.getDeclaredField("enableStateStoreCheckpointIds"));
      changelogWriter = accessible(RocksDB.class.getDeclaredField("changelogWriter"));
      replay = accessible(RocksDB.class.getDeclaredMethod("replayChangelog", Tuple2[].class));
      countGetters = new Method[] {
          accessible(RocksDB.class.getDeclaredMethod("numKeysOnWritingVersion")),
          accessible(RocksDB.class.getDeclaredMethod("numInternalKeysOnWritingVersion"))};
      countSetters = new Method[] {
          accessible(RocksDB.class.getDeclaredMethod("numKeysOnLoadedVersion_$eq", long.class)),
          accessible(RocksDB.class.getDeclaredMethod(
              "numInternalKeysOnLoadedVersion_$eq", long.class))};
    }

    private static <T extends AccessibleObject> T accessible(T member) {
      member.setAccessible(true);
      return member;
    }
  }

  private static final Members MEMBERS;
  private static final String MISSING;

  static {
    Members members = null;
    String missing = null;
    try {
      members = new Members();
    } catch (ReflectiveOperationException | RuntimeException e) {
      missing = e.toString();
    }
    MEMBERS = members;
    MISSING = missing;
  }

  /**
   * Why `db`, holding version `from`, cannot be replayed up to `to` in place, or null. Only
   * changelog checkpointing writes a changelog per version; checkpoint ids (format v2) tie a
   * version to its lineage, which only Spark's own load follows; an open changelog writer
   * would record the replay as new changes (a copy loaded read-only has none); from a
   * snapshot interval behind on, a reopen from the newest snapshot reads fewer changelogs.
   */
  static String refusal(RocksDB db, long from, long to) {
    if (from < 0) {
      return "no version loaded";
    }
    if (to <= from) {
      return "it holds version " + from + ", not one before " + to;
    }
    int every = db.conf().minDeltasForSnapshot();
    if (to - from >= every) {
      return (to - from) + " versions behind: a snapshot every " + every + " is nearer";
    }
    if (MISSING != null) {
      return "Spark's RocksDB is not the one checked (" + MISSING + ")";
    }
    try {
      if (!db.conf().enableChangelogCheckpointing() || !MEMBERS.changelogEnabled.getBoolean(db)) {
        return "no changelog checkpointing";
      }
      if (MEMBERS.checkpointIds.getBoolean(db)) {
        return "state store checkpoint ids (format v2)";
      }
      if (((Option<?>) MEMBERS.changelogWriter.get(db)).isDefined()) {
        return "a changelog writer is open";
      }
    } catch (ReflectiveOperationException | RuntimeException e) {
      return "Spark's RocksDB is not the one checked (" + e + ")";
    }
    return null;
  }

  /**
   * Replays versions `from + 1` to `to` into `db`, the database of `provider`, holding it
   * meanwhile as a read store of that provider object at `from`: at the version it holds
   * that reloads nothing, and it makes a concurrent close wait (a closed copy throws here
   * instead); only after `refusal` said null. The switch's top-up and the follower both
   * replay through here.
   */
  static void replayHeld(StateStoreProvider provider, RocksDB db, long from, long to)
      throws Exception {
    ReadStateStore held = provider.getReadStore(from, Option.empty());
    try {
      replay(db, from, to);
    } finally {
      held.release();
    }
  }

  /**
   * Replays versions `from + 1` to `to` into `db`, which holds `from` and whose instance the
   * caller has acquired (`replayHeld`); only after `refusal` said null. On a
   * failure the database is marked as holding nothing (as Spark's own load does), so the
   * next load reopens it whole; an Error other than a failed assertion (Spark's checks) is
   * thrown as it is.
   */
  static void replay(RocksDB db, long from, long to) throws Exception {
    @SuppressWarnings("unchecked")
    Tuple2<Object, Option<String>>[] versions = new Tuple2[(int) (to - from)];
    for (int i = 0; i < versions.length; i++) {
      versions[i] = new Tuple2<>(Long.valueOf(from + 1 + i), Option.empty());
    }
    try {
      MEMBERS.replay.invoke(db, (Object) versions);
      db.loadedVersion_$eq(to);
      for (int i = 0; i < MEMBERS.countGetters.length; i++) {
        MEMBERS.countSetters[i].invoke(db, MEMBERS.countGetters[i].invoke(db));
      }
    } catch (InvocationTargetException e) {
      db.loadedVersion_$eq(-1);
      Throwable cause = e.getCause();
      if (cause instanceof Exception) {
        throw (Exception) cause;
      }
      if (cause instanceof AssertionError) {
        throw new IllegalStateException(cause.getMessage(), cause);
      }
      throw (Error) cause;
    } catch (Exception e) {
      db.loadedVersion_$eq(-1);
      throw e;
    }
  }
}
