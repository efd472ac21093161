// A share-group member (KIP-932) for the share-group interop tests, run
// with the JDK's source launcher against Kafka's client jars:
//   java -cp 'kafka-lib/*' ShareMember.java BOOTSTRAP GROUP TOPIC NAME
// It consumes with Kafka's KafkaShareConsumer in explicit acknowledgement
// mode and acknowledges each record by its key:
//   reject-*   REJECT
//   release-*  RELEASE on its first delivery, ACCEPT on later ones
//   poison-*   RELEASE always (the broker archives it at the group's
//              share.delivery.count.limit)
//   others     ACCEPT
// For each record it prints, before acknowledging it,
//   "R partition offset deliveryCount ACK key"
// and after each commitSync, for each partition acknowledged,
//   "C partition ok" or "C partition ExceptionClass"
// ("C * ExceptionClass" when commitSync itself threw). A test reading these
// lines knows which acknowledgements the broker confirmed. It stops, closing
// the consumer, when its standard input closes.
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareMember {
    static AcknowledgeType decide(String key, short deliveryCount) {
        if (key.startsWith("reject-")) {
            return AcknowledgeType.REJECT;
        }
        if (key.startsWith("release-")) {
            return deliveryCount <= 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT;
        }
        if (key.startsWith("poison-")) {
            return AcknowledgeType.RELEASE;
        }
        return AcknowledgeType.ACCEPT;
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, args[3]);
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        AtomicBoolean stop = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try { while (System.in.read() >= 0) { } } catch (Exception e) { }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        try (KafkaShareConsumer<String, byte[]> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(args[2]));
            while (!stop.get()) {
                ConsumerRecords<String, byte[]> recs = c.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) continue;
                StringBuilder out = new StringBuilder();
                for (ConsumerRecord<String, byte[]> r : recs) {
                    short dc = r.deliveryCount().orElse((short) 0);
                    AcknowledgeType ack = decide(r.key() == null ? "" : r.key(), dc);
                    out.append("R ").append(r.partition()).append(' ').append(r.offset()).append(' ')
                        .append(dc).append(' ').append(ack.name()).append(' ').append(r.key()).append('\n');
                    c.acknowledge(r, ack);
                }
                // Printed before the commit: a member killed during it has
                // said what it processed, and its acks are unconfirmed.
                System.out.print(out);
                System.out.flush();
                StringBuilder k = new StringBuilder();
                try {
                    Map<TopicIdPartition, Optional<KafkaException>> res = c.commitSync();
                    res.forEach((tp, err) -> k.append("C ").append(tp.partition()).append(' ')
                        .append(err.isPresent() ? err.get().getClass().getSimpleName() : "ok").append('\n'));
                } catch (KafkaException e) {
                    k.append("C * ").append(e.getClass().getSimpleName()).append('\n');
                }
                System.out.print(k);
                System.out.flush();
            }
        }
    }
}
