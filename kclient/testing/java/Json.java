// One JSON line per step of KafkaJavaPeer.

import java.util.*;

/** A JSON object written in insertion order (no JSON library on the class path). */
final class Json {
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
