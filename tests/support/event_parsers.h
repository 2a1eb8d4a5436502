// fencecheck tests and benchmarks — the differential check of the history line parser: the
// production event_from_json_line (simdjson ondemand, workers/proto/src/event_simdjson.cpp)
// against the reference detail::event_from_json_line_nlohmann (event.cpp). The one copy for
// tests/proto/event_parse_test.cpp, tests/fuzz/worker_line_fuzz.cpp and
// bench/bench_history_parse.cpp.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fencecheck/proto/event.h"

namespace fencecheck::testing {

/// Malformed and unusual lines fencecheck's writer never produces but a reader must treat as the
/// reference does: escapes, surrogate pairs and lone surrogates, control and invalid UTF-8
/// bytes, a BOM, nulls, repeated and unknown keys, non-integer numbers, integers past int64,
/// content after the object, other top-level values, empty lines.
inline std::vector<std::string> unusual_event_lines() {
  return {
      R"({"kind":"log"})",
      R"(  {"t_ns":1,"src_ns":2,"source":"w1","kind":"write.ok","token":3,"high_water":3}  )",
      R"({"kind":"log","detail":"q\"b\\s\/\n\t\u00e9\ud83d\ude00"})",
      R"({"kind":"log","t_ns":-0,"src_ns":-9223372036854775808,"token":9223372036854775807})",
      R"({"kind":"log","token":9223372036854775808})",
      R"({"kind":"log","token":18446744073709551615})",
      R"({"kind":"log","token":18446744073709551616})",
      R"({"kind":"log","token":-9223372036854775809})",
      R"({"kind":"log","token":1.0})",
      R"({"kind":"log","token":1e3})",
      R"({"kind":"log","token":01})",
      R"({"kind":"log","token":-})",
      R"({"kind":"log","token":"5"})",
      R"({"kind":"log","token":true})",
      R"({"kind":"log","token":null,"detail":null})",
      R"({"kind":"log","detail":5})",
      R"({"kind":"log","source":{"a":1}})",
      R"({"kind":"log","kind":"pause"})",
      R"({"kind":"log","token":1,"token":2})",
      R"({"kind":"log","t\u005fns":5,"t_ns":6})",
      R"({"kind":"log","extra":[1,{"a":2}],"token":4})",
      R"({"kind":"log","extra":01})",
      R"({"kind":"log","extra":1e400})",
      R"({"kind":"log","t\u005fns":5})",
      R"({"kind":"log","detail":"\ud800"})",
      R"({"kind":"log","detail":"\udc00x"})",
      R"({"kind":"log","detail":"\ud800\u0041"})",
      R"({"kind":"log","detail":"\ud800\ue000"})",
      R"({"kind":"log","detail":"\udbff\udfff"})",
      R"({"kind":"log","detail":"\u0000"})",
      R"({"kind":"log","detail":"\x"})",
      R"({"kind":"log","detail":"\u12"})",
      "{\"kind\":\"log\",\"detail\":\"\x01\"}",
      "{\"kind\":\"log\",\"detail\":\"\xff\"}",
      "{\"kind\":\"log\",\"detail\":\"\xed\xa0\x80\"}",
      "{\"kind\":\"log\",\"detail\":\"\xc3\xa9\"}",
      [] {  // a raw NUL byte inside a string
        std::string s = R"({"kind":"log","detail":"a#b"})";
        s[s.find('#')] = '\0';
        return s;
      }(),
      "\xEF\xBB\xBF{\"kind\":\"log\"}",
      R"({"kind":"log",})",
      R"({"kind":"log" "t_ns":1})",
      R"({"kind":"log"} x)",
      R"({"kind":"log"}{})",
      R"({"kind":"log"}})",
      R"({"kind":"log"},)",
      "{\"kind\":\"log\"}\r",
      "{\"kind\":\"log\"}\t\n ",
      R"({"kind":"log")",
      R"({"kind":"log","token":1)",
      R"({"kind":"log","token":12 )",
      R"({"kind":5})",
      R"({"kind":null})",
      R"({"kind":"nope"})",
      R"({"kind":"write.ok "})",
      R"({"t_ns":1})",
      R"({})",
      R"([])",
      R"([{"kind":"log"}])",
      R"("log")",
      "5",
      "null",
      "",
      "   ",
      "nonsense",
  };
}

