// Writes kring's golden vectors for the classic consumer protocol and the assignors,
// computed by the real Java client (see README.md in this folder for how to rerun).
import java.nio.ByteBuffer;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.*;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.*;

public class GenVectors {
    static String hex(ByteBuffer b) {
        if (b == null) return "-";
        ByteBuffer d = b.duplicate();
        StringBuilder s = new StringBuilder();
        while (d.hasRemaining()) s.append(String.format("%02x", d.get()));
        return s.length() == 0 ? "=" : s.toString();
    }
    static ByteBuffer bytes(int... v) {
        ByteBuffer b = ByteBuffer.allocate(v.length);
        for (int x : v) b.put((byte) x);
        b.flip();
        return b;
    }
    static TopicPartition tp(String t, int p) { return new TopicPartition(t, p); }
    static String tps(Collection<TopicPartition> l) {
        if (l.isEmpty()) return "-";
        List<String> s = new ArrayList<>();
        for (TopicPartition t : l) s.add(t.topic() + ":" + t.partition());
        return String.join(",", s);
    }

    static void protocol() {
        List<TopicPartition> owned = List.of(tp("t2", 1), tp("t1", 0), tp("t1", 3));
        ByteBuffer ud = bytes(1, 2, 0xff);
        for (short v = 0; v <= 3; v++) {
            Subscription s = new Subscription(List.of("t2", "t1"), v == 0 ? null : ud.duplicate(),
                v >= 1 ? owned : List.of(), v >= 2 ? 5 : -1, v >= 3 ? Optional.of("rack-a") : Optional.empty());
            System.out.println("subscription " + v + " " + hex(ConsumerProtocol.serializeSubscription(s, v)));
        }
        Subscription bare = new Subscription(List.of("only"), null, List.of(), -1, Optional.empty());
        System.out.println("subscription 3 " + hex(ConsumerProtocol.serializeSubscription(bare, (short) 3)));
        Subscription emptyUd = new Subscription(List.of(), ByteBuffer.allocate(0), List.of(), 0, Optional.empty());
        System.out.println("subscription 2 " + hex(ConsumerProtocol.serializeSubscription(emptyUd, (short) 2)));
        List<TopicPartition> assigned = List.of(tp("t2", 1), tp("t1", 2), tp("t1", 0));
        for (short v = 0; v <= 3; v++) {
            Assignment a = new Assignment(assigned, v >= 1 ? ud.duplicate() : null);
            System.out.println("assignment " + v + " " + hex(ConsumerProtocol.serializeAssignment(a, v)));
        }
        System.out.println("assignment 0 " + hex(ConsumerProtocol.serializeAssignment(new Assignment(List.of()), (short) 0)));

        // StickyAssignor's user data (StickyAssignorUserData v1: previous assignment, generation).
        StickyAssignor st = new StickyAssignor();
        System.out.println("sticky-userdata none " + hex(st.subscriptionUserData(Set.of("t1"))));
        st.onAssignment(new Assignment(List.of(tp("t1", 0), tp("t1", 4))), new ConsumerGroupMetadata("g", 3, "m", Optional.empty()));
        System.out.println("sticky-userdata 3 " + hex(st.subscriptionUserData(Set.of("t1"))));
        st.onAssignment(new Assignment(List.of()), new ConsumerGroupMetadata("g", 9, "m", Optional.empty()));
        System.out.println("sticky-userdata 9 " + hex(st.subscriptionUserData(Set.of("t1"))));
        CooperativeStickyAssignor co = new CooperativeStickyAssignor();
        co.onAssignment(new Assignment(List.of(tp("t1", 0))), new ConsumerGroupMetadata("g", 3, "m", Optional.empty()));
        System.out.println("cooperative-userdata 3 " + hex(co.subscriptionUserData(Set.of("t1"))));
    }

    // One group: members (id, instance id or "-", topics, owned partitions, generation).
    record M(String id, String instance, List<String> topics, List<TopicPartition> owned, int generation) {}

