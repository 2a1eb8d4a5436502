// job.payload: opaque (issue 34, item 4): the bytes a worker writes are the system's own (a
// shipment's JSON), not fencecheck's self-describing chunks. The chunk-byte rule (corrupt-chunk)
// answers unknown with the reason, never invalid and never valid; every other checker judges from
// the resource's token and writer columns, its accept log and the workers' events, and can still
// say invalid. The histories are the smoke scenario's story (history_builder.h), fenced and
// unfenced, with every stored row's bytes replaced by a JSON document of the team's own.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../harness/history_builder.h"
#include "fencecheck/harness/checkers.h"
#include "fencecheck/harness/stream_check.h"
#include "golden_cases.h"

namespace fh = fencecheck::harness;
using fencecheck::ChunkHeader;
using fencecheck::Event;
using fencecheck::ReadBack;

namespace {

/// A row's bytes as a team's worker writes them: its own JSON, nothing of fencecheck's format.
std::string shipment(const fencecheck::StoredChunk& c) {
  return R"({"shipment":"S-)" + std::to_string(c.segment * 10 + c.chunk) + R"(","carrier":"dhl","qty":3})";
}

/// The story with every stored row's bytes replaced by the team's own JSON.
fh::StoryRun with_json_rows(fh::StoryRun r) {
  for (auto& c : r.rb.chunks) c.data = shipment(c);
  return r;
}

/// The scenario's context: two workers, a 2 s lease, the lock of the story, a resource that gives
/// chunks, an accept log and marks (PostgreSQL with its queries: no rejections), and `payload`.
fh::CheckContext context(fh::PayloadMode payload) {
  fh::CheckContext c;
  c.lease_ttl = std::chrono::seconds(2);
  c.lock = fh::kLock;
  c.job_kind = fencecheck::JobKind::kSegments;
  c.workers = {"w1", "w2"};
  c.resource_kind = "postgres";
  c.lock_service_kind = "etcd";
  fencecheck::resources::Evidence e;
  e.rejections = false;
  e.effects = false;
  c.evidence = e;
  c.payload = payload;
  return c;
}

const fh::CheckerResult& result(const fh::CheckRun& run, const std::string& name) {
  for (const auto& r : run.results)
    if (r.name == name) return r;
  throw std::runtime_error("no result for " + name);
}

std::vector<std::string> names(const std::vector<fh::Anomaly>& anomalies) {
  std::vector<std::string> out;
  for (const auto& a : anomalies) out.push_back(a.name);
  return out;
}

TEST(OpaquePayload, JsonRowsAreCorruptChunksOnlyWhenTheScenarioSaysTheBytesAreSelfDescribing) {
  const fh::StoryRun r = with_json_rows(fh::fenced_run());
  // Self-describing (the default): a JSON row does not decode, and that is a finding.
  const fh::CheckRun own = fh::run_checkers(fh::default_checkers(), r.b.h, r.rb, context(fh::PayloadMode::kSelfDescribing));
  const fh::CheckerResult& corrupt = result(own, "corrupt-chunk");
  EXPECT_EQ(corrupt.verdict, fh::Verdict::kInvalid);
  EXPECT_EQ(corrupt.anomalies.size(), r.rb.chunks.size());
  // Opaque: the bytes are the system's own; corrupt-chunk is not run and says why.
  const fh::CheckRun opaque = fh::run_checkers(fh::default_checkers(), r.b.h, r.rb, context(fh::PayloadMode::kOpaque));
  const fh::CheckerResult& unknown = result(opaque, "corrupt-chunk");
  EXPECT_EQ(unknown.verdict, fh::Verdict::kUnknown);
  EXPECT_EQ(unknown.error, "payload: opaque: the bytes are the system's own");
  EXPECT_EQ(unknown.error, fh::kOpaquePayloadReason);
  EXPECT_TRUE(unknown.anomalies.empty());
  EXPECT_TRUE(unknown.evidence.empty()) << "it rests on nothing";
  // Every other checker judged the run from the columns, the log and the events: valid. The
  // combined verdict is unknown, never valid (a checker could not judge).
  for (const auto& res : opaque.results) {
    if (res.name == "corrupt-chunk") continue;
    EXPECT_EQ(res.verdict, fh::Verdict::kValid) << res.name << ": " << res.error;
  }
  EXPECT_EQ(opaque.verdict, fh::Verdict::kUnknown);
}

TEST(OpaquePayload, TheCheckerCalledAloneSaysUnknownToo) {
  const fh::StoryRun r = with_json_rows(fh::fenced_run());
  const fh::CheckerResult res =
      fh::CorruptChunkChecker().check_with(r.b.h, r.rb, context(fh::PayloadMode::kOpaque));
  EXPECT_EQ(res.verdict, fh::Verdict::kUnknown);
  EXPECT_EQ(res.error, fh::kOpaquePayloadReason);
  EXPECT_TRUE(res.anomalies.empty());
  EXPECT_EQ(fh::CorruptChunkChecker().check_with(r.b.h, r.rb, context(fh::PayloadMode::kSelfDescribing)).verdict,
            fh::Verdict::kInvalid);
}

TEST(OpaquePayload, AStaleWriteAcceptedIsInvalidFromTheTokenAndWriterColumnsAndTheLog) {
  // The unfenced story: w1 (token 33) resumes after w2 (34) wrote the whole job, and the resource
  // accepts its writes over w2's. Nothing in the bytes says who wrote them.
  const fh::StoryRun r = with_json_rows(fh::unfenced_run());
  const fh::CheckRun run = fh::run_checkers(fh::default_checkers(), r.b.h, r.rb, context(fh::PayloadMode::kOpaque));
  EXPECT_EQ(run.verdict, fh::Verdict::kInvalid);

  const fh::CheckerResult& stale = result(run, "stale-write-accepted");
  ASSERT_EQ(stale.verdict, fh::Verdict::kInvalid) << stale.error;
  ASSERT_FALSE(stale.anomalies.empty());
  EXPECT_EQ(stale.anomalies[0].key, fh::kLedgerKey);
  EXPECT_EQ(stale.anomalies[0].tokens, (std::vector<std::int64_t>{33, 34}));
  EXPECT_EQ(stale.anomalies[0].clients, (std::vector<std::string>{"w1", "w2"}));

  // Segment 0 holds w2's chunk 0 (token 34) and w1's chunk 1 (token 33): the writer and token
  // columns say so, with no byte decoded.
  const fh::CheckerResult& interleaved = result(run, "interleaved-segment");
  ASSERT_EQ(interleaved.verdict, fh::Verdict::kInvalid) << interleaved.error;
  EXPECT_EQ(interleaved.anomalies[0].segment, 0);
  EXPECT_EQ(interleaved.anomalies[0].tokens, (std::vector<std::int64_t>{33, 34}));
  EXPECT_EQ(interleaved.anomalies[0].description.find("does not decode"), std::string::npos)
      << "opaque bytes are never decoded: " << interleaved.anomalies[0].description;

  const fh::CheckerResult& corrupt = result(run, "corrupt-chunk");
  EXPECT_EQ(corrupt.verdict, fh::Verdict::kUnknown);
  EXPECT_EQ(corrupt.error, fh::kOpaquePayloadReason);
}

TEST(OpaquePayload, AnAcknowledgedRowTheResourceNoLongerShowsIsLost) {
  // The fenced story, but the resource lost w2's last row (segment 1, chunk 1) and its log entry.
  fh::StoryRun r = with_json_rows(fh::fenced_run());
  r.rb.chunks.pop_back();
  r.rb.log.pop_back();
  const fh::CheckRun run = fh::run_checkers(fh::default_checkers(), r.b.h, r.rb, context(fh::PayloadMode::kOpaque));
  const fh::CheckerResult& lost = result(run, "lost-acknowledged-write");
  ASSERT_EQ(lost.verdict, fh::Verdict::kInvalid) << lost.error;
  ASSERT_EQ(lost.anomalies.size(), 1u);
  EXPECT_EQ(lost.anomalies[0].segment, 1);
  EXPECT_EQ(lost.anomalies[0].clients, (std::vector<std::string>{"w2"}));
  EXPECT_EQ(run.verdict, fh::Verdict::kInvalid);
}

TEST(OpaquePayload, BytesThatLookSelfDescribingAreNotTakenForAnyonesWord) {
  // w2 wrote both chunks of segment 0 (the columns say so); one row's bytes happen to be a valid
  // self-describing chunk naming w1 and token 33. Read as fencecheck's chunks, the segment is
  // interleaved and the row corrupt; read as the system's own bytes, neither: the columns rule.
  fh::StoryRun r = with_json_rows(fh::fenced_run());
  fencecheck::StoredChunk& c = r.rb.chunks[1];
  ASSERT_EQ(c.client, "w2");
  c.data = fencecheck::encode_chunk(ChunkHeader{"w1", 33, fh::kLedgerKey, c.segment, c.chunk}, 64);
  r.rb.chunks[0].data = fencecheck::encode_chunk(ChunkHeader{"w2", 34, fh::kLedgerKey, 0, 0}, 64);

  const fh::CheckRun own = fh::run_checkers(fh::default_checkers(), r.b.h, r.rb, context(fh::PayloadMode::kSelfDescribing));
  EXPECT_EQ(result(own, "interleaved-segment").verdict, fh::Verdict::kInvalid);
  EXPECT_EQ(names(result(own, "interleaved-segment").anomalies), (std::vector<std::string>{"interleaved-segment"}));

  const fh::CheckRun opaque = fh::run_checkers(fh::default_checkers(), r.b.h, r.rb, context(fh::PayloadMode::kOpaque));
  EXPECT_EQ(result(opaque, "interleaved-segment").verdict, fh::Verdict::kValid) << result(opaque, "interleaved-segment").error;
  EXPECT_EQ(result(opaque, "corrupt-chunk").verdict, fh::Verdict::kUnknown);
}

TEST(OpaquePayload, TheStreamedRulesOverAFileSayWhatTheCheckersSay) {
  const fh::StoryRun r = with_json_rows(fh::unfenced_run());
  const auto path = fencecheck::golden::scratch_dir() / "opaque-payload.jsonl";
  {
    std::ofstream out(path);
    for (const Event& e : r.b.h) out << fencecheck::to_json_line(e) << '\n';
  }
  const fh::CheckContext ctx = context(fh::PayloadMode::kOpaque);
  const fh::StreamCheckRun streamed = fh::check_history_file(path, r.rb, ctx);
  const fh::CheckRun direct = fh::run_checkers(fh::default_checkers(), r.b.h, r.rb, ctx);
  ASSERT_EQ(streamed.run.results.size(), direct.results.size());
  for (const auto& d : direct.results) {
    const fh::CheckerResult& s = result(streamed.run, d.name);
    EXPECT_EQ(s.verdict, d.verdict) << d.name;
    EXPECT_EQ(s.error, d.error) << d.name;
    EXPECT_EQ(names(s.anomalies), names(d.anomalies)) << d.name;
  }
  EXPECT_EQ(result(streamed.run, "corrupt-chunk").error, fh::kOpaquePayloadReason);
  EXPECT_EQ(result(streamed.run, "stale-write-accepted").verdict, fh::Verdict::kInvalid);
}

}  // namespace
