/*
 * Swivel: top a prewarmed RocksDB copy up to a later version in place, by replaying the
 * changelogs after the version it holds into its open database (docs/migration.md,
 * "The switch's top-up in place").
 *
 * Why: Spark's RocksDB.load(version) reopens the database whenever the version it asks for is
 * not the one loaded: it closes it, brings the bin's newest snapshot from the checkpoint,
 * opens it and replays the changelogs after that snapshot (Spark 4.3.0,
 * loadWithoutCheckpointId). A prewarmed copy is a version or a few behind at its switch, and
 * that reopen ran inside the switching boundary, on the batch path (115-222 ms per target,
 * measured). With changelog checkpointing every version has a changelog, so the copy can
 * replay just the versions it misses, as Spark itself replays them after a reopen: the same
 * private `replayChangelog`, then what loadWithoutCheckpointId sets after it (the loaded
 * version, the key counts, the file manager's highest version seen).
 *
 * Checked against Spark 4.3.0 only, like the rest of the helper. Where a piece is missing or
 * the store does not qualify, `refusal` says why and the caller reopens as Spark would.
 */
package io.swivel.spark;

import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

import org.apache.spark.sql.execution.streaming.state.RocksDB;
import scala.Option;
import scala.Tuple2;

final class ChangelogCatchUp {
  private ChangelogCatchUp() {}

  /**
   * Why `db`, holding version `from`, cannot be replayed up to `to` in place, or null. Only
   * changelog checkpointing writes a changelog per version; checkpoint ids (format v2) tie a
   * version to its lineage, which only Spark's own load follows; an open changelog writer
   * would record the replay as new changes (a copy loaded read-only has none).
   */
  static String refusal(RocksDB db, long from, long to) {
    if (from < 0) {
      return "no version loaded";
    }
    if (to <= from) {
      return "it holds version " + from + ", not one before " + to;
    }
    try {
      if (!db.conf().enableChangelogCheckpointing()
          || !booleanField(db, "enableChangelogCheckpointing")) {
        return "no changelog checkpointing";
      }
      if (booleanField(db, "enableStateStoreCheckpointIds")) {
        return "state store checkpoint ids (format v2)";
      }
      Field writer = RocksDB.class.getDeclaredField("changelogWriter");
      writer.setAccessible(true);
      if (((Option<?>) writer.get(db)).isDefined()) {
        return "a changelog writer is open";
      }
    } catch (ReflectiveOperationException | RuntimeException e) {
      return "Spark's RocksDB is not the one checked (" + e + ")";
    }
    return null;
  }

  /**
   * Replays versions `from + 1` to `to` into `db`, which holds `from` and whose instance the
   * caller has acquired (a read store open at `from`). On a failure the database is marked
   * as holding nothing (as Spark's own load does), so the next load reopens it whole.
   */
  static void replay(RocksDB db, long from, long to) throws Exception {
    @SuppressWarnings("unchecked")
    Tuple2<Object, Option<String>>[] versions = new Tuple2[(int) (to - from)];
    for (int i = 0; i < versions.length; i++) {
      versions[i] = new Tuple2<>(Long.valueOf(from + 1 + i), Option.empty());
    }
    try {
      Method replay = RocksDB.class.getDeclaredMethod("replayChangelog", Tuple2[].class);
      replay.setAccessible(true);
      replay.invoke(db, (Object) versions);
      db.loadedVersion_$eq(to);
      copyCount(db, "numKeysOnWritingVersion", "numKeysOnLoadedVersion_$eq");
      copyCount(db, "numInternalKeysOnWritingVersion", "numInternalKeysOnLoadedVersion_$eq");
      db.fileManager().setMaxSeenVersion(to);
    } catch (InvocationTargetException e) {
      db.loadedVersion_$eq(-1);
      Throwable cause = e.getCause();
      throw cause instanceof Exception ? (Exception) cause : new RuntimeException(cause);
    } catch (Exception | Error e) {
      db.loadedVersion_$eq(-1);
      throw e;
    }
  }

  /** What RocksDB.load does after a replay: the loaded version's counts are the replay's. */
  private static void copyCount(RocksDB db, String getter, String setter) throws Exception {
    Method get = RocksDB.class.getDeclaredMethod(getter);
    Method set = RocksDB.class.getDeclaredMethod(setter, long.class);
    get.setAccessible(true);
    set.setAccessible(true);
    set.invoke(db, get.invoke(db));
  }

  private static boolean booleanField(RocksDB db, String name) throws ReflectiveOperationException {
    Field field = RocksDB.class.getDeclaredField(name);
    field.setAccessible(true);
    return field.getBoolean(db);
  }
}
