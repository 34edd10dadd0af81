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
 *
 * The pieces: this class is the driver's entry points (the calls, the switch, the answers'
 * reads) and what both sides share (Spec, the answers' JSON); PrewarmRunner does a call's
 * work for one bin on an executor, PrewarmLoads holds the executor's loads and their
 * answers, HelperRpc and HelperEndpoint carry the calls over Spark's RPC, and
 * ChangelogFollower and ChangelogCatchUp keep a loaded RocksDB copy current.
 */
package io.swivel.spark;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.execution.streaming.state.RocksDB;
import org.apache.spark.sql.execution.streaming.state.SchemaHelper;
import org.apache.spark.sql.execution.streaming.state.StateStoreColFamilySchema;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreCoordinatorRef;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.BlockResult;
import org.apache.spark.storage.TestBlockId;
import org.apache.spark.util.SerializableConfiguration;
import scala.Option;
import scala.Tuple2;
import scala.collection.mutable.HashMap;
import scala.jdk.javaapi.CollectionConverters;

public final class StatePrewarm {
  /**
   * Bumped when the wire format of `run`, `switchStep`, `releaseShadows` or `announced`
   * changes; the Python side checks it.
   */
  public static final int API = 14;

  /**
   * A failure switch for tests: a session setting; while it is "true" the switch's top-up
   * does not replay in place (ChangelogCatchUp) and falls back to Spark's reopening load, as
   * it does where a replay is refused or fails (unset, the default: it replays).
   */
  static final String REPLAY_REFUSED_KEY = "swivel.prewarm.test.refuseReplay";

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

  /** For tests: HelperRpc.askRegistryMessage (any message, as a peer could send it). */
  public static String askRpcRegistryMessage(SparkContext sc, List<Object> message) {
    return HelperRpc.askRegistryMessage(sc, message);
  }

  /** For tests: HelperRpc.askEndpointMessage (any message to an executor's endpoint). */
  public static String askRpcEndpointMessage(SparkContext sc, String executorId,
      Object message) {
    return HelperRpc.askEndpointMessage(sc, executorId, message);
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

  /** How every answer block's name begins (the block id's own prefix, then ours). */
  static String answerBlockPrefix() {
    return TestBlockId.apply(ANSWER_BLOCK_PREFIX).name();
  }

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
   * Driver side: the answers that load `loadId` has announced so far for `partitions` (one
   * JSON per answered store, as `poll` would return it); a partition not yet answered is
   * left out. Runs no Spark job. Only another load's id could name another answer. An
   * answer its executor sent over RPC is taken as it came (`"answered":"rpc"`); without
   * one, and only with `fetchBlocks`, the answer block is read (`"answered":"block"`: a
   * fetch from the executor's block server, which the driver otherwise never makes).
   */
  public static List<String> announced(String root, long operatorId, String storeName,
      String runId, String loadId, List<Integer> partitions, boolean fetchBlocks) {
    BlockManager blocks = SparkEnv.get().blockManager();
    List<String> answers = new ArrayList<>();
    for (Integer partition : partitions) {
      String key = answerKey(root, operatorId, partition, storeName, runId);
      BlockId block = answerBlock(key, loadId);
      String sent = HelperRpc.takeAnswer(block.name());
      if (sent != null) {
        answers.add(answeredBy(sent, "rpc"));
        continue;
      }
      if (!fetchBlocks) {
        continue;
      }
      try {
        Option<BlockResult> found = blocks.getLocalValues(block);  // local mode: same JVM
        if (found.isEmpty() && blocks.master().contains(block)) {
          found = blocks.getRemoteValues(block, PrewarmLoads.ANSWER_TAG);
        }
        if (found.isDefined()) {
          scala.collection.Iterator<Object> values = found.get().data();
          String answer = values.hasNext() ? String.valueOf(values.next()) : null;
          while (values.hasNext()) {
            values.next();  // read to the end: that releases a local block's read lock
          }
          if (answer != null) {
            answers.add(answeredBy(answer, "block"));
          }
        }
      } catch (Throwable e) {
        // not readable yet (or its executor just left): the poll job decides
      }
    }
    return answers;
  }

  /** An answer (a JSON object) marked with how the driver read it. */
  private static String answeredBy(String answer, String how) {
    if (!answer.startsWith("{") || answer.length() <= 2) {
      return answer;
    }
    return "{\"answered\":\"" + how + "\"," + answer.substring(1);
  }

  /** Driver side: whether `executorId` sends its loads' answers over RPC (has an endpoint). */
  public static boolean answersOverRpc(String executorId) {
    return HelperRpc.hasEndpoint(executorId);
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
    List<Tuple2<Spec, String>> items = new ArrayList<>();
    for (String target : targets) {
      String[] parts = target.split("\t", -1);
      Spec spec = new Spec(action, parts[1], root, operatorId, Integer.parseInt(parts[0]),
          storeName, runId, loadId, version, keySchema, valueSchema, columnFamilies);
      items.add(new Tuple2<>(spec, PinnedJob.on(parts[1], parts[2])));
    }
    return PinnedJob.run(sc, "swivel: " + action + " " + targets.size() + " bin(s)",
        Spec.class, items, new PrewarmRunner(storeConf, shipped));
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
