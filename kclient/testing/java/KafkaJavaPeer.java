// The Java clients (kafka-clients) as a test peer of the embedded broker.
//
// java KafkaJavaPeer BOOTSTRAP STEP...   where each STEP is one argument:
//   "name key=value key=value ..."
// Every step prints one JSON line {"step": name, ...}; a step that throws prints
// {"step": name, "error": "ExceptionClass: message"} and the run goes on with the next.
// Run by kclient/testing/java_clients.py, which parses the lines. Every wait is bounded
// (request/delivery/api timeouts, poll deadlines), so a run never hangs.

import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.serialization.*;

public final class KafkaJavaPeer {
  private static String bootstrap;

  public static void main(String[] args) {
    bootstrap = args[0];
    for (int i = 1; i < args.length; i++) {
      String[] words = args[i].trim().split("\\s+");
      Map<String, String> opts = new HashMap<>();
      for (int j = 1; j < words.length; j++) {
        int eq = words[j].indexOf('=');
        opts.put(words[j].substring(0, eq), words[j].substring(eq + 1));
      }
      Json out = new Json().put("step", words[0]);
      long start = System.nanoTime();
      try {
        run(words[0], opts, out);
      } catch (Throwable t) {
        Throwable cause = t;
        while ((cause instanceof java.util.concurrent.ExecutionException || cause.getClass() == RuntimeException.class)
            && cause.getCause() != null) {
          cause = cause.getCause();
        }
        out.put("error", cause.getClass().getSimpleName() + ": " + cause.getMessage());
      }
      out.put("ms", (System.nanoTime() - start) / 1_000_000);
      System.out.println(out);
      System.out.flush();
    }
  }

  private static void run(String step, Map<String, String> o, Json out) throws Exception {
    switch (step) {
      case "produce": produce(o, out); break;
      case "txn": txn(o, out); break;
      case "fence": fence(o, out); break;
      case "ctp": ctp(o, out); break;
      case "lso": lso(o, out); break;
      case "txn_timeout": txnTimeout(o, out); break;
      case "kafka_decode": kafkaDecode(o, out); break;
      case "consume": consume(o, out); break;
      default: try (Admin admin = Admin.create(PeerAdmin.props(bootstrap))) { PeerAdmin.run(step, admin, o, out); }
    }
  }

  // ---- producer ----------------------------------------------------------------------

  private static Properties producerProps(Map<String, String> o) {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("key.serializer", StringSerializer.class.getName());
    p.put("value.serializer", StringSerializer.class.getName());
    p.put("enable.idempotence", o.getOrDefault("idempotent", "true"));
    p.put("acks", o.getOrDefault("acks", "all"));
    p.put("linger.ms", o.getOrDefault("linger_ms", "5"));
    p.put("compression.type", o.getOrDefault("compression", "none"));
    p.put("request.timeout.ms", "10000");
    p.put("delivery.timeout.ms", "20000");
    p.put("max.block.ms", "20000");
    if (o.containsKey("transactional_id")) p.put("transactional.id", o.get("transactional_id"));
    return p;
  }