    static void scenario(String name, ConsumerPartitionAssignor assignor, Map<String, Integer> topics, List<M> members) {
        List<PartitionInfo> parts = new ArrayList<>();
        Node node = new Node(0, "h", 1);
        for (var t : topics.entrySet())
            for (int p = 0; p < t.getValue(); p++)
                parts.add(new PartitionInfo(t.getKey(), p, node, new Node[] {node}, new Node[] {node}));
        Cluster cluster = new Cluster("c", List.of(node), parts, Set.of(), Set.of());
        Map<String, Subscription> subs = new TreeMap<>();
        System.out.println("scenario " + name + " " + assignor.name());
        for (var t : new TreeMap<>(topics).entrySet()) System.out.println("topic " + t.getKey() + " " + t.getValue());
        for (M m : members) {
            ByteBuffer ud = null;
            if (assignor instanceof StickyAssignor && m.generation >= 0) {
                StickyAssignor prev = new StickyAssignor();
                prev.onAssignment(new Assignment(m.owned), new ConsumerGroupMetadata("g", m.generation, m.id, Optional.empty()));
                ud = prev.subscriptionUserData(new HashSet<>(m.topics));
            }
            Subscription s = new Subscription(m.topics, ud, m.owned, m.generation, Optional.empty());
            if (!m.instance.equals("-")) s.setGroupInstanceId(Optional.of(m.instance));
            subs.put(m.id, s);
            System.out.println("member " + m.id + " " + m.instance + " " + String.join(",", m.topics) + " "
                + tps(m.owned) + " " + m.generation + " " + hex(ud));
        }
        GroupAssignment ga = assignor.assign(cluster, new GroupSubscription(subs));
        for (var e : new TreeMap<>(ga.groupAssignment()).entrySet()) {
            List<TopicPartition> l = new ArrayList<>(e.getValue().partitions());
            l.sort(Comparator.comparing(TopicPartition::topic).thenComparing(TopicPartition::partition));
            System.out.println("expect " + e.getKey() + " " + tps(l));
        }
        System.out.println("end");
    }

    static M m(String id, String inst, String topics) { return new M(id, inst, List.of(topics.split(",")), List.of(), -1); }
    static M m(String id, String topics, int gen, TopicPartition... owned) { return new M(id, "-", List.of(topics.split(",")), List.of(owned), gen); }

    static void assignors() {
        for (ConsumerPartitionAssignor a : List.of(new RangeAssignor(), new RoundRobinAssignor())) {
            scenario("shared", a, Map.of("t1", 5, "t2", 3), List.of(m("c", "-", "t1,t2"), m("a", "-", "t1,t2"), m("b", "-", "t1,t2")));
            scenario("mixed", a, Map.of("t1", 4, "t2", 7, "t3", 2), List.of(m("m1", "-", "t1"), m("m2", "-", "t1,t2"), m("m3", "-", "t2,t3"), m("m4", "-", "t3,t1")));
            scenario("crowd", a, Map.of("t1", 2), List.of(m("e", "-", "t1"), m("d", "-", "t1"), m("c", "-", "t1"), m("b", "-", "t1"), m("a", "-", "t1")));
            scenario("static", a, Map.of("t1", 7, "t2", 2), List.of(m("a", "z", "t1,t2"), m("b", "y", "t1,t2"), m("c", "-", "t1,t2"), m("d", "x", "t1")));
            scenario("missing-topic", a, Map.of("t1", 3), List.of(m("a", "-", "t1,gone"), m("b", "-", "gone")));
        }
        for (ConsumerPartitionAssignor a : List.of(new StickyAssignor(), new CooperativeStickyAssignor())) {
            scenario("fresh", a, Map.of("t1", 6, "t2", 4), List.of(m("a", "-", "t1,t2"), m("b", "-", "t1,t2"), m("c", "-", "t1,t2")));
            scenario("join", a, Map.of("t1", 6, "t2", 4), List.of(
                m("a", "t1,t2", 4, tp("t1", 0), tp("t1", 3), tp("t2", 0), tp("t2", 3)),
                m("b", "t1,t2", 4, tp("t1", 1), tp("t1", 4), tp("t2", 1)),
                m("c", "t1,t2", 4, tp("t1", 2), tp("t1", 5), tp("t2", 2)),
                m("d", "t1,t2", -1)));
            scenario("leave", a, Map.of("t1", 6, "t2", 4), List.of(
                m("a", "t1,t2", 4, tp("t1", 0), tp("t1", 3), tp("t2", 0), tp("t2", 3)),
                m("c", "t1,t2", 4, tp("t1", 2), tp("t1", 5), tp("t2", 2))));
            scenario("stale-generation", a, Map.of("t1", 4), List.of(
                m("a", "t1", 5, tp("t1", 0), tp("t1", 1)),
                m("b", "t1", 3, tp("t1", 1), tp("t1", 2), tp("t1", 3)),
                m("c", "t1", 5, tp("t1", 3))));
            scenario("mixed", a, Map.of("t1", 3, "t2", 5, "t3", 2), List.of(
                m("a", "t1", 2, tp("t1", 0), tp("t1", 1), tp("t1", 2)),
                m("b", "t1,t2", 2, tp("t2", 0), tp("t2", 1)),
                m("c", "t2,t3", 2, tp("t2", 2), tp("t2", 3), tp("t2", 4), tp("t3", 0), tp("t3", 1))));
            scenario("grown", a, Map.of("t1", 8), List.of(
                m("a", "t1", 1, tp("t1", 0), tp("t1", 1)),
                m("b", "t1", 1, tp("t1", 2), tp("t1", 3))));
        }
    }

    public static void main(String[] args) {
        if (args.length == 1 && args[0].equals("protocol")) protocol();
        else assignors();
    }
}
