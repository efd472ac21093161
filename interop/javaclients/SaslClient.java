// SaslClient runs Kafka's Java client (4.3) over SASL_PLAINTEXT: a
// producer, a consumer in a group and an Admin, each printing one line:
// "<step> ok" or "<step> <exception>". Mechanisms: SCRAM-SHA-256/512 and
// PLAIN (SECRET is the password), OAUTHBEARER (SECRET is a file holding a
// JWT, read through Kafka's file:// token endpoint).
// Usage: java -cp 'kafka-lib/*' SaslClient.java BOOTSTRAP TOPIC GROUP MECHANISM USER SECRET
// With KAFKA_CLIENT_PROPS naming a properties file, its entries are added
// last (e.g. security.protocol=SASL_SSL or SSL and the ssl.* settings).
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class SaslClient {
    static Properties base(String bootstrap, String mech, String user, String secret) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", mech);
        if (mech.equals("OAUTHBEARER")) {
            p.put("sasl.oauthbearer.token.endpoint.url", "file://" + secret);
            p.put("sasl.login.callback.handler.class", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler");
            p.put("sasl.jaas.config", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;");
        } else if (mech.equals("PLAIN")) {
            p.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"" + user + "\" password=\"" + secret + "\";");
        } else {
            p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"" + user + "\" password=\"" + secret + "\";");
        }
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("max.block.ms", "20000");
        p.put("delivery.timeout.ms", "20000");
        p.put("request.timeout.ms", "10000");
        String extra = System.getenv("KAFKA_CLIENT_PROPS");
        if (extra != null) {
            try (java.io.FileInputStream in = new java.io.FileInputStream(extra)) {
                p.load(in);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
        return p;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], mech = args[3], user = args[4], secret = args[5];
        final int n = 100;
        try (KafkaProducer<String, String> p = new KafkaProducer<>(base(bootstrap, mech, user, secret))) {
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, "k" + i, mech + "-" + i));
            }
            p.flush();
            p.send(new ProducerRecord<>(topic, "last", mech + "-last")).get();
            System.out.println("produce ok");
        } catch (Exception e) {
            System.out.println("produce " + e);
            System.exit(1);
        }
        Properties c = base(bootstrap, mech, user, secret);
        c.put("group.id", group);
        c.put("auto.offset.reset", "earliest");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60000;
            int got = 0;
            while (got < n + 1 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    if (r.value().startsWith(mech + "-")) {
                        got++;
                    }
                }
            }
            consumer.commitSync();
            System.out.println(got == n + 1 ? "consume ok" : "consume got " + got + " of " + (n + 1));
        } catch (Exception e) {
            System.out.println("consume " + e);
        }
        try (Admin admin = Admin.create(base(bootstrap, mech, user, secret))) {
            boolean listed = admin.listTopics().names().get().contains(topic);
            int nodes = admin.describeCluster().nodes().get().size();
            System.out.println(listed && nodes > 0 ? "admin ok" : "admin topics/nodes missing");
        } catch (Exception e) {
            System.out.println("admin " + e);
        }
    }
}