/// What one parser made of a line: its Event, or the message of the std::invalid_argument it
/// threw; `other` holds the message of any other exception (a broken contract).
struct ParseOutcome {
  std::optional<Event> event;
  std::string invalid_argument;
  std::optional<std::string> other;
};

template <class Parse>
ParseOutcome parse_outcome(Parse&& parse) {
  try {
    return {parse(), {}, std::nullopt};
  } catch (const std::invalid_argument& e) {
    return {std::nullopt, e.what(), std::nullopt};
  } catch (const std::exception& e) {
    return {std::nullopt, {}, std::string(e.what())};
  }
}

/// The two parsers on one line.
struct ParserComparison {
  /// Empty when they agree: the same Event (every field), or both threw std::invalid_argument with
  /// the same message. Else what differs, with both outcomes (Events as to_json_line).
  std::string difference;
  /// Whether the production parser took the line on its simdjson fast path (else it went to the
  /// reference: agreement is then by construction).
  bool fast = false;
};

/// An Event with every field set (none at its default), for event_from_padded_line to reuse: a
/// field it forgets to reset shows as a difference.
inline Event padded_parse_reused_event() {
  Event e;
  e.t_ns = 11, e.src_ns = 12, e.source = "stale-source", e.kind = EventKind::kProtocolError;
  e.token = 1, e.high_water = 2, e.lease_id = 3, e.revision = 4, e.segment = 5, e.chunk = 6;
  e.duration_ns = 7, e.ttl_ms = 8, e.protocol = 9, e.line_no = 10;
  e.lock = "stale-lock", e.lock_key = "stale-lock-key", e.key = "stale-key", e.fault = "stale-fault";
  e.target = "stale-target", e.detail = "a stale detail longer than the small-string buffer", e.line = "stale line";
  return e;
}

/// Runs event_from_json_line (production), detail::event_from_json_line_fast,
/// event_from_padded_line (padded with more JSON, into a reused Event) and
/// detail::event_from_json_line_nlohmann (reference) on `line` and compares them. Thread-safe as
/// the parsers are.
inline ParserComparison compare_event_parsers(std::string_view line) {
  const auto show = [](const ParseOutcome& o) {
    if (o.event) return "Event " + to_json_line(*o.event);
    if (o.other) return "a non-invalid_argument exception: " + *o.other;
    return "std::invalid_argument: " + o.invalid_argument;
  };
  ParserComparison c;
  Event fast_event;
  c.fast = detail::event_from_json_line_fast(line, fast_event);
  const ParseOutcome production = parse_outcome([&] { return event_from_json_line(line); });
  const ParseOutcome reference = parse_outcome([&] { return detail::event_from_json_line_nlohmann(line); });
  // event_from_padded_line, as the history reader calls it: the line in a buffer whose padding
  // holds what a reader's buffer holds after a line (more JSON: quotes, digits, a closing brace),
  // into an Event reused from a line with every field set.
  const ParseOutcome padded = parse_outcome([&] {
    std::string buffer(line);
    while (buffer.size() < line.size() + kLinePadding) buffer += R"(7","token":12345}{"kind":"write.ok"} )";
    Event reused = padded_parse_reused_event();
    event_from_padded_line(std::string_view(buffer.data(), line.size()), reused);
    return reused;
  });
  if (production.other || reference.other || padded.other) {
    c.difference = "an exception other than std::invalid_argument: production " + show(production) + "; reference " +
                   show(reference) + "; padded " + show(padded);
  } else if (production.event != reference.event || production.invalid_argument != reference.invalid_argument) {
    c.difference = "production " + show(production) + "; reference " + show(reference);
  } else if (padded.event != reference.event || padded.invalid_argument != reference.invalid_argument) {
    c.difference = "event_from_padded_line " + show(padded) + "; reference " + show(reference);
  } else if (c.fast && (!production.event || fast_event != *production.event)) {
    c.difference = "the fast path accepted the line as Event " + to_json_line(fast_event) + "; production " +
                   show(production);
  }
  return c;
}

}  // namespace fencecheck::testing
