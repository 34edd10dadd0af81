package io.swivel.spark;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSInputStream;
import org.apache.hadoop.fs.FilterFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.impl.OpenFileParameters;

/**
 * Local disk with a remote object store's read costs, for the migration benchmark
 * (docs/migration.md, "Remote-like checkpoint storage"). A checkpoint at
 * {@code throttled:///abs/path} is the local folder {@code /abs/path}; every open of a file
 * for reading waits {@code fs.throttled.open.latency.ms} (a GET's first byte), and each
 * opened stream reads at most {@code fs.throttled.read.mb.per.s} (MiB/s, one stream's
 * bandwidth to S3 or a remote HDFS datanode). Writes, listings, renames and deletes go
 * to the local disk unchanged.
 *
 * <p>Why a FilterFileSystem over a local file system that answers to the {@code throttled}
 * scheme: Spark resolves the checkpoint's scheme through {@code fs.throttled.impl}, and as
 * no {@code AbstractFileSystem} is registered for it, its checkpoint file manager falls back
 * to the FileSystem-based one, which reads (state deltas, snapshots, offsets, commits)
 * through {@link #open(Path, int)} or the {@code openFile} builder -- both throttled here.
 *
 * <p>Why a log: the benchmark must show, not assume, that the state store's reloads pay
 * the emulated costs. With {@code fs.throttled.log} set to a file, every closed stream
 * appends one tab-separated line: pid, epoch ms at close, path, bytes read, nanoseconds from
 * open to close, nanoseconds slept by the throttle (latency included). Lines are short single appends
 * (O_APPEND), so the driver and the executors of a local cluster can share the file.
 */
public class ThrottledFileSystem extends FilterFileSystem {
  public static final String SCHEME = "throttled";
  public static final String READ_MB_PER_S = "fs.throttled.read.mb.per.s";
  public static final String OPEN_LATENCY_MS = "fs.throttled.open.latency.ms";
  public static final String LOG = "fs.throttled.log";

  /** Counters of this JVM, for a quick look through py4j on the driver. */
  public static final AtomicLong OPENS = new AtomicLong();
  public static final AtomicLong BYTES = new AtomicLong();
  public static final AtomicLong SLEPT_NANOS = new AtomicLong();

  private static final URI ROOT = URI.create(SCHEME + ":///");
  private static final String PID = ManagementFactory.getRuntimeMXBean().getName().split("@")[0];

  private double bytesPerSecond = 150.0 * 1024 * 1024;
  private long openLatencyMs = 20;
  private String log;

  /** The local file system under another scheme: paths keep {@code throttled:}. */
  static final class LocalUnderScheme extends RawLocalFileSystem {
    @Override
    public URI getUri() {
      return ROOT;
    }

    @Override
    public String getScheme() {
      return SCHEME;
    }
  }

  public ThrottledFileSystem() {
    super(new LocalUnderScheme());
  }

  @Override
  public void initialize(URI name, Configuration conf) throws IOException {
    super.initialize(name, conf);
    double mbPerSecond = conf.getDouble(READ_MB_PER_S, 150.0);
    bytesPerSecond = mbPerSecond <= 0 ? Double.POSITIVE_INFINITY : mbPerSecond * 1024 * 1024;
    openLatencyMs = conf.getLong(OPEN_LATENCY_MS, 20L);
    log = conf.get(LOG);
  }

  @Override
  public String getScheme() {
    return SCHEME;
  }

  /**
   * How long a stream that has read {@code bytes} since its first byte, {@code elapsedNanos}
   * ago, must still wait so that it never reads faster than {@code bytesPerSecond}.
   */
  public static long delayNanos(long bytes, long elapsedNanos, double bytesPerSecond) {
    if (Double.isInfinite(bytesPerSecond) || bytesPerSecond <= 0) {
      return 0L;
    }
    long due = (long) (bytes * 1e9 / bytesPerSecond);
    return Math.max(0L, due - elapsedNanos);
  }

  static long sleep(long nanos) throws IOException {
    if (nanos <= 0) {
      return 0L;
    }
    long start = System.nanoTime();
    try {
      Thread.sleep(nanos / 1_000_000L, (int) (nanos % 1_000_000L));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.io.InterruptedIOException("throttled read interrupted");
    }
    return System.nanoTime() - start;
  }

