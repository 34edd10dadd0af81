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
 * endpoint is reached; the executor's side is HelperEndpoint). From then on
 * `StatePrewarm.run` asks the endpoints of its targets' executors, all at once, and runs
 * its job only for targets without one. Messages hold only JDK and Spark types: the RPC
 * threads deserialise with the application's class loader, which does not see a jar added
 * through spark.jars.
 *
 * Trust: the registry and the endpoints are reachable by whoever can speak Spark's RPC to
 * the driver, as Spark's own endpoints are (spark.authenticate, which the operator sets, is
 * what guards them; their messages are Java-deserialised before any check, as Spark's own
 * are). Each checks a message's shape and types and answers anything else with a failure
 * naming what is wrong. The registry takes an endpoint only for a live executor, under the
 * helper's own endpoint name, and only one reached through the sender's own connection (no
 * address of its own) or, in local mode, the driver's own. A call names a state store
 * provider of Spark's two (nothing else is instantiated) and at most MAX_TARGETS bins. A
 * call's answer only decides whether a bin is switched with its loaded copy: a wrong one
 * makes the bin reload from the checkpoint, as without prewarm.
 *
 * Answers: a load that finishes on an executor with a registered endpoint sends its answer
 * to the registry (ANSWER), which keeps it until the driver's wait takes it; the wait then
 * fetches no answer block (docs/migration.md, "Answers over RPC"). The registry takes an
 * answer only from a live executor whose endpoint it holds, on that executor's host, named
 * as an answer block and shaped as a JSON object of at most MAX_ANSWER_CHARS; it keeps at
 * most MAX_ANSWERS (dropping the oldest: its block is still there; an answer whose wait
 * ended before it came stays until then), and a wrong answer costs what a wrong block
 * would: a bin switched with no copy reloads from the checkpoint.
 *
 * Failures: a target whose executor has no endpoint is answered by the job path; so is
 * one whose ask failed (its answer then says `rpc_failed` and why), except an activation:
 * it may still be running on the executor, so it is answered `failed` (the bin reloads
 * from the checkpoint; were the late activation to land first, its copy is at the version
 * the batch reads). A failed ask forgets the executor's endpoint until a helper
 * job's task registers it again.
 */
package io.swivel.spark;

import java.lang.ref.WeakReference;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.function.Function;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.rpc.RpcAddress;
import org.apache.spark.rpc.RpcCallContext;
import org.apache.spark.rpc.RpcEndpointRef;
import org.apache.spark.rpc.RpcEnv;
import org.apache.spark.rpc.RpcTimeout;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.util.RpcUtils;
import org.apache.spark.util.SerializableConfiguration;
import scala.Tuple2;
import scala.concurrent.Future;
import scala.reflect.ClassTag$;

final class HelperRpc {
  static final String REGISTRY = "swivel-prewarm-registry";
  static final String REGISTER = "swivel-register";
  static final String ANSWER = "swivel-answer";

  /** The most answers the registry keeps unread (one per store of each bin loading). */
  static final int MAX_ANSWERS = 4096;

  /** The longest answer the registry takes (a load's answer is ~300-600 characters). */
  private static final int MAX_ANSWER_CHARS = 8_192;

  /** What follows the prefix in an answer block's name: a name-based UUID. */
  private static final Pattern ANSWER_ID = Pattern.compile(
      "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");

  /** Driver side: the RpcEnv the registry is set up on (a new context has a new one). */
  private static WeakReference<RpcEnv> registryEnv = new WeakReference<>(null);

  /** Driver side: why the registry could not be set up (null: it is, or not tried yet). */
  private static volatile String registryRefused;

  /** Driver side: executor id -> its endpoint, as the executor registered it. */
  private static final ConcurrentHashMap<String, RpcEndpointRef> EXECUTORS =
      new ConcurrentHashMap<>();

