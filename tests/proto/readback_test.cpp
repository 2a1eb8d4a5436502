// The read-back's JSON (fencecheck/proto/readback.h): counter writes have fields of their own
// (issue 14), chunk writes are unchanged, and read-backs kept from older runs still read.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <limits>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fencecheck/proto/readback.h"

using namespace fencecheck;

namespace {

ReadBack one_of_each() {
  ReadBack rb;
  rb.resource = "store";
  rb.fencing = "per-key";
  rb.log.push_back(AcceptedWrite{1, "ledger", 0, 2, 7, "w2"});
  rb.log.push_back(AcceptedWrite{2, "hits", kNoSlot, kNoSlot, 7, "w2", WriteKind::kCounter, 5});
  rb.rejections.push_back(RejectedWrite{"ledger", 0, 3, 6, "w1", 7});
  rb.rejections.push_back(RejectedWrite{"hits", kNoSlot, kNoSlot, 6, "w1", 7, WriteKind::kCounter, 5});
  rb.high_water = {{"hits", 7}, {"ledger", 7}};
  return rb;
}

}  // namespace

TEST(ReadBackJson, CounterWritesHaveKindAndValueAndChunkWritesAreUnchanged) {
  const nlohmann::json j = to_json(one_of_each());
  EXPECT_EQ(j.at("log"), nlohmann::json::parse(R"([
      {"seq":1,"key":"ledger","segment":0,"chunk":2,"token":7,"client":"w2"},
      {"seq":2,"key":"hits","kind":"counter","value":5,"token":7,"client":"w2"}])"));
  EXPECT_EQ(j.at("rejections"), nlohmann::json::parse(R"([
      {"key":"ledger","segment":0,"chunk":3,"token":6,"client":"w1","high_water":7},
      {"key":"hits","kind":"counter","value":5,"token":6,"client":"w1","high_water":7}])"));

  const ReadBack back = readback_from_json(j);
  ASSERT_EQ(back.log.size(), 2u);
  EXPECT_EQ(back.log[0].kind, WriteKind::kChunk);
  EXPECT_EQ(back.log[0].segment, 0);
  EXPECT_EQ(back.log[0].chunk, 2);
  EXPECT_EQ(back.log[0].value, 0);
  EXPECT_EQ(back.log[1].kind, WriteKind::kCounter);
  EXPECT_EQ(back.log[1].value, 5);
  EXPECT_EQ(back.log[1].segment, kNoSlot);
  EXPECT_EQ(back.log[1].chunk, kNoSlot);
  ASSERT_EQ(back.rejections.size(), 2u);
  EXPECT_EQ(back.rejections[1].kind, WriteKind::kCounter);
  EXPECT_EQ(back.rejections[1].value, 5);
  EXPECT_EQ(back.rejections[1].high_water, 7);
  EXPECT_EQ(to_json(back), j);  // round trip
}

// A readback.json written before issue 14 (kept in an old run directory, read by fencecheck
// report) showed a counter write as chunk -1 with the value in segment: it reads as the same
// counter write, and writes back in today's form.
TEST(ReadBackJson, AnOlderReadBackShowingCountersAsChunkMinusOneStillReads) {
  const auto old = nlohmann::json::parse(R"({"resource":"store","fencing":"per-key","chunks":[],
      "log":[{"seq":1,"key":"ledger","segment":0,"chunk":2,"token":7,"client":"w2"},
             {"seq":2,"key":"hits","segment":5,"chunk":-1,"token":7,"client":"w2"}],
      "rejections":[{"key":"ledger","segment":0,"chunk":3,"token":6,"client":"w1","high_water":7},
                    {"key":"hits","segment":5,"chunk":-1,"token":6,"client":"w1","high_water":7}],
      "high_water":{"hits":7,"ledger":7}})");
  const ReadBack rb = readback_from_json(old);
  ASSERT_EQ(rb.log.size(), 2u);
  EXPECT_EQ(rb.log[1].kind, WriteKind::kCounter);
  EXPECT_EQ(rb.log[1].value, 5);
  EXPECT_EQ(rb.log[1].segment, kNoSlot);
  EXPECT_EQ(rb.rejections[1].kind, WriteKind::kCounter);
  EXPECT_EQ(rb.rejections[1].value, 5);
  EXPECT_EQ(rb.log[0].kind, WriteKind::kChunk);
  EXPECT_EQ(to_json(rb), to_json(one_of_each()));
}

