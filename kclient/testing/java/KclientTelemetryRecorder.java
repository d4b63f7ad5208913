import java.io.*;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.Metric;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.MetricsData;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ScopeMetrics;

/**
 * kclient's test receiver of client metrics (KIP-714) for Apache Kafka 4.x: a broker metric
 * reporter (metric.reporters) whose exporter appends each push to the file named by the broker
 * setting kclient.telemetry.file, one line per push, tab-separated: client instance id,
 * terminating, content type, push interval ms, the payload in base64, and the metric names
 * Kafka's own (shaded) OpenTelemetry classes read from it ("!" and the error if they could not).
 */
public class KclientTelemetryRecorder implements MetricsReporter, ClientTelemetryExporterProvider {
  private File file;

  @Override public void configure(Map<String, ?> configs) {
    Object path = configs.get("kclient.telemetry.file");
    if (path == null) throw new IllegalArgumentException("kclient.telemetry.file is not set");
    file = new File(path.toString());
  }

  @Override public void init(List<KafkaMetric> metrics) {}
  @Override public void metricChange(KafkaMetric metric) {}
  @Override public void metricRemoval(KafkaMetric metric) {}
  @Override public void close() {}

  @Override public ClientTelemetryExporter clientTelemetryExporter() {
    return this::export;
  }

  private synchronized void export(ClientTelemetryContext context, ClientTelemetryPayload payload) {
    ByteBuffer buffer = payload.data().duplicate();
    byte[] bytes = new byte[buffer.remaining()];
    buffer.get(bytes);
    String names;
    try {
      StringBuilder joined = new StringBuilder();
      for (ResourceMetrics rm : MetricsData.parseFrom(bytes).getResourceMetricsList()) {
        for (ScopeMetrics sm : rm.getScopeMetricsList()) {
          for (Metric m : sm.getMetricsList()) {
            if (joined.length() > 0) joined.append(',');
            joined.append(m.getName());
          }
        }
      }
      names = joined.toString();
    } catch (Exception e) {
      names = "!" + e.toString().replace('\t', ' ').replace('\n', ' ');
    }
    String line = payload.clientInstanceId() + "\t" + payload.isTerminating() + "\t"
        + payload.contentType() + "\t" + context.pushIntervalMs() + "\t"
        + Base64.getEncoder().encodeToString(bytes) + "\t" + names + "\n";
    try (Writer out = new OutputStreamWriter(new FileOutputStream(file, true), StandardCharsets.UTF_8)) {
      out.write(line);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
