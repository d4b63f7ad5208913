// The Admin steps of KafkaJavaPeer (one Admin client per step; see KafkaJavaPeer.java).

import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;

final class PeerAdmin {
  static Properties props(String bootstrap) {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("request.timeout.ms", "10000");
    p.put("default.api.timeout.ms", "15000");
    return p;
  }

  private static List<String> names(Map<String, String> o, String key) {
    return o.containsKey(key) ? Arrays.asList(o.get(key).split(",")) : Collections.emptyList();
  }

  static void run(String step, Admin admin, Map<String, String> o, Json out) throws Exception {
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
}