TEST(ReadBackJson, ABadKindOrACounterWithoutValueIsNamed) {
  auto with_log = [](const char* entry) {
    return nlohmann::json::parse(std::string(R"({"log":[)") + entry + "]}");
  };
  auto error_of = [](const nlohmann::json& j) {
    try {
      (void)readback_from_json(j);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(with_log(R"({"seq":1,"key":"k","kind":"queue","value":1,"token":1,"client":"w"})")),
            R"(log entry: field 'kind' is "queue"; expected "chunk" or "counter")");
  EXPECT_EQ(error_of(with_log(R"({"seq":1,"key":"k","kind":"counter","token":1,"client":"w"})")),
            "log entry: missing field 'value'");
  EXPECT_EQ(error_of(with_log(R"({"seq":1,"key":"k","kind":7,"token":1,"client":"w"})")),
            "log entry: field 'kind' has the wrong type");
  EXPECT_EQ(error_of(with_log(R"({"seq":1,"key":"k","chunk":0,"token":1,"client":"w"})")),
            "log entry: missing field 'segment'");
  // "kind":"chunk" spelled out is a chunk write, even at chunk -1 (only the old, kind-less form
  // is taken for a counter).
  const ReadBack rb = readback_from_json(with_log(R"({"seq":1,"key":"k","kind":"chunk","segment":0,"chunk":-1,"token":1,"client":"w"})"));
  EXPECT_EQ(rb.log.at(0).kind, WriteKind::kChunk);
}

// ---- the streamed read and write (a long run's read-back without its DOM) -----------------------

namespace {

// What a read of `text` gives: the read-back's JSON, or the error's class and message.
std::string outcome_of(const std::function<ReadBack()>& read) {
  try {
    return "ok " + to_json(read()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const ReadBackSyntaxError& e) {
    return std::string("syntax: ") + e.what();
  } catch (const nlohmann::json::exception& e) {
    return std::string("json: ") + e.what();
  } catch (const std::invalid_argument& e) {
    return std::string("invalid: ") + e.what();
  }
}

// Whatever json::parse() throws (a syntax error, also a number beyond double: out_of_range 406)
// is "not valid JSON" to the callers, and ReadBackSyntaxError from the streamed read.
std::string document_outcome(const std::string& text) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return std::string("syntax: ") + e.what();
  }
  return outcome_of([&] { return readback_from_json(doc); });
}

std::string streamed_outcome(const std::string& text) {
  return outcome_of([&] { return readback_from_json_text(text); });
}

/// read_readback_file() of `text` with its log handed to a sink (a vector, which a repeated "log"
/// member clears), the sink's entries then put back as the read-back's log.
std::string sink_outcome(const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("fencecheck-readback-sink-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path, std::ios::binary) << text;
  std::vector<AcceptedWrite> log;
  const ReadBackLogSink sink{[&](AcceptedWrite&& w) { log.push_back(std::move(w)); }, [&] { log.clear(); }};
  std::string out = outcome_of([&] {
    ReadBack rb = read_readback_file(path, sink);
    EXPECT_TRUE(rb.log.empty()) << text;
    rb.log = log;
    return rb;
  });
  std::filesystem::remove(path);
  return out;
}

ReadBack everything() {
  ReadBack rb = one_of_each();
  rb.chunks.push_back(StoredChunk{"ledger", 0, 2, 7, "w2", 1, std::string("\x00\xff\n\"", 4)});
  rb.chunks.push_back(StoredChunk{"a\"b\\c\n", 1, 0, 9, "w\t3", 4, "plain"});
  rb.effects.push_back(EffectRecord{"ledger", "seg1", 7, "w2", 3, true, "fenced"});
  rb.effects.push_back(EffectRecord{"ledger", "seg1", 6, "w1", 4, false, ""});
  rb.counters = {{"hits", 5}, {"z", -3}};
  rb.high_water["\xc3\xa9t\xc3\xa9"] = 11;
  rb.log.push_back(AcceptedWrite{3, "bad\xff utf8", 2, 0, 8, "w\xfe"});
  return rb;
}

}  // namespace

// write_readback_json() is the document's dump(2), byte for byte: with and without the optional
// members, empty arrays and maps, bytes that need escaping and bytes that are not UTF-8 (replaced,
// as RunDirectory::write_json does).
TEST(ReadBackJsonStreamed, TheWriterIsByteForByteTheDocumentsDump) {
  ReadBack empty;
  ReadBack only_scalars;
  only_scalars.resource = "postgres";
  only_scalars.fencing = "none";
  ReadBack no_optional = everything();
  no_optional.effects.clear();
  no_optional.counters.clear();
  for (const ReadBack& rb : {empty, only_scalars, one_of_each(), no_optional, everything()}) {
    std::ostringstream out;
    write_readback_json(out, rb);
    EXPECT_EQ(out.str(), to_json(rb).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    // Every indent (compact for an HTTP reply), and the store's form with both optional members.
    for (int indent : {-1, 0, 1, 4}) {
      for (bool always : {false, true}) {
        nlohmann::json doc = to_json(rb);
        if (always) {
          if (!doc.contains("effects")) doc["effects"] = nlohmann::json::array();
          if (!doc.contains("counters")) doc["counters"] = nlohmann::json::object();
        }
        std::ostringstream styled;
        write_readback_json(styled, rb, ReadBackJsonStyle{indent, always});
        EXPECT_EQ(styled.str(), doc.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace))
            << "indent " << indent << (always ? ", always" : "");
      }
    }
  }
  std::ostringstream out;
  write_readback_json(out, everything());
  EXPECT_NE(out.str().find("\"a\\\"b\\\\c\\n\""), std::string::npos);  // escaped, not raw
  EXPECT_NE(out.str().find("\"effects\": [\n    {\n      \"applied\": true,"), std::string::npos);
}

// readback_from_json_text() gives what the whole document gives: the same read-back, or the same
// error, the first one in readback_from_json()'s order even where the text has another earlier.
// Read-back texts for comparing the ways of reading one: every kind of error, in each array and
// in two at once, repeated members, values beyond int64.
std::vector<std::string> streamed_cases() {
  std::ostringstream written;
  write_readback_json(written, everything());
  const std::string log_ok = R"({"seq":1,"key":"k","segment":0,"chunk":1,"token":2,"client":"w"})";
  return {
      written.str(),
      to_json(one_of_each()).dump(),
      "{}",
      R"({"resource":"store","log":[]})",
      // an error in each array, and in two at once: the document checks chunks, log, rejections,
      // high_water, effects, counters in that order, whatever order the text has
      R"({"log":[)" + log_ok + R"(,{"seq":2}]})",
      R"({"log":[{"seq":"x"}],"chunks":[{"key":"k"}]})",
      R"({"rejections":[{"key":1}],"log":[{"seq":2}]})",
      R"({"effects":[{"key":"k"}],"high_water":{"k":"x"}})",
      R"({"counters":{"k":1.5},"effects":[7]})",
      R"({"effects":[{"key":"k","id":"i","token":1,"client":"c","seq":1,"applied":"yes"}]})",
      R"({"chunks":[{"key":"k","segment":0,"chunk":0,"token":1,"client":"c","seq":1,"data_b64":"@@"}]})",
      // elements that are not objects, arrays that are not arrays, nesting that is not an element
      R"({"log":[1,"x",null,[{"seq":1}]]})",
      R"({"log":{"a":[{"seq":1}]}})",
      R"({"log":7,"chunks":"x"})",
      R"({"high_water":{"k":[{"seq":1}]}})",
      R"({"other":[{"seq":1}],"log":[)" + log_ok + "]}",
      // a repeated member: the document keeps the last one
      R"({"log":[{"seq":"bad"}],"log":[)" + log_ok + "]}",
      R"({"log":[)" + log_ok + R"(],"log":[]})",
      R"({"log":[)" + log_ok + R"(],"log":5})",
      // not an object, not JSON, a mistyped scalar
      R"([{"log":[{"seq":1}]}])",
      "7",
      R"({"log":[)",
      R"({"log":[1e400]})",
      R"({"resource":5})",
      // a high-water mark or a counter beyond int64 is refused, not wrapped around
      R"({"high_water":{"k":18446744073709551615}})",
      R"({"counters":{"k":9223372036854775808}})",
      R"({"high_water":{"k":-9223372036854775808},"counters":{"k":9223372036854775807}})",
      R"({"log":[{"seq":18446744073709551615,"key":"k","segment":0,"chunk":1,"token":2,"client":"w"}]})",
  };
}

TEST(ReadBackJsonStreamed, TheStreamedReadGivesTheDocumentsResultAndItsFirstError) {
  const std::vector<std::string> texts = streamed_cases();
  for (const std::string& text : texts) EXPECT_EQ(streamed_outcome(text), document_outcome(text)) << text;
  EXPECT_EQ(streamed_outcome(texts[6]), "invalid: log entry: missing field 'key'");  // log before rejections
  EXPECT_EQ(streamed_outcome(texts[16]), document_outcome(texts[16]));
  EXPECT_EQ(readback_from_json_text(texts[16]).log.size(), 1u);
  EXPECT_TRUE(streamed_outcome("{\"log\":[").starts_with("syntax: "));
  EXPECT_EQ(streamed_outcome(R"({"high_water":{"k":18446744073709551615}})"),
            "invalid: read-back: high_water['k'] must be an integer in -2^63..2^63-1");
  EXPECT_EQ(streamed_outcome(R"({"counters":{"k":9223372036854775808}})"),
            "invalid: read-back: counters['k'] must be an integer in -2^63..2^63-1");
  EXPECT_EQ(streamed_outcome(R"({"resource":5})"), "invalid: read-back: field 'resource' must be a string");
  EXPECT_EQ(streamed_outcome(R"({"fencing":[]})"), "invalid: read-back: field 'fencing' must be a string");
  EXPECT_EQ(streamed_outcome(texts[10]), "invalid: chunk: field 'data_b64' is not base64: base64 text length 2 is not a multiple of 4");
  EXPECT_EQ(readback_from_json_text(R"({"high_water":{"k":-9223372036854775808}})").high_water.at("k"),
            std::numeric_limits<std::int64_t>::min());
}

// The document the parser keeps has the arrays empty: their elements were converted and dropped
// as they came (what keeps a long run's read-back at its own size). `inspect` sees that document
// before anything is checked, and what it throws is what the read throws.
TEST(ReadBackJsonStreamed, ElementsAreNotKeptInTheDocumentAndInspectSeesItFirst) {
  std::ostringstream written;
  write_readback_json(written, everything());
  nlohmann::json seen;
  const ReadBack rb = readback_from_json_text(written.str(), [&](const nlohmann::json& top) { seen = top; });
  EXPECT_EQ(rb.log.size(), 3u);
  EXPECT_EQ(rb.chunks.size(), 2u);
  EXPECT_EQ(seen.at("log"), nlohmann::json::array());
  EXPECT_EQ(seen.at("chunks"), nlohmann::json::array());
  EXPECT_EQ(seen.at("effects"), nlohmann::json::array());
  EXPECT_EQ(seen.at("rejections"), nlohmann::json::array());
  EXPECT_EQ(seen.at("high_water").size(), 3u);
  EXPECT_EQ(seen.at("resource"), "store");
  EXPECT_THROW((void)readback_from_json_text(R"({"log":[{"seq":"x"}]})",
                                             [](const nlohmann::json&) { throw std::invalid_argument("mine"); }),
               std::invalid_argument);
  try {
    (void)readback_from_json_text(R"({"log":[{"seq":"x"}]})",
                                  [](const nlohmann::json&) { throw std::invalid_argument("mine"); });
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "mine");
  }
}

