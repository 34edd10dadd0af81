/*
 * Swivel: load a moved bin's state on its target executor ahead of the switch
 * (docs/migration.md, "Prewarmed moves: what Spark allows").
 *
 * Checked against Spark 4.3.0 only (jobs/spark_prewarm.py refuses other versions). It uses
 * private[sql] Spark classes (public in bytecode) and, for the switch, reflection on
 * StateStore's private `loadedProviders` map and the providers' own members
 * (ProviderInternals).
 *
 * Why a *shadow* provider id: on an executor, StateStore.getStateStoreProvider reports every
 * provider it loads to the driver's StateStoreCoordinator as the active instance, and both
 * eviction paths (the report's providerIdsToUnload on the executor's next state-store task,
 * and maintenance's verifyIfInstanceActive every spark.sql.streaming.stateStore.
 * maintenanceInterval) drop any loaded provider whose coordinator location is another
 * executor. A copy of bin p loaded under the query's own provider id on the target while
 * the old owner still serves p would either re-point the coordinator (the bin moves at
 * once, not at the boundary) or be evicted. So the prewarm loads it under the same
 * StateStoreId (same checkpoint files) with a different queryRunId, which the scheduler
 * never asks about; the coordinator holds that shadow id at the target, so nothing evicts
 * it. At the boundary the driver re-points the real id and `activate` moves the loaded
 * provider from the shadow key to the real key of the target's loadedProviders; the next
 * batch's StateStore.get finds it there. A RocksDB copy is first brought to the version that
 * batch reads, by replaying in place the changelogs since its load (ChangelogCatchUp); an
 * HDFS-backed copy loads the deltas since the prewarm in that batch.
 */
package io.swivel.spark;

import java.io.Serializable;
import java.lang.ref.WeakReference;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.function.Function;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.NoPrefixKeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.RocksDB;
import org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.SchemaHelper;
import org.apache.spark.sql.execution.streaming.state.StateStore$;
import org.apache.spark.sql.execution.streaming.state.StateStoreColFamilySchema;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreCoordinatorRef;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.BlockResult;
import org.apache.spark.storage.StorageLevel;
import org.apache.spark.storage.TestBlockId;
import org.apache.spark.util.SerializableConfiguration;
import scala.Option;
import scala.Tuple2;
import scala.collection.mutable.HashMap;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;

public final class StatePrewarm {
  /**
   * Bumped when the wire format of `run`, `switchStep`, `releaseShadows` or `announced`
   * changes; the Python side checks it.
   */
  public static final int API = 11;

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

  /**
   * A failure switch for tests: a session setting; while it is "true" the switch's top-up
   * does not replay in place (ChangelogCatchUp) and falls back to Spark's reopening load, as
   * it does where a replay is refused or fails (unset, the default: it replays).
   */
  static final String REPLAY_REFUSED_KEY = "swivel.prewarm.test.refuseReplay";

  /** SparkContext.SPARK_JOB_DESCRIPTION (private[spark] in Scala). */
  static final String JOB_DESCRIPTION = "spark.job.description";

  /** Executor side: real provider id -> the provider object a prewarm loaded for it. */
  private static final ConcurrentHashMap<String, WeakReference<StateStoreProvider>> PREWARMED =
      new ConcurrentHashMap<>();

  /**
   * Executor side: the loads started by `load`, by real provider id, until `poll` has
   * reported them and the next load, an activation or a release replaces or drops them.
   */
  private static final ConcurrentHashMap<String, Load> LOADS = new ConcurrentHashMap<>();

  /** One load call's work on the loader thread, named by the driver's load id. */
  static final class Load extends FutureTask<String> {
    final String loadId;

    Load(String loadId, java.util.concurrent.Callable<String> body) {
      super(body);
      this.loadId = loadId;
    }
  }

