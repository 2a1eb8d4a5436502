// The read-back's JSON (fencecheck/proto/readback.h): counter writes have fields of their own
// (issue 14), chunk writes are unchanged, and read-backs kept from older runs still read.
#include <stdexcept>

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
