// The history line parser (issue 16): the production event_from_json_line (simdjson ondemand,
// workers/proto/src/event_simdjson.cpp) against the reference, nlohmann-json
// (detail::event_from_json_line_nlohmann), on the unusual lines (tests/support/event_parsers.h),
// every line of the fuzz corpora and regressions, and mutated lines: the same Event, field for
// field, or the same std::invalid_argument. And the writer's lines must take the fast path.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../support/event_parsers.h"
#include "fencecheck/proto/event.h"

namespace {

using fencecheck::Event;
using fencecheck::EventKind;
using fencecheck::event_from_json_line;
using fencecheck::testing::compare_event_parsers;

/// An Event with every field set, strings with escapes and non-ASCII text.
Event full_event(EventKind kind) {
  Event e;
  e.t_ns = 6192909540505;
  e.src_ns = -7;
  e.source = "w1";
  e.kind = kind;
  e.token = 9223372036854775807;
  e.high_water = 3;
  e.lease_id = 167092972530941447;
  e.revision = 2;
  e.segment = 0;
  e.chunk = 1;
  e.duration_ns = 6000000000;
  e.ttl_ms = 2000;
  e.protocol = 1;
  e.line_no = 12;
  e.lock = "fencecheck/sigstop-past-lease";
  e.lock_key = "fencecheck/sigstop-past-lease/251a22c582bbe07";
  e.key = "ledger";
  e.fault = "sigstop";
  e.target = "w2";
  e.detail = "token 2 is below \"3\"\\ of key 'ledger'\n\tcaf\xc3\xa9 \xf0\x9f\x98\x80";
  e.line = std::string("{\"kind\":\x01}\0tail", 15);
  return e;
}

/// Every '\n'-separated line of every file under `dir` (recursively), without the '\n'.
std::vector<std::string> lines_under(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<std::string> lines;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::size_t start = 0;
    while (start <= text.size()) {
      const std::size_t nl = std::min(text.find('\n', start), text.size());
      lines.push_back(text.substr(start, nl - start));
      start = nl + 1;
    }
  }
  return lines;
}

/// The history lines of the report corpus (each input: history.jsonl, then readback.json).
std::vector<std::string> corpus_history_lines() {
  std::vector<std::string> out;
  for (const std::string& line : lines_under(std::filesystem::path(FENCECHECK_FUZZ_DIR) / "corpus" / "report")) {
    if (line.rfind("{\"", 0) == 0 && line.find("\"kind\":") != std::string::npos) out.push_back(line);
  }
  return out;
}

TEST(EventParse, WriterLinesOfEveryKindTakeTheFastPathAndRoundTrip) {
  for (int k = 0; k <= static_cast<int>(EventKind::kProtocolError); ++k) {
    const Event e = full_event(static_cast<EventKind>(k));
    const std::string line = fencecheck::to_json_line(e);
    SCOPED_TRACE(line);
    Event fast;
    EXPECT_TRUE(fencecheck::detail::event_from_json_line_fast(line, fast));
    EXPECT_TRUE(fast == e);
    EXPECT_TRUE(event_from_json_line(line) == e);
    EXPECT_EQ(compare_event_parsers(line).difference, "");
  }
  // event_from_padded_line's reused Event (tests/support/event_parsers.h) sets every field, so a
  // field it fails to reset shows: 21 keys in its JSON, none of them at its default.
  EXPECT_EQ(fencecheck::to_json(fencecheck::testing::padded_parse_reused_event()).size(), 21u);
  // A reused Event takes each line's fields and only those, line after line.
  Event reused = fencecheck::testing::padded_parse_reused_event();
  for (int k = 0; k <= static_cast<int>(EventKind::kProtocolError); ++k) {
    const Event e = full_event(static_cast<EventKind>(k));
    std::string buffer = fencecheck::to_json_line(e);
    const std::size_t n = buffer.size();
    buffer.append(fencecheck::kLinePadding, '9');
    event_from_padded_line(std::string_view(buffer.data(), n), reused);
    EXPECT_TRUE(reused == e) << buffer.substr(0, n);
    std::string run_end = R"({"kind":"run.end"})";
    const std::size_t m = run_end.size();
    run_end.append(fencecheck::kLinePadding, '"');
    event_from_padded_line(std::string_view(run_end.data(), m), reused);
    EXPECT_TRUE(reused == Event{.kind = EventKind::kRunEnd});
  }
  // Absent fields stay absent; t_ns and src_ns default to 0.
  const Event minimal = event_from_json_line(R"({"kind":"run.end"})");
  EXPECT_EQ(minimal.kind, EventKind::kRunEnd);
  EXPECT_EQ(minimal.t_ns, 0);
  EXPECT_FALSE(minimal.token.has_value());
  EXPECT_EQ(minimal.detail, "");
}

