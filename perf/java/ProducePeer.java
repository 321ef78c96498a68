// perf/java/ProducePeer.java: the Java client's produce peer for perf/run (perf/README.md,
// "The peer contract"), for what Kafka's ProducerPerformance tool cannot do: transactions of
// exactly N records (the tool's --transaction-duration-ms ends them by time), the contract's
// keys (--key-size) and its fixed schedule with stamped values (--rate). perf/run compiles it
// with javac against `scripts/kafka classpath` and runs it on that classpath:
//
//   ProducePeer produce --bootstrap HOST:PORT --topic T --records N --payload-file F \
//       --acks 0|1|all --idempotence true|false --compression none|gzip|snappy|lz4|zstd \
//       --linger-ms L --batch-size BYTES [--transactional-id ID --txn-records N] \
//       [--key-size K] [--rate R] [--property NAME=VALUE ...]
//
// A KafkaProducer<byte[], byte[]> (record i's value is line i mod K of the payload file; its
// key null, or with --key-size K the first K of the 16 hex digits of i * 0x9E3779B97F4A7C15,
// partitioned by the client's default, murmur2) sends every record with a callback; every
// SAMPLE-th record's send-to-callback latency is kept, every record's with --rate. With
// --rate R record i is sent no earlier than start + i / R (parking until then; a late record
// goes at once, the schedule is never reset), and its value is a copy of the line with the
// first 19 bytes replaced by the wall clock of the send call (ns since the Unix epoch, 19
// digits). Set-up before the clock starts: the topic's partitions (partitionsFor, which also
// opens the first connection) and, in transactions, initTransactions. Then beginTransaction,
// N sends, commitTransaction (which flushes the records, cutting the linger short, and waits
// for every callback), again and again; without transactions one flush at the end. elapsed_s
// runs from the first send to the last callback, or in transactions to the end of the last
// commit. Any failed record or commit ends the program with exit 1 and a line on stderr; bad
// arguments with exit 2. The last line on stdout is the contract's JSON result.

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class ProducePeer {
    /** The shortest wait of a paced sender (perf/README.md, --rate). */
    static final long MIN_NAP_NS = 500_000;

    /** Every SAMPLE-th record's latency is kept (the contract asks for at least every 100th). */
    static final int SAMPLE = 16;
    /** The multiplier of the contract's keys (2^64 / the golden ratio). */
    static final long KEY_MULTIPLIER = 0x9E3779B97F4A7C15L;
    /** The stamp's length: ns since the Unix epoch, 19 decimal digits. */
    static final int STAMP_LEN = 19;
    static final byte[] HEX = "0123456789abcdef".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    static void badArgs(String message) {
        System.err.println("ProducePeer: " + message);
        System.err.println("usage: ProducePeer produce --bootstrap HOST:PORT --topic T --records N"
                + " --payload-file F --acks 0|1|all --idempotence true|false --compression CODEC"
                + " --linger-ms L --batch-size BYTES [--transactional-id ID --txn-records N]"
                + " [--key-size K] [--rate R] [--property NAME=VALUE ...] (perf/README.md)");
        System.exit(2);
    }

    static void fail(String message) {
        System.err.println("ProducePeer: " + message);
        System.exit(1);
    }

    /** The command line, as the contract defines it. */
    static final class Args {
        String bootstrap, topic, payloadFile, transactionalId;
        String acks = "1", idempotence = "false", compression = "none";
        long records, txnRecords, lingerMs = 5, batchSize = 1_000_000;
        int keySize; // 0: null keys
        double rate; // records/s; 0: flat out
        final List<String[]> properties = new ArrayList<>();

        static long number(String flag, String v) {
            try {
                return Long.parseLong(v);
            } catch (NumberFormatException e) {
                badArgs(flag + " " + v + ": not a number");
                return 0;
            }
        }

        static double decimal(String flag, String v) {
            try {
                double d = Double.parseDouble(v);
                if (!Double.isFinite(d)) badArgs(flag + " " + v + ": not a finite number");
                return d;
            } catch (NumberFormatException e) {
                badArgs(flag + " " + v + ": not a number");
                return 0;
            }
        }

        static String oneOf(String flag, String v, String... allowed) {
            if (!Arrays.asList(allowed).contains(v)) badArgs(flag + " " + v + ": must be one of " + String.join(", ", allowed));
            return v;
        }

        static Args parse(String[] argv) {
            if (argv.length == 0 || !argv[0].equals("produce")) badArgs("the first argument must be produce");
            Args a = new Args();
            for (int i = 1; i < argv.length; i += 2) {
                String flag = argv[i];
                if (i + 1 >= argv.length) badArgs(flag + " needs a value");
                String v = argv[i + 1];
                switch (flag) {
                    case "--bootstrap" -> a.bootstrap = v;
                    case "--topic" -> a.topic = v;
                    case "--records" -> a.records = number(flag, v);
                    case "--payload-file" -> a.payloadFile = v;
                    case "--acks" -> a.acks = oneOf(flag, v, "0", "1", "all");
                    case "--idempotence" -> a.idempotence = oneOf(flag, v, "true", "false");
                    case "--compression" -> a.compression = oneOf(flag, v, "none", "gzip", "snappy", "lz4", "zstd");
                    case "--linger-ms" -> a.lingerMs = number(flag, v);
                    case "--batch-size" -> a.batchSize = number(flag, v);
                    case "--transactional-id" -> a.transactionalId = v;
                    case "--txn-records" -> a.txnRecords = number(flag, v);
                    case "--key-size" -> {
                        long k = number(flag, v);
                        if (k < 1 || k > 16) badArgs("--key-size " + v + ": must be 1 to 16");
                        a.keySize = (int) k;
                    }
                    case "--rate" -> {
                        a.rate = decimal(flag, v);
                        if (!(a.rate > 0)) badArgs("--rate " + v + ": must be > 0");
                    }
                    case "--property" -> {
                        int eq = v.indexOf('=');
                        if (eq <= 0) badArgs("--property " + v + ": expected NAME=VALUE");
                        a.properties.add(new String[] {v.substring(0, eq), v.substring(eq + 1)});
                    }
                    default -> badArgs("unknown argument " + flag);
                }
            }
            if (a.bootstrap == null || a.topic == null || a.payloadFile == null || a.records <= 0)
                badArgs("--bootstrap, --topic, --payload-file and --records (> 0) are required");
            if (a.records > Integer.MAX_VALUE) badArgs("--records " + a.records + ": too many");
            if (a.lingerMs < 0 || a.batchSize <= 0 || a.batchSize > Integer.MAX_VALUE)
                badArgs("--linger-ms must be >= 0 and --batch-size in 1..2^31-1");
            if ((a.transactionalId != null) != (a.txnRecords != 0))
                badArgs("--transactional-id and --txn-records go together");
            if (a.transactionalId != null && (a.transactionalId.isEmpty() || a.txnRecords < 0))
                badArgs("--transactional-id needs an id and --txn-records a count > 0");
            if (a.rate > 0 && a.transactionalId != null) badArgs("--rate and --transactional-id don't go together");
            return a;
        }

        boolean transactional() {
            return transactionalId != null;
        }

        boolean paced() {
            return rate > 0;
        }

        /** One latency kept in every `sample()` records. */
        int sample() {
            return paced() ? 1 : SAMPLE;
        }
    }

    /** The payload file's lines: record i's value is line i mod K. */
    static byte[][] payloads(String path) {
        byte[] text;
        try {
            text = Files.readAllBytes(Path.of(path));
        } catch (IOException e) {
            fail("payload file " + path + ": " + e);
            return null;
        }
        List<byte[]> lines = new ArrayList<>();
        int start = 0;
        for (int i = 0; i <= text.length; i++) {
            if (i == text.length || text[i] == '\n') {
                if (i > start) lines.add(Arrays.copyOfRange(text, start, i));
                start = i + 1;
            }
        }
        if (lines.isEmpty()) fail("payload file " + path + " has no lines");
        return lines.toArray(new byte[0][]);
    }

    /** Delivery reports: counts, the first error, the sampled latencies, the last report's time. */
    static final class Reports {
        final AtomicLong done = new AtomicLong(), failed = new AtomicLong(), lastNs = new AtomicLong();
        final AtomicReference<Exception> firstError = new AtomicReference<>();
        final long[] latencyNs;

        Reports(long records, int sample) {
            latencyNs = new long[(int) ((records + sample - 1) / sample)];
        }

        Callback callback(long sentNs, int slot) {
            return (metadata, e) -> {
                long now = System.nanoTime();
                if (e != null) {
                    firstError.compareAndSet(null, e);
                    failed.incrementAndGet();
                } else if (slot >= 0) {
                    latencyNs[slot] = now - sentNs;
                }
                lastNs.set(now);
                done.incrementAndGet();
            };
        }

        void checkNoneFailed(String when) {
            if (failed.get() > 0) fail(failed.get() + " records failed " + when + "; first error: " + firstError.get());
        }
    }

    static Properties config(Args a) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, a.acks);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, a.idempotence);
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, a.compression);
        p.put(ProducerConfig.LINGER_MS_CONFIG, Long.toString(a.lingerMs));
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, Long.toString(a.batchSize));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        if (a.transactional()) p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, a.transactionalId);
        for (String[] kv : a.properties) p.put(kv[0], kv[1]);
        return p;
    }

    /** Progress on stderr, at most once a second. */
    static long progress(long lastNs, Reports reports, long records) {
        long now = System.nanoTime();
        if (now - lastNs < 1_000_000_000L) return lastNs;
        System.err.println("ProducePeer: produce " + reports.done.get() + "/" + records);
        return now;
    }

    /** Record i's key: the first `size` of the 16 lowercase hex digits of i * KEY_MULTIPLIER. */
    static byte[] key(long i, int size) {
        long h = i * KEY_MULTIPLIER; // wraps: mod 2^64
        byte[] k = new byte[size];
        for (int j = 0; j < size; j++) k[j] = HEX[(int) (h >>> (60 - 4 * j)) & 0xf];
        return k;
    }

    /** The wall clock, ns since the Unix epoch. */
    static long wallNs() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    /** A copy of `line` whose first 19 bytes are `ns` in decimal, zero-padded. */
    static byte[] stamped(byte[] line, long ns) {
        byte[] v = line.clone();
        for (int j = STAMP_LEN - 1; j >= 0; j--) {
            v[j] = (byte) ('0' + (int) (ns % 10));
            ns /= 10;
        }
        return v;
    }

    static double percentileMs(long[] sorted, double p) {
        int i = (int) Math.ceil(sorted.length * p) - 1;
        return sorted[Math.max(0, Math.min(i, sorted.length - 1))] / 1e6;
    }

    public static void main(String[] argv) {
        Args a = Args.parse(argv);
        byte[][] values = payloads(a.payloadFile);
        if (a.paced())
            for (byte[] line : values)
                if (line.length < STAMP_LEN) badArgs("--rate needs payload lines of at least " + STAMP_LEN
                        + " bytes for the stamp; " + a.payloadFile + " has one of " + line.length);
        int sample = a.sample();
        double nsPerRecord = a.paced() ? 1e9 / a.rate : 0;
        Reports reports = new Reports(a.records, sample);
        long bytes = 0;
        long t0, end;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config(a))) {
            if (producer.partitionsFor(a.topic).isEmpty()) fail("topic " + a.topic + " has no partitions");
            if (a.transactional()) producer.initTransactions();
            long shown = System.nanoTime();
            t0 = System.nanoTime();
            for (long i = 0; i < a.records; i++) {
                if (a.transactional() && i % a.txnRecords == 0) producer.beginTransaction();
                byte[] value = values[(int) (i % values.length)];
                bytes += value.length;
                byte[] key = a.keySize > 0 ? key(i, a.keySize) : null;
                if (a.paced()) {
                    // The schedule: record i no earlier than t0 + i / R.
                    // Naps of at least MIN_NAP_NS (the contract's rule).
                    long due = t0 + (long) (i * nsPerRecord);
                    long wait = due - System.nanoTime();
                    if (wait > 0) {
                        long until = System.nanoTime() + Math.max(wait, MIN_NAP_NS);
                        for (long w = until - System.nanoTime(); w > 0; w = until - System.nanoTime())
                            LockSupport.parkNanos(w);
                    }
                    value = stamped(value, wallNs());
                }
                boolean sampled = i % sample == 0;
                long sent = sampled ? System.nanoTime() : 0;
                producer.send(new ProducerRecord<>(a.topic, key, value), reports.callback(sent, sampled ? (int) (i / sample) : -1));
                if (a.transactional() && ((i + 1) % a.txnRecords == 0 || i + 1 == a.records)) {
                    producer.commitTransaction();
                    reports.checkNoneFailed("in a committed transaction");
                }
                if (i % 4096 == 0) shown = progress(shown, reports, a.records);
            }
            if (!a.transactional()) producer.flush();
            end = a.transactional() ? System.nanoTime() : reports.lastNs.get();
        } catch (RuntimeException e) {
            fail("produce: " + e);
            return;
        }
        reports.checkNoneFailed("by the end");
        if (reports.done.get() != a.records) fail(reports.done.get() + " of " + a.records + " records reported");
        long[] sorted = reports.latencyNs.clone();
        Arrays.sort(sorted);
        System.out.printf(Locale.ROOT, "{\"client\":\"java\",\"op\":\"produce\",\"records\":%d,\"bytes\":%d,\"elapsed_s\":%.6f,"
                        + "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"p999_ms\":%.3f,\"max_ms\":%.3f}%n",
                a.records, bytes, (end - t0) / 1e9, percentileMs(sorted, 0.50), percentileMs(sorted, 0.99),
                percentileMs(sorted, 0.999), sorted[sorted.length - 1] / 1e6);
    }
}
