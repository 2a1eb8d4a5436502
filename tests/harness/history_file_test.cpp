// history.jsonl.zst: compress_history(), for_each_history_line() and load_history_jsonl() on
// compressed histories (history.h). A long run's history is replaced by its zstd form at the end
// of the run; everything that reads a run directory must read it back event for event.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <cstdint>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/harness/history.h"

using namespace fencecheck;
using namespace fencecheck::harness;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / "fencecheck-history-file-test" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spill(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

/// A history shaped like a soak's: holders taking turns, writes with tokens, keepalives, a
/// rejection now and then (n events).
History soak_like(std::size_t n) {
  History h;
  for (std::size_t i = 0; h.size() < n; ++i) {
    const std::string w = "w" + std::to_string(i % 7 + 1);
    const std::int64_t token = 1000 + static_cast<std::int64_t>(i);
    Event e;
    e.t_ns = 1'000'000'000 + static_cast<std::int64_t>(h.size()) * 1'234'567;
    e.src_ns = e.t_ns - 3'000;
    e.source = w;
    e.kind = EventKind::kAcquireOk;
    e.lock = "fencecheck/soak";
    e.lock_key = "fencecheck/soak/" + std::to_string(0x694d8a1f00000000LL + token);
    e.lease_id = 0x694d8a1f00000000LL + token;
    e.token = token;
    e.ttl_ms = 2000;
    h.add(e);
    for (int c = 0; c < 4 && h.size() < n; ++c) {
      Event wi = e;
      wi.kind = c == 3 && i % 5 == 0 ? EventKind::kWriteFail : EventKind::kWriteOk;
      wi.t_ns += (c + 1) * 100'000'000;
      wi.key = "ledger-" + std::to_string(i % 13);
      wi.segment = token * 4 + c;
      wi.chunk = c;
      if (wi.kind == EventKind::kWriteFail) wi.high_water = token + 3;
      h.add(wi);
    }
  }
  return h;
}

std::vector<std::string> lines_of(const History& h) {
  std::vector<std::string> out;
  for (const auto& e : h) out.push_back(to_json_line(e));
  return out;
}

}  // namespace

