/*
 * Swivel: the prewarm helper's calls to executors over Spark's own RPC, not a Spark job
 * each (docs/migration.md, "Helper calls over Spark's RPC").
 *
 * Why: every helper call (a step's loads, its switch's activation) was a Spark job, and a
 * job goes through the driver's DAG scheduler, task-set manager, task-result getter and
 * status listener. A run with HotSpot's compilation log showed the driver compiling those
 * paths again when the first helper jobs met code compiled for the query's own jobs
 * (deoptimised on their types and branches), and each job cost ~40 ms of JVM CPU, on a
 * machine whose cores the batches already fill. An endpoint on the executor answers the
 * same call in one round trip of messages the executor's JVM already exchanges with the
 * driver.
 *
 * How: the driver sets up a registry endpoint on its RpcEnv. An executor running its first
 * helper task sets up its own endpoint and sends the registry a reference to it: an
 * executor's RpcEnv has no server, so the driver reaches an executor's endpoint only
 * through a reference the executor sent over its own connection (as Spark's own executor
 * endpoint is reached). From then on `StatePrewarm.run` asks the targets' endpoints, all at
 * once, when every target has one; otherwise, or when an ask fails, it runs its job as
 * before. Messages hold only JDK and Spark types: the RPC threads deserialise with the
 * application's class loader, which does not see a jar added through spark.jars.
 *
 * Trust: the registry and the endpoints are reachable by whoever can reach Spark's RPC
 * ports, as Spark's own endpoints are (spark.authenticate is what guards them). Each checks
 * a message's shape and types and answers anything else with a failure naming what is
 * wrong; a registration only names where the driver sends helper calls for that executor,
 * and a call's answer only decides whether a bin is switched with its loaded copy (a wrong
 * answer makes the bin reload from the checkpoint, as without prewarm).
 */
package io.swivel.spark;

import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.rpc.IsolatedThreadSafeRpcEndpoint;
import org.apache.spark.rpc.RpcCallContext;
import org.apache.spark.rpc.RpcEndpoint;
import org.apache.spark.rpc.RpcEndpointRef;
import org.apache.spark.rpc.RpcEnv;
import org.apache.spark.rpc.RpcTimeout;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.util.RpcUtils;
import org.apache.spark.util.SerializableConfiguration;
import scala.PartialFunction;
import scala.PartialFunction$;
import scala.concurrent.Future;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

final class HelperRpc {
  static final String REGISTRY = "swivel-prewarm-registry";
  static final String ENDPOINT = "swivel-prewarm-calls";
  static final String REGISTER = "swivel-register";
  static final String CALL = "swivel-call";

  /** A call's fields after its tag, in order, and the type each must have. */
  private static final Class<?>[] CALL_FIELDS = {StateStoreConf.class, Broadcast.class,
      String.class, String.class, Long.class, String.class, String.class, String.class,
      Long.class, String.class, String.class, Boolean.class, List.class};

  /** Driver side: the RpcEnv the registry is set up on (a new context has a new one). */
  private static WeakReference<RpcEnv> registryEnv = new WeakReference<>(null);

  /** Driver side: executor id -> its endpoint, as the executor registered it. */
  private static final ConcurrentHashMap<String, RpcEndpointRef> EXECUTORS =
      new ConcurrentHashMap<>();

  /** Executor side: the RpcEnv this JVM's endpoint is set up on, the endpoint, and how its
   * registration went. */
  private static WeakReference<RpcEnv> endpointEnv = new WeakReference<>(null);

  private static RpcEndpointRef endpointRef;

  static volatile String endpointState = "not set up";

  private HelperRpc() {}

  /** Driver side: sets up the registry on `sc`'s RpcEnv, once per context. */
  static synchronized void ensureRegistry(SparkContext sc) {
    RpcEnv env = sc.env().rpcEnv();
    if (registryEnv.get() == env) {
      return;
    }
    EXECUTORS.clear();  // the old context's executors are gone with it
    try {
      env.setupEndpoint(REGISTRY, new Registry(env));
    } catch (IllegalArgumentException alreadyThere) {
      // set up by this class for this env before (a static reset cannot happen otherwise)
    }
    registryEnv = new WeakReference<>(env);
  }

  /** Driver side: the executors with an endpoint registered (for tests and the answers). */
  static List<String> registeredExecutors() {
    return new ArrayList<>(EXECUTORS.keySet());
  }

  /** Driver side, for tests: forget `executorId`'s endpoint (its calls take the job path). */
  static void forget(String executorId) {
    EXECUTORS.remove(executorId);
  }

