// The smoke suite for real: embedded etcd, fencecheck-store, two fencecheck-worker processes and
// a real SIGSTOP past the lease. Asserts the values the verdicts must show, not just exit codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "run_util.h"

using fctest::fs::path;
using nlohmann::json;

namespace {

struct SuiteRun {
  fctest::Result result;
  json summary;                    // --json output: one object per scenario
  std::map<std::string, path> dirs;  // scenario -> run directory
};

// Both scenarios are run once for the whole test suite (each takes ~8 s).
const SuiteRun& suite() {
  static SuiteRun run = [] {
    SuiteRun r;
    auto work = fctest::fresh_dir("smoke");
    r.result = fctest::run_fencecheck({"run", std::string(FENCECHECK_SOURCE_DIR) + "/scenarios/smoke", "--run-root",
                                       (work / "runs").string(), "--json"},
                                      work);
    r.summary = json::parse(r.result.out, nullptr, false);
    if (r.summary.is_array())
      for (const auto& s : r.summary) r.dirs[s["scenario"]] = s["run_dir"].get<std::string>();
    return r;
  }();
  return run;
}

json load(const path& p) { return json::parse(fctest::slurp(p)); }

std::int64_t token_of(const std::vector<json>& history, const std::string& worker) {
  for (const auto& e : history)
    if (e["kind"] == "acquire.ok" && e["source"] == worker) return e["token"];
  return -1;
}

}  // namespace

TEST(SmokeSuite, BothScenariosMeetTheirExpectationAndTheSuiteExitsZero) {
  const auto& s = suite();
  ASSERT_EQ(s.result.code, 0) << s.result.out << s.result.err;
  ASSERT_TRUE(s.summary.is_array()) << s.result.out;
  ASSERT_EQ(s.summary.size(), 2u);
  for (const auto& r : s.summary) {
    EXPECT_TRUE(r["met"].get<bool>()) << r.dump(2);
    EXPECT_EQ(r["exit_code"], 0);
  }
  for (const char* f : {"history.jsonl", "anomalies.live.jsonl", "verdict.json", "readback.json", "metrics.prom", "scenario.json",
                        "faults.ledger", "harness.log", "logs/etcd.log", "logs/store.log", "logs/w1.log", "logs/w2.log"})
    EXPECT_TRUE(std::filesystem::exists(s.dirs.at("sigstop-past-lease") / f)) << f;
  // Issue 32: the embedded services' data is removed once the run has ended (62 MB of it was etcd's
  // WAL preallocation), so a smoke run directory stays small.
  for (const auto& [scenario, dir] : s.dirs) {
    EXPECT_FALSE(std::filesystem::exists(dir / "etcd-data")) << scenario;
    EXPECT_FALSE(std::filesystem::exists(dir / "store-data")) << scenario;
    std::uintmax_t bytes = 0;
    for (const auto& f : std::filesystem::recursive_directory_iterator(dir))
      if (f.is_regular_file()) bytes += f.file_size();
    EXPECT_LE(bytes, 2u * 1000 * 1000) << scenario << ": " << bytes << " bytes";
  }
}

TEST(SmokeSuite, KeepDataKeepsTheServicesDataDirectories) {
  const path work = fctest::fresh_dir("smoke-keep-data");
  const auto res = fctest::run_fencecheck({"run", std::string(FENCECHECK_SOURCE_DIR) + "/scenarios/smoke/sigstop-past-lease.yaml",
                                           "--run-root", (work / "runs").string(), "--json", "--keep-data"},
                                          work);
  ASSERT_EQ(res.code, 0) << res.out << res.err;
  const path dir = json::parse(res.out)[0]["run_dir"].get<std::string>();
  EXPECT_TRUE(std::filesystem::is_directory(dir / "etcd-data"));
  EXPECT_TRUE(std::filesystem::is_directory(dir / "store-data"));
  EXPECT_EQ(res.err.find("removed the embedded services' data"), std::string::npos) << res.err;
}

