// A consumer-group member for the rebalance test, run with the JDK's
// source launcher against Kafka's client jars:
//   java -cp 'kafka-lib/*' GroupMember.java BOOTSTRAP GROUP TOPIC NAME
// It prints "C partition offset" for every record it processes and
// "K partition nextOffset" after each synchronous commit, and stops when
// its standard input closes.
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class GroupMember {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, args[3]);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        AtomicBoolean stop = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try { while (System.in.read() >= 0) { } } catch (Exception e) { }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(args[2]));
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) continue;
                Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
                StringBuilder out = new StringBuilder();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    out.append("C ").append(r.partition()).append(' ').append(r.offset()).append('\n');
                    commit.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                System.out.print(out);
                System.out.flush();
                try {
                    c.commitSync(commit);
                } catch (org.apache.kafka.common.KafkaException e) {
                    // A rebalance took the partitions away: their new owner
                    // processes these records again, which is allowed.
                    System.out.println("F " + e.getClass().getSimpleName());
                    continue;
                }
                StringBuilder k = new StringBuilder();
                commit.forEach((tp, om) -> k.append("K ").append(tp.partition()).append(' ').append(om.offset()).append('\n'));
                System.out.print(k);
                System.out.flush();
            }
        }
    }
}