  /**
   * Executor side, from a helper job's task: sets up this JVM's endpoint (once per RpcEnv)
   * and registers it with the driver. Registered again by every such task: a task runs
   * only where the driver had no endpoint to ask (not yet registered, or forgotten after a
   * failed ask). A failure is kept in `endpointState`; the calls then take the job path.
   */
  static void ensureEndpoint() {
    SparkEnv env = SparkEnv.get();
    RpcEnv rpc = env.rpcEnv();
    RpcEndpointRef self;
    synchronized (HelperRpc.class) {
      if (endpointEnv.get() != rpc) {
        endpointEnv = new WeakReference<>(rpc);
        try {
          endpointRef = rpc.setupEndpoint(ENDPOINT, new Calls(rpc));
        } catch (Throwable e) {
          endpointRef = null;
          endpointState = "not set up: " + StatePrewarm.describe(e);
        }
      }
      self = endpointRef;
    }
    if (self == null) {
      return;
    }
    try {
      RpcEndpointRef registry = RpcUtils.makeDriverRef(REGISTRY, env.conf(), rpc);
      List<Object> registration = new ArrayList<>();
      registration.add(REGISTER);
      registration.add(env.executorId());
      registration.add(self);
      registry.askSync(registration, ClassTag$.MODULE$.apply(Object.class));
      endpointState = "registered";
    } catch (Throwable e) {
      endpointState = "not registered: " + StatePrewarm.describe(e);
    }
  }

  /**
   * Driver side: `StatePrewarm.run`'s call over RPC, when every target's executor has an
   * endpoint; the answers in `targets` order, or null when the job path must answer (an
   * executor without an endpoint, or an ask that failed: its endpoint is then forgotten).
   * Each executor gets one message with all of its targets; the asks run at once.
   */
  static List<String> call(SparkContext sc, StateStoreConf storeConf,
      Broadcast<SerializableConfiguration> conf, String action, List<String> targets,
      String root, long operatorId, String storeName, String runId, String loadId,
      long version, String keySchema, String valueSchema, boolean columnFamilies) {
    ensureRegistry(sc);
    Map<String, List<Integer>> byExecutor = new LinkedHashMap<>();
    for (int i = 0; i < targets.size(); i++) {
      String executorId = targets.get(i).split("\t", -1)[1];
      byExecutor.computeIfAbsent(executorId, id -> new ArrayList<>()).add(i);
    }
    Map<String, RpcEndpointRef> refs = new LinkedHashMap<>();
    for (String executorId : byExecutor.keySet()) {
      RpcEndpointRef ref = EXECUTORS.get(executorId);
      if (ref == null) {
        return null;
      }
      refs.put(executorId, ref);
    }
    RpcTimeout timeout = RpcUtils.askRpcTimeout(sc.conf());
    Map<String, Future<Object>> asked = new LinkedHashMap<>();
    for (Map.Entry<String, List<Integer>> entry : byExecutor.entrySet()) {
      List<String> mine = new ArrayList<>();
      for (int index : entry.getValue()) {
        String[] parts = targets.get(index).split("\t", -1);
        mine.add(parts[0] + "\t" + parts[1]);
      }
      List<Object> message = new ArrayList<>(java.util.Arrays.asList(CALL, storeConf, conf,
          action, root, operatorId, storeName, runId, loadId, version, keySchema, valueSchema,
          columnFamilies, mine));
      asked.put(entry.getKey(), refs.get(entry.getKey())
          .ask(message, timeout, ClassTag$.MODULE$.apply(Object.class)));
    }
    String[] answers = new String[targets.size()];
    for (Map.Entry<String, Future<Object>> entry : asked.entrySet()) {
      String executorId = entry.getKey();
      Object reply;
      try {
        reply = timeout.awaitResult(entry.getValue());
      } catch (Throwable e) {  // lost, timed out or refused: the job path answers
        EXECUTORS.remove(executorId, refs.get(executorId));
        return null;
      }
      List<Integer> indices = byExecutor.get(executorId);
      if (!(reply instanceof List) || ((List<?>) reply).size() != indices.size()) {
        EXECUTORS.remove(executorId, refs.get(executorId));
        return null;
      }
      List<?> replies = (List<?>) reply;
      for (int i = 0; i < indices.size(); i++) {
        answers[indices.get(i)] = String.valueOf(replies.get(i));
      }
    }
    return java.util.Arrays.asList(answers);
  }