TEST(EventParse, UnusualLinesGiveTheReferencesEventOrMessage) {
  int fast = 0;
  for (const std::string& line : fencecheck::testing::unusual_event_lines()) {
    const auto c = compare_event_parsers(line);
    EXPECT_EQ(c.difference, "") << "line: " << line;
    fast += c.fast ? 1 : 0;
  }
  // The plain ones among them are the fast path's (nothing after the object but white space).
  EXPECT_GE(fast, 5);
  const Event escaped = event_from_json_line(R"({"kind":"log","detail":"q\"b\\s\/\n\t\u00e9\ud83d\ude00"})");
  EXPECT_EQ(escaped.detail, "q\"b\\s/\n\t\xc3\xa9\xf0\x9f\x98\x80");
  const Event extremes = event_from_json_line(R"({"kind":"log","src_ns":-9223372036854775808,"token":9223372036854775807})");
  EXPECT_EQ(extremes.src_ns, INT64_MIN);
  EXPECT_EQ(extremes.token, INT64_MAX);
  // The reference's own rules, now the production parser's: the last of a repeated key wins, a
  // null is absent, an unknown key is ignored, an integer above INT64_MAX wraps (get<int64_t>).
  EXPECT_EQ(event_from_json_line(R"({"kind":"log","token":1,"token":2})").token, 2);
  EXPECT_EQ(event_from_json_line(R"({"kind":"log","kind":"pause"})").kind, EventKind::kPause);
  EXPECT_FALSE(event_from_json_line(R"({"kind":"log","token":null})").token.has_value());
  EXPECT_EQ(event_from_json_line(R"({"kind":"log","extra":[1,{"a":2}],"token":4})").token, 4);
  EXPECT_EQ(event_from_json_line(R"({"kind":"log","token":18446744073709551615})").token, -1);
}