  /** Driver side: answer block name -> the answer its executor sent, oldest first. */
  private static final Map<String, String> ANSWERS = new LinkedHashMap<>(16, 0.75f, false) {
    @Override
    protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
      return size() > MAX_ANSWERS;
    }
  };

  private HelperRpc() {}

  /** Driver side: takes the answer sent for answer block `block`, or null (none came). */
  static String takeAnswer(String block) {
    synchronized (ANSWERS) {
      return ANSWERS.remove(block);
    }
  }

  /** Driver side: whether `executorId` has an endpoint here (its loads send answers). */
  static boolean hasEndpoint(String executorId) {
    return EXECUTORS.containsKey(executorId);
  }

  // -- the driver's side ------------------------------------------------------------------

  /** Sets up the registry on `sc`'s RpcEnv, once per context; false where it could not. */
  static synchronized boolean ensureRegistry(SparkContext sc) {
    RpcEnv env = sc.env().rpcEnv();
    if (registryEnv.get() == env) {
      return registryRefused == null;
    }
    EXECUTORS.clear();  // the old context's executors went with it
    synchronized (ANSWERS) {
      ANSWERS.clear();
    }
    registryEnv = new WeakReference<>(env);
    try {
      env.setupEndpoint(REGISTRY, new Registry(env));
      registryRefused = null;
    } catch (Throwable e) {  // e.g. the name taken by another copy of this class
      registryRefused = StatePrewarm.describe(e);
      System.err.println("swivel: prewarm helper calls run as jobs: " + registryRefused);
    }
    return registryRefused == null;
  }

  /** The executors whose calls go over RPC, sorted. */
  static List<String> executors(SparkContext sc) {
    ensureRegistry(sc);
    return new ArrayList<>(new TreeSet<>(EXECUTORS.keySet()));
  }

  /**
   * For tests: sends the registry [tag, executorId, endpoint] as an executor would, the
   * endpoint being the registry's own reference (`withRef`) or a string; returns
   * "accepted" or the refusal's message. The registry then holds what it held before.
   */
  static String askRegistry(SparkContext sc, String tag, String executorId, boolean withRef) {
    ensureRegistry(sc);
    RpcEnv env = sc.env().rpcEnv();
    RpcEndpointRef registry = env.setupEndpointRef(env.address(), REGISTRY);
    return askRegistryMessage(sc, List.of(tag, executorId,
        withRef ? registry : "not an endpoint"));
  }

  /** For tests: asks the registry `message` as is; "accepted" or the refusal's message. */
  static String askRegistryMessage(SparkContext sc, List<Object> message) {
    ensureRegistry(sc);
    RpcEnv env = sc.env().rpcEnv();
    RpcEndpointRef registry = env.setupEndpointRef(env.address(), REGISTRY);
    try {
      registry.askSync(new ArrayList<>(message), ClassTag$.MODULE$.apply(Object.class));
      return "accepted";
    } catch (Throwable e) {
      return causes(e);
    }
  }

  /**
   * For tests: asks `executorId`'s registered endpoint `message` as is (as a peer could);
   * "answered" or the refusal's message, or "no endpoint" where none is registered.
   */
  static String askEndpointMessage(SparkContext sc, String executorId, Object message) {
    ensureRegistry(sc);
    RpcEndpointRef ref = EXECUTORS.get(executorId);
    if (ref == null) {
      return "no endpoint";
    }
    try {
      ref.askSync(message, ClassTag$.MODULE$.apply(Object.class));
      return "answered";
    } catch (Throwable e) {
      return causes(e);
    }
  }

  /** A failure switch for tests: forget `executorId`'s endpoint (its calls take the job). */
  static void forget(String executorId) {
    EXECUTORS.remove(executorId);
  }

  /**
   * Sets up the endpoint of each of `executors` ("executorId\thost") ahead of the first
   * prewarm, in one job of a task per executor, so that a migration's first steps run no
   * helper job either. Returns each task's "executorId\tstate" ("registered", or why not;
   * "wrong-executor" where the task landed elsewhere).
   */
  static List<String> registerEndpoints(SparkContext sc, List<String> executors) {
    ensureRegistry(sc);
    List<Tuple2<String, String>> items = new ArrayList<>();
    for (String executor : executors) {
      String[] parts = executor.split("\t", -1);
      items.add(new Tuple2<>(parts[0], PinnedJob.on(parts[0], parts[1])));
    }
    return PinnedJob.run(sc, "swivel: register helper endpoints", String.class, items,
        new Registrar());
  }

  /** `registerEndpoints`'s task body. */
  static final class Registrar implements Function<String, String> {
    private static final long serialVersionUID = 1L;

    @Override
    public String call(String wanted) {
      if (!wanted.equals(SparkEnv.get().executorId())) {
        return wanted + "\twrong-executor";
      }
      HelperEndpoint.ensure();
      return wanted + "\t" + HelperEndpoint.state;
    }
  }

  /**
   * `StatePrewarm.run`'s call over RPC: one message per executor with its targets, asked
   * at once. Returns an answer per target in `targets` order; null for a target the job
   * must answer (no endpoint, or its ask failed: then `failures` says why, by index).
   */
  static String[] call(SparkContext sc, StateStoreConf storeConf,
      Broadcast<SerializableConfiguration> conf, String action, List<String> targets,
      String root, long operatorId, String storeName, String runId, String loadId,
      long version, String keySchema, String valueSchema, boolean columnFamilies,
      Map<Integer, String> failures) {
    String[] answers = new String[targets.size()];
    if (!ensureRegistry(sc)) {
      return answers;
    }
    Map<String, List<Integer>> byExecutor = new LinkedHashMap<>();
    for (int i = 0; i < targets.size(); i++) {
      byExecutor.computeIfAbsent(targets.get(i).split("\t", -1)[1], id -> new ArrayList<>())
          .add(i);
    }
    RpcTimeout timeout = RpcUtils.askRpcTimeout(sc.conf());
    Map<String, Future<Object>> asked = new LinkedHashMap<>();
    Map<String, RpcEndpointRef> refs = new LinkedHashMap<>();
    for (Map.Entry<String, List<Integer>> entry : byExecutor.entrySet()) {
      RpcEndpointRef ref = EXECUTORS.get(entry.getKey());
      if (ref == null) {
        continue;
      }
      if (!StatePrewarm.registered(entry.getKey())) {  // it left: the job says so
        EXECUTORS.remove(entry.getKey(), ref);
        continue;
      }
      List<String> mine = new ArrayList<>();
      for (int index : entry.getValue()) {
        String[] parts = targets.get(index).split("\t", -1);
        mine.add(parts[0] + "\t" + parts[1]);
      }
      List<Object> message = new ArrayList<>(Arrays.asList(HelperEndpoint.CALL, storeConf,
          conf, action, root, operatorId, storeName, runId, loadId, version, keySchema,
          valueSchema, columnFamilies, mine));
      refs.put(entry.getKey(), ref);
      asked.put(entry.getKey(),
          ref.ask(message, timeout, ClassTag$.MODULE$.apply(Object.class)));
    }
    for (Map.Entry<String, Future<Object>> entry : asked.entrySet()) {
      String executorId = entry.getKey();
      List<Integer> indices = byExecutor.get(executorId);
      String failed;
      try {
        Object reply = timeout.awaitResult(entry.getValue());
        if (reply instanceof List && ((List<?>) reply).size() == indices.size()
            && !answersElsewhere((List<?>) reply)) {
          List<?> replies = (List<?>) reply;
          for (int i = 0; i < indices.size(); i++) {
            answers[indices.get(i)] = String.valueOf(replies.get(i));
          }
          continue;
        }
        failed = "the executor's endpoint answered " + reply;
      } catch (Throwable e) {  // lost, timed out or refused
        failed = causes(e);
      }
      EXECUTORS.remove(executorId, refs.get(executorId));
      System.err.println("swivel: helper call " + action + " to executor " + executorId
          + " over RPC failed (" + failed + "); " + ("activate".equals(action)
          ? "answered failed: it may still run there" : "its job answers"));
      for (int index : indices) {
        if ("activate".equals(action)) {
          String partition = targets.get(index).split("\t", -1)[0];
          answers[index] = new StatePrewarm.Json().put("partition", Integer.parseInt(partition))
              .put("store", storeName).put("operator", operatorId).put("executor", executorId)
              .put("action", action).put("status", "failed").put("via", "rpc")
              .put("error", "the activation's ask failed: " + failed).toString();
        } else {
          failures.put(index, failed);
        }
      }
    }
    return answers;
  }

  /**
   * Whether an endpoint answered from another executor than the one it was registered for
   * (`wrong-executor`): it is then forgotten, and the job answers in its place.
   */
  private static boolean answersElsewhere(List<?> replies) {
    for (Object reply : replies) {
      if (String.valueOf(reply).contains("\"status\":\"wrong-executor\"")) {
        return true;
      }
    }
    return false;
  }

  /** An error and its causes, one after another (Spark wraps the endpoint's own). */
  static String causes(Throwable error) {
    StringBuilder out = new StringBuilder();
    for (Throwable e = error; e != null && out.length() < 2000; e = e.getCause()) {
      out.append(out.length() == 0 ? "" : "; caused by ").append(e);
    }
    return out.toString();
  }

  /**
   * The driver's registry: executor id -> the endpoint its executor sent. On a thread of
   * its own: its checks ask the block manager master, and the shared dispatcher's few
   * threads also serve the state store coordinator.
   */
  static final class Registry extends HelperEndpoint.Isolated {
    Registry(RpcEnv env) {
      super(env);
    }

    @Override
    void handle(Object message, RpcCallContext context) {
      if (message instanceof List && !((List<?>) message).isEmpty()
          && ANSWER.equals(((List<?>) message).get(0))) {
        keepAnswer(message, context);
        return;
      }
      String wrong = notARegistration(message, context.senderAddress());
      if (wrong != null) {
        context.sendFailure(new IllegalArgumentException("swivel prewarm registry: " + wrong));
        return;
      }
      List<?> fields = (List<?>) message;
      EXECUTORS.put((String) fields.get(1), (RpcEndpointRef) fields.get(2));
      context.reply(Boolean.TRUE);
    }

    /** Keeps a load's answer for the wait that reads it, and wakes the waits. */
    private void keepAnswer(Object message, RpcCallContext context) {
      String wrong = notAnAnswer(message, context.senderAddress());
      if (wrong != null) {
        context.sendFailure(new IllegalArgumentException("swivel prewarm registry: " + wrong));
        return;
      }
      List<?> fields = (List<?>) message;
      synchronized (ANSWERS) {
        ANSWERS.put((String) fields.get(2), (String) fields.get(3));
      }
      AnswerWatch.answered();
      context.reply(Boolean.TRUE);
    }

    /** Why `message` is not an answer this driver keeps (null: it is one). */
    private static String notAnAnswer(Object message, RpcAddress sender) {
      List<?> fields = (List<?>) message;
      if (fields.size() != 4 || !(fields.get(1) instanceof String)
          || !(fields.get(2) instanceof String) || !(fields.get(3) instanceof String)) {
        return "not a " + ANSWER + " [tag, executor id, answer block, answer]";
      }
      String executorId = (String) fields.get(1);
      String block = (String) fields.get(2);
      String answer = (String) fields.get(3);
      if (!EXECUTORS.containsKey(executorId) || !StatePrewarm.registered(executorId)) {
        return "no live executor " + executorId + " with an endpoint here";
      }
      String prefix = StatePrewarm.answerBlockPrefix();
      if (!block.startsWith(prefix) || !ANSWER_ID.matcher(block.substring(prefix.length()))
          .matches()) {
        return "not an answer block's name";
      }
      if (answer.length() > MAX_ANSWER_CHARS || !answer.startsWith("{")
          || !answer.endsWith("}")) {
        return "not a JSON object of at most " + MAX_ANSWER_CHARS + " characters";
      }
      return sentFromElsewhere(executorId, sender);
    }

    /** Why `message` is not a registration this driver takes (null: it is one). */
    private String notARegistration(Object message, RpcAddress sender) {
      List<?> fields = message instanceof List ? (List<?>) message : List.of();
      if (fields.size() != 3 || !REGISTER.equals(fields.get(0))
          || !(fields.get(1) instanceof String) || !(fields.get(2) instanceof RpcEndpointRef)) {
        return "not a " + REGISTER + " [tag, executor id, endpoint]";
      }
      String executorId = (String) fields.get(1);
      RpcEndpointRef ref = (RpcEndpointRef) fields.get(2);
      if (!StatePrewarm.registered(executorId)) {
        return "no live executor " + executorId;
      }
      if (!HelperEndpoint.NAME.equals(ref.name())) {
        return "the endpoint is not named " + HelperEndpoint.NAME;
      }
      if (ref.address() != null && !ref.address().equals(rpcEnv().address())) {
        return "the endpoint is not on the sender's connection";  // the driver would dial it
      }
      return ref.address() == null ? sentFromElsewhere(executorId, sender) : null;
    }
  }

  /** Why `sender` cannot speak for `executorId` (another host than its block manager's). */
  private static String sentFromElsewhere(String executorId, RpcAddress sender) {
    String host = executorHost(executorId);
    if (host != null && sender != null && !sameHost(host, sender.host())) {
      return "executor " + executorId + " is on " + host + ", the sender on " + sender.host();
    }
    return null;
  }

  /** The host of `executorId`'s block manager, or null (not found). */
  private static String executorHost(String executorId) {
    scala.collection.Iterator<BlockManagerId> ids =
        SparkEnv.get().blockManager().master().getMemoryStatus().keysIterator();
    while (ids.hasNext()) {
      BlockManagerId id = ids.next();
      if (id.executorId().equals(executorId)) {
        return id.host();
      }
    }
    return null;
  }

  private static boolean sameHost(String one, String other) {
    if (one.equals(other)) {
      return true;
    }
    try {
      return InetAddress.getByName(one).equals(InetAddress.getByName(other));
    } catch (Exception e) {
      return false;
    }
  }
}
