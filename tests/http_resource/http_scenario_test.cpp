// Integration, end to end: `fencecheck run` with `resource: {kind: http}` against
// tests/http_resource/broken_service.py, on a real etcd with a real SIGSTOP (catalogue item 2's
// plan: the holder paused past its lease while the next holder's write waits in the service's
// 2.5 s check window). The broken service must be caught (stale-write-accepted, from the accept
// log it reads back); the same service with --correct must keep the run safe, with the stale write
// rejected. And issue 31's service that keeps the lock but compares tokens as text
// (--text-compare): its rejections above the mark are caught and never count as fencing.
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../support/remove_at_end.h"
#include "service_process.h"

namespace fencecheck {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using testing::Process;

/// Catalogue item 2's plan with the resource replaced by kind http at `url`.
std::string scenario(const std::string& name, const std::string& url, const std::string& expect) {
  return "name: " + name + "\n" +
         "description: >\n"
         "  w1 takes the lock (TTL 2s); after its first accepted write it is SIGSTOPped for 3s, its\n"
         "  lease expires and w2 takes the lock with a higher token. w2's first write passes the\n"
         "  service's check and sits in its 2.5s window; w1 resumes meanwhile and writes with its\n"
         "  stale token.\n"
         "seed: 42\n"
         "lease_ttl: 2s\n"
         "timeout: 60s\n"
         "resource: {kind: http, url: \"" + url + "\", health: /healthz}\n"
         "job: {key: ledger, segments: 2, chunks: 2, chunk_bytes: 128, chunk_interval: 100ms}\n"
         "workers:\n"
         "  - id: w1\n"
         "  - id: w2\n"
         "    start_after: {worker: w1, event: acquire.ok}\n"
         "faults:\n"
         "  - kind: sigstop\n"
         "    target: w1\n"
         "    trigger: {worker: w1, event: write.ok, count: 1}\n"
         "    duration: 3s\n"
         "expect: " + expect + "\n";
}

struct RunResult {
  int exit_code = -1;
  json verdict;   ///< verdict.json
  json readback;  ///< readback.json
};

/// Runs `fencecheck run` on the scenario in a directory kept when a test fails.
RunResult run_fencecheck(const std::string& name, const std::string& yaml) {
  const fs::path work = testing::remove_at_end(fs::temp_directory_path() /
                                                ("fc-http-" + std::to_string(::getpid()) + "-" + name));
  fs::remove_all(work);
  fs::create_directories(work);
  const fs::path file = work / (name + ".yaml");
  std::ofstream(file) << yaml;
  RunResult r;
  {
    process::ChildSpec spec;
    spec.name = "fencecheck";
    spec.exe = FENCECHECK_BIN;
    spec.args = {"run", "--run-root", (work / "runs").string(), file.string()};
    spec.stderr_log = work / "fencecheck.stderr";
    process::ChildProcess fc(spec, [](std::string_view, std::int64_t, bool) {});
    r.exit_code = fc.wait_for(std::chrono::minutes(3)).value_or(-1);
  }
  const fs::path dir = work / "runs" / "latest";
  std::ifstream v(dir / "verdict.json");
  r.verdict = json::parse(v, nullptr, false);
  std::ifstream b(dir / "readback.json");
  r.readback = json::parse(b, nullptr, false);
  return r;
}

std::set<std::string> anomalies(const json& verdict) {
  std::set<std::string> out;
  for (const auto& c : verdict.at("checkers"))
    for (const auto& a : c.at("anomalies")) out.insert(a.at("name").get<std::string>());
  return out;
}

const json& checker(const json& verdict, const std::string& name) {
  for (const auto& c : verdict.at("checkers"))
    if (c.at("name") == name) return c;
  throw std::runtime_error("no checker " + name);
}

TEST(HttpScenario, TheBrokenServiceIsCaughtAcceptingAStaleWrite) {
  Process svc("broken-service", "/usr/bin/python3", {BROKEN_SERVICE, "--window-ms", "2500"});
  const RunResult r = run_fencecheck("broken", scenario("http-check-then-write-broken", svc.url(),
                                       "{outcome: anomaly, anomalies: [stale-write-accepted], min_expiries_during_work: 1}"));
  ASSERT_TRUE(r.verdict.is_object()) << "no verdict.json";
  EXPECT_EQ(r.exit_code, 0) << r.verdict.dump(2);
  EXPECT_EQ(r.verdict.at("verdict"), "invalid");
  EXPECT_TRUE(r.verdict.at("expectation").at("met").get<bool>()) << r.verdict.at("expectation").dump();
  // The stale write, and (when it landed in a segment the newer holder had already written, which
  // the service's accept log shows in its order: w1, w2, w1) the two holders' writes by turns in
  // one segment (issue 31 item 5); nothing else.
  const std::set<std::string> found = anomalies(r.verdict);
  EXPECT_TRUE(found.count("stale-write-accepted"));
  for (const auto& name : found)
    EXPECT_TRUE(name == "stale-write-accepted" || name == "interleaved-segment") << "unexpected anomaly " << name;
  const json& stale = checker(r.verdict, "stale-write-accepted");
  EXPECT_EQ(stale.at("evidence"), (json{"resource.accept-log", "worker-events"})) << "proven from the service's own log";
  const json& a = stale.at("anomalies").at(0);
  EXPECT_EQ(a.at("key"), "ledger");
  EXPECT_EQ(a.at("clients"), (json{"w1", "w2"}));
  EXPECT_FALSE(a.at("readback_seqs").empty());
  EXPECT_EQ(r.readback.at("resource"), "broken-service");
  EXPECT_EQ(r.readback.at("fencing"), "check-then-write");
}

TEST(HttpScenario, TheCorrectServiceKeepsTheRunSafeAndRejectsTheStaleWrite) {
  Process svc("correct-service", "/usr/bin/python3", {BROKEN_SERVICE, "--window-ms", "2500", "--correct"});
  const RunResult r = run_fencecheck("correct", scenario("http-check-then-write-correct", svc.url(),
                                        "{outcome: safe, min_rejected_writes: 1, min_expiries_during_work: 1}"));
  ASSERT_TRUE(r.verdict.is_object()) << "no verdict.json";
  EXPECT_EQ(r.exit_code, 0) << r.verdict.dump(2);
  EXPECT_EQ(r.verdict.at("verdict"), "valid");
  EXPECT_TRUE(r.verdict.at("expectation").at("met").get<bool>()) << r.verdict.at("expectation").dump();
  EXPECT_TRUE(anomalies(r.verdict).empty());
  EXPECT_GE(r.verdict.at("figures").at("rejected_writes_readback").get<int>(), 1) << "the service's own rejections";
  ASSERT_FALSE(r.readback.at("rejections").empty());
  EXPECT_EQ(r.readback.at("rejections").at(0).at("client"), "w1");
  EXPECT_EQ(r.readback.at("fencing"), "per-key");
}

// Issue 31, item 2: the service keeps the contract's one lock but compares tokens as text, so
// "10" < "9". With etcd's 7 prior revisions w1 is granted 9 and writes the job; every fresh token
// of w2 (10, 13, ...) is then rejected at mark 9, with no fault at all. Those rejections must not
// make the run look fenced: invalid (unjustified-rejection, and w2 fenced out), and none of them
// counts toward min_rejected_writes.
TEST(HttpScenario, AServiceRejectingTokensAboveItsMarkIsCaughtNotCountedAsFencing) {
  Process svc("text-compare-service", "/usr/bin/python3", {BROKEN_SERVICE, "--correct", "--text-compare"});
  const std::string yaml = "name: http-text-compare\n"
                           "seed: 42\n"
                           "lease_ttl: 2s\n"
                           "timeout: 60s\n"
                           "lock_service: {kind: etcd, prior_revisions: 7}\n"
                           "resource: {kind: http, url: \"" + svc.url() + "\", health: /healthz}\n"
                           "job: {key: ledger, segments: 1, chunks: 2, chunk_bytes: 128}\n"
                           "workers:\n"
                           "  - id: w1\n"
                           "  - id: w2\n"
                           "    start_after: {worker: w1, event: acquire.ok}\n"
                           "expect: {outcome: safe, min_rejected_writes: 1}\n";
  const RunResult r = run_fencecheck("text-compare", yaml);
  ASSERT_TRUE(r.verdict.is_object()) << "no verdict.json";
  EXPECT_EQ(r.verdict.at("verdict"), "invalid") << r.verdict.dump(2);
  EXPECT_FALSE(r.verdict.at("expectation").at("met").get<bool>());
  const std::set<std::string> found = anomalies(r.verdict);
  EXPECT_TRUE(found.count("unjustified-rejection")) << r.verdict.at("checkers").dump();
  EXPECT_TRUE(found.count("fenced-out")) << r.verdict.at("checkers").dump();
  const json& a = checker(r.verdict, "unjustified-rejection").at("anomalies").at(0);
  EXPECT_EQ(a.at("key"), "ledger");
  EXPECT_EQ(a.at("clients"), (json{"w2"}));
  for (const auto& token : a.at("tokens")) EXPECT_GE(token.get<int>(), 10);
  const json& f = r.verdict.at("figures");
  EXPECT_GE(f.at("rejected_writes_history").get<int>(), 1);
  EXPECT_EQ(f.at("rejected_writes_unjustified_history"), f.at("rejected_writes_history"));
  EXPECT_EQ(f.at("rejected_writes_unjustified_readback"), f.at("rejected_writes_readback"));
  EXPECT_EQ(f.at("rejected_writes_total"), 0);
  EXPECT_EQ(r.readback.at("fencing"), "per-key-text");
  ASSERT_FALSE(r.readback.at("rejections").empty());
  for (const auto& rej : r.readback.at("rejections"))  // each at a mark at or below its token
    EXPECT_GE(rej.at("token").get<int>(), rej.at("high_water").get<int>()) << rej.dump();
}

}  // namespace
}  // namespace fencecheck