  /** Why `message` is not a call (null: it is one). */
  static String notACall(Object message) {
    if (!(message instanceof List)) {
      return "not a list";
    }
    List<?> fields = (List<?>) message;
    if (fields.size() != CALL_FIELDS.length + 1 || !CALL.equals(fields.get(0))) {
      return "not a " + CALL + " of " + (CALL_FIELDS.length + 1) + " fields";
    }
    for (int i = 0; i < CALL_FIELDS.length; i++) {
      Object field = fields.get(i + 1);
      if (!CALL_FIELDS[i].isInstance(field)) {
        return "field " + (i + 1) + " is not a " + CALL_FIELDS[i].getSimpleName();
      }
    }
    for (Object target : (List<?>) fields.get(CALL_FIELDS.length)) {
      if (!(target instanceof String) || ((String) target).split("\t", -1).length != 2) {
        return "a target is not \"partition\\texecutorId\"";
      }
    }
    return null;
  }

  /** The executor's endpoint: runs a call's targets as the job's tasks would, in order. */
  static final class Calls implements IsolatedThreadSafeRpcEndpoint {
    private final RpcEnv env;

    Calls(RpcEnv env) {
      this.env = env;
    }

    @Override
    public RpcEnv rpcEnv() {
      return env;
    }

    @Override
    public int threadCount() {
      return 1;  // its own thread: an activation's top-up holds none of the shared ones
    }

    @Override
    public PartialFunction<Object, BoxedUnit> receiveAndReply(RpcCallContext context) {
      return total(message -> {
        String wrong = notACall(message);
        if (wrong != null) {
          context.sendFailure(new IllegalArgumentException("swivel prewarm call: " + wrong));
          return;
        }
        List<?> f = (List<?>) message;
        @SuppressWarnings("unchecked")
        StatePrewarm.Runner runner = new StatePrewarm.Runner((StateStoreConf) f.get(1),
            (Broadcast<SerializableConfiguration>) f.get(2));
        List<String> replies = new ArrayList<>();
        for (Object target : (List<?>) f.get(13)) {
          String[] parts = ((String) target).split("\t", -1);
          String answer;
          try {
            StatePrewarm.Spec spec = new StatePrewarm.Spec((String) f.get(3), parts[1],
                (String) f.get(4), (Long) f.get(5), Integer.parseInt(parts[0]),
                (String) f.get(6), (String) f.get(7), (String) f.get(8), (Long) f.get(9),
                (String) f.get(10), (String) f.get(11), (Boolean) f.get(12));
            answer = runner.answer(spec);
          } catch (Throwable e) {  // as a failed task fails its job: the caller retries
            // as text: the error itself may not be serialisable
            context.sendFailure(new IllegalStateException(StatePrewarm.describe(e)));
            return;
          }
          // "via" first: the answer is a JSON object
          replies.add("{\"via\":\"rpc\"," + answer.substring(1));
        }
        context.reply(replies);
      });
    }
  }

  /** The driver's registry: executor id -> the endpoint its executor sent. */
  static final class Registry implements RpcEndpoint {
    private final RpcEnv env;

    Registry(RpcEnv env) {
      this.env = env;
    }

    @Override
    public RpcEnv rpcEnv() {
      return env;
    }

    @Override
    public PartialFunction<Object, BoxedUnit> receiveAndReply(RpcCallContext context) {
      return total(message -> {
        List<?> fields = message instanceof List ? (List<?>) message : List.of();
        if (fields.size() != 3 || !REGISTER.equals(fields.get(0))
            || !(fields.get(1) instanceof String) || ((String) fields.get(1)).isEmpty()
            || !(fields.get(2) instanceof RpcEndpointRef)) {
          context.sendFailure(new IllegalArgumentException("swivel prewarm registry: not a "
              + REGISTER + " [tag, executor id, endpoint]"));
          return;
        }
        EXECUTORS.put((String) fields.get(1), (RpcEndpointRef) fields.get(2));
        context.reply(Boolean.TRUE);
      });
    }
  }

  /** A handler that accepts every message (each answers what it cannot use). */
  private static PartialFunction<Object, BoxedUnit> total(
      java.util.function.Consumer<Object> handler) {
    return PartialFunction$.MODULE$.fromFunction(new AbstractFunction1<Object, BoxedUnit>() {
      @Override
      public BoxedUnit apply(Object message) {
        handler.accept(message);
        return BoxedUnit.UNIT;
      }
    });
  }
}
