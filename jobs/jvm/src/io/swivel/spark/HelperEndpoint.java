/*
 * Swivel: the executor's side of the prewarm helper's calls over Spark's RPC (HelperRpc
 * has the why, the driver's side and the trust rules; docs/migration.md, "Helper calls
 * over Spark's RPC").
 *
 * An executor's first helper task sets up this endpoint on the executor's RpcEnv and sends
 * the driver's registry a reference to it. A call names an action and its bins; the
 * endpoint checks its shape, types, action, run id, provider and size, runs each bin as
 * the job's task would (PrewarmRunner) on a small pool, and replies with the answers in
 * order. Its
 * skeleton (`Isolated`) is also the base of the driver's registry (HelperRpc.Registry).
 */
package io.swivel.spark;

import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.regex.Pattern;

import org.apache.spark.SparkEnv;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.rpc.IsolatedThreadSafeRpcEndpoint;
import org.apache.spark.rpc.RpcCallContext;
import org.apache.spark.rpc.RpcEndpointRef;
import org.apache.spark.rpc.RpcEnv;
import org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.util.RpcUtils;
import org.apache.spark.util.SerializableConfiguration;
import scala.PartialFunction;
import scala.PartialFunction$;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

final class HelperEndpoint {
  static final String NAME = "swivel-prewarm-calls";
  static final String CALL = "swivel-call";

  /** The most bins one call may name (a query has at most this many state partitions). */
  static final int MAX_TARGETS = 4096;

  /**
   * A failure switch for tests: a session setting; while it is "true" every executor's
   * endpoint refuses calls, as a failed ask would (unset, the default: it answers).
   */
  static final String FAIL_KEY = "swivel.prewarm.test.failRpc";

  /**
   * A failure switch for tests: a session setting; while it is "true" a finished load does
   * not send its answer to the driver over RPC (as when the message is lost), so the driver
   * reads it from the answer block (unset, the default: it sends it).
   */
  static final String DROP_ANSWERS_KEY = "swivel.prewarm.test.dropRpcAnswers";

  /** The only providers a call may name: Spark's own (a call instantiates its class). */
  private static final Set<String> PROVIDERS = Set.of(
      HDFSBackedStateStoreProvider.class.getName(), RocksDBStateStoreProvider.class.getName());

  /** A run id as Spark writes one (UUID.toString), before UUID.fromString reads it. */
  private static final Pattern UUID_TEXT =
      Pattern.compile("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");

  // A call's fields: its tag, then these, in this order.
  private static final int STORE_CONF = 1;
  private static final int HADOOP_CONF = 2;
  private static final int ACTION = 3;
  private static final int ROOT = 4;
  private static final int OPERATOR = 5;
  private static final int STORE = 6;
  private static final int RUN_ID = 7;
  private static final int LOAD_ID = 8;
  private static final int VERSION = 9;
  private static final int KEY_SCHEMA = 10;
  private static final int VALUE_SCHEMA = 11;
  private static final int COLUMN_FAMILIES = 12;
  private static final int TARGETS = 13;
  private static final Class<?>[] CALL_FIELDS = {String.class, StateStoreConf.class,
      Broadcast.class, String.class, String.class, Long.class, String.class, String.class,
      String.class, Long.class, String.class, String.class, Boolean.class, List.class};

  /** The RpcEnv this JVM's endpoint is set up on, and the endpoint. */
  private static WeakReference<RpcEnv> endpointEnv = new WeakReference<>(null);

  private static RpcEndpointRef endpointRef;

  /** How the last registration went. */
  static volatile String state = "not set up";

  /** The driver's registry this JVM's endpoint registered with (null: not registered). */
  private static volatile RpcEndpointRef registry;

  /**
   * Runs the calls' bins, several at once (an executor's bins switch in parallel, as the
   * job's tasks did on its cores), off the endpoint's own thread, which only hands the work
   * over. One queue for every action: a release of several bins queued first delays an
   * activation behind it (the driver releases only steps that will not switch).
   */
  private static final ExecutorService WORK = Executors.newFixedThreadPool(
      Math.max(2, Runtime.getRuntime().availableProcessors()), task -> {
        Thread thread = new Thread(task, "swivel-prewarm-call");
        thread.setDaemon(true);
        return thread;
      });

  private HelperEndpoint() {}

