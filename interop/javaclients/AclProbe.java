// AclProbe runs Kafka's Java client (4.3) against a broker with ACLs and
// prints, one line each, what it got: "<probe> ok" or "<probe> <exception's
// simple class name>". Probes: produce (to the allowed topic), produce-denied
// (a topic without WRITE), consume-denied (a group without READ),
// txn-denied (a transactional id without WRITE), admin-list (topics listed).
// Usage: java -cp 'kafka-lib/*' AclProbe.java BOOTSTRAP OPEN_TOPIC DENIED_TOPIC DENIED_GROUP DENIED_TXN
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class AclProbe {
    static Properties base(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("max.block.ms", "15000");
        p.put("delivery.timeout.ms", "15000");
        p.put("request.timeout.ms", "10000");
        return p;
    }

    static String name(Throwable t) {
        while ((t instanceof ExecutionException || t.getClass().getSimpleName().equals("KafkaException")) && t.getCause() != null) {
            t = t.getCause();
        }
        return t.getClass().getSimpleName();
    }

    static void produce(String probe, String bootstrap, String topic) {
        try (KafkaProducer<String, String> p = new KafkaProducer<>(base(bootstrap))) {
            p.send(new ProducerRecord<>(topic, "k", "v")).get();
            System.out.println(probe + " ok");
        } catch (Exception e) {
            System.out.println(probe + " " + name(e));
        }
    }

    public static void main(String[] args) {
        String bootstrap = args[0], open = args[1], deniedTopic = args[2], deniedGroup = args[3], deniedTxn = args[4];
        produce("produce", bootstrap, open);
        produce("produce-denied", bootstrap, deniedTopic);

        Properties c = base(bootstrap);
        c.put("group.id", deniedGroup);
        c.put("auto.offset.reset", "earliest");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of(open));
            long deadline = System.currentTimeMillis() + 20000;
            String got = "timeout";
            while (System.currentTimeMillis() < deadline) {
                try {
                    consumer.poll(Duration.ofMillis(500));
                } catch (Exception e) {
                    got = name(e);
                    break;
                }
            }
            System.out.println("consume-denied " + got);
        }

        Properties t = base(bootstrap);
        t.put("transactional.id", deniedTxn);
        try (KafkaProducer<String, String> p = new KafkaProducer<>(t)) {
            p.initTransactions();
            System.out.println("txn-denied ok");
        } catch (Exception e) {
            System.out.println("txn-denied " + name(e));
        }

        Properties a = new Properties();
        a.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(a)) {
            System.out.println("admin-list " + String.join(",", new java.util.TreeSet<>(admin.listTopics().names().get())));
        } catch (Exception e) {
            System.out.println("admin-list " + name(e));
        }
    }
}
