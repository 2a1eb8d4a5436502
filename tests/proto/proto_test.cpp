// Unit tests for the shared protocol: token parsing, the event schema, the chunk codec, base64.
#include <gtest/gtest.h>

#include "fencecheck/proto/base64.h"
#include "fencecheck/proto/chunk.h"
#include "fencecheck/proto/event.h"
#include "fencecheck/proto/token.h"

using namespace fencecheck;

TEST(Token, ParsesDecimalUpToInt64Max) {
  auto p = parse_token("9223372036854775807");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.token.value(), 9223372036854775807LL);
  EXPECT_EQ(parse_token("34").token, FencingToken(34));
  EXPECT_LT(FencingToken(33), FencingToken(34));
}

TEST(Token, RejectsEachBadFormWithItsReason) {
  EXPECT_NE(parse_token("").error.find("empty"), std::string::npos);
  EXPECT_NE(parse_token("-3").error.find("negative"), std::string::npos);
  EXPECT_NE(parse_token("12a").error.find("not a number"), std::string::npos);
  EXPECT_NE(parse_token(" 12").error.find("not a number"), std::string::npos);
  EXPECT_NE(parse_token("9223372036854775808").error.find("2^63"), std::string::npos);
  EXPECT_FALSE(parse_token("+5").ok);
}

TEST(Event, RoundTripsEveryField) {
  Event e;
  e.t_ns = 10;
  e.src_ns = 9;
  e.source = "w1";
  e.kind = EventKind::kWriteFail;
  e.token = 33;
  e.high_water = 34;
  e.key = "ledger";
  e.segment = 1;
  e.chunk = 2;
  e.detail = "stale";
  Event back = event_from_json_line(to_json_line(e));
  EXPECT_EQ(back.kind, EventKind::kWriteFail);
  EXPECT_EQ(back.token, 33);
  EXPECT_EQ(back.high_water, 34);
  EXPECT_EQ(back.key, "ledger");
  EXPECT_EQ(back.segment, 1);
  EXPECT_EQ(back.chunk, 2);
  EXPECT_EQ(back.source, "w1");
  EXPECT_EQ(back.t_ns, 10);
  EXPECT_FALSE(back.lease_id.has_value());
  EXPECT_EQ(to_json_line(e).find("lease_id"), std::string::npos);
}

TEST(Event, EveryKindHasAUniqueWireName) {
  for (int k = 0; k <= static_cast<int>(EventKind::kProtocolError); ++k) {
    auto kind = static_cast<EventKind>(k);
    auto back = kind_from_name(kind_name(kind));
    ASSERT_TRUE(back.has_value()) << kind_name(kind);
    EXPECT_EQ(*back, kind);
  }
}

TEST(Event, BadLinesSayWhatIsWrong) {
  EXPECT_THROW((void)event_from_json_line("{"), std::invalid_argument);
  try {
    (void)event_from_json_line(R"({"kind":"write.maybe"})");
    FAIL();
  } catch (const std::invalid_argument& err) {
    EXPECT_NE(std::string(err.what()).find("write.maybe"), std::string::npos);
  }
  EXPECT_THROW((void)event_from_json_line(R"({"kind":"write.ok","token":"34"})"), std::invalid_argument);
}

TEST(Chunk, EncodesProvenanceAndDecodesIt) {
  ChunkHeader h{"w1", 34, "ledger", 1, 2};
  std::string bytes = encode_chunk(h, 256);
  EXPECT_EQ(bytes.size(), 256u);
  auto d = decode_chunk(bytes);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.header, h);
}

TEST(Chunk, DetectsCorruptionAndTornWrites) {
  std::string bytes = encode_chunk({"w2", 7, "k", 0, 3}, 64);
  std::string flipped = bytes;
  flipped[10] = flipped[10] == '7' ? '8' : '7';
  auto d = decode_chunk(flipped);
  EXPECT_FALSE(d.ok);
  EXPECT_NE(d.error.find("checksum mismatch"), std::string::npos);
  EXPECT_FALSE(decode_chunk(bytes.substr(0, bytes.size() - 3)).ok);
  EXPECT_FALSE(decode_chunk("hello").ok);
}

TEST(Chunk, RejectsUnsafeNames) {
  EXPECT_THROW((void)encode_chunk({"w 1", 1, "k", 0, 0}), std::invalid_argument);
  EXPECT_THROW((void)encode_chunk({"w1", 1, "", 0, 0}), std::invalid_argument);
  EXPECT_THROW((void)encode_chunk({"w1", -1, "k", 0, 0}), std::invalid_argument);
}

TEST(Crc32, MatchesTheStandardCheckValue) {
  EXPECT_EQ(crc32("123456789"), 0xCBF43926u);  // the CRC-32/ISO-HDLC check value
}