  @Override
  public FSDataInputStream open(Path f, int bufferSize) throws IOException {
    long opened = System.nanoTime();
    long slept = sleep(openLatencyMs * 1_000_000L);
    FSDataInputStream inner = fs.open(f, bufferSize);
    OPENS.incrementAndGet();
    return new FSDataInputStream(new Throttled(inner, f, opened, slept));
  }

  @Override
  protected CompletableFuture<FSDataInputStream> openFileWithOptions(
      Path path, OpenFileParameters parameters) throws IOException {
    // the openFile() builder: through open(), so it is throttled too
    CompletableFuture<FSDataInputStream> result = new CompletableFuture<>();
    try {
      result.complete(open(path, parameters.getBufferSize()));
    } catch (IOException e) {
      result.completeExceptionally(e);
    }
    return result;
  }

  private synchronized void record(Path path, long bytes, long nanos, long slept) {
    BYTES.addAndGet(bytes);
    SLEPT_NANOS.addAndGet(slept);
    if (log == null || log.isEmpty()) {
      return;
    }
    String line = PID + "\t" + System.currentTimeMillis() + "\t" + path + "\t" + bytes + "\t" + nanos + "\t" + slept + "\n";
    try (FileOutputStream out = new FileOutputStream(new File(log), true)) {
      out.write(line.getBytes(StandardCharsets.UTF_8));
    } catch (IOException e) {
      // the log is for the benchmark's check; a failed line must not fail a read
    }
  }

  /** One opened file: reads through, then sleeps until the stream's bandwidth allows. */
  private final class Throttled extends FSInputStream {
    private final FSDataInputStream inner;
    private final Path path;
    private final long opened;
    private long slept;
    private long bytes;
    private long firstByte = -1;
    private boolean closed;

    Throttled(FSDataInputStream inner, Path path, long opened, long slept) {
      this.inner = inner;
      this.path = path;
      this.opened = opened;
      this.slept = slept;
    }

    private void pace(int read) throws IOException {
      if (read <= 0) {
        return;
      }
      long now = System.nanoTime();
      if (firstByte < 0) {
        firstByte = now;
      }
      bytes += read;
      slept += sleep(delayNanos(bytes, now - firstByte, bytesPerSecond));
    }

    @Override
    public int read() throws IOException {
      int value = inner.read();
      pace(value < 0 ? 0 : 1);
      return value;
    }

    @Override
    public int read(byte[] buffer, int offset, int length) throws IOException {
      int read = inner.read(buffer, offset, length);
      pace(read);
      return read;
    }

    @Override
    public void seek(long position) throws IOException {
      inner.seek(position);
    }

    @Override
    public long getPos() throws IOException {
      return inner.getPos();
    }

    @Override
    public boolean seekToNewSource(long target) throws IOException {
      return false;
    }

    @Override
    public int available() throws IOException {
      return inner.available();
    }

    @Override
    public void close() throws IOException {
      if (closed) {
        return;
      }
      closed = true;
      inner.close();
      record(path, bytes, System.nanoTime() - opened, slept);
    }
  }

  /**
   * Self-check from the command line, no Spark: {@code java -cp swivel-spark.jar:<hadoop
   * jars> io.swivel.spark.ThrottledFileSystem FILE MB_PER_S LATENCY_MS} reads FILE through
   * the throttle and prints "bytes elapsed_ms slept_ms opens".
   */
  public static void main(String[] args) throws Exception {
    Configuration conf = new Configuration(false);
    conf.set("fs." + SCHEME + ".impl", ThrottledFileSystem.class.getName());
    conf.setBoolean("fs." + SCHEME + ".impl.disable.cache", true);
    conf.set(READ_MB_PER_S, args[1]);
    conf.set(OPEN_LATENCY_MS, args[2]);
    Path path = new Path(SCHEME + "://" + new File(args[0]).getAbsolutePath());
    org.apache.hadoop.fs.FileSystem fs = path.getFileSystem(conf);
    long start = System.nanoTime();
    long total = 0;
    try (FSDataInputStream in = fs.open(path)) {
      byte[] buffer = new byte[64 * 1024];
      for (int read = in.read(buffer); read >= 0; read = in.read(buffer)) {
        total += read;
      }
    }
    long elapsed = System.nanoTime() - start;
    System.out.println(
        total + " " + elapsed / 1_000_000L + " " + SLEPT_NANOS.get() / 1_000_000L + " "
            + OPENS.get());
  }
}