  /**
   * Executor side: one thread runs the background loads, one bin after another. A load that
   * ran in its task held a task slot for the whole download (seconds from a remote store),
   * and the query's own tasks on that executor waited for the slot; this thread only
   * competes for the CPU it actually uses, and at a lower priority than the tasks
   * (`lowerPriority`): Megaphone's migration must not stall processing.
   */
  private static final ExecutorService LOADER = Executors.newSingleThreadExecutor(task -> {
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
   * Executor side: the block of each key's announced answer. Recording an answer, and
   * removing a load with its record, happen under the LOADS lock, so an answer stays
   * announced only while its load is the key's current one; the block manager's calls to
   * the driver run outside the lock.
   */
  private static final ConcurrentHashMap<String, BlockId> ANNOUNCED = new ConcurrentHashMap<>();

  /**
   * Executor side: the keys whose copy the loader thread is loading now. Changed, and read
   * by a release, under the LOADS lock: a release then either finds the load running (and
   * the load drops its own copy when it ends) or finds it ended (and drops the copy itself).
   */
  private static final Set<String> RUNNING = ConcurrentHashMap.newKeySet();

  private StatePrewarm() {}

  /** `API`, as a method: py4j reaches static methods more reliably than static fields. */
  public static int api() {
    return API;
  }

  /** Driver side: how many Hadoop-conf broadcasts the helper jobs have made (ShippedConf). */
  public static long confBroadcasts() {
    return ShippedConf.broadcasts();
  }

  /** Driver side: the executors whose helper calls go over RPC (HelperRpc), sorted. */
  public static List<String> rpcExecutors(SparkContext sc) {
    return HelperRpc.executors(sc);
  }

  /**
   * Driver side, a failure switch for tests: forget `executorId`'s endpoint, so its calls
   * take the job path again (whose task registers it anew).
   */
  public static void forgetRpcEndpoint(String executorId) {
    HelperRpc.forget(executorId);
  }

  /** For tests: HelperRpc.askRegistry (a registration as an executor would send it). */
  public static String askRpcRegistry(SparkContext sc, String tag, String executorId,
      boolean withRef) {
    return HelperRpc.askRegistry(sc, tag, executorId, withRef);
  }

  /** Driver side: HelperRpc.registerEndpoints (each "executorId\thost"). */
  public static List<String> registerEndpoints(SparkContext sc, List<String> executors) {
    return HelperRpc.registerEndpoints(sc, executors);
  }

  /** One store of one bin of one query run: the key of its load and of its answer. */
  static String answerKey(String root, long operatorId, int partition, String storeName,
      String runId) {
    return root + "|" + operatorId + "|" + partition + "|" + storeName + "|" + runId;
  }

  // -- a finished load's answer, announced through the block manager ----------------------
  //
  // A poll is a Spark job: its task waits for a slot while a batch runs and then holds one
  // that a batch task wanted. So the loader thread announces its answer as a tiny block
  // (the executor's BlockManager tells the driver's BlockManagerMaster that it holds it),
  // and the driver reads it with no job at all: a look-up in the master and one fetch.

  /** What every answer block's name holds (AnswerWatch wakes the waits on it). */
  static final String ANSWER_BLOCK_PREFIX = "swivel-prewarm-";

  /** The block that carries the answer of one load (`loadId`, made by the driver) of `key`. */
  static BlockId answerBlock(String key, String loadId) {
    UUID id = UUID.nameUUIDFromBytes((key + "|" + loadId).getBytes(StandardCharsets.UTF_8));
    return TestBlockId.apply(ANSWER_BLOCK_PREFIX + id);
  }

  /**
   * Driver side: how many answer blocks have been put or removed so far (AnswerWatch, added
   * as `sc`'s listener on first use). Read it before reading the answers, then pass it to
   * `awaitAnswers`.
   */
  public static long answerUpdates(SparkContext sc) {
    return AnswerWatch.of(sc).updates();
  }

  /**
   * Driver side: waits up to `timeoutMs` for an answer block to be put or removed after
   * `answerUpdates` returned `seen`; returns the count then (at once when one already was).
   */
  public static long awaitAnswers(SparkContext sc, long seen, long timeoutMs)
      throws InterruptedException {
    return AnswerWatch.of(sc).awaitAfter(seen, timeoutMs);
  }

  /**
   * Executor side: publish a finished load's answer, if `current` still holds when it is
   * recorded (the load is still the key's own; checked under the LOADS lock). The block
   * manager's calls to the driver run outside that lock: they wait for the driver, and the
   * switch's tasks take the lock on the batch path. A failure only costs time: the answer
   * stays in LOADS, where the driver's occasional poll job still finds it.
   */
  static void announce(String key, String loadId, String answer,
      java.util.function.BooleanSupplier current) {
    BlockId block = answerBlock(key, loadId);
    try {
      SparkEnv.get().blockManager().putSingle(block, answer, StorageLevel.MEMORY_ONLY(), true,
          ClassTag$.MODULE$.apply(String.class));
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
    removeQuietly(drop);
  }

  /** Executor side: take the key's announced answer off the record (under the LOADS lock). */
  static BlockId unrecord(String key) {
    return ANNOUNCED.remove(key);
  }

  /** Executor side: drop an announced answer's block (outside the LOADS lock). */
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

  /**
   * Driver side: the answers that load `loadId` has announced so far for `partitions` (one
   * JSON per answered store, as `poll` would return it); a partition not yet answered is
   * left out. Runs no Spark job. Only another load's id could name another answer.
   */
  public static List<String> announced(String root, long operatorId, String storeName,
      String runId, String loadId, List<Integer> partitions) {
    BlockManager blocks = SparkEnv.get().blockManager();
    List<String> answers = new ArrayList<>();
    for (Integer partition : partitions) {
      String key = answerKey(root, operatorId, partition, storeName, runId);
      BlockId block = answerBlock(key, loadId);
      try {
        Option<BlockResult> found = blocks.getLocalValues(block);  // local mode: same JVM
        if (found.isEmpty() && blocks.master().contains(block)) {
          found = blocks.getRemoteValues(block, ClassTag$.MODULE$.apply(String.class));
        }
        if (found.isDefined()) {
          scala.collection.Iterator<Object> values = found.get().data();
          String answer = values.hasNext() ? String.valueOf(values.next()) : null;
          while (values.hasNext()) {
            values.next();  // read to the end: that releases a local block's read lock
          }
          if (answer != null) {
            answers.add(answer);
          }
        }
      } catch (Throwable e) {
        // not readable yet (or its executor just left): the poll job decides
      }
    }
    return answers;
  }

  /** Driver side: whether `executorId`'s block manager is still registered (it is alive). */
  public static boolean registered(String executorId) {
    return SparkEnv.get().blockManager().master().getExecutorEndpointRef(executorId).isDefined();
  }

  /** The shadow run id of a query run: stable, so driver and executors agree on it. */
  public static UUID shadowRunId(UUID runId) {
    return UUID.nameUUIDFromBytes(("swivel-prewarm:" + runId).getBytes(StandardCharsets.UTF_8));
  }

  public static String shadowRunId(String runId) {
    return shadowRunId(UUID.fromString(runId)).toString();
  }

  /**
   * The key and value schema (JSON) of a store, read from its schema file as
   * StateSchemaCompatibilityChecker.readSchemaFile does: `<store of partition 0>/_metadata/
   * schema`, a version string then the schemas. Only single-column-family stores (schema
   * v1/v2: aggregations, dedup, (flat)MapGroupsWithState, applyInPandasWithState, joins).
   */
  public static String[] readSchema(Configuration hadoopConf, String root, long operatorId,
      String storeName) throws Exception {
    Path store = new StateStoreId(root, operatorId, 0, storeName).storeCheckpointLocation();
    Path file = new Path(new Path(store, "_metadata"), "schema");
    FileSystem fs = file.getFileSystem(hadoopConf);
    try (FSDataInputStream in = fs.open(file)) {
      String version = in.readUTF();
      scala.collection.immutable.List<StateStoreColFamilySchema> schemas =
          SchemaHelper.SchemaReader$.MODULE$.createSchemaReader(version).read(in);
      if (schemas.size() != 1) {
        throw new IllegalStateException("store " + store + " has " + schemas.size()
            + " column families (" + version + "): prewarm supports one");
      }
      StateStoreColFamilySchema schema = schemas.head();
      return new String[] {schema.keySchema().json(), schema.valueSchema().json(), version};
    }
  }

  /** One unit of work: a bin (of one store) on one executor. */
  public static final class Spec implements Serializable {
    private static final long serialVersionUID = 1L;
    final String action;
    final String executorId;
    final String root;
    final long operatorId;
    final int partition;
    final String storeName;
    final String runId;
    /**
     * The driver's id of one load call (`load`), and of the load that `poll` and `release`
     * are about: a load's answer names it, and a poll or release of another load of the
     * bin answers `superseded` and changes nothing.
     */
    final String loadId;
    final long version;
    final String keySchema;
    final String valueSchema;
    /** transformWithState: column families, several values per key (schema v3). */
    final boolean columnFamilies;

    Spec(String action, String executorId, String root, long operatorId, int partition,
        String storeName, String runId, String loadId, long version, String keySchema,
        String valueSchema, boolean columnFamilies) {
      this.action = action;
      this.executorId = executorId;
      this.root = root;
      this.operatorId = operatorId;
      this.partition = partition;
      this.storeName = storeName;
      this.runId = runId;
      this.loadId = loadId;
      this.version = version;
      this.keySchema = keySchema;
      this.valueSchema = valueSchema;
      this.columnFamilies = columnFamilies;
    }

    StateStoreId storeId() {
      return new StateStoreId(root, operatorId, partition, storeName);
    }

    StateStoreProviderId real() {
      return new StateStoreProviderId(storeId(), UUID.fromString(runId));
    }

    StateStoreProviderId shadow() {
      return new StateStoreProviderId(storeId(), shadowRunId(UUID.fromString(runId)));
    }

    String key() {
      return answerKey(root, operatorId, partition, storeName, runId);
    }
  }

  /**
   * Runs `action` (load | poll | activate | probe | release) for each `targets` entry
   * "partition\texecutorId\thost": over RPC where the entry's executor has registered
   * its endpoint (HelperRpc: no job; the answer says "via": "rpc"), and for the other
   * entries as one job of a task per entry preferring exactly that executor
   * (ExecutorCacheTaskLocation; a task that lands elsewhere does nothing and says so, and
   * its executor registers its endpoint for the next call). An entry whose ask failed is
   * answered by the job too (its answer says `rpc_failed`), except an activation, which
   * answers `failed`: it may still run there. Returns one JSON object per entry, in
   * `targets` order. Blocks until every answer is in. For `activate`, a
   * `version` above 0 first tops the shadow copy up to that version (RocksDB reuses a
   * loaded database only at the exact version a task asks for).
   */
  public static List<String> run(SparkContext sc, SQLConf sqlConf, Configuration hadoopConf,
      String action, List<String> targets, String root, long operatorId, String storeName,
      String runId, String loadId, long version, String keySchema, String valueSchema,
      boolean columnFamilies) {
    StateStoreConf storeConf = new StateStoreConf(sqlConf,
        scala.collection.immutable.Map$.MODULE$.<String, String>empty());
    Broadcast<SerializableConfiguration> shipped = ShippedConf.of(sc, hadoopConf);
    java.util.Map<Integer, String> failures = new java.util.HashMap<>();
    String[] answers = HelperRpc.call(sc, storeConf, shipped, action, targets, root,
        operatorId, storeName, runId, loadId, version, keySchema, valueSchema, columnFamilies,
        failures);
    List<Integer> byJob = new ArrayList<>();
    for (int i = 0; i < answers.length; i++) {
      if (answers[i] == null) {
        byJob.add(i);
      }
    }
    if (!byJob.isEmpty()) {  // executors without an endpoint, or whose ask failed
      List<String> jobTargets = new ArrayList<>();
      for (int index : byJob) {
        jobTargets.add(targets.get(index));
      }
      List<String> jobAnswers = runJob(sc, storeConf, shipped, action, jobTargets, root,
          operatorId, storeName, runId, loadId, version, keySchema, valueSchema,
          columnFamilies);
      for (int i = 0; i < byJob.size(); i++) {
        String failed = failures.get(byJob.get(i));
        String answer = jobAnswers.get(i);
        if (failed != null) {  // the answer says why its job ran: "{rpc_failed, ...answer}"
          String mark = new Json().put("rpc_failed", failed).toString();
          answer = mark.substring(0, mark.length() - 1) + "," + answer.substring(1);
        }
        answers[byJob.get(i)] = answer;
      }
    }
    return java.util.Arrays.asList(answers);
  }

  /** `run`'s job: one task per target, on its executor. */
  private static List<String> runJob(SparkContext sc, StateStoreConf storeConf,
      Broadcast<SerializableConfiguration> shipped, String action, List<String> targets,
      String root, long operatorId, String storeName, String runId, String loadId,
      long version, String keySchema, String valueSchema, boolean columnFamilies) {
    List<Tuple2<Spec, scala.collection.immutable.Seq<String>>> items = new ArrayList<>();
    for (String target : targets) {
      String[] parts = target.split("\t", -1);
      int partition = Integer.parseInt(parts[0]);
      String executorId = parts[1];
      String host = parts[2];
      Spec spec = new Spec(action, executorId, root, operatorId, partition, storeName, runId,
          loadId, version, keySchema, valueSchema, columnFamilies);
      List<String> where = new ArrayList<>();
      where.add("executor_" + host + "_" + executorId);
      items.add(new Tuple2<>(spec, CollectionConverters.asScala(where).toList()));
    }
    RDD<Spec> rdd = sc.makeRDD(CollectionConverters.asScala(items).toList(),
        ClassTag$.MODULE$.apply(Spec.class));
    Runner runner = new Runner(storeConf, shipped);
    // Inside foreachBatch this thread carries the batch's description ("... batch = N"),
    // which the adapter uses to find a batch's jobs: ours get their own, then it is restored.
    String description = sc.getLocalProperty(JOB_DESCRIPTION);
    sc.setJobDescription("swivel: " + action + " " + targets.size() + " bin(s)");
    try {
      return rdd.toJavaRDD().map(runner).collect();
    } finally {
      sc.setLocalProperty(JOB_DESCRIPTION, description);
    }
  }

  /** Where a released shadow id points: no executor, on a host of that name. */
  static final String RELEASED_EXECUTOR = "swivel-released";

  /**
   * A prewarmed step's whole switch, in one call from the driver: the boundary is on the
   * batch path, and from Python each bin's re-pointing took a dozen py4j round trips (each
   * also waiting for the GIL). Points every bin's real id at its target (what `set_location`
   * does), runs `activate` for each store (one job per store, as `run`), and then, activated
   * or not, points every bin's shadow ids at no executor, so no shadow copy stays the
   * active instance anywhere. `targets` as in `run`; `stores` one entry per store,
   * "operatorId\tstoreName\tkeySchema\tvalueSchema\tcolumnFamilies" (schemas are JSON,
   * which never holds a raw tab; columnFamilies is true or false). Returns `activate`'s
   * answers, every store's.
   */
  public static List<String> switchStep(SparkContext sc, SQLConf sqlConf,
      Configuration hadoopConf, StateStoreCoordinatorRef coordinator, List<String> targets,
      List<String> stores, String root, String runId, long version) throws Exception {
    UUID real = UUID.fromString(runId);
    point(coordinator, targets, stores, root, real, null, null);
    List<String> answers = new ArrayList<>();
    Throwable failed = null;  // a failed job is a SparkException, which Java counts as checked
    try {
      for (String store : stores) {
        String[] parts = store.split("\t", -1);
        answers.addAll(run(sc, sqlConf, hadoopConf, "activate", targets, root,
            Long.parseLong(parts[0]), parts[1], runId, "", version, parts[2], parts[3],
            Boolean.parseBoolean(parts[4])));
      }
    } catch (Throwable e) {
      failed = e;
    }
    try {  // activated or not, no shadow copy may stay the active instance anywhere
      releaseShadows(coordinator, targets, stores, root, runId);
    } catch (Exception e) {  // the coordinator's ask may fail too (a SparkException)
      if (failed == null) {
        throw e;
      }
      failed.addSuppressed(e);  // the activation's failure is the one the caller needs
    }
    if (failed instanceof Exception) {
      throw (Exception) failed;
    } else if (failed != null) {
      throw (Error) failed;
    }
    return answers;
  }

  /**
   * Points the shadow id of every bin of `bins` (each entry starts with the bin number, as a
   * `targets` entry of `run` does) and every store of `stores` (each entry starts with
   * "operatorId\tstoreName", as in `switchStep`) at no executor (`RELEASED_EXECUTOR`, on a
   * host of that name): a shadow copy left anywhere is then not the active instance, and
   * that executor's maintenance unloads it. The one release of shadow ids: `switchStep`'s,
   * a cancelled step's and a switch that failed before `switchStep` ran.
   */
  public static void releaseShadows(StateStoreCoordinatorRef coordinator, List<String> bins,
      List<String> stores, String root, String runId) {
    point(coordinator, bins, stores, root, shadowRunId(UUID.fromString(runId)),
        RELEASED_EXECUTOR, RELEASED_EXECUTOR);
  }

  /**
   * Points the provider id of run `runId` of every bin of `targets` (as in `run`) and every
   * store of `stores` (as in `switchStep`) at `executor` on `host`; both null: at each
   * target's own executor and host. With both given, a `targets` entry needs only its bin
   * number and a `stores` entry only "operatorId\tstoreName".
   */
  private static void point(StateStoreCoordinatorRef coordinator, List<String> targets,
      List<String> stores, String root, UUID runId, String host, String executor) {
    scala.collection.immutable.Seq<StateStoreProviderId> none =
        CollectionConverters.asScala(new ArrayList<StateStoreProviderId>()).toList();
    for (String target : targets) {
      String[] bin = target.split("\t", -1);
      for (String store : stores) {
        String[] parts = store.split("\t", -1);
        StateStoreId id = new StateStoreId(root, Long.parseLong(parts[0]),
            Integer.parseInt(bin[0]), parts[1]);
        coordinator.reportActiveInstance(new StateStoreProviderId(id, runId),
            host == null ? bin[2] : host, executor == null ? bin[1] : executor, none);
      }
    }
  }

  /** The task body. */
  static final class Runner implements Function<Spec, String> {
    private static final long serialVersionUID = 1L;
    private final StateStoreConf storeConf;
    // broadcast: fetched once per executor, not shipped and deserialised with every task
    private final Broadcast<SerializableConfiguration> shippedConf;

    Runner(StateStoreConf storeConf, Broadcast<SerializableConfiguration> shippedConf) {
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

    /** The call's work, on the job's task or on the executor's endpoint (HelperRpc). */
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
      // read on the task's thread, while its job holds the broadcast: a load may wait in the
      // loader's queue after a changed setting has replaced the broadcast and Spark's
      // cleaner has removed the old one's blocks
      Configuration conf = hadoopConf();
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
        announce(key, spec.loadId, result, () -> LOADS.get(key) == self.get());
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

  /** An error with the frames that tell where it came from (a load has no task log). */
  static String describe(Throwable error) {
    StringBuilder out = new StringBuilder(String.valueOf(error));
    StackTraceElement[] frames = error.getStackTrace();
    for (int i = 0; i < Math.min(frames.length, 12); i++) {
      out.append(" at ").append(frames[i]);
    }
    return out.toString();
  }

  /** A flat JSON object of strings and numbers, enough for the results. */
  static final class Json {
    private final StringBuilder body = new StringBuilder();

    Json put(String name, Object value) {
      body.append(body.length() == 0 ? "" : ",").append(quote(name)).append(':');
      if (value instanceof Number || value instanceof Boolean) {
        body.append(value);
      } else {
        body.append(quote(String.valueOf(value)));
      }
      return this;
    }

    private static String quote(String text) {
      StringBuilder out = new StringBuilder("\"");
      for (char c : text.toCharArray()) {
        if (c == '"' || c == '\\') {
          out.append('\\').append(c);
        } else if (c < 0x20) {
          out.append(String.format("\\u%04x", (int) c));
        } else {
          out.append(c);
        }
      }
      return out.append('"').toString();
    }

    @Override
    public String toString() {
      return "{" + body + "}";
    }
  }
}