TEST(Base64, RoundTripsAndRejectsGarbage) {
  EXPECT_EQ(base64_encode("mylock"), "bXlsb2Nr");
  EXPECT_EQ(base64_decode("bXlsb2NrLzIwNDBhMjJiZmIwOTJjMDY="), "mylock/2040a22bfb092c06");
  EXPECT_EQ(base64_decode(base64_encode(std::string("\0\xff\x01", 3))), std::string("\0\xff\x01", 3));
  EXPECT_THROW((void)base64_decode("b$ls"), std::invalid_argument);
  EXPECT_THROW((void)base64_decode("abc"), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// The worker protocol (docs/worker-protocol.md): what the harness accepts on a worker's channel.

#include "fencecheck/proto/worker_protocol.h"

namespace {

struct LineCase {
  const char* name;
  std::string line;
  bool first;
  std::string error;  // "" = accepted
  std::string field;
};

const LineCase kLineCases[] = {
    {"Hello", R"({"kind":"hello","protocol":1})", true, "", ""},
    {"FirstLineNotHello", R"({"kind":"acquire.ok","token":5,"lock_key":"l/1"})", true,
     R"(the first line must be {"kind":"hello","protocol":1}, got kind 'acquire.ok')", "kind"},
    {"SecondHello", R"({"kind":"hello","protocol":1})", false, "a second hello (hello is the first line only)", "kind"},
    {"OtherVersion", R"({"kind":"hello","protocol":2})", true,
     "speaks worker protocol version 2; this harness speaks 1", "protocol"},
    {"HelloWithoutVersion", R"({"kind":"hello"})", true, "hello has no field 'protocol'", "protocol"},
    {"NotJson", "acquired the lock!", false, "", ""},  // error text is nlohmann's: checked by prefix below
    {"NotAnObject", "[1,2]", false, R"(not a JSON object (each line is one event: {"kind": ...}))", ""},
    {"NoKind", R"({"token":5})", false, "has no string field 'kind'", "kind"},
    {"UnknownKind", R"({"kind":"write.done","key":"k","token":5})", false, "unknown kind 'write.done'", "kind"},
    {"HarnessKind", R"({"kind":"lock.grant","token":5})", false,
     "kind 'lock.grant' is the harness's own, not one a worker sends", "kind"},
    {"AcquireOkWithoutToken", R"({"kind":"acquire.ok","lock_key":"l/1"})", false, "acquire.ok has no field 'token'", "token"},
    {"AcquireOkWithoutLockKey", R"({"kind":"acquire.ok","token":5})", false, "acquire.ok has no field 'lock_key'", "lock_key"},
    {"TokenNotAnInteger", R"({"kind":"write.ok","key":"k","token":"5"})", false,
     "write.ok: field 'token' must be an integer", "token"},
    {"TokenAFloat", R"({"kind":"write.invoke","key":"k","token":5.5})", false,
     "write.invoke: field 'token' must be an integer", "token"},
    {"WriteWithoutKey", R"({"kind":"write.fail","token":5})", false, "write.fail has no field 'key'", "key"},
    {"EmptyKey", R"({"kind":"write.fail","key":"","token":5})", false, "write.fail: field 'key' is empty", "key"},
    {"ReleaseWithoutLockKey", R"({"kind":"release.ok","token":5})", false, "release.ok has no field 'lock_key'", "lock_key"},
    {"PauseWithoutDuration", R"({"kind":"pause"})", false, "pause has no field 'duration_ns'", "duration_ns"},
    {"WriteOk", R"({"kind":"write.ok","key":"k","token":5,"segment":0,"chunk":1,"high_water":5,"extra":"ignored"})", false, "", ""},
    {"JobDoneBare", R"({"kind":"job.done"})", false, "", ""},
    {"GaveUp", R"({"kind":"job.gave_up","detail":"fenced out: 10 acquisitions, each token below the mark","token":5})", false, "", ""},
    {"GaveUpWithoutReason", R"({"kind":"job.gave_up","token":5})", false, "job.gave_up has no field 'detail'", "detail"},
    {"GaveUpWithAnEmptyReason", R"({"kind":"job.gave_up","detail":""})", false, "job.gave_up: field 'detail' is empty", "detail"},
    {"LogLine", R"({"kind":"log","detail":"hi"})", false, "", ""},
};

class WorkerLineTest : public ::testing::TestWithParam<LineCase> {};

TEST_P(WorkerLineTest, AcceptsOrNamesTheProblem) {
  const LineCase& c = GetParam();
  const WorkerLine r = read_worker_line(c.line, c.first);
  if (std::string(c.name) == "NotJson") {
    EXPECT_FALSE(r.event);
    EXPECT_EQ(r.error.rfind("not JSON: ", 0), 0u) << r.error;
    return;
  }
  if (c.error.empty()) {
    ASSERT_TRUE(r.event) << r.error;
    EXPECT_TRUE(r.error.empty());
  } else {
    EXPECT_FALSE(r.event);
    EXPECT_EQ(r.error, c.error);
    EXPECT_EQ(r.field, c.field);
  }
}

INSTANTIATE_TEST_SUITE_P(EachLine, WorkerLineTest, ::testing::ValuesIn(kLineCases),
                         [](const ::testing::TestParamInfo<LineCase>& p) { return p.param.name; });

TEST(WorkerProtocol, AcceptedLinesCarryTheirFields) {
  const WorkerLine r = read_worker_line(R"({"kind":"write.ok","key":"k","token":5,"segment":2,"chunk":1,"high_water":7})", false);
  ASSERT_TRUE(r.event);
  EXPECT_EQ(r.event->kind, EventKind::kWriteOk);
  EXPECT_EQ(r.event->token, 5);
  EXPECT_EQ(r.event->segment, 2);
  EXPECT_EQ(r.event->high_water, 7);
  EXPECT_EQ(read_worker_line(R"({"kind":"hello","protocol":1})", true).event->protocol, 1);
}

TEST(WorkerProtocol, OnlyTheHarnessSendsItsOwnKinds) {
  for (auto k : {EventKind::kWorkerExit, EventKind::kFaultInject, EventKind::kFaultHeal, EventKind::kLockGrant,
                 EventKind::kLockDelete, EventKind::kRunStart, EventKind::kRunEnd, EventKind::kProtocolError})
    EXPECT_FALSE(worker_may_send(k)) << kind_name(k);
  for (auto k : {EventKind::kHello, EventKind::kAcquireOk, EventKind::kWriteInfo, EventKind::kJobDone, EventKind::kPause,
                 EventKind::kJobGaveUp, EventKind::kLog})
    EXPECT_TRUE(worker_may_send(k)) << kind_name(k);
}

}  // namespace
