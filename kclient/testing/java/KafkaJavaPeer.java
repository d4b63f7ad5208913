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
import org.apache.kafka.common.config.ConfigResource;
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
      default: try (Admin admin = Admin.create(adminProps())) { admin(step, admin, o, out); }
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

  /** Read a response body ("hex", after the response header) of "api" at "version" with
   * Kafka's own generated message class, and write it back: "same" says whether Kafka's
   * serializer gives back the very same bytes; "text" is the message as Kafka sees it. */
  private static void kafkaDecode(Map<String, String> o, Json out) {
    short version = Short.parseShort(o.get("version"));
    byte[] body = java.util.HexFormat.of().parseHex(o.get("hex"));
    org.apache.kafka.common.protocol.ApiMessage message =
        org.apache.kafka.common.message.ApiMessageType.fromApiKey(Short.parseShort(o.get("api"))).newResponse();
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

  // ---- admin -------------------------------------------------------------------------

  private static Properties adminProps() {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("request.timeout.ms", "10000");
    p.put("default.api.timeout.ms", "15000");
    return p;
  }

  private static List<String> names(Map<String, String> o, String key) {
    return o.containsKey(key) ? Arrays.asList(o.get(key).split(",")) : Collections.emptyList();
  }

  private static void admin(String step, Admin admin, Map<String, String> o, Json out) throws Exception {
    switch (step) {
      case "create_topics": {
        List<NewTopic> topics = new ArrayList<>();
        for (String name : names(o, "names")) {
          NewTopic t = new NewTopic(name, Integer.parseInt(o.getOrDefault("partitions", "1")), Short.parseShort(o.getOrDefault("rf", "1")));
          if (o.containsKey("config")) { String[] kv = o.get("config").split(":"); t.configs(Collections.singletonMap(kv[0], kv[1])); }
          topics.add(t);
        }
        admin.createTopics(topics).all().get();
        out.put("created", names(o, "names"));
        break;
      }
      case "list_topics":
        out.put("topics", new TreeSet<>(admin.listTopics().names().get()));
        break;
      case "describe_topics": {
        Json topics = new Json();
        for (TopicDescription d : admin.describeTopics(names(o, "names")).allTopicNames().get().values()) {
          List<Object> parts = new ArrayList<>();
          for (TopicPartitionInfo pi : d.partitions()) {
            parts.add(new Json().put("partition", pi.partition()).put("leader", pi.leader() == null ? -1 : pi.leader().id())
                .put("replicas", pi.replicas().size()).put("isr", pi.isr().size()));
          }
          topics.put(d.name(), new Json().put("id", d.topicId().toString()).put("partitions", parts));
        }
        out.put("topics", topics);
        break;
      }
      case "describe_configs": {
        ConfigResource r = new ConfigResource(ConfigResource.Type.valueOf(o.getOrDefault("type", "TOPIC")), o.get("name"));
        Json configs = new Json();
        for (ConfigEntry e : admin.describeConfigs(Collections.singleton(r)).all().get().get(r).entries()) {
          configs.put(e.name(), e.value() + " (" + e.source() + ")");
        }
        out.put("configs", configs);
        break;
      }
      case "alter_config": {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, o.get("name"));
        AlterConfigOp op = new AlterConfigOp(new ConfigEntry(o.get("key"), o.get("value")), AlterConfigOp.OpType.SET);
        admin.incrementalAlterConfigs(Collections.singletonMap(r, Collections.singleton(op))).all().get();
        out.put("altered", o.get("key"));
        break;
      }
      case "list_groups": {
        List<String> groups = new ArrayList<>();
        for (GroupListing g : admin.listGroups().all().get()) {
          groups.add(g.groupId() + ":" + g.type().map(Object::toString).orElse("?") + ":" + g.groupState().map(Object::toString).orElse("?"));
        }
        Collections.sort(groups);
        out.put("groups", groups);
        break;
      }
      case "describe_groups": {
        Json groups = new Json();
        for (ConsumerGroupDescription d : admin.describeConsumerGroups(names(o, "ids")).all().get().values()) {
          groups.put(d.groupId(), new Json().put("state", String.valueOf(d.groupState())).put("members", d.members().size())
              .put("coordinator", d.coordinator() == null ? -1 : d.coordinator().id()).put("assignor", d.partitionAssignor()));
        }
        out.put("groups", groups);
        break;
      }
      case "list_offsets": {
        Json offsets = new Json();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : admin.listConsumerGroupOffsets(o.get("group")).partitionsToOffsetAndMetadata().get().entrySet()) {
          offsets.put(e.getKey().toString(), e.getValue().offset());
        }
        out.put("offsets", offsets);
        break;
      }
      case "describe_producers": {
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < Integer.parseInt(o.getOrDefault("partitions", "1")); i++) tps.add(new TopicPartition(o.get("topic"), i));
        List<Object> producers = new ArrayList<>();
        for (Map.Entry<TopicPartition, DescribeProducersResult.PartitionProducerState> e : admin.describeProducers(tps).all().get().entrySet()) {
          for (ProducerState s : e.getValue().activeProducers()) {
            producers.add(new Json().put("partition", e.getKey().partition()).put("producer_id", s.producerId())
                .put("epoch", s.producerEpoch()).put("last_sequence", s.lastSequence())
                .put("txn_start_offset", s.currentTransactionStartOffset().orElse(-1L)));
          }
        }
        out.put("producers", producers);
        break;
      }
      case "list_transactions": {
        List<String> txns = new ArrayList<>();
        for (TransactionListing t : admin.listTransactions().all().get()) txns.add(t.transactionalId() + ":" + t.state());
        Collections.sort(txns);
        out.put("transactions", txns);
        break;
      }
      case "describe_transactions": {
        Json txns = new Json();
        for (Map.Entry<String, TransactionDescription> e : admin.describeTransactions(names(o, "ids")).all().get().entrySet()) {
          txns.put(e.getKey(), new Json().put("state", e.getValue().state().toString()).put("producer_id", e.getValue().producerId()));
        }
        out.put("transactions", txns);
        break;
      }
      case "describe_cluster": {
        DescribeClusterResult c = admin.describeCluster();
        out.put("nodes", c.nodes().get().size()).put("controller", c.controller().get().id()).put("cluster_id", c.clusterId().get());
        break;
      }
      case "describe_features": {
        Json features = new Json();
        for (Map.Entry<String, FinalizedVersionRange> e : admin.describeFeatures().featureMetadata().get().finalizedFeatures().entrySet()) {
          features.put(e.getKey(), e.getValue().maxVersionLevel());
        }
        out.put("finalized", features);
        break;
      }
      case "list_partition_offsets": {
        TopicPartition tp = new TopicPartition(o.get("topic"), 0);
        Json offsets = new Json();
        for (String spec : new String[] {"earliest", "latest", "max_timestamp"}) {
          OffsetSpec os = spec.equals("earliest") ? OffsetSpec.earliest() : spec.equals("latest") ? OffsetSpec.latest() : OffsetSpec.maxTimestamp();
          offsets.put(spec, admin.listOffsets(Collections.singletonMap(tp, os)).partitionResult(tp).get().offset());
        }
        out.put("offsets", offsets);
        break;
      }
      case "delete_records": {
        TopicPartition tp = new TopicPartition(o.get("topic"), 0);
        long low = admin.deleteRecords(Collections.singletonMap(tp, RecordsToDelete.beforeOffset(Long.parseLong(o.get("before")))))
            .lowWatermarks().get(tp).get().lowWatermark();
        out.put("low_watermark", low);
        break;
      }
      case "alter_group_offsets": {
        TopicPartition tp = new TopicPartition(o.get("topic"), 0);
        admin.alterConsumerGroupOffsets(o.get("group"), Collections.singletonMap(tp, new OffsetAndMetadata(Long.parseLong(o.get("offset"))))).all().get();
        out.put("altered", true);
        break;
      }
      case "delete_groups":
        admin.deleteConsumerGroups(names(o, "ids")).all().get();
        out.put("deleted", names(o, "ids"));
        break;
      case "describe_log_dirs": {
        Map<Integer, Map<String, LogDirDescription>> dirs = admin.describeLogDirs(Arrays.asList(0, 1, 2)).allDescriptions().get();
        out.put("brokers", dirs.size());
        break;
      }
      case "elect_leaders":
        admin.electLeaders(ElectionType.PREFERRED, Collections.singleton(new TopicPartition(o.get("topic"), 0))).all().get();
        out.put("elected", true);
        break;
      case "delete_topics":
        admin.deleteTopics(names(o, "names")).all().get();
        out.put("deleted", names(o, "names"));
        break;
      default:
        throw new IllegalArgumentException("unknown step " + step);
    }
  }

  // ---- output ------------------------------------------------------------------------

  /** A JSON object written in insertion order (no JSON library on the class path). */
  static final class Json {
    private final StringBuilder body = new StringBuilder();

    Json put(String key, Object value) {
      if (body.length() > 0) body.append(',');
      body.append(quote(key)).append(':').append(encode(value));
      return this;
    }

    static String encode(Object v) {
      if (v == null) return "null";
      if (v instanceof Json || v instanceof Number || v instanceof Boolean) return v.toString();
      if (v instanceof Collection) {
        StringJoiner j = new StringJoiner(",", "[", "]");
        for (Object x : (Collection<?>) v) j.add(encode(x));
        return j.toString();
      }
      return quote(v.toString());
    }

    static String quote(String s) {
      StringBuilder b = new StringBuilder("\"");
      for (char c : s.toCharArray()) {
        if (c == '"' || c == '\\') b.append('\\').append(c);
        else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
        else b.append(c);
      }
      return b.append('"').toString();
    }

    @Override
    public String toString() {
      return "{" + body + "}";
    }
  }
}
