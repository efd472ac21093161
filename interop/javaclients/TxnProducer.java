// A transactional producer for the transaction version 2 test, run with the
// JDK's source launcher against Kafka's client jars:
//   java -cp 'kafka-lib/*' TxnProducer.java BOOTSTRAP TOPIC TRANSACTIONAL_ID COUNT GROUP
// It runs COUNT transactions of three records each (keys p0..p2, values
// "tI-rJ"), each also committing GROUP's offset I+1 for TOPIC-0 through
// sendOffsetsToTransaction, and aborts every third (I % 3 == 2), commits
// the rest. It prints "T I commit|abort" per transaction and "DONE".
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnProducer {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[2]);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        String topic = args[1];
        int count = Integer.parseInt(args[3]);
        ConsumerGroupMetadata group = new ConsumerGroupMetadata(args[4]);
        try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
            pr.initTransactions();
            for (int i = 0; i < count; i++) {
                pr.beginTransaction();
                for (int j = 0; j < 3; j++) {
                    pr.send(new ProducerRecord<>(topic, j, "p" + j, "t" + i + "-r" + j));
                }
                pr.sendOffsetsToTransaction(Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(i + 1)), group);
                if (i % 3 == 2) {
                    pr.abortTransaction();
                    System.out.println("T " + i + " abort");
                } else {
                    pr.commitTransaction();
                    System.out.println("T " + i + " commit");
                }
            }
        }
        System.out.println("DONE");
    }
}
