/*
 * Swivel: the executor's side of the prewarm's loads (docs/migration.md, "Prewarmed moves:
 * what Spark allows"): which loads are on record and running, the loader thread that runs
 * them at a lower priority than the tasks, the answers announced through the block
 * manager, and the one place a load's copy is dropped. Split out of StatePrewarm, whose
 * driver-side calls start them; PrewarmRunner does each call's work.
 */
package io.swivel.spark;

import static io.swivel.spark.StatePrewarm.answerBlock;
import static io.swivel.spark.StatePrewarm.describe;

import io.swivel.spark.StatePrewarm.Spec;
import java.lang.ref.WeakReference;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;

import org.apache.spark.SparkEnv;
import org.apache.spark.sql.execution.streaming.state.StateStore$;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.StorageLevel;
import scala.Option;
import scala.collection.mutable.HashMap;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

final class PrewarmLoads {
  /**
   * A failure switch for tests: a session setting naming a file; a load started while it is
   * set waits before it reads anything for as long as that file exists (at most
   * LOAD_HOLD_MAX_S), as a slow download would, so a test decides when the load ends
   * instead of guessing (unset, the default: no wait). The session's settings reach the
   * task through the Hadoop conf the driver passes; executors of a local cluster see the
   * driver's files.
   */
  static final String LOAD_HOLD_KEY = "swivel.prewarm.test.holdWhileExists";

  private static final long LOAD_HOLD_MAX_S = 120;

  /** Real provider id -> the provider object a prewarm loaded for it. */
  static final ConcurrentHashMap<String, WeakReference<StateStoreProvider>> PREWARMED =
      new ConcurrentHashMap<>();

  /**
   * The loads started by `load`, by real provider id, until `poll` has
   * reported them and the next load, an activation or a release replaces or drops them.
   */
  static final ConcurrentHashMap<String, Load> LOADS = new ConcurrentHashMap<>();

  /** One load call's work on the loader thread, named by the driver's load id. */
  static final class Load extends FutureTask<String> {
    final String loadId;

    Load(String loadId, java.util.concurrent.Callable<String> body) {
      super(body);
      this.loadId = loadId;
    }
  }

  /**
   * One thread runs the background loads, one bin after another. A load that
   * ran in its task held a task slot for the whole download (seconds from a remote store),
   * and the query's own tasks on that executor waited for the slot; this thread only
   * competes for the CPU it actually uses, and at a lower priority than the tasks
   * (`lowerPriority`): Megaphone's migration must not stall processing.
   */
  static final ExecutorService LOADER = Executors.newSingleThreadExecutor(task -> {
    Thread thread = new Thread(() -> {
      loaderPriority = lowerPriority();
      task.run();
    }, "swivel-prewarm-loader");
    thread.setDaemon(true);
    return thread;
  });

  /** The loader thread's nice value: CFS then gives a busy task thread ~10 times its CPU. */
  static final int LOADER_NICE = 10;

  /** What `lowerPriority` did: `nice 10`, or why the loader runs at the tasks' priority. */
  static volatile String loaderPriority = "not started";

  /** What `lowerPriority` did for the follower thread (ChangelogFollower), as above. */
  static volatile String followerPriority = "not started";

