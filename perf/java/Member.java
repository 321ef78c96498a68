// perf/java/Member.java: the Java client's group member for perf/rebalance (perf/README.md,
// "The member contract"), run as a single-file source program on Kafka's classpath:
//
//   java -cp "$(scripts/kafka classpath)" perf/java/Member.java --topic T --property NAME=VALUE ...
//
// A KafkaConsumer subscribed to T, configured by the properties given (Java names), logging
// to stdout one event a line with times in ns since the Unix epoch: "J <t>" just before
// subscribe, "A <t> p,..." / "R <t> p,..." / "L <t> p,..." from the rebalance listener (all
// partitions with an eager assignor, the increment with a cooperative one), and
// "M <t> <partition> <offset> <record timestamp ms>" per record, flushed after every poll.
// Runs until killed.

import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.stream.Collectors;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class Member {
    static final BufferedWriter OUT =
            new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII), 1 << 16);

    static long nowNs() {
        Instant i = Instant.now();
        return i.getEpochSecond() * 1_000_000_000L + i.getNano();
    }

    static synchronized void line(String s) {
        try {
            OUT.write(s);
            OUT.write('\n');
            OUT.flush();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static String text(Collection<TopicPartition> parts) {
        if (parts.isEmpty()) return "-";
        return parts.stream().map(tp -> Integer.toString(tp.partition())).collect(Collectors.joining(","));
    }

    public static void main(String[] args) throws IOException {
        Properties props = new Properties();
        String topic = null;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--topic" -> topic = args[i + 1];
                case "--property" -> {
                    String[] kv = args[i + 1].split("=", 2);
                    if (kv.length != 2) fail("--property " + args[i + 1] + ": expected NAME=VALUE");
                    props.setProperty(kv[0], kv[1]);
                }
                default -> fail("unknown argument " + args[i]);
            }
        }
        if (topic == null || args.length % 2 != 0) fail("usage: Member --topic T --property NAME=VALUE ...");
        props.setProperty("key.deserializer", ByteArrayDeserializer.class.getName());
        props.setProperty("value.deserializer", ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            line("J " + nowNs());
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                public void onPartitionsAssigned(Collection<TopicPartition> p) { line("A " + nowNs() + " " + text(p)); }
                public void onPartitionsRevoked(Collection<TopicPartition> p) { line("R " + nowNs() + " " + text(p)); }
                public void onPartitionsLost(Collection<TopicPartition> p) { line("L " + nowNs() + " " + text(p)); }
            });
            StringBuilder sb = new StringBuilder(1 << 16);
            while (true) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                if (records.isEmpty()) continue;
                long t = nowNs();
                sb.setLength(0);
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    sb.append("M ").append(t).append(' ').append(r.partition()).append(' ')
                      .append(r.offset()).append(' ').append(r.timestamp()).append('\n');
                }
                synchronized (Member.class) {
                    OUT.write(sb.toString());
                    OUT.flush();
                }
            }
        }
    }

    static void fail(String msg) {
        System.err.println("Member: " + msg);
        System.exit(2);
    }
}
