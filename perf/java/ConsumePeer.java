// perf/java/ConsumePeer.java: the Java client's consume peer for perf/run (perf/README.md,
// "The peer contract"), for what Kafka's ConsumerPerformance tool cannot do: reading without
// a consumer group, and the end-to-end latencies of `consume --e2e`. perf/run compiles it with
// javac against `scripts/kafka classpath` and runs it on that classpath:
//
//   ConsumePeer consume --bootstrap HOST:PORT --topic T --records N [--e2e] \
//       [--property NAME=VALUE ...]
//
// (properties by the Java client's names). A KafkaConsumer<byte[], byte[]> without a group:
// set-up before the clock starts is the topic's partitions (partitionsFor, which also opens
// the first connection), assign() of all of them, seekToBeginning and a position() per
// partition, so the earliest offsets are resolved; with --e2e the line `ready` then goes to
// stderr. Then poll until N records, touching every value (its length, first and last bytes;
// the order-independent digest sum(len << 16 | first << 8 | last) goes to stderr at the end).
// elapsed_s runs from the first poll to the poll that handed over the N-th record. With
// --e2e every record's end-to-end latency is the wall clock when the poll hands it over minus
// the stamp in its value's first 19 bytes (ns since the Unix epoch, as the producer's --rate
// writes it); a value without a stamp ends the program with exit 1. So does not finishing
// within 120 s of the start; bad arguments exit 2. The last line on stdout is the contract's
// JSON result.

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ConsumePeer {
    /** The program fails when it has not read its records this long after starting. */
    static final long DEADLINE_NS = 120_000_000_000L;
    /** The stamp's length: ns since the Unix epoch, 19 decimal digits. */
    static final int STAMP_LEN = 19;
    static final Duration POLL = Duration.ofMillis(100);

    static void badArgs(String message) {
        System.err.println("ConsumePeer: " + message);
        System.err.println("usage: ConsumePeer consume --bootstrap HOST:PORT --topic T --records N [--e2e]"
                + " [--property NAME=VALUE ...] (perf/README.md)");
        System.exit(2);
    }

    static void fail(String message) {
        System.err.println("ConsumePeer: " + message);
        System.exit(1);
    }

    /** The command line, as the contract defines it. */
    static final class Args {
        String bootstrap, topic;
        long records;
        boolean e2e;
        final List<String[]> properties = new ArrayList<>();

        static Args parse(String[] argv) {
            if (argv.length == 0 || !argv[0].equals("consume")) badArgs("the first argument must be consume");
            Args a = new Args();
            for (int i = 1; i < argv.length; i++) {
                String flag = argv[i];
                if (flag.equals("--e2e")) {
                    a.e2e = true;
                    continue;
                }
                if (flag.equals("--group"))
                    badArgs("--group: not in this peer (Java's group workloads run Kafka's ConsumerPerformance)");
                if (i + 1 >= argv.length) badArgs(flag + " needs a value");
                String v = argv[++i];
                switch (flag) {
                    case "--bootstrap" -> a.bootstrap = v;
                    case "--topic" -> a.topic = v;
                    case "--records" -> {
                        try {
                            a.records = Long.parseLong(v);
                        } catch (NumberFormatException e) {
                            badArgs("--records " + v + ": not a number");
                        }
                    }
                    case "--property" -> {
                        int eq = v.indexOf('=');
                        if (eq <= 0) badArgs("--property " + v + ": expected NAME=VALUE");
                        a.properties.add(new String[] {v.substring(0, eq), v.substring(eq + 1)});
                    }
                    default -> badArgs("unknown argument " + flag);
                }
            }
            if (a.bootstrap == null || a.topic == null || a.records <= 0)
                badArgs("--bootstrap, --topic and --records (> 0) are required");
            if (a.records > Integer.MAX_VALUE) badArgs("--records " + a.records + ": too many");
            return a;
        }
    }

    static Properties config(Args a) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.bootstrap);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        for (String[] kv : a.properties) p.put(kv[0], kv[1]);
        return p;
    }

    /** The wall clock, ns since the Unix epoch. */
    static long wallNs() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    /** The stamp in a value's first 19 bytes, or -1 when they are not 19 ASCII digits. */
    static long stamp(byte[] value) {
        if (value == null || value.length < STAMP_LEN) return -1;
        long ns = 0;
        for (int j = 0; j < STAMP_LEN; j++) {
            int d = value[j] - '0';
            if (d < 0 || d > 9) return -1;
            ns = ns * 10 + d;
        }
        return ns;
    }

    static String percentileMs(long[] sorted, double q) {
        int i = (int) Math.ceil(sorted.length * q) - 1;
        return String.format(Locale.ROOT, "%.3f", sorted[Math.max(0, Math.min(i, sorted.length - 1))] / 1e6);
    }

    static Duration left(long deadline) {
        long ns = deadline - System.nanoTime();
        if (ns <= 0) fail("not done within " + DEADLINE_NS / 1_000_000_000L + " s");
        return Duration.ofNanos(ns);
    }

    public static void main(String[] argv) {
        long deadline = System.nanoTime() + DEADLINE_NS;
        Args a = Args.parse(argv);
        int n = (int) a.records;
        long[] e2eNs = a.e2e ? new long[n] : null;
        long count = 0, bytes = 0, digest = 0;
        long t0, end = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config(a))) {
            List<PartitionInfo> infos = consumer.partitionsFor(a.topic, left(deadline));
            if (infos == null || infos.isEmpty()) fail("topic " + a.topic + " has no partitions");
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : infos) partitions.add(new TopicPartition(info.topic(), info.partition()));
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            for (TopicPartition tp : partitions) consumer.position(tp, left(deadline));
            if (a.e2e) {
                System.err.println("ready");
                System.err.flush();
            }
            long shown = System.nanoTime();
            t0 = System.nanoTime();
            while (count < n) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(POLL);
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    byte[] v = r.value();
                    int len = v == null ? 0 : v.length;
                    long share = (long) len << 16;
                    if (len > 0) share |= (v[0] & 0xff) << 8 | (v[len - 1] & 0xff);
                    digest += share;
                    bytes += len;
                    if (a.e2e) {
                        long now = wallNs();
                        long sent = stamp(v);
                        if (sent < 0)
                            fail("record at " + r.topic() + "-" + r.partition() + "@" + r.offset()
                                    + " has no stamp (19 ASCII digits) at the start of its value");
                        e2eNs[(int) count] = now - sent;
                    }
                    if (++count == n) break;
                }
                long now = System.nanoTime();
                if (count == n) end = now;
                else left(deadline);
                if (now - shown >= 1_000_000_000L) {
                    System.err.println("ConsumePeer: consume " + count + "/" + n);
                    shown = now;
                }
            }
        } catch (RuntimeException e) {
            fail("consume: " + e);
            return;
        }
        System.err.printf("ConsumePeer: consumed values' digest %016x%n", digest);
        StringBuilder line = new StringBuilder(String.format(Locale.ROOT,
                "{\"client\":\"java\",\"op\":\"consume\",\"records\":%d,\"bytes\":%d,\"elapsed_s\":%.6f,"
                        + "\"p50_ms\":null,\"p99_ms\":null",
                count, bytes, (end - t0) / 1e9));
        if (a.e2e) {
            long[] sorted = e2eNs.clone();
            Arrays.sort(sorted);
            line.append(",\"e2e_p50_ms\":").append(percentileMs(sorted, 0.50))
                    .append(",\"e2e_p99_ms\":").append(percentileMs(sorted, 0.99))
                    .append(",\"e2e_p999_ms\":").append(percentileMs(sorted, 0.999))
                    .append(",\"e2e_max_ms\":").append(percentileMs(sorted, 1.0));
        }
        System.out.println(line.append('}'));
    }
}