TEST(SmokeSuite, FencedRunRejectsTheStaleWriteAndStaysValid) {
  const auto& s = suite();
  ASSERT_TRUE(s.dirs.count("sigstop-past-lease"));
  const path dir = s.dirs.at("sigstop-past-lease");
  json v = load(dir / "verdict.json");
  auto history = fctest::read_history(dir / "history.jsonl");
  EXPECT_EQ(v["verdict"], "valid") << v.dump(2);
  EXPECT_TRUE(v["expectation"]["met"].get<bool>()) << v["expectation"].dump();

  const std::int64_t t1 = token_of(history, "w1"), t2 = token_of(history, "w2");
  ASSERT_GT(t1, 0);
  ASSERT_GT(t2, t1) << "w2 must get a higher token (create_revision) than w1";

  // The stale write: w1, after SIGCONT, sent its old token and the store rejected it, citing w2's.
  auto stale = std::find_if(history.begin(), history.end(), [&](const json& e) {
    return e["kind"] == "write.fail" && e["source"] == "w1" && e["token"] == t1;
  });
  ASSERT_NE(stale, history.end()) << "no rejected stale write from w1";
  EXPECT_GE((*stale)["high_water"].get<std::int64_t>(), t2);
  // Never retried with the rejected token: every later write by w1 carries a newer token.
  for (auto it = stale + 1; it != history.end(); ++it) {
    if ((*it)["source"] == "w1" && (*it)["kind"] == "write.invoke") {
      EXPECT_GT((*it)["token"].get<std::int64_t>(), t1);
    }
  }

  // w1's release of its expired key deleted nothing, so it carries no revision: the lock
  // service's delete of that key stays an expiry, not a release.
  auto release = std::find_if(history.begin(), history.end(), [&](const json& e) {
    return e["kind"] == "release.ok" && e["source"] == "w1" && e["token"] == t1;
  });
  ASSERT_NE(release, history.end());
  EXPECT_FALSE(release->contains("revision")) << release->dump();
  EXPECT_NE(release->value("detail", "").find("already gone"), std::string::npos);

  // The store agrees: its rejections list w1's token, and every stored chunk is one token per segment.
  json rb = load(dir / "readback.json");
  ASSERT_FALSE(rb["rejections"].empty());
  EXPECT_EQ(rb["rejections"][0]["client"], "w1");
  EXPECT_EQ(rb["rejections"][0]["token"], t1);
  std::map<std::int64_t, std::set<std::int64_t>> tokens_per_segment;
  for (const auto& c : rb["chunks"]) tokens_per_segment[c["segment"]].insert(c["token"].get<std::int64_t>());
  EXPECT_EQ(tokens_per_segment.size(), 3u);
  for (const auto& [seg, tokens] : tokens_per_segment) EXPECT_EQ(tokens.size(), 1u) << "segment " << seg;

  // Figures: the expiry during work is w1's, and w1's own ticker measured ~6 s.
  const auto& fig = v["figures"];
  ASSERT_GE(fig["expiries_during_work"].size(), 1u) << fig.dump(2);
  EXPECT_EQ(fig["expiries_during_work"][0]["worker"], "w1");
  EXPECT_EQ(fig["expiries_during_work"][0]["token"], t1);
  const double pause_s = fig["longest_pause_ns"]["w1"].get<double>() / 1e9;
  EXPECT_NEAR(pause_s, 6.0, 0.6);

  // metrics.prom carries the evidence.
  const std::string prom = fctest::slurp(dir / "metrics.prom");
  EXPECT_NE(prom.find("fencecheck_rejected_writes_total{"), std::string::npos);
  EXPECT_NE(prom.find("client=\"w1\""), std::string::npos);
  EXPECT_NE(prom.find("fencecheck_lease_expiries_during_work_total{"), std::string::npos);
  EXPECT_NE(prom.find("fencecheck_holder_pause_seconds_bucket{"), std::string::npos);
  EXPECT_NE(prom.find("fencecheck_scenario_passed{source=\"file\",scenario=\"sigstop-past-lease\"} 1"), std::string::npos);
}