// read_readback_file() reads what write_readback_json() wrote (a run's readback.json), and names
// a path it cannot open.
TEST(ReadBackJsonStreamed, AFileWrittenElementByElementReadsBackTheSame) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("fencecheck-readback-test-" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(path);
    write_readback_json(out, everything());
    out << '\n';
  }
  EXPECT_EQ(to_json(read_readback_file(path)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
            to_json(readback_from_json(nlohmann::json::parse(std::ifstream(path)))).dump(
                -1, ' ', false, nlohmann::json::error_handler_t::replace));
  std::filesystem::remove(path);
  try {
    (void)read_readback_file(path);
    ADD_FAILURE() << "no error for a missing file";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::no_such_file_or_directory);
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
  // A directory opens; its reads fail: named as a read error, not as a text that ended early.
  std::filesystem::create_directory(path);
  try {
    (void)read_readback_file(path);
    ADD_FAILURE() << "no error for a directory";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::is_a_directory);
    EXPECT_NE(std::string(e.what()).find("cannot read " + path.string()), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

// The writer with the log's entries from elsewhere (LogEntries: what the orchestrator does with a
// packed log) writes the same bytes as with them in rb.log, at any indent, empty log included.
TEST(ReadBackJsonStreamed, TheWriterWithTheLogFromElsewhereWritesTheSameBytes) {
  ReadBack many = everything();
  for (std::int64_t i = 0; i < 100; ++i) many.log.push_back(AcceptedWrite{i + 10, "k", i, i % 4, i, "w"});
  for (const ReadBack& rb : {everything(), one_of_each(), ReadBack{}, many}) {
    ReadBack without = rb;
    without.log.clear();
    const LogEntries entries = [&](const std::function<void(const AcceptedWrite&)>& each) {
      for (const AcceptedWrite& w : rb.log) each(w);
    };
    for (int indent : {-1, 0, 2, 4})
      for (bool always : {false, true}) {
        std::ostringstream want, got;
        write_readback_json(want, rb, ReadBackJsonStyle{indent, always});
        write_readback_json(got, without, ReadBackJsonStyle{indent, always}, entries);
        EXPECT_EQ(got.str(), want.str()) << "indent " << indent << ", log of " << rb.log.size();
      }
  }
}

// read_readback_stream reads an open stream from where it stands (a reply spilled to a file), and
// names the stream in a read error.
TEST(ReadBackJsonStreamed, AStreamIsReadFromWhereItStands) {
  std::ostringstream written;
  write_readback_json(written, everything());
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::tmpfile(), &std::fclose);
  ASSERT_TRUE(f);
  const std::string text = "prefix that is not JSON" + written.str();
  ASSERT_EQ(std::fwrite(text.data(), 1, text.size(), f.get()), text.size());
  ASSERT_EQ(std::fseek(f.get(), 23, SEEK_SET), 0);
  std::vector<AcceptedWrite> log;
  const ReadBackLogSink sink{[&](AcceptedWrite&& w) { log.push_back(std::move(w)); }, [&] { log.clear(); }};
  ReadBack rb = read_readback_stream(f.get(), "the spilled reply", {}, &sink);
  EXPECT_TRUE(rb.log.empty());
  rb.log = log;
  auto text_of = [](const ReadBack& r) { return to_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); };
  EXPECT_EQ(text_of(rb), text_of(everything()));
  // A stream opened for writing only: its reads fail, named as a read error of `name`.
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> w(std::fopen("/dev/null", "wb"), &std::fclose);
  ASSERT_TRUE(w);
  try {
    (void)read_readback_stream(w.get(), "the spilled reply");
    ADD_FAILURE() << "no error for a stream that cannot be read";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read the spilled reply"), std::string::npos) << e.what();
  }
}

