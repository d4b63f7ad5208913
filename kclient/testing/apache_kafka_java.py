"""Kafka's own Java consumer reads topics back for a test: the strictest reader there is.

Corresponds to a ``KafkaConsumer`` of the ``kafka-clients`` jar of the cluster's version. A
small Java program (its source is below, compiled once by ``javac`` into the Maven cache
folder) assigns itself every partition of the given topics, reads from the beginning up
to the end offsets it saw at the start (the last stable offsets under ``read_committed``),
and prints one line per record: key, value and header values in base64, so that any bytes
survive. With a group it also prints the group's committed offsets. One JVM reads many
topics: a test that checks several topics reads them in one call.
"""

from __future__ import annotations

import base64
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kclient.testing.apache_kafka_node import JVM_OPTIONS, ApacheKafkaError, class_data_sharing
from kclient.testing.maven import compile_java, require_java

__all__ = ["JavaReadBack", "JavaRecord", "compile_reader", "java_read", "parse_output"]

_CLASS = "KclientReadBack"
_SOURCE = r"""
import java.io.*;
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.header.Header;

/** args: properties file, timeout ms, group or "-", topics... */
public class KclientReadBack {
  static String b64(byte[] b) { return b == null ? "-" : Base64.getEncoder().encodeToString(b); }

  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    try (InputStream in = new FileInputStream(args[0])) { props.load(in); }
    long deadline = System.currentTimeMillis() + Long.parseLong(args[1]);
    String des = "org.apache.kafka.common.serialization.ByteArrayDeserializer";
    props.put("key.deserializer", des);
    props.put("value.deserializer", des);
    props.put("enable.auto.commit", "false");
    if (!args[2].equals("-")) props.put("group.id", args[2]);
    PrintStream out = new PrintStream(new BufferedOutputStream(System.out), false, "UTF-8");
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      List<TopicPartition> parts = new ArrayList<>();
      for (int i = 3; i < args.length; i++) {
        List<PartitionInfo> infos = consumer.partitionsFor(args[i], Duration.ofMillis(
            Math.max(1, deadline - System.currentTimeMillis())));
        if (infos == null || infos.isEmpty()) {
          throw new IllegalStateException("no topic " + args[i]);
        }
        for (PartitionInfo p : infos) parts.add(new TopicPartition(p.topic(), p.partition()));
      }
      consumer.assign(parts);
      consumer.seekToBeginning(parts);
      Map<TopicPartition, Long> end = consumer.endOffsets(parts, Duration.ofMillis(
          Math.max(1, deadline - System.currentTimeMillis())));
      while (true) {
        boolean done = true;
        for (TopicPartition tp : parts) {
          if (consumer.position(tp) < end.get(tp)) { done = false; break; }
        }
        if (done) break;
        if (System.currentTimeMillis() > deadline) {
          for (TopicPartition tp : parts) {
            out.println("T\t" + tp.topic() + "\t" + tp.partition() + "\t" + consumer.position(tp)
                + "\t" + end.get(tp));
          }
          out.flush();
          System.exit(3);
        }
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
          StringBuilder line = new StringBuilder("R\t");
          line.append(r.topic()).append('\t').append(r.partition()).append('\t')
              .append(r.offset()).append('\t').append(r.timestamp()).append('\t')
              .append(r.timestampType().name()).append('\t').append(b64(r.key())).append('\t')
              .append(b64(r.value())).append('\t');
          boolean first = true;
          for (Header h : r.headers()) {
            if (!first) line.append(',');
            first = false;
            line.append(b64(h.key().getBytes("UTF-8"))).append(':').append(b64(h.value()));
          }
          out.println(line);
        }
      }
      for (TopicPartition tp : parts) {
        out.println("E\t" + tp.topic() + "\t" + tp.partition() + "\t" + end.get(tp));
      }
      if (!args[2].equals("-")) {
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e
            : consumer.committed(new HashSet<>(parts)).entrySet()) {
          if (e.getValue() != null) {
            out.println("C\t" + e.getKey().topic() + "\t" + e.getKey().partition() + "\t"
                + e.getValue().offset());
          }
        }
      }
    }
    out.flush();
  }
}
"""


@dataclass(frozen=True)
class JavaRecord:
    """A record as the Java consumer saw it."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    timestamp_type: str
    """``CreateTime`` or ``LogAppendTime``."""
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass
class JavaReadBack:
    """What one run of the Java reader printed."""

    records: list[JavaRecord] = field(default_factory=list)
    end_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    """(topic, partition) → the end (``read_committed``: last stable) offset read up to."""
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    """(topic, partition) → the group's committed offset, when a group was given."""

    def of(self, topic: str, partition: int | None = None) -> list[JavaRecord]:
        """The records of ``topic`` (and ``partition``), in offset order per partition."""
        return [
            r
            for r in self.records
            if r.topic == topic and (partition is None or r.partition == partition)
        ]


def _unb64(text: str) -> bytes | None:
    return None if text == "-" else base64.b64decode(text)


def compile_reader(libs: Path) -> Path:
    """The folder holding the compiled reader (compiled against ``libs`` on first use)."""
    return compile_java({f"{_CLASS}.java": _SOURCE}, libs)


def java_read(
    libs: Path,
    config: Mapping[str, str],
    topics: Sequence[str],
    *,
    isolation_level: str = "read_committed",
    group: str | None = None,
    timeout_s: float = 30.0,
) -> JavaReadBack:
    """Read ``topics`` whole with the Java consumer of the jars in ``libs``; ``config`` holds
    the connection settings (Java names). Raises :class:`ApacheKafkaError` with what the
    consumer printed when it did not reach the end offsets within ``timeout_s``."""
    classes = compile_reader(libs)
    java = require_java()
    with tempfile.TemporaryDirectory(prefix="kclient-read-") as work:
        props = Path(work) / "consumer.properties"
        settings = {**config, "isolation.level": isolation_level, "fetch.max.wait.ms": "50"}
        props.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        command = [
            java,
            *JVM_OPTIONS,
            *class_data_sharing(libs),  # the archive's class path first, the reader after
            "-cp",
            f"{libs}/*:{classes}",
            _CLASS,
            str(props),
            str(int(timeout_s * 1000)),
            group or "-",
            *topics,
        ]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout_s + 30, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise ApacheKafkaError(f"the Java reader of {list(topics)} hung") from exc
    if done.returncode != 0:
        raise ApacheKafkaError(
            f"the Java reader of {list(topics)} exited with {done.returncode}:\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )
    return parse_output(done.stdout)


def parse_output(text: str) -> JavaReadBack:
    """What the Java reader printed, parsed."""
    result = JavaReadBack()
    for line in text.splitlines():
        kind, *fields = line.split("\t")
        if kind == "R":
            topic, partition, offset, timestamp, ts_type, key, value, headers = fields
            pairs = []
            for item in filter(None, headers.split(",")):
                name, _, data = item.partition(":")
                pairs.append(((_unb64(name) or b"").decode(), _unb64(data)))
            result.records.append(
                JavaRecord(
                    topic,
                    int(partition),
                    int(offset),
                    int(timestamp),
                    ts_type,
                    _unb64(key),
                    _unb64(value),
                    tuple(pairs),
                )
            )
        elif kind == "E":
            result.end_offsets[fields[0], int(fields[1])] = int(fields[2])
        elif kind == "C":
            result.committed[fields[0], int(fields[1])] = int(fields[2])
    return result