TEST(SmokeSuite, UnfencedRunShowsTheInterleavedSegmentNamingBothTokens) {
  const auto& s = suite();
  ASSERT_TRUE(s.dirs.count("sigstop-past-lease-unfenced"));
  const path dir = s.dirs.at("sigstop-past-lease-unfenced");
  json v = load(dir / "verdict.json");
  auto history = fctest::read_history(dir / "history.jsonl");
  EXPECT_EQ(v["verdict"], "invalid");
  EXPECT_TRUE(v["expectation"]["met"].get<bool>());
  const std::int64_t t1 = token_of(history, "w1"), t2 = token_of(history, "w2");
  ASSERT_GT(t2, t1);

  const json* interleaved = nullptr;
  for (const auto& c : v["checkers"])
    for (const auto& a : c["anomalies"])
      if (a["name"] == "interleaved-segment") interleaved = &a;
  ASSERT_NE(interleaved, nullptr) << v.dump(2);
  auto tokens = (*interleaved)["tokens"].get<std::vector<std::int64_t>>();
  EXPECT_NE(std::find(tokens.begin(), tokens.end(), t1), tokens.end());
  EXPECT_NE(std::find(tokens.begin(), tokens.end(), t2), tokens.end());
  auto clients = (*interleaved)["clients"].get<std::vector<std::string>>();
  EXPECT_EQ(clients, (std::vector<std::string>{"w1", "w2"}));
  // Evidence points at real write.ok events of both writers.
  std::set<std::string> writers;
  for (auto idx : (*interleaved)["evidence"]) {
    const auto& e = history.at(idx.get<std::size_t>());
    if (e["kind"] == "write.ok") writers.insert(e["source"]);
  }
  EXPECT_EQ(writers, (std::set<std::string>{"w1", "w2"}));
  EXPECT_NE(fctest::slurp(dir / "metrics.prom").find("anomaly=\"interleaved-segment\""), std::string::npos);

  // Found while the run went: w1's first stale write accepted (the live checker; the interleaved
  // segment needs the read-back). Every live anomaly is in verdict.json, the event that proved it
  // among its evidence; the fenced run's file is empty.
  const auto live = fctest::read_history(dir / "anomalies.live.jsonl");
  ASSERT_FALSE(live.empty());
  for (const auto& l : live) {
    const auto at = l["found_at"].get<std::size_t>();
    EXPECT_EQ(history.at(at)["kind"], "write.ok") << l.dump();
    EXPECT_EQ(history.at(at)["source"], "w1") << l.dump();
    EXPECT_EQ(history.at(at)["token"], t1) << l.dump();
    bool in_verdict = false;
    for (const auto& c : v["checkers"])
      for (const auto& a : c["anomalies"])
        if (a["name"] == l["anomaly"] && a["key"] == l["key"])
          for (const auto& idx : a["evidence"]) in_verdict |= idx.get<std::size_t>() == at;
    EXPECT_TRUE(in_verdict) << l.dump() << "\n" << v.dump(2);
  }
  EXPECT_EQ(live.front()["anomaly"], "stale-write-accepted");
  EXPECT_EQ(fctest::slurp(s.dirs.at("sigstop-past-lease") / "anomalies.live.jsonl"), "");
}

// --compress-history always: the run's history ends as history.jsonl.zst (a long run's would under
// the default, auto, from 16 MiB), and `fencecheck report` judges the compressed history again to
// the same verdict, evidence included.
TEST(SmokeSuite, ACompressedHistoryIsJudgedAgainToTheSameVerdict) {
  const path work = fctest::fresh_dir("smoke-zst");
  const auto res = fctest::run_fencecheck({"run", std::string(FENCECHECK_SOURCE_DIR) + "/scenarios/smoke/sigstop-past-lease.yaml",
                                           "--run-root", (work / "runs").string(), "--json", "--compress-history", "always"},
                                          work);
  ASSERT_EQ(res.code, 0) << res.out << res.err;
  const json summary = json::parse(res.out);
  const path dir = summary[0]["run_dir"].get<std::string>();
  EXPECT_FALSE(std::filesystem::exists(dir / "history.jsonl"));
  ASSERT_TRUE(std::filesystem::exists(dir / "history.jsonl.zst"));
  EXPECT_NE(res.err.find("history.jsonl compressed to history.jsonl.zst"), std::string::npos) << res.err;
  EXPECT_TRUE(std::filesystem::exists(dir / "report.html"));
  const json before = load(dir / "verdict.json");
  ASSERT_EQ(before["verdict"], "valid");

  const auto again = fctest::run_fencecheck({"report", dir.string(), "--json"}, work);
  ASSERT_EQ(again.code, 0) << again.out << again.err;
  EXPECT_EQ(again.err.find("the stored verdict was"), std::string::npos) << again.err;
  const json after = load(dir / "verdict.json");
  EXPECT_EQ(after["verdict"], before["verdict"]);
  EXPECT_EQ(after["checkers"], before["checkers"]);
  EXPECT_EQ(after["figures"], before["figures"]);
  EXPECT_FALSE(std::filesystem::exists(dir / "history.jsonl")) << "report reads it where it is, and writes no copy";

  // A bad option value is refused before anything starts.
  const auto bad = fctest::run_fencecheck({"run", std::string(FENCECHECK_SOURCE_DIR) + "/scenarios/smoke/sigstop-past-lease.yaml",
                                           "--run-root", (work / "runs2").string(), "--compress-history", "sometimes"},
                                          work);
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--compress-history"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(work / "runs2"));
}