  /**
   * From a helper job's task: sets up this JVM's endpoint (once per RpcEnv) and registers it
   * with the driver. Registered again by every such task: a task runs only where the driver
   * had no endpoint to ask (not yet registered, or forgotten after a failed ask). A failure
   * is kept in `state`; the calls then take the job path. Set up from a task's
   * thread, the endpoint's class comes from the task's class loader (where spark.jars is).
   */
  static void ensure() {
    SparkEnv env = SparkEnv.get();
    RpcEnv rpc = env.rpcEnv();
    RpcEndpointRef self;
    synchronized (HelperEndpoint.class) {
      if (endpointEnv.get() != rpc) {
        endpointEnv = new WeakReference<>(rpc);
        try {
          endpointRef = rpc.setupEndpoint(NAME, new Calls(rpc));
        } catch (Throwable e) {
          endpointRef = null;
          state = "not set up: " + StatePrewarm.describe(e);
        }
      }
      self = endpointRef;
    }
    if (self == null) {
      return;
    }
    try {
      RpcEndpointRef driver = RpcUtils.makeDriverRef(HelperRpc.REGISTRY, env.conf(), rpc);
      driver.askSync(new ArrayList<>(List.of(HelperRpc.REGISTER, env.executorId(), self)),
          ClassTag$.MODULE$.apply(Object.class));
      registry = driver;
      state = "registered";
    } catch (Throwable e) {
      // an earlier registration may still hold on the driver (it calls this only for an
      // executor it has no endpoint of): its registry ref is kept, a send to it is harmless
      state = "not registered: " + StatePrewarm.describe(e);
    }
  }

  /**
   * Sends a finished load's answer (`block` names it, as StatePrewarm.answerBlock does) to
   * the driver's registry, without waiting for the reply: the driver then reads it without
   * fetching the block, which a driver never does otherwise in a streaming query (a block
   * client, its event loop and message types first used inside a migration's batches,
   * docs/migration.md "Answers over RPC"). Not registered, or the send failed: the driver
   * reads the block.
   */
  static void sendAnswer(String block, String answer) {
    RpcEndpointRef to = registry;
    SparkEnv env = SparkEnv.get();
    if (to == null || env == null) {
      return;
    }
    try {
      to.ask(new ArrayList<>(List.of(HelperRpc.ANSWER, env.executorId(), block, answer)),
          RpcUtils.askRpcTimeout(env.conf()), ClassTag$.MODULE$.apply(Object.class));
    } catch (Throwable e) {
      // the block is there: the driver's slower read finds it
    }
  }

  /** Why `message` is not a call this executor runs (null: it is one). */
  static String notACall(Object message) {
    if (!(message instanceof List)) {
      return "not a list";
    }
    List<?> fields = (List<?>) message;
    if (fields.size() != CALL_FIELDS.length || !CALL.equals(fields.get(0))) {
      return "not a " + CALL + " of " + CALL_FIELDS.length + " fields";
    }
    for (int i = 1; i < CALL_FIELDS.length; i++) {
      if (!CALL_FIELDS[i].isInstance(fields.get(i))) {
        return "field " + i + " is not a " + CALL_FIELDS[i].getSimpleName();
      }
    }
    if (!PrewarmRunner.ACTIONS.contains((String) fields.get(ACTION))) {
      return "action " + fields.get(ACTION) + " is not one of "
          + new TreeSet<>(PrewarmRunner.ACTIONS);
    }
    if (!UUID_TEXT.matcher((String) fields.get(RUN_ID)).matches()) {
      return "run id " + fields.get(RUN_ID) + " is not a UUID";
    }
    if ((Long) fields.get(OPERATOR) < 0 || (Long) fields.get(VERSION) < 0) {
      return "a negative operator id or version";
    }
    String provider = ((StateStoreConf) fields.get(STORE_CONF)).providerClass();
    if (!PROVIDERS.contains(provider)) {
      return "provider " + provider + " is not one of " + new TreeSet<>(PROVIDERS);
    }
    List<?> targets = (List<?>) fields.get(TARGETS);
    if (targets.size() > MAX_TARGETS) {
      return targets.size() + " targets, over " + MAX_TARGETS;
    }
    for (Object target : targets) {
      String[] parts = target instanceof String ? ((String) target).split("\t", -1) : null;
      if (parts == null || parts.length != 2 || !parts[0].matches("[0-9]{1,9}")) {
        return "a target is not \"partition\\texecutorId\"";
      }
    }
    return null;
  }