TEST(CompressedHistory, ReplacesThePlainFileAndReadsBackEveryEvent) {
  const fs::path dir = fresh_dir("roundtrip");
  const History h = soak_like(6'000);
  save_history_jsonl(dir / kHistoryFile, h);
  const auto plain_size = fs::file_size(dir / kHistoryFile);
  EXPECT_EQ(history_file(dir), dir / kHistoryFile);

  const CompressedHistory c = compress_history(dir / kHistoryFile);
  EXPECT_EQ(c.path, dir / kCompressedHistoryFile);
  EXPECT_EQ(c.plain_bytes, plain_size);
  EXPECT_EQ(c.compressed_bytes, fs::file_size(dir / kCompressedHistoryFile));
  EXPECT_LT(c.compressed_bytes * 4, c.plain_bytes) << "a soak's history compresses well; far less would mean no compression";
  EXPECT_FALSE(fs::exists(dir / kHistoryFile)) << "the plain file is replaced";
  EXPECT_FALSE(fs::exists(dir / "history.jsonl.zst.tmp"));
  EXPECT_EQ(history_file(dir), dir / kCompressedHistoryFile);

  // Read by its own name, and by the plain name (the .zst sibling is found).
  for (const fs::path& p : {dir / kCompressedHistoryFile, dir / kHistoryFile}) {
    const History back = load_history_jsonl(p);
    ASSERT_EQ(back.size(), h.size()) << p;
    EXPECT_EQ(lines_of(back), lines_of(h)) << p;
  }
  // It is a standard zstd frame with its size unknown up front (streamed) and a checksum: the
  // library's own one-shot decoder gives back the plain bytes exactly.
  const std::string zst = slurp(dir / kCompressedHistoryFile);
  std::string plain(plain_size, '\0');
  const std::size_t n = ZSTD_decompress(plain.data(), plain.size(), zst.data(), zst.size());
  ASSERT_FALSE(ZSTD_isError(n)) << ZSTD_getErrorName(n);
  EXPECT_EQ(n, plain_size);
  std::string expected;
  for (const auto& l : lines_of(h)) expected += l + "\n";
  EXPECT_EQ(plain, expected);
}

TEST(CompressedHistory, ConcatenatedFramesLongLinesAndNoFinalNewlineReadAsPlainText) {
  // What `zstd a b > c` or an append of compressed pieces gives: several frames, one after the
  // other. A line of 300 KB crosses every buffer boundary; the last line has no '\n'.
  const fs::path dir = fresh_dir("frames");
  const std::string long_detail(300'000, 'x');
  const std::string line1 = R"({"t_ns":1,"source":"harness","kind":"run.start"})";
  const std::string line2 = R"({"t_ns":2,"source":"w1","kind":"log","detail":")" + long_detail + R"("})";
  const std::string line4 = R"({"t_ns":3,"source":"harness","kind":"run.end"})";
  // Frames cut mid-line: the first ends inside line 2.
  const std::vector<std::string> pieces = {line1 + "\n" + line2.substr(0, 1000), line2.substr(1000) + "\r\n\n", line4};
  std::string zst;
  for (const auto& p : pieces) {
    std::string frame(ZSTD_compressBound(p.size()), '\0');
    const std::size_t n = ZSTD_compress(frame.data(), frame.size(), p.data(), p.size(), 1);
    ASSERT_FALSE(ZSTD_isError(n));
    zst.append(frame.data(), n);
  }
  spill(dir / "h.jsonl.zst", zst);
  std::vector<std::pair<std::size_t, std::size_t>> seen;  // (line number, length)
  for_each_history_line(dir / "h.jsonl.zst", [&](std::string_view line, std::size_t number) { seen.emplace_back(number, line.size()); });
  using Seen = std::vector<std::pair<std::size_t, std::size_t>>;
  EXPECT_EQ(seen, (Seen{{1, line1.size()}, {2, line2.size()}, {3, 0}, {4, line4.size()}}))
      << "the \\r of a \\r\\n is not part of the line; an empty line is still a line";
  const History h = load_history_jsonl(dir / "h.jsonl.zst");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[1].detail, long_detail);
  EXPECT_EQ(h[2].kind, EventKind::kRunEnd);
}

TEST(CompressedHistory, DamageIsNamedWithTheFileAndTheLinesReadBeforeIt) {
  const fs::path dir = fresh_dir("damage");
  save_history_jsonl(dir / kHistoryFile, soak_like(5'000));
  const fs::path zst = compress_history(dir / kHistoryFile).path;
  const std::string good = slurp(zst);

  // A flipped byte in the middle: zstd's block decoding or, at the latest, the frame's checksum
  // finds it. (Read as lines only: a parse of the damaged lines could fail first.)
  std::string flipped = good;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x5a);
  spill(zst, flipped);
  try {
    for_each_history_line(zst, [](std::string_view, std::size_t) {});
    FAIL() << "a damaged history was read";
  } catch (const HistoryError& e) {
    EXPECT_EQ(e.file(), zst.string());
    EXPECT_THAT(e.message(), HasSubstr("the compressed history is damaged: ")) << e.what();
  }

  // Cut short: the frame never ends.
  spill(zst, good.substr(0, good.size() * 2 / 3));
  try {
    (void)load_history_jsonl(zst);
    FAIL() << "a truncated history loaded";
  } catch (const HistoryError& e) {
    EXPECT_EQ(e.file(), zst.string());
    EXPECT_EQ(e.message(), "the compressed history is truncated: it ends in the middle of a zstd frame") << e.what();
    EXPECT_GT(e.line(), 100u) << "the lines before the cut were read";
  }

  // Not zstd at all (a plain history renamed).
  spill(zst, R"({"t_ns":1,"source":"harness","kind":"run.start"})" "\n");
  try {
    (void)load_history_jsonl(zst);
    FAIL() << "plain text read as zstd";
  } catch (const HistoryError& e) {
    EXPECT_EQ(e.line(), 0u);
    EXPECT_EQ(std::string(e.what()), zst.string() + ": the compressed history is damaged: Unknown frame descriptor");
  }
}

TEST(CompressedHistory, AnEmptyHistoryAndAMissingFile) {
  const fs::path dir = fresh_dir("edge");
  spill(dir / kHistoryFile, "");
  const CompressedHistory c = compress_history(dir / kHistoryFile);
  EXPECT_EQ(c.plain_bytes, 0u);
  EXPECT_GT(c.compressed_bytes, 0u) << "a frame header and checksum";
  EXPECT_TRUE(load_history_jsonl(dir / kHistoryFile).empty());

  try {
    (void)compress_history(dir / "nothing.jsonl");
    FAIL() << "compressed a missing file";
  } catch (const HistoryError& e) {
    EXPECT_THAT(e.what(), HasSubstr("nothing.jsonl: cannot open the history to compress it: No such file or directory"));
  }
  EXPECT_FALSE(fs::exists(dir / "nothing.jsonl.zst"));
  EXPECT_FALSE(fs::exists(dir / "nothing.jsonl.zst.tmp"));
  EXPECT_EQ(history_file(dir / "no-such-run"), dir / "no-such-run" / kHistoryFile);
}

TEST(ForEachHistoryEventIf, ParsesOnlyTheWantedLinesAtTheirOwnIndicesBlankLinesAndCompressionAlike) {
  // A soak-like history with blank lines, plain and compressed: the wanted lines are parsed and
  // given at the index for_each_history_event gives them; an unwanted bad line is never parsed.
  const fs::path dir = fresh_dir("if");
  const History h = soak_like(2'000);
  std::string text;
  for (std::size_t i = 0; i < h.size(); ++i) text += to_json_line(h[i]) + (i % 97 == 0 ? "\n\n" : "\n");
  spill(dir / kHistoryFile, text);
  const fs::path zst = dir / "copy.jsonl.zst";
  spill(dir / "copy.jsonl", text);
  compress_history(dir / "copy.jsonl");
  for (const fs::path& file : {dir / kHistoryFile, zst}) {
    std::vector<std::size_t> acquires;
    for_each_history_event_if(
        file, [](std::size_t, std::string_view line) { return line_may_be_kind(line, std::vector{EventKind::kAcquireOk}); },
        [&](std::size_t index, Event&& e) {
          EXPECT_EQ(e.kind, EventKind::kAcquireOk) << index;  // the write lines are not parsed
          EXPECT_EQ(to_json_line(e), to_json_line(h[index])) << index;
          acquires.push_back(index);
        });
    std::vector<std::size_t> expected;
    for (std::size_t i = 0; i < h.size(); ++i)
      if (h[i].kind == EventKind::kAcquireOk) expected.push_back(i);
    EXPECT_EQ(acquires, expected) << file;
    EXPECT_EQ(acquires.size(), 400u);
  }
  // A bad line that is not wanted is skipped; wanted, it is named with its file and line.
  spill(dir / "bad.jsonl", to_json_line(h[0]) + "\n{not json\n" + to_json_line(h[1]) + "\n");
  std::size_t parsed = 0;
  for_each_history_event_if(
      dir / "bad.jsonl", [](std::size_t index, std::string_view) { return index != 1; },
      [&](std::size_t, Event&&) { ++parsed; });
  EXPECT_EQ(parsed, 2u);
  try {
    for_each_history_event_if(
        dir / "bad.jsonl", [](std::size_t, std::string_view) { return true; }, [](std::size_t, Event&&) {});
    ADD_FAILURE() << "no error for a bad wanted line";
  } catch (const HistoryError& err) {
    EXPECT_THAT(err.what(), HasSubstr("bad.jsonl:2"));
  }
}

TEST(LineMayBeKind, FalseOnlyWhenEveryKindKeyNamesAnotherKindAndNoEscapeIsInTheLine) {
  Event e;
  e.kind = EventKind::kWriteOk;
  e.source = "w1";
  e.key = "ledger";
  const std::string ok = to_json_line(e);
  EXPECT_TRUE(line_may_be_kind(ok, std::vector{EventKind::kWriteOk}));
  EXPECT_FALSE(line_may_be_kind(ok, std::vector{EventKind::kAcquireOk, EventKind::kLockDelete}));
  EXPECT_TRUE(line_may_be_kind(ok, std::vector{EventKind::kAcquireOk, EventKind::kWriteOk}));
  const std::vector acquire{EventKind::kAcquireOk};
  // A kind spelled with a JSON escape is still a candidate (parsed, then judged by its kind).
  EXPECT_TRUE(line_may_be_kind(R"({"kind":"acquire\u002eok","source":"w1"})", acquire));
  EXPECT_TRUE(line_may_be_kind(R"({"kind":"write.ok","detail":"a\"b"})", acquire));
  // A kind's name inside another field does not make a candidate: only "kind" keys are read.
  EXPECT_FALSE(line_may_be_kind(R"({"kind":"write.ok","detail":"after acquire.ok"})", acquire));
  EXPECT_FALSE(line_may_be_kind(R"({"detail":"kind","kind":"write.ok"})", acquire));  // "kind" as a value
  // White space around the ':' (JSON allows it; the writer never writes it).
  EXPECT_TRUE(line_may_be_kind("{\"kind\" \t:  \"acquire.ok\"}", acquire));
  EXPECT_FALSE(line_may_be_kind("{\"kind\" : \"write.ok\"}", acquire));
  // A repeated key: the last one wins in the parser, so any one of them naming a wanted kind is enough.
  EXPECT_TRUE(line_may_be_kind(R"({"kind":"write.ok","kind":"acquire.ok"})", acquire));
  EXPECT_TRUE(line_may_be_kind(R"({"kind":"acquire.ok","kind":"write.ok"})", acquire));
  EXPECT_TRUE(line_may_be_kind(R"({"kind":"write.ok","kind":"write.ok"})", acquire));  // unsure: not read further
  EXPECT_TRUE(line_may_be_kind(R"({"x":{"kind":"write.ok"},"kind":"write.ok"})", acquire));  // nested: unsure too
  // No "kind" key, or one whose value is not a plain string: the parser must say what the line is.
  EXPECT_TRUE(line_may_be_kind(R"({"source":"w1"})", acquire));
  EXPECT_TRUE(line_may_be_kind(R"({"kind":7})", acquire));
  EXPECT_TRUE(line_may_be_kind(R"({"kind":null,"detail":"x"})", acquire));
  EXPECT_TRUE(line_may_be_kind(R"({"kind":"acquire.ok)", acquire));  // cut short
  EXPECT_TRUE(line_may_be_kind("", acquire));
  // The parser's verdict on every line the test calls false: not an event of those kinds, or no event.
  const std::vector<std::string> lines = {
      ok, R"({"kind":"lock.grant","lock_key":"acquire.ok"})",
      R"({"kind":"acquire.okk"})", R"({"kind":"acquire.o"})", R"({ "kind" : "release.ok" , "token" : 3 })"};
  for (const std::string& line : lines) {
    EXPECT_FALSE(line_may_be_kind(line, acquire)) << line;
    try {
      EXPECT_NE(event_from_json_line(line).kind, EventKind::kAcquireOk) << line;
    } catch (const std::invalid_argument&) {
    }
  }
}

TEST(ScanLineField, ReadsAPlainStringOrIntegerAndIsUnsureOfAnythingElse) {
  using W = LineField;
  const std::string line = R"({"t_ns":5,"source":"w1","kind":"acquire.ok","lock_key":"lock/42","token":-17,"detail":"lock_key"})";
  EXPECT_EQ(scan_line_field(line, "lock_key").what, W::kString);
  EXPECT_EQ(scan_line_field(line, "lock_key").text, "lock/42");  // the value "lock_key" of detail is not the key
  EXPECT_EQ(scan_line_field(line, "token").what, W::kInteger);
  EXPECT_EQ(scan_line_field(line, "token").text, "-17");
  EXPECT_EQ(scan_line_field(line, "t_ns").text, "5");
  EXPECT_EQ(scan_line_field(line, "revision").what, W::kAbsent);
  EXPECT_EQ(scan_line_field(R"({ "lock_key" :	"k" })", "lock_key").text, "k");  // JSON's white space
  // Unsure: an escape anywhere, a repeated or nested key, null, an object, a cut line.
  EXPECT_EQ(scan_line_field(R"({"lock_key":"k","detail":"a\"b"})", "lock_key").what, W::kUnsure);
  EXPECT_EQ(scan_line_field(R"({"lock_key":"a","lock_key":"b"})", "lock_key").what, W::kUnsure);
  EXPECT_EQ(scan_line_field(R"({"x":{"token":1},"token":2})", "token").what, W::kUnsure);
  EXPECT_EQ(scan_line_field(R"({"token":null})", "token").what, W::kUnsure);
  EXPECT_EQ(scan_line_field(R"({"token":{"a":1}})", "token").what, W::kUnsure);
  EXPECT_EQ(scan_line_field(R"({"token":)", "token").what, W::kUnsure);
  EXPECT_EQ(scan_line_field(R"({"lock_key":"cut)", "lock_key").what, W::kUnsure);
  // A key only inside a nested value is not the line's (the reviewer's case: a job.done whose
  // token is nested has no token), so anything nested makes the look unsure.
  EXPECT_EQ(scan_line_field(R"({"kind":"job.done","x":{"token":99}})", "token").what, W::kUnsure);
  EXPECT_EQ(scan_line_field(R"({"kind":"job.done","x":[{"token":99}]})", "token").what, W::kUnsure);
  EXPECT_EQ(scan_line_field(R"({"kind":"job.done","x":[1]})", "kind").what, W::kUnsure);
  // first_only trusts the caller that no key is there twice (a line the fast path parsed before).
  EXPECT_EQ(scan_line_field(R"({"lock_key":"a","lock_key":"b"})", "lock_key", true).text, "a");
  EXPECT_EQ(scan_line_field(R"({"lock_key":"a","detail":"x"})", "lock_key", true).text, "a");
  EXPECT_EQ(scan_line_field(R"({"lock_key":"a\"b"})", "lock_key", true).what, W::kUnsure);  // escapes still looked for
  EXPECT_EQ(scan_line_field(R"({"detail":"x"})", "lock_key", true).what, W::kAbsent);
  // Whatever it says of a field, the parser agrees on every line of a soak-like history.
  const History h = soak_like(500);
  for (const Event& e : h) {
    const std::string text = to_json_line(e);
    const LineField key = scan_line_field(text, "lock_key");
    if (e.lock_key.empty()) {
      EXPECT_EQ(key.what, W::kAbsent) << text;
    } else {
      EXPECT_EQ(key.what, W::kString) << text;
      EXPECT_EQ(key.text, e.lock_key) << text;
    }
    const LineField token = scan_line_field(text, "token");
    if (e.token) {
      EXPECT_EQ(token.what, W::kInteger) << text;
      EXPECT_EQ(token.text, std::to_string(*e.token)) << text;
    } else {
      EXPECT_EQ(token.what, W::kAbsent) << text;
    }
  }
}

TEST(PackedEvent, EveryFieldRoundTripsExactlyWhateverItsValueAndEventsFollowOneAnother) {
  // pack_event keeps what analyze_history_file caught as evidence: each field must come back as
  // it was, absent optionals and empty strings included, at the int64 extremes, with any bytes.
  std::mt19937_64 rng(2026);
  const std::int64_t extremes[] = {0, 1, -1, 63, 64, -64, -65, 127, 128, INT64_MAX, INT64_MIN, INT64_MIN + 1};
  const auto number = [&] {
    return rng() % 3 == 0 ? extremes[rng() % std::size(extremes)] : static_cast<std::int64_t>(rng());
  };
  const auto text = [&] {
    std::string s(rng() % 4 == 0 ? 0 : rng() % 300, '\0');
    for (char& c : s) c = static_cast<char>(rng());  // any bytes, NUL and invalid UTF-8 too
    return s;
  };
  std::vector<Event> events;
  std::string packed;
  std::vector<std::size_t> starts;
  for (int round = 0; round < 2000; ++round) {
    Event e;
    e.kind = static_cast<EventKind>(rng() % (static_cast<int>(EventKind::kProtocolError) + 1));
    e.t_ns = number();
    e.src_ns = number();
    for (auto* o : {&e.token, &e.high_water, &e.lease_id, &e.revision, &e.segment, &e.chunk, &e.duration_ns, &e.ttl_ms,
                    &e.protocol, &e.line_no})
      if (rng() % 2 == 0) *o = number();
    for (auto* s : {&e.source, &e.lock, &e.lock_key, &e.key, &e.fault, &e.target, &e.detail, &e.line}) *s = text();
    starts.push_back(packed.size());
    const std::size_t n = pack_event(e, packed);
    EXPECT_EQ(n, packed.size() - starts.back());
    events.push_back(std::move(e));
  }
  for (std::size_t i = 0; i < events.size(); ++i)
    EXPECT_EQ(unpack_event(std::string_view(packed).substr(starts[i])), events[i]) << "event " << i;

  // Every field set: an event's packed form is every field's bytes and a few more, not its JSON.
  Event grant;
  grant.kind = EventKind::kLockGrant;
  grant.t_ns = 1'700'000'000'000'000'000;
  grant.src_ns = grant.t_ns - 500;
  grant.lease_id = grant.token = grant.revision = 12'345'678;
  grant.source = "lock";
  grant.lock = "lock-k7";
  grant.lock_key = "lock-k7/12345678";
  std::string one;
  // kind 1, presence 2 + 2, t_ns and src_ns 9 each (a zigzag 62-bit value), three 24-bit numbers
  // 4 each, the strings' lengths 1 each and their 4 + 7 + 16 bytes.
  EXPECT_EQ(pack_event(grant, one), 65u);
  EXPECT_LT(one.size(), to_json_line(grant).size() / 2);

  // Cut short, or not a kind: an error, never a read past the bytes.
  for (std::size_t n = 0; n < one.size(); ++n)
    EXPECT_THROW((void)unpack_event(std::string_view(one).substr(0, n)), std::invalid_argument) << n << " bytes";
  EXPECT_THROW((void)unpack_event(std::string("\xff\0\0\0\0\0\0", 7)), std::invalid_argument);
}

TEST(LineLook, AgreesWithAJsonParserOnRandomFlatLinesWhoseNamesAndValuesShareLetters) {
  // LineLook looks for a name's least common letter (kind's 'd', lock_key's 'y'), so names and
  // values built of the same letters, before and after the key, at the very start and end of the
  // line, must not fool it. One look answers for every field, as scan_line_field does alone.
  const std::vector<std::string> names = {"kind", "dkind", "kindd", "kin", "lock_key", "key", "lock", "token",
                                          "revision", "d", "y", "kk"};
  std::mt19937_64 rng(7);
  for (int round = 0; round < 3000; ++round) {
    nlohmann::json j = nlohmann::json::object();
    const std::size_t fields = rng() % 6;
    for (std::size_t f = 0; f < fields; ++f) {
      const std::string& name = names[rng() % names.size()];
      if (rng() % 2 == 0) j[name] = static_cast<std::int64_t>(rng() % 2000) - 1000;
      else j[name] = names[rng() % names.size()] + (rng() % 2 == 0 ? "" : ":" + names[rng() % names.size()]);
    }
    const std::string line = j.dump();  // flat, no escapes, each key once
    const LineLook look(line), first(line, true);
    for (const std::string& name : names) {
      const LineField got = look.field(name);
      EXPECT_EQ(first.field(name).what, got.what) << line << " " << name;
      EXPECT_EQ(scan_line_field(line, name).what, got.what) << line << " " << name;
      if (!j.contains(name)) {
        EXPECT_EQ(got.what, LineField::kAbsent) << line << " " << name;
      } else if (j[name].is_string()) {
        EXPECT_EQ(got.what, LineField::kString) << line << " " << name;
        EXPECT_EQ(got.text, j[name].get<std::string>()) << line << " " << name;
      } else {
        EXPECT_EQ(got.what, LineField::kInteger) << line << " " << name;
        EXPECT_EQ(got.text, std::to_string(j[name].get<std::int64_t>())) << line << " " << name;
      }
    }
  }
  // The key at the very start of the text, and cut short right after it.
  EXPECT_EQ(LineLook(R"("kind":"x")").field("kind").text, "x");
  EXPECT_EQ(LineLook(R"({"kind":)").field("kind").what, LineField::kUnsure);  // a key without its value
  EXPECT_EQ(LineLook(R"({"kind")").field("kind").what, LineField::kAbsent);   // a string that is no key: not a valid line
  EXPECT_EQ(LineLook(R"({"kin)").field("kind").what, LineField::kAbsent);
}