  /** count records key-i / prefix-i to topic; prints the offsets each partition got. */
  private static void produce(Map<String, String> o, Json out) throws Exception {
    String topic = o.get("topic");
    int count = Integer.parseInt(o.getOrDefault("count", "10"));
    String prefix = o.getOrDefault("prefix", "v");
    Map<Integer, List<Long>> offsets = new TreeMap<>();
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(o))) {
      List<java.util.concurrent.Future<RecordMetadata>> futures = new ArrayList<>();
      long delayMs = Long.parseLong(o.getOrDefault("delay_ms", "0"));
      for (int i = 0; i < count; i++) {
        futures.add(producer.send(new ProducerRecord<>(topic, "key-" + i, prefix + "-" + i)));
        if (delayMs > 0 && i % 10 == 9) Thread.sleep(delayMs);
      }
      producer.flush();
      for (java.util.concurrent.Future<RecordMetadata> f : futures) {
        RecordMetadata m = f.get(30, TimeUnit.SECONDS);
        offsets.computeIfAbsent(m.partition(), k -> new ArrayList<>()).add(m.offset());
      }
    }
    Json parts = new Json();
    for (Map.Entry<Integer, List<Long>> e : offsets.entrySet()) parts.put(e.getKey().toString(), e.getValue());
    out.put("sent", count).put("offsets", parts);
  }

  /** Transactions of one transactional producer: "plan" is a comma list of commit:N /
   * abort:N; records of each are prefix-<txn>-<i>, flushed before the commit or abort. */
  private static void txn(Map<String, String> o, Json out) throws Exception {
    String topic = o.get("topic");
    List<String> done = new ArrayList<>();
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(o))) {
      producer.initTransactions();
      int n = 0;
      for (String part : o.get("plan").split(",")) {
        String[] kv = part.split(":");
        producer.beginTransaction();
        for (int i = 0; i < Integer.parseInt(kv[1]); i++) {
          producer.send(new ProducerRecord<>(topic, "k" + i, o.getOrDefault("prefix", "t") + "-" + n + "-" + i));
        }
        producer.flush();
        if (o.containsKey("offsets_group")) {
          // consume-transform-produce: the group's offset of offsets_topic-0 moves to n+1
          Map<TopicPartition, OffsetAndMetadata> offsets = Collections.singletonMap(
              new TopicPartition(o.get("offsets_topic"), 0), new OffsetAndMetadata(n + 1));
          producer.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(o.get("offsets_group")));
        }
        if (kv[0].equals("commit")) producer.commitTransaction(); else producer.abortTransaction();
        done.add(kv[0]);
        n++;
      }
    }
    out.put("done", done);
  }

  /** Two producers with one transactional id: the second fences the first, whose open
   * transaction then cannot commit; the second's transaction commits. */
  private static void fence(Map<String, String> o, Json out) throws Exception {
    String topic = o.get("topic");
    try (KafkaProducer<String, String> first = new KafkaProducer<>(producerProps(o));
         KafkaProducer<String, String> second = new KafkaProducer<>(producerProps(o))) {
      first.initTransactions();
      first.beginTransaction();
      first.send(new ProducerRecord<>(topic, "k", "fenced")).get(20, TimeUnit.SECONDS);
      second.initTransactions();
      second.beginTransaction();
      second.send(new ProducerRecord<>(topic, "k", "winner"));
      second.commitTransaction();
      try {
        first.commitTransaction();
        out.put("first", "committed");
      } catch (KafkaException e) {
        out.put("first", e.getClass().getSimpleName());
      }
      out.put("second", "committed");
    }
  }

  /** Consume-transform-produce, as Kafka Streams does it: a read_committed member of
   * "group" reads "topic", and each poll's records go to "out" in a transaction with the
   * consumer's offsets (sendOffsetsToTransaction with the member's group metadata). */
  private static void ctp(Map<String, String> o, Json out) throws Exception {
    Map<String, String> c = new HashMap<>(o);
    c.put("isolation", "read_committed");
    int expect = Integer.parseInt(o.getOrDefault("expect", "1"));
    long deadline = System.nanoTime() + Long.parseLong(o.getOrDefault("timeout_ms", "20000")) * 1_000_000;
    int copied = 0, transactions = 0;
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(c));
         KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(o))) {
      producer.initTransactions();
      consumer.subscribe(Collections.singletonList(o.get("topic")));
      while (copied < expect && System.nanoTime() < deadline) {
        ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
        if (records.isEmpty()) continue;
        producer.beginTransaction();
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (ConsumerRecord<String, String> r : records) {
          producer.send(new ProducerRecord<>(o.get("out"), r.key(), r.value().toUpperCase()));
          offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
          copied++;
        }
        producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
        producer.commitTransaction();
        transactions++;
      }
      out.put("generation", consumer.groupMetadata().generationId());
    }
    out.put("copied", copied).put("transactions", transactions);
  }

  /** A transaction left open past transaction.timeout.ms ("timeout_ms"), which the
   * coordinator aborts: what its commit raises, then whether an abort and a new
   * transaction of the same producer commit. */
  private static void txnTimeout(Map<String, String> o, Json out) throws Exception {
    Properties p = producerProps(o);
    p.put("transaction.timeout.ms", o.getOrDefault("timeout_ms", "1000"));
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
      producer.initTransactions();
      producer.beginTransaction();
      producer.send(new ProducerRecord<>(o.get("topic"), "k", "timed-out")).get(20, TimeUnit.SECONDS);
      Thread.sleep(Long.parseLong(o.getOrDefault("sleep_ms", "4000")));
      try {
        producer.commitTransaction();
        out.put("commit", "committed");
      } catch (KafkaException e) {
        out.put("commit", e.getClass().getSimpleName() + ": " + e.getMessage());
        try {
          producer.abortTransaction();
          producer.beginTransaction();
          producer.send(new ProducerRecord<>(o.get("topic"), "k", "after"));
          producer.commitTransaction();
          out.put("recovered", true);
        } catch (KafkaException e2) {
          out.put("recovered", e2.getClass().getSimpleName() + ": " + e2.getMessage());
        }
      }
    }
  }

  /** With a transaction open on "topic"-0 (5 records flushed after "before" committed
   * ones), the end offsets a read_committed and a read_uncommitted consumer see, and
   * what read_committed reads; then the transaction is aborted. */
  private static void lso(Map<String, String> o, Json out) throws Exception {
    TopicPartition tp = new TopicPartition(o.get("topic"), 0);
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(o))) {
      producer.initTransactions();
      producer.beginTransaction();
      for (int i = 0; i < 5; i++) producer.send(new ProducerRecord<>(tp.topic(), "k", "open-" + i));
      producer.flush();
      for (String isolation : new String[] {"read_committed", "read_uncommitted"}) {
        Map<String, String> c = new HashMap<>(o);
        c.put("isolation", isolation);
        c.put("group", "lso-" + isolation);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(c))) {
          consumer.assign(Collections.singletonList(tp));
          consumer.seekToBeginning(Collections.singletonList(tp));
          int read = 0;
          long deadline = System.nanoTime() + 1_000_000_000L;
          while (System.nanoTime() < deadline) read += consumer.poll(Duration.ofMillis(100)).count();
          out.put(isolation, new Json().put("end", consumer.endOffsets(Collections.singletonList(tp)).get(tp)).put("read", read));
        }
      }
      producer.abortTransaction();
    }
  }

  /** Read a response body ("hex", after the response header; with kind=request a request
   * body, after the request header) of "api" at "version" with Kafka's own generated message
   * class, and write it back: "same" says whether Kafka's serializer gives back the very same
   * bytes; "text" is the message as Kafka sees it. */
  private static void kafkaDecode(Map<String, String> o, Json out) {
    short version = Short.parseShort(o.get("version"));
    byte[] body = java.util.HexFormat.of().parseHex(o.get("hex"));
    org.apache.kafka.common.message.ApiMessageType type =
        org.apache.kafka.common.message.ApiMessageType.fromApiKey(Short.parseShort(o.get("api")));
    // kind=request: a request body (kclient's own bytes); else a response body (a broker's)
    org.apache.kafka.common.protocol.ApiMessage message =
        "request".equals(o.get("kind")) ? type.newRequest() : type.newResponse();
    org.apache.kafka.common.protocol.ByteBufferAccessor in =
        new org.apache.kafka.common.protocol.ByteBufferAccessor(java.nio.ByteBuffer.wrap(body));
    message.read(in, version);
    byte[] again = org.apache.kafka.common.utils.Utils.toArray(
        org.apache.kafka.common.protocol.MessageUtil.toByteBufferAccessor(message, version).buffer());
    out.put("left", in.remaining()).put("same", Arrays.equals(body, again))
        .put("kafka_hex", java.util.HexFormat.of().formatHex(again)).put("text", message.toString());
  }

  // ---- consumer ----------------------------------------------------------------------

  /** "members" consumers (one thread each) subscribe in one group and poll until they
   * hold "expect" records between them or "timeout_ms" passes; each commits what it read. */
  private static void consume(Map<String, String> o, Json out) throws Exception {
    int members = Integer.parseInt(o.getOrDefault("members", "1"));
    int expect = Integer.parseInt(o.getOrDefault("expect", "1"));
    long deadline = System.nanoTime() + Long.parseLong(o.getOrDefault("timeout_ms", "20000")) * 1_000_000;
    List<String> values = Collections.synchronizedList(new ArrayList<>());
    List<Object> memberInfo = Collections.synchronizedList(new ArrayList<>());
    List<Throwable> failures = Collections.synchronizedList(new ArrayList<>());
    List<Thread> threads = new ArrayList<>();
    for (int m = 0; m < members; m++) {
      Thread t = new Thread(() -> {
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(o))) {
          consumer.subscribe(Collections.singletonList(o.get("topic")));
          int mine = 0;
          while (values.size() < expect && System.nanoTime() < deadline) {
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
              values.add(r.partition() + ":" + r.offset() + ":" + r.value());
              mine++;
            }
          }
          consumer.commitSync(Duration.ofSeconds(10));
          List<Integer> parts = new ArrayList<>();
          for (TopicPartition tp : consumer.assignment()) parts.add(tp.partition());
          Collections.sort(parts);
          memberInfo.add(new Json().put("generation", consumer.groupMetadata().generationId())
              .put("partitions", parts).put("records", mine));
        } catch (Throwable e) {
          failures.add(e);
        }
      });
      t.start();
      threads.add(t);
    }
    for (Thread t : threads) t.join();
    if (!failures.isEmpty()) throw new RuntimeException(failures.get(0));
    synchronized (values) { out.put("records", new ArrayList<>(values)); }
    out.put("members", memberInfo);
  }

  private static Properties consumerProps(Map<String, String> o) {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("group.id", o.get("group"));
    p.put("key.deserializer", StringDeserializer.class.getName());
    p.put("value.deserializer", StringDeserializer.class.getName());
    p.put("auto.offset.reset", "earliest");
    p.put("enable.auto.commit", "false");
    p.put("isolation.level", o.getOrDefault("isolation", "read_uncommitted"));
    p.put("group.protocol", o.getOrDefault("protocol", "classic"));
    p.put("request.timeout.ms", "10000");
    p.put("default.api.timeout.ms", "15000");
    if (o.containsKey("assignor")) p.put("partition.assignment.strategy", o.get("assignor"));
    if (o.containsKey("instance")) p.put("group.instance.id", o.get("instance") + "-" + Thread.currentThread().getId());
    return p;
  }

}