  /**
   * An endpoint of the helper's, on a thread of its own (the shared dispatcher's few
   * threads serve Spark's own endpoints), that takes every message it is asked and answers
   * exactly what `handle` replies or refuses.
   */
  abstract static class Isolated implements IsolatedThreadSafeRpcEndpoint {
    private final RpcEnv env;

    Isolated(RpcEnv env) {
      this.env = env;
    }

    @Override
    public RpcEnv rpcEnv() {
      return env;
    }

    /**
     * Replies to or refuses `message` through `context` (a failure naming why), exactly
     * once, now or later from another thread (as Calls does, when its bins are done). A
     * throw is answered as a failure by Spark's Inbox, and the endpoint goes on.
     */
    abstract void handle(Object message, RpcCallContext context);

    @Override
    public PartialFunction<Object, BoxedUnit> receiveAndReply(RpcCallContext context) {
      return PartialFunction$.MODULE$.fromFunction(new AbstractFunction1<Object, BoxedUnit>() {
        @Override
        public BoxedUnit apply(Object message) {
          handle(message, context);
          return BoxedUnit.UNIT;
        }
      });
    }
  }

  /** The executor's endpoint: runs a call's targets as the job's tasks would. */
  static final class Calls extends Isolated {
    Calls(RpcEnv env) {
      super(env);
    }

    @Override
    void handle(Object message, RpcCallContext context) {
      String wrong = notACall(message);
      if (wrong != null) {
        context.sendFailure(new IllegalArgumentException("swivel prewarm call: " + wrong));
        return;
      }
      List<?> f = (List<?>) message;
      @SuppressWarnings("unchecked")
      PrewarmRunner runner = new PrewarmRunner((StateStoreConf) f.get(STORE_CONF),
          (Broadcast<SerializableConfiguration>) f.get(HADOOP_CONF));
      List<CompletableFuture<String>> work = new ArrayList<>();
      for (Object target : (List<?>) f.get(TARGETS)) {
        String[] parts = ((String) target).split("\t", -1);
        StatePrewarm.Spec spec = new StatePrewarm.Spec((String) f.get(ACTION), parts[1],
            (String) f.get(ROOT), (Long) f.get(OPERATOR), Integer.parseInt(parts[0]),
            (String) f.get(STORE), (String) f.get(RUN_ID), (String) f.get(LOAD_ID),
            (Long) f.get(VERSION), (String) f.get(KEY_SCHEMA), (String) f.get(VALUE_SCHEMA),
            (Boolean) f.get(COLUMN_FAMILIES));
        work.add(CompletableFuture.supplyAsync(() -> answer(runner, spec), WORK));
      }
      CompletableFuture.allOf(work.toArray(new CompletableFuture<?>[0]))
          .whenComplete((done, error) -> reply(context, work, error));
    }

    /**
     * Answers the call exactly once: the driver waits for it (on the batch path for an
     * activation), so a reply that cannot be sent is replaced by a failure naming why.
     */
    private static void reply(RpcCallContext context, List<CompletableFuture<String>> work,
        Throwable error) {
      try {
        if (error != null) {  // as a failed task fails its job; as text: serialisable
          context.sendFailure(new IllegalStateException(String.valueOf(error)));
          return;
        }
        List<String> replies = new ArrayList<>();
        for (CompletableFuture<String> one : work) {
          replies.add(one.join());
        }
        context.reply(replies);
      } catch (Throwable e) {
        context.sendFailure(new IllegalStateException("the reply failed: " + e));
      }
    }

    /** One target's answer, marked as sent over RPC; a failure fails the whole call. */
    private static String answer(PrewarmRunner runner, StatePrewarm.Spec spec) {
      if (runner.setting(FAIL_KEY)) {
        throw new IllegalStateException("refused by " + FAIL_KEY);
      }
      try {
        String answer = runner.answer(spec);
        return "{\"via\":\"rpc\"," + answer.substring(1);  // an answer is a JSON object
      } catch (Exception e) {
        throw new IllegalStateException(StatePrewarm.describe(e), e);
      }
    }
  }
}