TEST(EventParse, BadLinesThrowInvalidArgumentNamingTheProblem) {
  const auto message = [](std::string_view line) -> std::string {
    try {
      (void)event_from_json_line(line);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(parsed)";
  };
  EXPECT_EQ(message(R"({"kind":"log","token":1.0})"), "field 'token' must be an integer");
  EXPECT_EQ(message(R"({"kind":"log","token":"5"})"), "field 'token' must be an integer");
  EXPECT_EQ(message(R"({"kind":"log","detail":5})"), "field 'detail' must be a string");
  EXPECT_EQ(message(R"({"kind":"nope"})"), "unknown event kind 'nope'");
  EXPECT_EQ(message(R"({"t_ns":1})"), "event has no string field 'kind'");
  EXPECT_EQ(message(R"([])"), "event is not a JSON object");
  EXPECT_EQ(message(R"({"kind":"log"}{})").rfind("not a JSON event: ", 0), 0U);
  EXPECT_EQ(message("").rfind("not a JSON event: ", 0), 0U);
  // nlohmann reports a number past double's range as out_of_range, not parse_error: still one
  // std::invalid_argument here (it escaped as a json::out_of_range before).
  EXPECT_NE(message(R"({"kind":"log","extra":1e400})").find("number overflow"), std::string::npos);
}

TEST(EventParse, EveryLineOfTheFuzzCorporaAndRegressions) {
  int lines = 0, fast = 0;
  for (const char* sub : {"corpus", "regressions"}) {
    for (const std::string& line : lines_under(std::filesystem::path(FENCECHECK_FUZZ_DIR) / sub)) {
      const auto c = compare_event_parsers(line);
      EXPECT_EQ(c.difference, "") << "line: " << line;
      ++lines;
      fast += c.fast ? 1 : 0;
    }
  }
  EXPECT_GT(lines, 200);
  // The history lines a real run wrote (the report corpus) are all on the fast path.
  const std::vector<std::string> history = corpus_history_lines();
  EXPECT_GE(history.size(), 40U);
  for (const std::string& line : history) {
    Event e;
    EXPECT_TRUE(fencecheck::detail::event_from_json_line_fast(line, e)) << line;
  }
  EXPECT_GE(fast, static_cast<int>(history.size()));
}

TEST(EventParse, MutatedLines) {
  std::vector<std::string> seeds = corpus_history_lines();
  for (int k = 0; k <= static_cast<int>(EventKind::kProtocolError); k += 5)
    seeds.push_back(fencecheck::to_json_line(full_event(static_cast<EventKind>(k))));
  ASSERT_GE(seeds.size(), 40U);
  static constexpr std::string_view kBytes = "\"\\{}[],: 0123456789-+.eEnulltrfasx\x01\x7f\xc3\xa9\xff\xed\xa0";
  std::mt19937_64 rng(16);
  const auto below = [&](std::size_t n) { return static_cast<std::size_t>(rng() % std::max<std::size_t>(n, 1)); };
  int fast = 0, threw = 0, differences = 0;
  constexpr int kLines = 20000;
  for (int i = 0; i < kLines; ++i) {
    std::string line = seeds[below(seeds.size())];
    const int edits = 1 + static_cast<int>(below(3));
    for (int m = 0; m < edits; ++m) {
      const std::size_t at = below(line.size());
      switch (below(6)) {
        case 0:  // a byte flipped to any byte
          line[at] = static_cast<char>(rng() & 0xff);
          break;
        case 1:  // a byte replaced by one of JSON's own
          line[at] = kBytes[below(kBytes.size())];
          break;
        case 2:  // truncated
          line.resize(at);
          break;
        case 3:  // a byte removed
          if (!line.empty()) line.erase(at, 1);
          break;
        case 4:  // a byte of JSON's own put in
          line.insert(at, 1, kBytes[below(kBytes.size())]);
          break;
        default:  // a piece repeated (a repeated key, content after the object)
          line.insert(at, line.substr(below(line.size()), below(24)));
          break;
      }
    }
    const auto c = compare_event_parsers(line);
    if (!c.difference.empty() && ++differences <= 5) ADD_FAILURE() << c.difference << "\n  line: " << line;
    fast += c.fast ? 1 : 0;
    Event ignored;
    try {
      ignored = fencecheck::detail::event_from_json_line_nlohmann(line);
    } catch (const std::invalid_argument&) {
      ++threw;
    }
  }
  EXPECT_EQ(differences, 0);
  // Both sides of the check are exercised: lines the fast path took (and so were compared with
  // the reference's Event: about 9 % of them) and lines the reference refused.
  EXPECT_GE(fast, kLines / 20) << threw << " of " << kLines << " refused";
  EXPECT_GE(threw, kLines / 4) << fast << " of " << kLines << " on the fast path";
}

TEST(EventParse, ThreadsParseAtOnce) {
  const std::vector<std::string> lines = corpus_history_lines();
  ASSERT_FALSE(lines.empty());
  std::vector<Event> expected;
  for (const std::string& line : lines) expected.push_back(fencecheck::detail::event_from_json_line_nlohmann(line));
  std::vector<int> wrong(2, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 200; ++round)
        for (std::size_t i = 0; i < lines.size(); ++i)
          if (!(event_from_json_line(lines[i]) == expected[i])) ++wrong[static_cast<std::size_t>(t)];
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong[0], 0);
  EXPECT_EQ(wrong[1], 0);
}

}  // namespace