namespace fencecheck {
namespace {

/// `fencecheck probe --json -` on a file holding just `resource:` (kind http at `url`).
json probe(const std::string& name, const std::string& url, int& exit_code,
           const std::vector<std::string>& extra = {}) {
  const fs::path work = testing::remove_at_end(fs::temp_directory_path() /
                                                ("fc-http-probe-" + std::to_string(::getpid()) + "-" + name));
  fs::remove_all(work);
  fs::create_directories(work);
  const fs::path file = work / "resource.yaml";
  std::ofstream(file) << "resource: {kind: http, url: \"" << url << "\", health: /healthz}\n";
  std::string out;
  {
    process::ChildSpec spec;
    spec.name = "fencecheck-probe";
    spec.exe = FENCECHECK_BIN;
    spec.args = {"probe", "--run-root", (work / "runs").string(), "--rounds", "20", "--json", "-"};
    spec.args.insert(spec.args.end(), extra.begin(), extra.end());
    spec.args.push_back(file.string());
    spec.stderr_log = work / "probe.stderr";
    process::ChildProcess fc(spec, [&out](std::string_view line, std::int64_t, bool eof) {
      if (!eof) out.append(line).append("\n");
    });
    exit_code = fc.wait_for(std::chrono::minutes(2)).value_or(-1);
  }
  return json::parse(out, nullptr, false);
}

std::string rule_verdict(const json& report, const std::string& rule) {
  for (const auto& r : report.at("rules"))
    if (r.at("rule") == rule) return r.at("verdict");
  return "(no rule " + rule + ")";
}

TEST(HttpProbe, NamesTheBrokenServicesRuleAndPassesTheCorrectOne) {
  Process broken("broken-service", "/usr/bin/python3", {BROKEN_SERVICE, "--window-ms", "50"});
  int code = -1;
  const json b = probe("broken", broken.url(), code);
  ASSERT_TRUE(b.is_object()) << "no JSON from the probe";
  EXPECT_EQ(code, 1) << b.dump(2);
  EXPECT_EQ(rule_verdict(b, "concurrent"), "broken") << b.dump(2);
  EXPECT_EQ(rule_verdict(b, "lower-token-rejected"), "holds");  // in sequence it fences: only the race breaks it

  Process correct("correct-service", "/usr/bin/python3", {BROKEN_SERVICE, "--window-ms", "50", "--correct"});
  const json c = probe("correct", correct.url(), code);
  ASSERT_TRUE(c.is_object()) << "no JSON from the probe";
  EXPECT_EQ(code, 0) << c.dump(2);
  EXPECT_EQ(rule_verdict(c, "concurrent"), "holds");
  EXPECT_EQ(rule_verdict(c, "survives-restart"), "not-applicable");  // the service is the user's: never restarted
}

/// The rule's entry of a probe report.
const json& rule_of(const json& report, const std::string& rule) {
  for (const auto& r : report.at("rules"))
    if (r.at("rule") == rule) return r;
  throw std::runtime_error("no rule " + rule);
}

TEST(HttpProbe, CatchesAServiceThatComparesTokensAsText) {
  // Issue 31, item 2: a service that keeps the mark as text fences 1001..1208 (the old probe's
  // tokens, all four digits) but accepts 9 after 10. The probe's default tokens cross 9 -> 10.
  Process text("text-service", "/usr/bin/python3", {BROKEN_SERVICE, "--window-ms", "0", "--correct", "--compare-as-text"});
  int code = -1;
  const json t = probe("text", text.url(), code);
  ASSERT_TRUE(t.is_object()) << "no JSON from the probe";
  EXPECT_EQ(code, 1) << t.dump(2);
  const json& lower = rule_of(t, "lower-token-rejected");
  EXPECT_EQ(lower.at("verdict"), "broken") << lower.dump(2);
  EXPECT_EQ(lower.at("anomaly"), "stale-write-accepted");
  const std::string evidence = lower.at("evidence");
  EXPECT_NE(evidence.find("9 after 10"), std::string::npos) << evidence;
  EXPECT_NE(evidence.find("compares tokens as text"), std::string::npos) << evidence;
  // Each power of ten adds a digit (caught); the binary boundaries keep the length (text order is
  // number order there).
  EXPECT_NE(evidence.find("accepted at 4 of 7 boundary crossings"), std::string::npos) << evidence;
  EXPECT_EQ(rule_verdict(t, "concurrent"), "holds");  // tokens 2^53 + 1 .. : all 16 digits

  // The same service against the numbers' service: all 7 crossings rejected.
  Process number("number-service", "/usr/bin/python3", {BROKEN_SERVICE, "--window-ms", "0", "--correct"});
  const json n = probe("number", number.url(), code);
  ASSERT_TRUE(n.is_object()) << "no JSON from the probe";
  EXPECT_EQ(rule_verdict(n, "lower-token-rejected"), "holds") << n.dump(2);

  // --token-base for a resource that needs larger tokens: every token is above it.
  const json big = probe("big", number.url(), code, {"--token-base", "5000000000"});
  ASSERT_TRUE(big.is_object()) << "no JSON from the probe";
  EXPECT_EQ(big.at("options").at("token_base"), 5000000000LL);
  for (const auto& r : big.at("rules"))
    for (const auto& s : r.at("steps"))
      if (s.contains("token")) EXPECT_GT(s.at("token").get<std::int64_t>(), 5000000000LL) << s.dump();
  EXPECT_EQ(rule_verdict(big, "lower-token-rejected"), "holds") << big.dump(2);
}

}  // namespace
}  // namespace fencecheck