// With a log sink, the entries go to the sink (a repeated "log" member clears it) and the rest is
// read as before: the same read-back once the sink's entries are put back, or the same error.
TEST(ReadBackJsonStreamed, WithALogSinkTheLogGoesThereAndTheResultIsTheSame) {
  for (const std::string& text : streamed_cases()) EXPECT_EQ(sink_outcome(text), document_outcome(text)) << text;
  std::ostringstream written;
  write_readback_json(written, everything());
  EXPECT_EQ(sink_outcome(written.str()), document_outcome(written.str()));
  EXPECT_TRUE(sink_outcome(written.str()).starts_with("ok"));
  try {
    (void)read_readback_file("/nonexistent", ReadBackLogSink{[](AcceptedWrite&&) {}, {}});
    ADD_FAILURE() << "no error for a sink without clear";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("add and clear"), std::string::npos) << e.what();
  }
}

// The streamed read gathers each array in blocks of 32,768 elements and moves them into one vector
// at the end: more than two blocks' worth reads back in order, and a repeated member drops the
// blocks of the first one.
TEST(ReadBackJsonStreamed, ALogOfSeveralBlocksReadsBackInOrder) {
  ReadBack rb;
  for (std::int64_t i = 1; i <= 70'001; ++i)
    rb.log.push_back(AcceptedWrite{i, "k" + std::to_string(i % 7), i % 3, i % 5, i, "w" + std::to_string(i % 11)});
  std::ostringstream out;
  write_readback_json(out, rb, ReadBackJsonStyle{-1, false});
  const ReadBack back = readback_from_json_text(out.str());
  ASSERT_EQ(back.log.size(), 70'001u);
  EXPECT_EQ(back.log[32'767].seq, 32'768);
  EXPECT_EQ(back.log[32'768].seq, 32'769);
  EXPECT_EQ(back.log.back().seq, 70'001);
  EXPECT_EQ(back.log[65'536].key, "k" + std::to_string(65'537 % 7));
  EXPECT_EQ(to_json(back), to_json(rb));
  // {"log":[70,001 entries],"log":[one]}: the document keeps the last member, and so does the read.
  std::string twice = out.str();
  twice.pop_back();
  twice += R"(,"log":[{"seq":9,"key":"x","segment":0,"chunk":0,"token":1,"client":"w"}]})";
  const ReadBack last = readback_from_json_text(twice);
  ASSERT_EQ(last.log.size(), 1u);
  EXPECT_EQ(last.log[0].seq, 9);
}

// ---- Rows of keys the run did not write (issue 34)

namespace {

ReadBack with_foreign_rows() {
  ReadBack rb;
  rb.resource = "postgres";
  rb.chunks = {StoredChunk{"ledger", 0, 0, 3, "w1", 1, "x"}, StoredChunk{"us-2", 0, 0, 900, "team", 0, "{}"},
               StoredChunk{"us-2", 0, 1, 900, "team", 0, "{}"}};
  rb.log = {AcceptedWrite{1, "us-2", 0, 0, 900, "team"}, AcceptedWrite{2, "ledger", 0, 0, 3, "w1"}};
  rb.rejections = {RejectedWrite{"us-2", 0, 0, 1, "team", 900}};
  rb.high_water = {{"ledger", 3}, {"us-2", 900}, {"eu-1", 7}};
  rb.counters = {{"hits", 4}};
  return rb;
}

}  // namespace

TEST(IgnoredRows, DropForeignRowsKeepsOnlyTheRunsKeysAndCountsEveryOtherRow) {
  ReadBack rb = with_foreign_rows();
  drop_foreign_rows(rb, {"ledger", "hits"});
  ASSERT_EQ(rb.chunks.size(), 1u);
  EXPECT_EQ(rb.chunks[0].key, "ledger");
  ASSERT_EQ(rb.log.size(), 1u);
  EXPECT_EQ(rb.log[0].seq, 2) << "seqs are kept as the resource gave them";
  EXPECT_TRUE(rb.rejections.empty());
  EXPECT_EQ(rb.high_water, (std::map<std::string, std::int64_t>{{"ledger", 3}}));
  EXPECT_EQ(rb.counters, (std::map<std::string, std::int64_t>{{"hits", 4}}));
  using Parts = std::map<std::string, std::int64_t>;
  EXPECT_EQ(rb.ignored.keys.at("us-2"), (Parts{{"read_back", 2}, {"accept_log", 1}, {"rejections", 1}, {"high_water", 1}}));
  EXPECT_EQ(rb.ignored.keys.at("eu-1"), (Parts{{"high_water", 1}}));
  EXPECT_EQ(rb.ignored.rows(), 6);
  EXPECT_EQ(rb.ignored.summary(), "ignored 6 rows of 2 keys the run did not write: eu-1, us-2");
  // The run's own keys only: nothing to drop, nothing reported.
  ReadBack own = with_foreign_rows();
  drop_foreign_rows(own, {"ledger", "us-2", "eu-1", "hits"});
  EXPECT_TRUE(own.ignored.empty());
  EXPECT_EQ(own.ignored.summary(), "");
}

TEST(IgnoredRows, TheLogFilterHandsOnTheRunsEntriesAndForgetsCountsWithTheLog) {
  std::vector<AcceptedWrite> kept;
  int clears = 0;
  ReadBackLogSink inner{[&](AcceptedWrite&& w) { kept.push_back(std::move(w)); }, [&] {
                          kept.clear();
                          ++clears;
                        }};
  IgnoredRows ignored;
  const std::set<std::string> keys{"ledger"};
  ReadBackLogSink sink = foreign_row_log_filter(inner, keys, ignored);
  sink.add(AcceptedWrite{1, "us-2", 0, 0, 9, "team"});
  sink.clear();  // "log" again: the counts of the entries dropped with it go too
  EXPECT_TRUE(ignored.empty());
  sink.add(AcceptedWrite{1, "us-2", 0, 0, 9, "team"});
  sink.add(AcceptedWrite{2, "ledger", 0, 0, 3, "w1"});
  sink.add(AcceptedWrite{3, "us-2", 0, 1, 9, "team"});
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].key, "ledger");
  EXPECT_EQ(clears, 1);
  EXPECT_EQ(ignored.keys.at("us-2").at("accept_log"), 2);
}

TEST(IgnoredRows, ReadBackJsonCarriesThemAndOmitsThemWhenNone) {
  ReadBack rb = with_foreign_rows();
  drop_foreign_rows(rb, {"ledger", "hits"});
  rb.ignored.add_not_counted("read_back");
  const nlohmann::json j = to_json(rb);
  EXPECT_EQ(j.at("ignored").at("keys").at("us-2").at("read_back"), 2);
  EXPECT_EQ(j.at("ignored").at("not_counted"), nlohmann::json::array({"read_back"}));
  const ReadBack back = readback_from_json(j);
  EXPECT_EQ(back.ignored.keys, rb.ignored.keys);
  EXPECT_EQ(back.ignored.not_counted, rb.ignored.not_counted);
  std::ostringstream streamed;
  write_readback_json(streamed, rb);
  EXPECT_EQ(streamed.str(), j.dump(2)) << "the streamed writer spells the same document";
  const ReadBack parsed = readback_from_json_text(streamed.str());
  EXPECT_EQ(parsed.ignored.keys, rb.ignored.keys);
  EXPECT_EQ(rb.ignored.summary(),
            "ignored 6 rows of 2 keys the run did not write: eu-1, us-2; rows of other keys not read (not counted) in "
            "read_back");
  EXPECT_FALSE(to_json(with_foreign_rows()).contains("ignored"));
  EXPECT_THROW((void)readback_from_json(nlohmann::json::parse(R"({"ignored":{"keys":{"a":{"read_back":-1}}}})")),
               std::invalid_argument);
}