  /**
   * Sets the calling thread's nice value to LOADER_NICE (Linux: `renice` on its thread id,
   * from /proc/thread-self; setpriority with a thread id changes that thread only). Java's
   * own thread priorities are ignored on Linux unless the JVM runs with
   * -XX:ThreadPriorityPolicy=1, which needs root. Raising one's own nice value needs no
   * privilege. Where it fails, the thread runs at the tasks' priority, and the answer says
   * why (`loaderPriority`, `followerPriority`).
   */
  static String lowerPriority() {
    try {
      java.nio.file.Path self =
          java.nio.file.Files.readSymbolicLink(java.nio.file.Paths.get("/proc/thread-self"));
      String tid = self.getFileName().toString();  // "<pid>/task/<tid>"
      Process renice = new ProcessBuilder("renice", "-n", String.valueOf(LOADER_NICE), "-p", tid)
          .redirectErrorStream(true).start();
      String said = new String(renice.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      boolean ended = renice.waitFor(10, TimeUnit.SECONDS);
      return ended && renice.exitValue() == 0
          ? "nice " + LOADER_NICE
          : "renice failed: " + said.trim();
    } catch (Throwable e) {
      return "not lowered: " + describe(e);
    }
  }

  /**
   * The block of each key's announced answer. Recording an answer, and
   * removing a load with its record, happen under the LOADS lock, so an answer stays
   * announced only while its load is the key's current one; the block manager's calls to
   * the driver run outside the lock.
   */
  static final ConcurrentHashMap<String, BlockId> ANNOUNCED = new ConcurrentHashMap<>();

  /**
   * The class tag an answer block is put and read with. Not String's: the block manager
   * picks Kryo for a String block whatever `spark.serializer` says, and the first remote
   * read of such a block made each executor's block server and the driver create their
   * first Kryo (hundreds of classes loaded, many looked up through every jar of the class
   * path) inside the first steps' batches (2026-12-07, docs/migration.md, "The driver's
   * class look-ups"). Object's tag gets the application's serializer, which the tasks keep
   * warm.
   */
  static final ClassTag<Object> ANSWER_TAG = ClassTag$.MODULE$.apply(Object.class);

  /**
   * The keys whose copy the loader thread is loading now. Changed, and read
   * by a release, under the LOADS lock: a release then either finds the load running (and
   * the load drops its own copy when it ends) or finds it ended (and drops the copy itself).
   */
  static final Set<String> RUNNING = ConcurrentHashMap.newKeySet();

  /**
   * Publish a finished load's answer, if `current` still holds when it is
   * recorded (the load is still the key's own; checked under the LOADS lock): as a block,
   * and (`overRpc`) sent to the driver's registry over this executor's own RPC connection,
   * so that the driver reads it without fetching the block (HelperRpc.ANSWER). The block
   * manager's and the RPC's calls to the driver run outside that lock: they wait for the
   * driver, and the switch's tasks take the lock on the batch path. A failure only costs
   * time: the answer stays in LOADS, where the driver's occasional poll job still finds it.
   */
  static void announce(String key, String loadId, String answer,
      java.util.function.BooleanSupplier current, boolean overRpc) {
    BlockId block = answerBlock(key, loadId);
    try {
      SparkEnv.get().blockManager().putSingle(block, (Object) answer,
          StorageLevel.MEMORY_ONLY(), true, ANSWER_TAG);
    } catch (Throwable e) {
      return;  // answered by the poll job instead
    }
    BlockId drop;
    synchronized (LOADS) {
      if (current.getAsBoolean()) {
        BlockId earlier = ANNOUNCED.put(key, block);
        drop = block.equals(earlier) ? null : earlier;
      } else {
        drop = block;  // the load was dropped meanwhile: its answer must not stay
      }
    }
    if (drop != block && overRpc) {
      HelperEndpoint.sendAnswer(block.name(), answer);
    }
    removeQuietly(drop);
  }

  /** take the key's announced answer off the record (under the LOADS lock). */
  static BlockId unrecord(String key) {
    return ANNOUNCED.remove(key);
  }

  /** drop an announced answer's block (outside the LOADS lock). */
  static void removeQuietly(BlockId block) {
    if (block == null) {
      return;
    }
    try {
      SparkEnv.get().blockManager().removeBlock(block, true);
    } catch (Throwable e) {
      // a leftover answer names its load: the driver never takes it for another one's
    }
  }

  // -- dropping a load and its copy ----------------------------------------------------------
  //
  // A copy is closed by exactly one of: a release or the already-loaded path (`dropLoad`,
  // when the load is not running) or the load itself when it ends without a record
  // (`doneLoading`). Which one is decided under the LOADS lock, and the copy is taken out of
  // `loadedProviders` under it too (lock order LOADS, then the providers' lock; nothing
  // takes them the other way), so a newer load recorded afterwards creates its own copy
  // instead of reusing one that is being closed. Closing runs outside the locks.

  /**
   * Drops the key's load record, its announced answer and its copy. With `onlyItsOwn`, a
   * record of another load than `spec.loadId` is left alone (`superseded`): a late release
   * of a step that timed out must not drop the load of the step that followed it. A running
   * load is not waited for (a task slot would be held for it) and its copy is not closed
   * while it loads: the load closes it when it ends (`releasing`); a queued one finds its
   * record gone and loads nothing. Otherwise `released`, or `no-shadow` (no copy here).
   */
  static String dropLoad(Spec spec, boolean onlyItsOwn) throws Exception {
    String key = spec.key();
    BlockId answered;
    Option<StateStoreProvider> copy = Option.empty();
    boolean running;
    synchronized (LOADS) {
      Load pending = LOADS.get(key);
      if (onlyItsOwn && pending != null && !pending.loadId.equals(spec.loadId)) {
        return "superseded";
      }
      answered = unrecord(key);
      LOADS.remove(key);
      running = RUNNING.contains(key);
      if (!running) {
        copy = takeShadow(spec);
      }
    }
    removeQuietly(answered);
    if (running) {
      return "releasing";
    }
    closeShadow(spec, copy);
    return copy.isDefined() ? "released" : "no-shadow";
  }

  /**
   * The key's load stops running. True when the key has no load on record any more
   * (released, or dropped by the already-loaded path, while it loaded): its copy is then an
   * orphan, and it is closed here.
   */
  static boolean doneLoading(Spec spec) {
    String key = spec.key();
    Option<StateStoreProvider> copy;
    synchronized (LOADS) {
      RUNNING.remove(key);
      if (LOADS.containsKey(key)) {
        return false;
      }
      try {
        copy = takeShadow(spec);
      } catch (Throwable e) {  // loadedProviders unreachable: every other action fails too
        return true;
      }
    }
    try {
      closeShadow(spec, copy);
    } catch (Throwable e) {
      // out of loadedProviders already: nothing serves or maintains it; only its close
      // (RocksDB: native memory, its working folder) is lost
    }
    return true;
  }

  /** LOAD_HOLD_KEY's wait (nothing when `path` is empty). */
  static void holdWhileExists(String path) throws InterruptedException {
    if (path.isEmpty()) {
      return;
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(LOAD_HOLD_MAX_S);
    while (java.nio.file.Files.exists(java.nio.file.Paths.get(path))
        && System.nanoTime() < deadline) {
      Thread.sleep(50);
    }
  }

  /** Takes the bin's shadow copy out of `loadedProviders` (none: empty). */
  static Option<StateStoreProvider> takeShadow(Spec spec) throws Exception {
    HashMap<StateStoreProviderId, StateStoreProvider> providers =
        ProviderInternals.loadedProviders();
    synchronized (providers) {
      return providers.remove(spec.shadow());
    }
  }

  /** Closes a copy taken by `takeShadow` (outside the locks: closing may wait for I/O). */
  static void closeShadow(Spec spec, Option<StateStoreProvider> copy) {
    ChangelogFollower.stop(spec.key(), "released");  // waits for a replay under way
    if (copy.isDefined()) {
      StateStore$.MODULE$.closeProvider(spec.shadow(), copy.get());
      PREWARMED.remove(spec.key());  // only a copy's: after an activation it names the real one
    }
  }

  private PrewarmLoads() {}
}
