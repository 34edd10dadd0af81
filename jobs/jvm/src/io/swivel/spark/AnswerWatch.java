/*
 * Swivel: wakes the driver's prewarm waits when a load announces its answer
 * (docs/migration.md, "One broadcast Hadoop conf, and waits woken by the answers").
 *
 * Why: a prewarm used to read its loads' announcements every 0.2 s: per target and read a
 * py4j call to see whether the target's block manager is registered and one per store,
 * each asking the BlockManagerMaster per bin (~1.2 ms of driver JVM CPU and ~0.3 ms of
 * Python per read, measured in local mode). With two steps loading ahead, four such
 * loops ran through every batch of a migration, on a driver whose cores the batches
 * already fill. A load's answer is a block its executor puts with the master told; the
 * master posts SparkListenerBlockUpdated for every accepted update (Spark 4.3.0,
 * BlockManagerMasterEndpoint.receiveAndReply's handleResult), so the waits sleep until
 * such an event names an answer block, and only then read.
 *
 * An answer sent over RPC (HelperRpc.ANSWER) wakes them too, and its block is then not read.
 *
 * A missed event costs time only: the caller's wait ends after its timeout anyway and
 * reads again (the listener bus may drop events when its queue is full).
 */
package io.swivel.spark;

import java.lang.ref.WeakReference;

import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerBlockUpdated;

final class AnswerWatch extends SparkListener {
  private static AnswerWatch installed;
  // weak: a stopped context is not kept for the next one's sake
  private static WeakReference<SparkContext> installedOn = new WeakReference<>(null);

  private long updates;  // answer blocks put or removed, and answers sent, since it was added

  /** The watch of `sc`'s answer blocks, added as a listener on first use. */
  static synchronized AnswerWatch of(SparkContext sc) {
    if (installed == null || installedOn.get() != sc) {
      installed = new AnswerWatch();
      installedOn = new WeakReference<>(sc);
      sc.addSparkListener(installed);
    }
    return installed;
  }

  /** An answer came over RPC (HelperRpc.ANSWER): wakes the waits as a block update does. */
  static void answered() {
    AnswerWatch watch;
    synchronized (AnswerWatch.class) {
      watch = installed;
    }
    if (watch != null) {
      watch.bump();
    }
  }

  private synchronized void bump() {
    updates++;
    notifyAll();
  }

  @Override
  public void onBlockUpdated(SparkListenerBlockUpdated event) {
    if (event.blockUpdatedInfo().blockId().name().contains(StatePrewarm.ANSWER_BLOCK_PREFIX)) {
      bump();
    }
  }

  /** How many answer-block updates have been seen so far. */
  synchronized long updates() {
    return updates;
  }

  /**
   * Waits until an answer block has been updated since `seen` was read (or `timeoutMs`
   * passed) and returns the count then; at once when one already was.
   */
  synchronized long awaitAfter(long seen, long timeoutMs) throws InterruptedException {
    long end = System.nanoTime() + timeoutMs * 1_000_000L;
    while (updates == seen) {
      long left = (end - System.nanoTime()) / 1_000_000L;
      if (left <= 0) {
        break;
      }
      wait(left);
    }
    return updates;
  }
}
