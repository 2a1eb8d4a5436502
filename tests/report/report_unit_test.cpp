// Unit tests for the reports: junit.xml (parsed back with pugixml: structure, counts, escaping),
// report.html on a hand-made history (lanes, marks, anchors, escaping, self-containedness), the
// stored-run loader and `fencecheck report` on the checked-in fixtures (real runs of the smoke
// suite), the results table, --keep retention, and the terminal progress line.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>
#include <pugixml.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/junit.h"
#include "fencecheck/harness/metrics.h"
#include "fencecheck/harness/night.h"
#include "fencecheck/harness/orchestrator.h"
#include "fencecheck/harness/progress.h"
#include "fencecheck/harness/report.h"
#include "fencecheck/harness/report_html.h"
#include "fencecheck/harness/run_dir.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/harness/verdict_json.h"
#include "fencecheck/proto/chunk.h"
#include "dom_util.h"

using namespace fencecheck;
using namespace fencecheck::harness;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
namespace fs = std::filesystem;

namespace {

using namespace fctest;

// ---- a hand-made history: the smoke story in miniature ---------------------------------------

constexpr std::int64_t kT0 = 1'000'000'000'000;
constexpr std::int64_t kMs = 1'000'000;
const std::string kKey1 = "fencecheck/test/k1";
const std::string kKey2 = "fencecheck/test/k2";

struct Story {
  History h;
  ReadBack rb;

  std::size_t add(std::int64_t at_ms, const std::string& source, EventKind kind, Event e = {}) {
    e.t_ns = kT0 + at_ms * kMs;
    e.src_ns = e.t_ns;
    e.source = source;
    e.kind = kind;
    return h.add(std::move(e));
  }
  static Event with_token(std::int64_t token) {
    Event e;
    e.token = token;
    return e;
  }
  static Event write(std::int64_t token, std::int64_t segment, std::int64_t chunk, std::optional<std::int64_t> hw = {}) {
    Event e;
    e.token = token;
    e.key = "ledger";
    e.segment = segment;
    e.chunk = chunk;
    e.high_water = hw;
    return e;
  }
  static Event lock_event(const std::string& key, std::int64_t token, std::optional<std::int64_t> revision) {
    Event e;
    e.lock = "fencecheck/test";
    e.lock_key = key;
    e.token = token;
    e.revision = revision;
    e.lease_id = 7000 + token;
    return e;
  }

  Story() {
    add(0, "harness", EventKind::kRunStart);                                                    // 0
    Event started;
    started.target = "w1";
    started.detail = "started worker w1 (pid 101)";
    add(10, "harness", EventKind::kLog, started);                                               // 1
    add(20, "w1", EventKind::kAcquireInvoke);                                                   // 2
    add(30, "lock", EventKind::kLockGrant, lock_event(kKey1, 2, 2));                            // 3
    add(40, "w1", EventKind::kAcquireOk, lock_event(kKey1, 2, 2));                              // 4
    started.target = "w2";
    started.detail = "started worker w2 (pid 102)";
    add(50, "harness", EventKind::kLog, started);                                               // 5
    add(60, "w2", EventKind::kAcquireInvoke);                                                   // 6
    add(70, "lock", EventKind::kLockGrant, lock_event(kKey2, 3, 3));                            // 7
    add(100, "w1", EventKind::kWriteInvoke, write(2, 0, 0));                                    // 8
    add(110, "w1", EventKind::kWriteOk, write(2, 0, 0, 2));                                     // 9
    Event inject;
    inject.fault = "sigstop";
    inject.target = "w1";
    inject.duration_ns = 6'000'000'000;
    inject.detail = "w1 (pid 101) <b>&amp;";
    add(120, "harness", EventKind::kFaultInject, inject);                                       // 10
    add(2200, "lock", EventKind::kLockDelete, lock_event(kKey1, 2, 4));                         // 11
    add(2210, "w2", EventKind::kAcquireOk, lock_event(kKey2, 3, 4));                            // 12
    add(2300, "w2", EventKind::kWriteInvoke, write(3, 0, 0));                                   // 13
    add(2310, "w2", EventKind::kWriteOk, write(3, 0, 0, 3));                                    // 14
    add(2400, "w2", EventKind::kWriteInvoke, write(3, 0, 1));                                   // 15
    add(2410, "w2", EventKind::kWriteOk, write(3, 0, 1, 3));                                    // 16
    Event done = with_token(3);
    done.key = "ledger";
    add(2420, "w2", EventKind::kJobDone, done);                                                 // 17
    add(2430, "w2", EventKind::kReleaseInvoke, lock_event(kKey2, 3, std::nullopt));             // 18
    add(2440, "lock", EventKind::kLockDelete, lock_event(kKey2, 3, 5));                         // 19
    add(2450, "w2", EventKind::kReleaseOk, lock_event(kKey2, 3, 5));                            // 20
    Event exit0;
    exit0.target = "w2";
    exit0.detail = "exit 0";
    add(2500, "harness", EventKind::kWorkerExit, exit0);                                        // 21
    Event heal = inject;
    heal.duration_ns = 6'000'000'000;
    add(6120, "harness", EventKind::kFaultHeal, heal);                                          // 22
    Event pause = with_token(2);
    pause.duration_ns = 6'004'000'000;
    add(6130, "w1", EventKind::kPause, pause);                                                  // 23
    add(6140, "w1", EventKind::kWriteInvoke, write(2, 0, 1));                                   // 24
    Event fail = write(2, 0, 1, 3);
    fail.detail = "token 2 is below the high-water mark 3 of key 'ledger' <fenced> & \"stopped\"";
    add(6150, "w1", EventKind::kWriteFail, fail);                                               // 25
    Event lost = with_token(2);
    lost.lease_id = 7002;
    add(6160, "w1", EventKind::kLeaseLost, lost);                                               // 26
    add(6170, "w1", EventKind::kReleaseInvoke, lock_event(kKey1, 2, std::nullopt));             // 27
    Event rel = lock_event(kKey1, 2, std::nullopt);
    rel.detail = "the lock key was already gone";
    add(6180, "w1", EventKind::kReleaseOk, rel);                                                // 28
    Event exit3;
    exit3.target = "w1";
    exit3.detail = "exit 3";
    add(6300, "harness", EventKind::kWorkerExit, exit3);                                        // 29
    Event end;
    end.detail = "done";
    add(6310, "harness", EventKind::kRunEnd, end);                                              // 30

    rb.resource = "store";
    rb.fencing = "per-key";
    rb.chunks = {StoredChunk{"ledger", 0, 0, 3, "w2", 2, encode_chunk(ChunkHeader{"w2", 3, "ledger", 0, 0}, 64)},
                 StoredChunk{"ledger", 0, 1, 3, "w2", 3, encode_chunk(ChunkHeader{"w2", 3, "ledger", 0, 1}, 64)}};
    rb.log = {AcceptedWrite{1, "ledger", 0, 0, 2, "w1"}, AcceptedWrite{2, "ledger", 0, 0, 3, "w2"},
              AcceptedWrite{3, "ledger", 0, 1, 3, "w2"}};
    rb.rejections = {RejectedWrite{"ledger", 0, 1, 2, "w1", 3}};
    rb.high_water = {{"ledger", 3}};
  }
};

Scenario smoke_scenario() { return load_scenario(kSource / "scenarios" / "smoke" / "sigstop-past-lease.yaml"); }

ScenarioResult result_for(const Analysis& a, bool met) {
  ScenarioResult r;
  r.scenario = "sigstop-past-lease";
  r.run_dir = "/tmp/runs/20260101T000000Z-sigstop-past-lease";
  r.expectation = "safe";
  r.verdict = std::string(verdict_name(a.verdict));
  r.met = met;
  r.exit_code = met ? kExitMet : kExitNotMet;
  r.rejected_writes = a.figures.rejected_writes_total();
  r.expiries_during_work = static_cast<std::int64_t>(a.figures.expiries_during_work.size());
  r.longest_pause_s = 6.004;
  r.duration_s = 6.31;
  return r;
}

// ---- junit.xml ---------------------------------------------------------------------------------

TEST(JUnit, SuiteNameIsTheScenarioDirectory) {
  EXPECT_EQ(junit_suite_name("scenarios/smoke/sigstop-past-lease.yaml"), "smoke");
  EXPECT_EQ(junit_suite_name("/abs/scenarios/nightly/x.yaml"), "nightly");
  EXPECT_EQ(junit_suite_name("x.yaml"), "fencecheck");
  EXPECT_EQ(junit_suite_name(""), "fencecheck");
}

/// A suite with one case of each kind: failed (an anomaly whose text needs escaping and holds
/// what XML cannot), passed, error (environment) and skipped. `a` must outlive nothing: the
/// cases copy what they need.
JUnitSuite four_case_suite(const Story& s, Analysis& a) {
  // A failure with an anomaly whose text carries every character XML needs escaped, and some it
  // cannot carry at all (a control character, a byte that is not UTF-8).
  Anomaly an;
  an.name = "interleaved-segment";
  an.description = "segment <0> & \"1\" 'x' ]]> bell\x07 bad\xFF end";
  an.key = "ledger";
  an.tokens = {2, 3};
  an.clients = {"w1", "w2"};
  an.evidence = {9, 25};
  a.checkers.front().anomalies.push_back(an);
  a.evidence_events[9] = s.h[9];
  a.evidence_events[25] = s.h[25];

  ScenarioResult failed = result_for(a, false);
  failed.anomalies = {"interleaved-segment"};
  failed.reasons = {"expected a safe run, but checker interleaved-segment found <it> & more"};
  ScenarioResult passed = result_for(a, true);
  passed.scenario = "sigstop-past-lease-unfenced";
  ScenarioResult error;
  error.scenario = "needs-etcd";
  error.exit_code = kExitEnvironment;
  error.reasons = {"etcd not found on PATH"};
  error.duration_s = 0.25;
  ScenarioResult skipped = error;
  skipped.scenario = "needs-root";
  skipped.skipped = true;
  skipped.reasons = {"cgroup cpu controller unavailable"};

  JUnitSuite suite;
  suite.name = "smoke";
  suite.timestamp = junit_timestamp(1764504000);  // 2025-11-30T12:00:00Z
  suite.hostname = "ci-7";
  suite.cases = {junit_case(failed, &a, kT0, "smoke"), junit_case(passed, &a, kT0, "smoke"),
                 junit_case(error, nullptr, 0, "smoke"), junit_case(skipped, nullptr, 0, "smoke")};
  return suite;
}

TEST(JUnit, RoundTripsStructureCountsAndEscaping) {
  Story s;
  Analysis a = analyze(s.h, s.rb);
  const JUnitSuite suite = four_case_suite(s, a);
  const std::string xml = render_junit(suite);

  pugi::xml_document doc;
  const auto parsed = doc.load_string(xml.c_str());
  ASSERT_TRUE(parsed) << parsed.description() << "\n" << xml;
  auto root = doc.child("testsuites");
  ASSERT_TRUE(root);
  EXPECT_STREQ(root.attribute("tests").value(), "4");
  EXPECT_STREQ(root.attribute("failures").value(), "1");
  EXPECT_STREQ(root.attribute("errors").value(), "1");
  EXPECT_STREQ(root.attribute("skipped").value(), "1");
  auto ts = root.child("testsuite");
  EXPECT_STREQ(ts.attribute("name").value(), "smoke");
  EXPECT_STREQ(ts.attribute("tests").value(), "4");
  EXPECT_STREQ(ts.attribute("failures").value(), "1");
  EXPECT_STREQ(ts.attribute("timestamp").value(), "2025-11-30T12:00:00");
  EXPECT_STREQ(ts.attribute("hostname").value(), "ci-7");
  EXPECT_STREQ(ts.attribute("time").value(), "13.120");  // 6.31 + 6.31 + 0.25 + 0.25
  EXPECT_EQ(std::distance(ts.children("testcase").begin(), ts.children("testcase").end()), 4);

  auto tc = ts.child("testcase");
  EXPECT_STREQ(tc.attribute("name").value(), "sigstop-past-lease");
  EXPECT_STREQ(tc.attribute("classname").value(), "fencecheck.smoke");
  EXPECT_STREQ(tc.attribute("time").value(), "6.310");
  auto failure = tc.child("failure");
  ASSERT_TRUE(failure);
  EXPECT_STREQ(failure.attribute("type").value(), "interleaved-segment");
  EXPECT_STREQ(failure.attribute("message").value(), "expected a safe run, but checker interleaved-segment found <it> & more");
  const std::string details = failure.text().get();
  // Escaped and unescaped back exactly; what XML cannot hold is spelled out.
  EXPECT_THAT(details, HasSubstr("anomaly interleaved-segment (checker "));
  EXPECT_THAT(details, HasSubstr("segment <0> & \"1\" 'x' ]]> bell\\x07 bad\\xFF end"));
  EXPECT_THAT(details, HasSubstr("  tokens: 2 3\n  clients: w1, w2\n"));
  EXPECT_THAT(details, HasSubstr("#9 +0.110 s w1 write.ok key=ledger segment=0 chunk=0 token=2 high_water=2"));
  EXPECT_THAT(details, HasSubstr("#25 +6.150 s w1 write.fail key=ledger segment=0 chunk=1 token=2 high_water=3 (token 2 is "
                                 "below the high-water mark 3 of key 'ledger' <fenced> & \"stopped\")"));
  EXPECT_THAT(details, HasSubstr("run directory: /tmp/runs/20260101T000000Z-sigstop-past-lease"));
  EXPECT_THAT(std::string(tc.child("system-out").text().get()), HasSubstr("rejected writes: 1\n"));
  // The raw text never carries a control character (XML 1.0 forbids them even escaped).
  EXPECT_EQ(xml.find('\x07'), std::string::npos);
  EXPECT_EQ(xml.find("&#7;"), std::string::npos);

  tc = tc.next_sibling("testcase");
  EXPECT_STREQ(tc.attribute("name").value(), "sigstop-past-lease-unfenced");
  EXPECT_FALSE(tc.child("failure"));
  EXPECT_FALSE(tc.child("error"));
  EXPECT_FALSE(tc.child("skipped"));

  tc = tc.next_sibling("testcase");
  EXPECT_STREQ(tc.child("error").attribute("type").value(), "environment");
  EXPECT_STREQ(tc.child("error").attribute("message").value(), "etcd not found on PATH");
  EXPECT_STREQ(tc.attribute("time").value(), "0.250");

  tc = tc.next_sibling("testcase");
  EXPECT_STREQ(tc.child("skipped").attribute("message").value(), "cgroup cpu controller unavailable");
  EXPECT_FALSE(tc.child("error"));
}

/// xmllint's verdict on a file against tests/report/junit.xsd (the JUnit shape CI servers read):
/// its exit code and messages.
std::pair<int, std::string> validate_junit(const fs::path& xml) {
  const fs::path log = xml.parent_path() / (xml.filename().string() + ".xmllint.txt");
  const std::string cmd = "xmllint --noout --schema '" + (kSource / "tests" / "report" / "junit.xsd").string() + "' '" +
                          xml.string() + "' >'" + log.string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(log)};
}

bool have_xmllint() { return std::system("command -v xmllint >/dev/null 2>&1") == 0; }

TEST(JUnit, EveryKindOfCaseValidatesAgainstTheCISchema) {
  if (!have_xmllint()) GTEST_SKIP() << "xmllint is not installed (scripts/install-deps.sh installs libxml2-utils)";
  Story s;
  Analysis a = analyze(s.h, s.rb);
  const fs::path d = fresh_dir("junit-schema");
  write_junit(d / "junit.xml", four_case_suite(s, a));
  const auto [rc, messages] = validate_junit(d / "junit.xml");
  EXPECT_EQ(rc, 0) << messages;
  EXPECT_THAT(messages, HasSubstr("validates"));

  // The check can fail: a test case without its classname.
  std::string text = slurp(d / "junit.xml");
  text.replace(text.find(" classname="), std::string(" classname=").size(), " class_name=");
  std::ofstream(d / "bad.xml") << text;
  const auto [bad_rc, bad_messages] = validate_junit(d / "bad.xml");
  EXPECT_NE(bad_rc, 0);
  EXPECT_THAT(bad_messages, HasSubstr("classname"));
  // A suite written without a timestamp gets the current time: the schema requires one.
  JUnitSuite no_time = four_case_suite(s, a);
  no_time.timestamp.clear();
  write_junit(d / "no-time.xml", no_time);
  EXPECT_EQ(validate_junit(d / "no-time.xml").first, 0) << validate_junit(d / "no-time.xml").second;
}

TEST(RunDirectory, OnlyTheEmbeddedServicesDataIsRemovedAtTheEnd) {
  // Issue 32: a smoke run kept 62 MB of etcd WAL preallocation. What a re-judge reads stays.
  const fs::path d = fresh_dir("service-data");
  const fs::path outside = fresh_dir("service-data-outside");
  for (const char* dir : {"etcd-data", "etcd-data-2", "zookeeper-data.1", "redis-data", "store-data", "logs",
                          "my-data-set", "data", "Etcd-data"})
    fs::create_directories(d / dir);
  std::ofstream(d / "etcd-data" / "wal") << std::string(4096, 'w');
  std::ofstream(d / "store-data" / "log") << std::string(1000, 's');
  for (const char* file : {"history.jsonl", "readback.json", "verdict.json", "report.html", "logs/etcd.log"})
    std::ofstream(d / file) << "kept";
  std::ofstream(d / "postgres-data") << "a file, not a data directory";
  std::ofstream(outside / "precious") << "never touched";
  fs::create_directory_symlink(outside, d / "linked-data");  // a link is never followed nor removed

  std::vector<std::string> names;
  for (const auto& p : fencecheck::harness::service_data_dirs(d)) names.push_back(p.filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"etcd-data", "etcd-data-2", "redis-data", "store-data", "zookeeper-data.1"}));

  EXPECT_EQ(fencecheck::harness::remove_service_data(d), 5096u);
  for (const char* gone : {"etcd-data", "etcd-data-2", "zookeeper-data.1", "redis-data", "store-data"})
    EXPECT_FALSE(fs::exists(d / gone)) << gone;
  for (const char* kept : {"history.jsonl", "readback.json", "verdict.json", "report.html", "logs/etcd.log", "my-data-set",
                           "data", "Etcd-data", "postgres-data", "linked-data"})
    EXPECT_TRUE(fs::exists(d / kept)) << kept;
  EXPECT_TRUE(fs::exists(outside / "precious"));
  EXPECT_EQ(fencecheck::harness::remove_service_data(d), 0u);  // nothing left to remove
  EXPECT_TRUE(fencecheck::harness::service_data_dirs(d / "no-such-dir").empty());
}

TEST(JUnit, WriteJunitReplacesTheFileAtomically) {
  const fs::path d = fresh_dir("junit-write");
  JUnitSuite suite;
  write_junit(d / "sub" / "junit.xml", suite);
  pugi::xml_document doc;
  ASSERT_TRUE(doc.load_file((d / "sub" / "junit.xml").c_str()));
  EXPECT_STREQ(doc.child("testsuites").attribute("tests").value(), "0");
  EXPECT_FALSE(fs::exists(d / "sub" / ".junit.xml.tmp"));
  EXPECT_THROW(write_junit(d / "missing-parent-is-a-file" / "x.xml",
                           [&] {
                             std::ofstream(d / "missing-parent-is-a-file") << "x";
                             return suite;
                           }()),
               std::runtime_error);
}

// ---- report.html -------------------------------------------------------------------------------

class ReportHtml : public ::testing::Test {
 protected:
  Story s;
  Scenario sc = smoke_scenario();
  Analysis a = analyze(s.h, s.rb);
  std::string page(const Analysis& analysis, bool met = true) {
    const ScenarioResult r = result_for(analysis, met);
    return render_report_html(ReportData{&sc, s.h, s.rb, analysis, r, "unit test"});
  }
  /// The page of another history (judged with the story's read-back).
  std::string page_of(const History& h, bool met) {
    const Analysis an = analyze(h, s.rb);
    const ScenarioResult r = result_for(an, met);
    return render_report_html(ReportData{&sc, h, s.rb, an, r, "unit test"});
  }
};

TEST_F(ReportHtml, TheStoryIsValidAsBuilt) {
  EXPECT_EQ(a.verdict, Verdict::kValid) << [&] {
    std::string why;
    for (const auto& c : a.checkers)
      for (const auto& an : c.anomalies) why += an.name + ": " + an.description + "\n";
    return why;
  }();
  ASSERT_EQ(a.figures.expiries_during_work.size(), 1u);
  EXPECT_EQ(a.figures.rejected_writes_total(), 1);
}

TEST_F(ReportHtml, DrawsALanePerWorkerAndForLockFaultsAndHighWater) {
  const std::string html = page(a);
  std::vector<std::string> lanes;
  for (auto& t : start_tags(html, "g"))
    if (has_class(t, "lane")) lanes.push_back(t["data-lane"] + (t.count("data-worker") ? ":" + t["data-worker"] : "") +
                                              (t.count("data-key") ? ":" + t["data-key"] : ""));
  EXPECT_THAT(lanes, ::testing::ElementsAre("faults", "lock", "worker:w1", "worker:w2", "high-water:ledger"));
}

// A resource may report any int64 as a key's high-water mark: the lane's axis spans INT64_MIN to
// INT64_MAX (2^64 - 1, beyond int64) without overflowing, and draws about five ticks, not 2^63
// (found by a breaking session: the page never finished and its memory grew without end).
TEST_F(ReportHtml, AHighWaterMarkAtEitherEndOfInt64DrawsAFewTicks) {
  for (const std::int64_t mark : {std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(),
                                  std::numeric_limits<std::int64_t>::min() + 3}) {
    ReadBack rb = s.rb;
    rb.high_water["ledger"] = mark;
    const ScenarioResult r = result_for(a, true);
    const std::string html = render_report_html(ReportData{&sc, s.h, rb, a, r, "unit test"});
    // The lane's own ticks: from its start tag to the next lane's, or the page's end.
    const std::size_t from = html.find("data-lane=\"high-water\"");
    ASSERT_NE(from, std::string::npos);
    const std::string lane = html.substr(from, html.find("data-lane=", from + 1) - from);
    std::size_t ticks = 0;
    for (auto& t : start_tags(lane, "text"))
      if (has_class(t, "tick")) ++ticks;
    EXPECT_GE(ticks, 2u) << mark;
    EXPECT_LE(ticks, 8u) << mark;
    EXPECT_NE(html.find(">" + std::to_string(mark) + "</text>"), std::string::npos) << mark;
  }
}

TEST_F(ReportHtml, NamesTheLockServiceAndWhatItsTokenIs) {
  // The figure's text (between its start tag and </b>) and its title (the tooltip, HTML-escaped).
  auto figure = [](const std::string& html) {
    std::string title;
    for (auto& t : start_tags(html, "b"))
      if (t["id"] == "fig-lock-service") title = t["title"];
    const auto at = html.find("id=\"fig-lock-service\"");
    if (at == std::string::npos) return std::pair<std::string, std::string>{};
    const auto open = html.find('>', at) + 1;
    return std::pair{html.substr(open, html.find("</b>", open) - open), title};
  };
  const auto [etcd, etcd_title] = figure(page(a));
  EXPECT_EQ(etcd, "etcd");
  EXPECT_THAT(etcd_title, HasSubstr("fencing token: the lock key&#39;s create_revision"));
  // The same history planned on ZooKeeper names ZooKeeper's token.
  sc = with_lock_service_kind(sc, "zookeeper");
  const auto [zk, zk_title] = figure(page(a));
  EXPECT_EQ(zk, "zookeeper");
  EXPECT_THAT(zk_title, HasSubstr("fencing token: the lock znode&#39;s czxid"));
}

// The run's claim on its lock service (claim.json, run_claim.h) is a summary figure: kind none
// cannot claim, and the page says so (as the log does), with the reason as its tooltip; a held
// claim says what holds it; a run without claim.json shows no figure.
TEST_F(ReportHtml, SaysWhetherTheRunClaimedItsLockAndWhyNot) {
  const auto dir = std::filesystem::temp_directory_path() / ("fc-report-claim-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto figure = [&](const std::string& claim_json) {
    if (claim_json.empty()) std::filesystem::remove(dir / "claim.json");
    else std::ofstream(dir / "claim.json") << claim_json;
    ScenarioResult r = result_for(a, true);
    r.run_dir = dir;
    const std::string html = render_report_html(ReportData{&sc, s.h, s.rb, a, r, "unit test"});
    std::string title;
    for (auto& t : start_tags(html, "b"))
      if (t["id"] == "fig-claim") title = t["title"];
    const auto at = html.find("id=\"fig-claim\"");
    if (at == std::string::npos) return std::pair<std::string, std::string>{"(no figure)", ""};
    const auto open = html.find('>', at) + 1;
    return std::pair{html.substr(open, html.find("</b>", open) - open), title};
  };
  const auto none = figure(R"({"claimed":false,"why":"kind none: fencecheck talks to no lock service, so it cannot claim the lock for this run"})");
  EXPECT_EQ(none.first, "none");
  EXPECT_THAT(none.second, HasSubstr("kind none: fencecheck talks to no lock service"));
  const auto held = figure(R"({"claimed":true,"held":"etcd http://10.0.0.5:2379 lease 1f (TTL 10 s) on fencecheck-claims/lock/x"})");
  EXPECT_EQ(held.first, "held");
  EXPECT_THAT(held.second, HasSubstr("TTL 10 s"));
  EXPECT_EQ(figure(R"({"claimed":false,"refused":"another run holds this run's lock"})").first, "refused");
  EXPECT_EQ(figure("").first, "(no figure)");
  std::filesystem::remove_all(dir);
}

// The lock-service lane names the scenario's kind (it said "etcd" whatever the kind), and no kind
// when the page has no scenario.
TEST_F(ReportHtml, TheLockLaneNamesTheScenariosLockService) {
  EXPECT_THAT(page(a), HasSubstr(">etcd: who owns the lock<"));
  sc = with_lock_service_kind(sc, "zookeeper");
  const std::string zk = page(a);
  EXPECT_THAT(zk, HasSubstr(">zookeeper: who owns the lock<"));
  EXPECT_EQ(zk.find("etcd: who owns the lock"), std::string::npos);
  const ScenarioResult r = result_for(a, true);
  const std::string none = render_report_html(ReportData{nullptr, s.h, s.rb, a, r, "unit test"});
  EXPECT_THAT(none, HasSubstr(">who owns the lock<"));
}

TEST_F(ReportHtml, MarksThePauseTheHoldingsTheRejectionAndTheExpiry) {
  const std::string html = page(a);
  // w1 paused 6.004 s (its own measurement), shaded with its length.
  auto pause = marks(html, "mark pause", {{"data-worker", "w1"}});
  ASSERT_EQ(pause.size(), 1u);
  EXPECT_EQ(pause[0]["id"], "mark-23");
  EXPECT_EQ(pause[0]["data-duration-s"], "6.00");
  EXPECT_EQ(pause[0]["data-token"], "2");
  EXPECT_EQ(pause[0]["data-start-s"], "0.13");  // 6.130 s - 6.004 s (the sender's stamp ends the gap)
  EXPECT_THAT(element_text(html, "mark-23"), HasSubstr("paused 6.00 s"));

  // Leases held, by token; w1's belief outlives its key (stale from the delete to the rejection).
  auto hold1 = marks(html, "mark holding", {{"data-worker", "w1"}, {"data-token", "2"}});
  ASSERT_EQ(hold1.size(), 2u);
  EXPECT_EQ(hold1[0]["data-start-s"], "0.04");
  EXPECT_EQ(hold1[0]["data-end-s"], "2.20");
  EXPECT_TRUE(has_class(hold1[1], "stale"));
  EXPECT_EQ(hold1[1]["data-start-s"], "2.20");
  EXPECT_EQ(hold1[1]["data-end-s"], "6.15");
  auto hold2 = marks(html, "mark holding", {{"data-worker", "w2"}});
  ASSERT_EQ(hold2.size(), 1u);
  EXPECT_EQ(hold2[0]["data-token"], "3");
  EXPECT_EQ(hold2[0]["data-start-s"], "2.21");
  EXPECT_EQ(hold2[0]["data-end-s"], "2.43");  // its release.invoke

  // The write that bounced: w1's token 2 against high-water 3.
  auto rejected = marks(html, "mark write rejected");
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0]["id"], "mark-25");
  EXPECT_EQ(rejected[0]["data-worker"], "w1");
  EXPECT_EQ(rejected[0]["data-token"], "2");
  EXPECT_EQ(rejected[0]["data-high-water"], "3");
  EXPECT_THAT(element_text(html, "mark-25"), HasSubstr("token 2 rejected (high-water 3)"));
  EXPECT_EQ(marks(html, "mark write accepted").size(), 3u);
  EXPECT_EQ(marks(html, "mark write accepted-stale").size(), 0u);

  // The lock service: w1 granted 2, w2 queued with 3, w1's key expired, w2's released.
  auto grants = marks(html, "mark grant");
  ASSERT_EQ(grants.size(), 2u);
  EXPECT_EQ(grants[0]["data-token"], "2");
  EXPECT_FALSE(has_class(grants[0], "queued"));
  EXPECT_TRUE(has_class(grants[1], "queued"));
  EXPECT_EQ(grants[1]["data-worker"], "w2");
  EXPECT_THAT(element_text(html, "mark-7"), HasSubstr("w2 queued: token 3"));
  auto expiry = marks(html, "mark delete expiry");
  ASSERT_EQ(expiry.size(), 1u);
  EXPECT_EQ(expiry[0]["id"], "mark-11");
  EXPECT_EQ(expiry[0]["data-worker"], "w1");
  EXPECT_THAT(element_text(html, "mark-11"), HasSubstr("w1&#39;s lease expired: token 2 deleted"));
  EXPECT_EQ(marks(html, "mark delete release", {{"data-token", "3"}}).size(), 1u);
  auto owners = marks(html, "mark owner");
  ASSERT_EQ(owners.size(), 2u);
  EXPECT_EQ(owners[0]["data-token"], "2");
  EXPECT_EQ(owners[1]["data-token"], "3");

  // The fault, with its measured length; w1's abnormal exit is labelled.
  auto fault = marks(html, "mark fault");
  ASSERT_EQ(fault.size(), 1u);
  EXPECT_EQ(fault[0]["data-fault"], "sigstop");
  EXPECT_EQ(fault[0]["data-target"], "w1");
  EXPECT_EQ(fault[0]["data-duration-s"], "6.00");
  EXPECT_THAT(element_text(html, "mark-29"), HasSubstr(">exit 3<"));

  // The high-water mark of ledger: 2, then 3; the rejected token under it.
  std::vector<std::string> steps;
  for (auto& t : marks(html, "mark hw-step", {{"data-key", "ledger"}})) steps.push_back(t["data-token"]);
  EXPECT_THAT(steps, ::testing::ElementsAre("2", "3"));
  EXPECT_EQ(marks(html, "mark hw-point rejected", {{"data-token", "2"}, {"data-high-water", "3"}}).size(), 1u);
}

TEST_F(ReportHtml, AReleaseWhoseDeleteArrivesFirstIsNotStale) {
  // The lock watch can deliver the delete of w2's release before w2's own release.invoke line.
  History h;
  for (std::size_t i = 0; i < s.h.size(); ++i) {
    if (i == 18) continue;  // w2's release.invoke ...
    h.add(s.h[i]);
    if (i == 19) {  // ... arrives after the delete it caused
      Event late = s.h[18];
      late.t_ns = s.h[19].t_ns + kMs / 2;
      h.add(late);
    }
  }
  const Analysis an = analyze(h, s.rb);
  const ScenarioResult r = result_for(an, true);
  const std::string html = render_report_html(ReportData{&sc, h, s.rb, an, r});
  EXPECT_TRUE(marks(html, "mark holding stale", {{"data-worker", "w2"}}).empty());
  EXPECT_EQ(marks(html, "mark holding stale", {{"data-worker", "w1"}}).size(), 1u);  // w1's key really expired
}

TEST_F(ReportHtml, ALostUnlockReplyIsTheHoldersReleaseAndTheStorySaysSo) {
  // A replies partition from the lock service: w1's keepalives and its unlock reach etcd and act,
  // their replies never come back.
  Story t;
  t.h = History{};
  t.add(0, "harness", EventKind::kRunStart);                                     // 0
  t.add(30, "lock", EventKind::kLockGrant, Story::lock_event(kKey1, 2, 2));      // 1
  t.add(40, "w1", EventKind::kAcquireOk, Story::lock_event(kKey1, 2, 2));        // 2
  t.add(45, "lock", EventKind::kLockGrant, Story::lock_event(kKey2, 3, 3));      // 3
  Event inject;
  inject.fault = "partition";
  inject.target = "w1";
  inject.duration_ns = 30'000'000'000;
  inject.detail = "w1 (fc-r-w1) from lock-service 10.213.0.2 (replies)";
  t.add(50, "harness", EventKind::kFaultInject, inject);                          // 4
  Event ka = Story::with_token(2);
  ka.detail = "no reply within 5000 ms";
  t.add(8400, "w1", EventKind::kKeepaliveFail, ka);                               // 5
  t.add(16700, "w1", EventKind::kKeepaliveFail, ka);                              // 6
  t.add(16701, "w1", EventKind::kJobDone, Story::with_token(2));                  // 7
  t.add(16702, "w1", EventKind::kReleaseInvoke, Story::lock_event(kKey1, 2, std::nullopt));  // 8
  t.add(16710, "lock", EventKind::kLockDelete, Story::lock_event(kKey1, 2, 4));   // 9
  t.add(16720, "w2", EventKind::kAcquireOk, Story::lock_event(kKey2, 3, 4));      // 10
  Event failed = Story::lock_event(kKey1, 2, std::nullopt);
  failed.detail = "Read timeout (no reply within 5000 ms)";
  t.add(21700, "w1", EventKind::kReleaseFail, failed);                            // 11
  Event heal = inject;
  t.add(30050, "harness", EventKind::kFaultHeal, heal);                           // 12
  t.add(30100, "harness", EventKind::kRunEnd);                                    // 13
  const Analysis an = analyze(t.h, ReadBack{});
  EXPECT_TRUE(an.figures.expiries_during_work.empty());  // w1 had finished: not an expiry
  const std::string html = render_report_html(ReportData{&sc, t.h, ReadBack{}, an, result_for(an, true), "unit test"});
  EXPECT_THAT(html, HasSubstr("the harness injected partition on w1, from lock-service 10.213.0.2 (replies), for 30.00 s"));
  EXPECT_THAT(html, HasSubstr("w1&#39;s keepalive of token 2 failed (no reply within 5000 ms) (2 failed keepalives with "
                              "this token)"));
  EXPECT_THAT(html, HasSubstr("the lock service deleted w1&#39;s lock key (token 2, revision 4) at w1&#39;s request: its "
                              "unlock arrived and acted"));
  EXPECT_THAT(html, HasSubstr("w1&#39;s release of token 2 failed (Read timeout (no reply within 5000 ms)); the lock "
                              "service had deleted its key all the same (revision 4)"));
  // The timeline draws the delete as w1's release, not an expiry.
  auto released = marks(html, "mark delete release", {{"data-token", "2"}});
  ASSERT_EQ(released.size(), 1u);
  EXPECT_THAT(element_text(html, released[0]["id"]), HasSubstr("released by its holder, which never got the reply"));
  EXPECT_TRUE(marks(html, "mark delete expiry").empty());
}

TEST_F(ReportHtml, ADeleteBeforeTheHoldersUnlockIsAnExpiryNotItsRequest) {
  // Issue 31 item 6, causality: w1, cut off from the lock service, lost its lease (the delete at
  // +14.0 s) and sent its release.invoke 400 ms later. The delete was no unlock of w1's.
  Story t;
  t.h = History{};
  t.add(0, "harness", EventKind::kRunStart);                                     // 0
  t.add(30, "lock", EventKind::kLockGrant, Story::lock_event(kKey1, 2, 2));      // 1
  t.add(40, "w1", EventKind::kAcquireOk, Story::lock_event(kKey1, 2, 2));        // 2
  t.add(13900, "w1", EventKind::kJobDone, Story::with_token(2));                 // 3
  t.add(13990, "lock", EventKind::kLockDelete, Story::lock_event(kKey1, 2, 4));  // 4
  t.add(14390, "w1", EventKind::kReleaseInvoke, Story::lock_event(kKey1, 2, std::nullopt));  // 5
  t.add(14500, "harness", EventKind::kRunEnd);                                    // 6
  const Analysis an = analyze(t.h, ReadBack{});
  const std::string html = render_report_html(ReportData{&sc, t.h, ReadBack{}, an, result_for(an, true), "unit test"});
  EXPECT_THAT(html, ::testing::Not(HasSubstr("its unlock arrived and acted")));
  EXPECT_THAT(html, HasSubstr("the lock service deleted w1&#39;s lock key (token 2, revision 4) before w1 asked to release "
                              "it (its release.invoke came +14.390 s): the lease had expired"));
  EXPECT_TRUE(marks(html, "mark delete release").empty());
}

TEST_F(ReportHtml, OneLockKeyForEveryHolderNamesEachGrantsOwnHolder) {
  // Issue 31 item 6, owners: python-etcd3 keeps the lock at one key for every holder; the key
  // alone would name the last holder as the owner of every grant and delete.
  const std::string key = "/locks/orders";
  Story t;
  t.h = History{};
  t.add(0, "harness", EventKind::kRunStart);                                    // 0
  t.add(30, "lock", EventKind::kLockGrant, Story::lock_event(key, 2, 2));       // 1
  t.add(40, "w1", EventKind::kAcquireOk, Story::lock_event(key, 2, 2));         // 2
  t.add(50, "w1", EventKind::kReleaseInvoke, Story::lock_event(key, 2, std::nullopt));  // 3
  t.add(60, "lock", EventKind::kLockDelete, Story::lock_event(key, 2, 3));      // 4
  t.add(70, "lock", EventKind::kLockGrant, Story::lock_event(key, 4, 4));       // 5
  t.add(80, "w2", EventKind::kAcquireOk, Story::lock_event(key, 4, 4));         // 6
  t.add(90, "harness", EventKind::kRunEnd);                                      // 7
  const Analysis an = analyze(t.h, ReadBack{});
  const std::string html = render_report_html(ReportData{&sc, t.h, ReadBack{}, an, result_for(an, true), "unit test"});
  auto first = marks(html, "mark grant", {{"data-token", "2"}});
  auto second = marks(html, "mark grant", {{"data-token", "4"}});
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(first[0]["data-worker"], "w1");
  EXPECT_EQ(second[0]["data-worker"], "w2");
  EXPECT_THAT(html, HasSubstr("the lock service deleted w1&#39;s lock key (token 2, revision 3) at w1&#39;s request"));
}

TEST_F(ReportHtml, AWriteAcceptedBeforeThePauseWhoseReplyCameAfterItIsNotCalledStale) {
  // Issue 31 item 6, the soak's headline: w1's write with token 2 was accepted by the resource
  // (seq 1) before token 3 existed; w1 was frozen before the reply reached it, and the reply came
  // to the harness only after w2's write with token 3. In receive order it looks accepted below the
  // mark; in acceptance order it is not, and the checkers (which judge that) find nothing.
  Story t;
  t.h = History{};
  t.add(0, "harness", EventKind::kRunStart);                                  // 0
  t.add(30, "lock", EventKind::kLockGrant, Story::lock_event(kKey1, 2, 2));   // 1
  t.add(40, "w1", EventKind::kAcquireOk, Story::lock_event(kKey1, 2, 2));     // 2
  t.add(50, "w1", EventKind::kWriteInvoke, Story::write(2, 0, 0));            // 3
  t.add(2600, "lock", EventKind::kLockDelete, Story::lock_event(kKey1, 2, 5));  // 4
  t.add(2610, "lock", EventKind::kLockGrant, Story::lock_event(kKey2, 3, 6));   // 5
  t.add(2620, "w2", EventKind::kAcquireOk, Story::lock_event(kKey2, 3, 6));     // 6
  t.add(2630, "w2", EventKind::kWriteInvoke, Story::write(3, 0, 0));            // 7
  t.add(2640, "w2", EventKind::kWriteOk, Story::write(3, 0, 0, 3));             // 8
  t.add(4100, "w1", EventKind::kWriteOk, Story::write(2, 0, 0, 2));             // 9: the late reply
  t.add(4200, "harness", EventKind::kRunEnd);                                    // 10
  ReadBack rb;
  rb.log = {AcceptedWrite{1, "ledger", 0, 0, 2, "w1"}, AcceptedWrite{2, "ledger", 0, 0, 3, "w2"}};
  rb.high_water["ledger"] = 3;
  const Analysis an = analyze(t.h, rb, CheckContext::of(sc));
  for (const auto& c : an.checkers)
    if (c.name == "stale-write-accepted") EXPECT_EQ(c.verdict, Verdict::kValid) << c.error;
  const std::string html = render_report_html(ReportData{&sc, t.h, rb, an, result_for(an, true), "unit test"});
  EXPECT_THAT(html, ::testing::Not(HasSubstr("ACCEPTED")));
  EXPECT_THAT(html, HasSubstr("w1&#39;s write with token 2 was accepted in order: no higher token had been accepted for "
                              "ledger (its reply came late)"));
  EXPECT_TRUE(marks(html, "write-mark accepted-stale").empty());
}

/// The story against an unfenced resource: w1's write with token 2 (event 25) accepted, its
/// reply's high-water 3.
History unfenced(const History& story) {
  History h;
  for (std::size_t i = 0; i < story.size(); ++i) {
    Event e = story[i];
    if (i == 25) {
      e.kind = EventKind::kWriteOk;
      e.detail.clear();
    }
    h.add(std::move(e));
  }
  return h;
}

/// The ids of the marks with these classes, in document order.
std::vector<std::string> mark_ids(const std::string& html, const std::string& classes) {
  std::vector<std::string> ids;
  for (auto& t : marks(html, classes)) ids.push_back(t["id"]);
  return ids;
}

// Issue 33: a write is drawn accepted below the mark exactly when the stale-write-accepted checker
// names it. The resource (unfenced) accepted w1's token 2 after w2's token 3 and again after w3's
// token 4: one anomaly (ledger, w1, token 2) with tokens 2, 3, 4 that also cites w2's and w3's
// writes, the higher ones it was accepted after. w2's token 3 lies below the anomaly's highest
// token (4), yet it was accepted in order: the page once marked it stale all the same.
TEST_F(ReportHtml, OnlyTheWritesTheCheckerNamesAreMarkedAcceptedBelowTheMark) {
  Story t;
  t.h = History{};
  t.add(0, "harness", EventKind::kRunStart);                                  // 0
  t.add(10, "w1", EventKind::kWriteInvoke, Story::write(2, 0, 0));            // 1
  t.add(20, "w1", EventKind::kWriteOk, Story::write(2, 0, 0));                // 2
  t.add(30, "w2", EventKind::kWriteInvoke, Story::write(3, 0, 1));            // 3
  t.add(40, "w2", EventKind::kWriteOk, Story::write(3, 0, 1));                // 4: the higher write, in order
  t.add(50, "w1", EventKind::kWriteInvoke, Story::write(2, 0, 2));            // 5
  t.add(60, "w1", EventKind::kWriteOk, Story::write(2, 0, 2));                // 6: below 3
  t.add(70, "w3", EventKind::kWriteInvoke, Story::write(4, 0, 3));            // 7
  t.add(80, "w3", EventKind::kWriteOk, Story::write(4, 0, 3));                // 8
  t.add(90, "w1", EventKind::kWriteInvoke, Story::write(2, 1, 0));            // 9
  t.add(100, "w1", EventKind::kWriteOk, Story::write(2, 1, 0));               // 10: below 4
  t.add(110, "harness", EventKind::kRunEnd);                                   // 11
  ReadBack rb;
  rb.log = {AcceptedWrite{1, "ledger", 0, 0, 2, "w1"}, AcceptedWrite{2, "ledger", 0, 1, 3, "w2"},
            AcceptedWrite{3, "ledger", 0, 2, 2, "w1"}, AcceptedWrite{4, "ledger", 0, 3, 4, "w3"},
            AcceptedWrite{5, "ledger", 1, 0, 2, "w1"}};
  rb.high_water["ledger"] = 4;
  const Analysis an = analyze(t.h, rb, CheckContext::of(sc));
  const CheckerResult* stale = nullptr;
  for (const auto& c : an.checkers)
    if (c.name == "stale-write-accepted") stale = &c;
  ASSERT_NE(stale, nullptr);
  ASSERT_EQ(stale->anomalies.size(), 1u);
  EXPECT_THAT(stale->anomalies[0].tokens, ElementsAre(2, 3, 4));
  EXPECT_THAT(stale->anomalies[0].evidence, ::testing::IsSupersetOf({4u, 6u, 8u, 10u}));  // cites w2's write too

  const std::string html = render_report_html(ReportData{&sc, t.h, rb, an, result_for(an, false), "unit test"});
  EXPECT_THAT(mark_ids(html, "mark write accepted-stale"), ElementsAre("mark-6", "mark-10"));
  EXPECT_THAT(mark_ids(html, "mark hw-point accepted-stale"), ElementsAre("hw-6", "hw-10"));
  auto w2 = marks(html, "mark write", {{"data-worker", "w2"}});
  ASSERT_EQ(w2.size(), 1u);
  EXPECT_EQ(w2[0]["class"], "mark write accepted evidence");
  EXPECT_THAT(element_text(html, "mark-6"), HasSubstr("token 2 accepted below high-water 4 (2 writes)"));
  EXPECT_THAT(html, HasSubstr("w1&#39;s write with token 2 (ledger segment 0 chunk 2) was ACCEPTED although the high-water "
                              "mark was 4 (2 such writes)"));
  EXPECT_THAT(html, Not(HasSubstr("id=\"stale-unjudged\"")));
}

// Issue 33: when the stale-write-accepted checker did not judge (unknown, or not run), no write is
// marked accepted below the mark (not even one whose own reply shows a high-water above its
// token), the timeline says why, and the headline does not call the old token's write accepted in
// order (which only the checker can say).
TEST_F(ReportHtml, AStaleCheckThatDidNotJudgeMarksNoWriteAndSaysSo) {
  const History h = unfenced(s.h);
  const Analysis judged = analyze(h, s.rb);
  auto stale_of = [](Analysis& a) {
    return std::find_if(a.checkers.begin(), a.checkers.end(), [](const CheckerResult& c) { return c.name == "stale-write-accepted"; });
  };
  auto page_with = [&](const Analysis& a) { return render_report_html(ReportData{&sc, h, s.rb, a, result_for(a, false), "unit test"}); };
  // Judged, the checker names event 25, and the page draws it so.
  EXPECT_THAT(mark_ids(page_with(judged), "mark write accepted-stale"), ElementsAre("mark-25"));

  Analysis unknown = judged;
  auto c = stale_of(unknown);
  ASSERT_NE(c, unknown.checkers.end());
  c->verdict = Verdict::kUnknown;
  c->anomalies.clear();
  c->error = "needs resource.accept-log, which resource kind x does not give as configured: not checked";
  const std::string html = page_with(unknown);
  EXPECT_THAT(mark_ids(html, "mark write accepted-stale"), IsEmpty());
  EXPECT_THAT(mark_ids(html, "hw-point accepted-stale"), IsEmpty());
  EXPECT_EQ(marks(html, "mark write accepted", {{"id", "mark-25"}}).size(), 1u);
  EXPECT_THAT(html, HasSubstr("id=\"stale-unjudged\">No write is marked accepted below the high-water mark: the "
                              "stale-write-accepted check was unknown: needs resource.accept-log, which resource kind x "
                              "does not give as configured: not checked, and the page does not judge that itself.</p>"));
  EXPECT_THAT(html, HasSubstr(">accepted below high-water: not judged</text>"));
  auto lines = headline_items(html);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["data-outcome"], "unjudged");
  EXPECT_THAT(html, HasSubstr("w1&#39;s write with token 2 was accepted; whether below the high-water mark is not known: "
                              "the stale-write-accepted check was unknown"));
  EXPECT_THAT(html, Not(HasSubstr("accepted in order")));

  Analysis not_run = judged;
  not_run.checkers.erase(stale_of(not_run));
  const std::string none = page_with(not_run);
  EXPECT_THAT(mark_ids(none, "mark write accepted-stale"), IsEmpty());
  EXPECT_THAT(none, HasSubstr("id=\"stale-unjudged\">No write is marked accepted below the high-water mark: the "
                              "stale-write-accepted check did not run, and the page"));
  EXPECT_THAT(none, Not(HasSubstr("accepted in order")));
}

TEST_F(ReportHtml, TellsTheStoryInSentences) {
  const std::string html = page(a);
  EXPECT_THAT(html, HasSubstr("w1 acquired the lock: token 2"));
  EXPECT_THAT(html, HasSubstr("the harness injected sigstop on w1 for 6.00 s"));
  EXPECT_THAT(html, HasSubstr("the lock service deleted w1&#39;s lock key (token 2): the lease expired while w1 was still working"));
  EXPECT_THAT(html, HasSubstr("w2 acquired the lock: token 3"));
  EXPECT_THAT(html, HasSubstr("w1 measured a pause of 6.00 s while holding token 2"));
  EXPECT_THAT(html, HasSubstr("w1&#39;s write with token 2 (ledger segment 0 chunk 1) was rejected: high-water 3"));
}

TEST_F(ReportHtml, HeadlinesThePauseTheSuccessorAndTheBouncedWrite) {
  const std::string html = page(a);
  auto lines = headline_items(html);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(headline_facts(lines[0]), "w1 token 2 paused 6.00 s; w2 took token 3; old token's write rejected");
  // Each part in words, linked to the event that shows it.
  EXPECT_THAT(html, HasSubstr("href=\"#ev-23\">w1 paused for 6.00 s holding token 2</a>"));
  EXPECT_THAT(html, HasSubstr("href=\"#ev-11\">the lock service expired its lease</a>"));
  EXPECT_THAT(html, HasSubstr("href=\"#ev-12\">w2 took token 3</a>"));
  EXPECT_THAT(html, HasSubstr("href=\"#ev-25\">w1&#39;s write with token 2 bounced off high-water 3</a>"));
}

TEST_F(ReportHtml, CueLinesTieTheLanesAtTheExpiryAndTheBouncedWrite) {
  const std::string html = page(a);
  std::vector<std::string> cues;
  for (auto& t : marks(html, "cue")) cues.push_back(t["class"] + " #" + t["data-event"] + " " + t["data-worker"] + " " + t["data-token"]);
  EXPECT_THAT(cues, ::testing::ElementsAre("cue expiry #11 w1 2", "cue rejected #25 w1 2"));
  EXPECT_THAT(html, HasSubstr(">w1&#39;s lease expired (token 2)</text></a>"));
  EXPECT_THAT(html, HasSubstr(">w1&#39;s write with token 2 bounced off high-water 3</text></a>"));
}

TEST_F(ReportHtml, HeadlinesAStaleWriteTheResourceAccepted) {
  // The same story against an unfenced resource: w1's write with token 2 is accepted.
  const History h = unfenced(s.h);
  const std::string html = page_of(h, false);
  auto lines = headline_items(html);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(headline_facts(lines[0]), "w1 token 2 paused 6.00 s; w2 took token 3; old token's write accepted");
  EXPECT_THAT(html, HasSubstr("href=\"#ev-25\">w1&#39;s write with token 2 was ACCEPTED below high-water 3</a>"));
}

TEST_F(ReportHtml, HeadlinesEverySuccessorBeforeTheOldTokensWrite) {
  // A second successor (w3, token 4) takes the lock after w2 and before w1 resumes.
  History h;
  for (std::size_t i = 0; i < s.h.size(); ++i) {
    h.add(s.h[i]);
    if (i == 20) {
      Event w3 = Story::lock_event("fencecheck/test/k3", 4, 6);
      w3.t_ns = s.h[i].t_ns + kMs;
      w3.source = "w3";
      w3.kind = EventKind::kAcquireOk;
      h.add(std::move(w3));
    }
  }
  const std::string html = page_of(h, true);
  auto lines = headline_items(html);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["data-successors"], "w2:3 w3:4");
  EXPECT_THAT(html, HasSubstr(">w2 took token 3</a> <span class=\"then\">\xE2\x86\x92</span> <a class=\"hl-successor\" href=\"#ev-21\">w3 "
                              "took token 4</a>"));
}

// A long run's page (ReportData::history_events): drawn from the history's first events, with a
// note saying so; the events the analysis cites beyond them are still listed, from its copies.
TEST_F(ReportHtml, ALongRunsPageDrawsItsFirstEventsAndListsTheCitedOnesBeyond) {
  ASSERT_GT(s.h.size(), 16u);
  Analysis with = a;
  Anomaly an;
  an.name = "interleaved-segment";
  an.description = "ledger segment 0 holds chunks written under 2 fencing tokens";
  an.evidence = {9, 14};
  with.checkers.front().anomalies.push_back(an);
  with.evidence_events.emplace(14, s.h[14]);  // analyze_history_file's copy of the cited event
  History first;
  for (std::size_t i = 0; i < 10; ++i) first.add(s.h[i]);
  const ScenarioResult r = result_for(with, false);
  const std::string html = render_report_html(ReportData{&sc, first, s.rb, with, r, "unit test", s.h.size()});
  EXPECT_THAT(html, HasSubstr("id=\"partial-history\">A long run: the history has " + std::to_string(s.h.size()) +
                              " events, and this page draws its first 10"));
  // Beyond the first 10: the events the anomaly and the figures (pauses, expiries, faults) cite.
  std::size_t cited = 0;
  for (const auto& [i, e] : with.evidence_events) cited += i >= 10 ? 1 : 0;
  ASSERT_GE(cited, 1u);
  ASSERT_LT(cited, s.h.size() - 10);  // some events beyond are not cited: they must be left out
  EXPECT_THAT(html, HasSubstr("After the first 10 events, the table lists the " + std::to_string(cited) +
                              " that the anomalies and figures cite."));
  for (std::size_t i = 0; i < s.h.size(); ++i) {
    const bool listed = i < 10 || with.evidence_events.count(i) > 0;
    EXPECT_EQ(html.find("<tr id=\"ev-" + std::to_string(i) + "\"") != std::string::npos, listed) << "event " << i;
  }
  EXPECT_THAT(html, HasSubstr("<tr id=\"ev-14\" class=\"k-"));  // the anomaly's evidence beyond the first 10
  // The whole history's page has no such note (history_events 0: whole).
  EXPECT_THAT(page(with, false), Not(HasSubstr("partial-history")));
}

// ---- a long run: bounded page, the whole run at a glance, windows -----------------------------

TEST(RunOverview, CountsEachSecondOfTheRunByKind) {
  RunOverview ov;
  const auto at = [&](std::int64_t ms, EventKind kind, std::optional<std::int64_t> hw = std::nullopt) {
    Event e;
    e.t_ns = kT0 + ms * kMs;
    e.kind = kind;
    e.high_water = hw;
    ov.observe(e);
  };
  at(0, EventKind::kRunStart);
  at(100, EventKind::kWriteOk, 2);
  at(999, EventKind::kWriteOk, 2);
  at(1000, EventKind::kWriteFail, 3);      // rejected by the fence
  at(1500, EventKind::kWriteFail);         // an invalid request: no mark, no rejection
  at(4200, EventKind::kAcquireOk);
  at(4300, EventKind::kFaultInject);
  at(4400, EventKind::kLockDelete);
  Event unstamped;
  unstamped.kind = EventKind::kWriteOk;  // no receive time: not placed
  ov.observe(unstamped);
  EXPECT_EQ(ov.t0_ns, kT0);
  ASSERT_EQ(ov.seconds.size(), 5u);
  EXPECT_EQ(ov.seconds[0].accepted, 2u);
  EXPECT_EQ(ov.seconds[0].events, 3u);
  EXPECT_EQ(ov.seconds[1].rejected, 1u);
  EXPECT_EQ(ov.seconds[1].events, 2u);
  EXPECT_EQ(ov.seconds[2].events, 0u);
  EXPECT_EQ(ov.seconds[4].acquired, 1u);
  EXPECT_EQ(ov.seconds[4].faults, 1u);
  EXPECT_EQ(ov.seconds[4].deletes, 1u);
}

TEST(WindowAnalysis, KeepsWhatLiesInsideTheWindowRenumberedAndDropsTheRest) {
  Analysis a;
  CheckerResult c;
  c.name = "interleaved-segment";
  Anomaly an;
  an.name = "interleaved-segment";
  an.evidence = {5, 12, 30};
  c.anomalies.push_back(an);
  a.checkers.push_back(c);
  PauseObservation inside, outside;
  inside.worker = "w1", inside.index = 14, inside.duration = std::chrono::seconds(2);
  outside.worker = "w2", outside.index = 8, outside.duration = std::chrono::seconds(9);
  a.figures.pauses = {outside, inside};
  a.figures.longest_pause = {{"w1", inside}, {"w2", outside}};
  FaultWindow before, within;
  before.inject_index = 3, before.heal_index = 15;
  within.inject_index = 11, within.heal_index = 40;
  a.figures.faults = {before, within};
  LeaseExpiry x;
  x.evidence = {2, 4};  // all before the window
  a.figures.expiries_during_work = {x};
  a.evidence_events.emplace(12, Event{});
  a.evidence_events.emplace(30, Event{});
  const Analysis w = window_analysis(a, 10, 10);  // events 10..19
  EXPECT_THAT(w.checkers[0].anomalies[0].evidence, ElementsAre(2u));
  ASSERT_EQ(w.figures.pauses.size(), 1u);
  EXPECT_EQ(w.figures.pauses[0].index, 4u);
  EXPECT_EQ(w.figures.longest_pause.count("w2"), 0u);  // its pause lies outside: not this window's
  ASSERT_EQ(w.figures.faults.size(), 1u);
  EXPECT_EQ(w.figures.faults[0].inject_index, 1u);
  EXPECT_FALSE(w.figures.faults[0].heal_index.has_value());  // healed after the window
  EXPECT_TRUE(w.figures.expiries_during_work.empty());
  ASSERT_EQ(w.evidence_events.size(), 1u);
  EXPECT_EQ(w.evidence_events.begin()->first, 2u);
}

/// A long soak's history in a file: `n` writes by w1 (ten a second), a sigstop of w1 at +100 s,
/// and the anomaly's evidence at +150 s. Returns its path.
fs::path long_history(const fs::path& dir, std::size_t n) {
  const fs::path file = dir / "history.jsonl";
  std::ofstream out(file);
  Event start;
  start.source = "harness", start.kind = EventKind::kRunStart, start.t_ns = kT0;
  out << to_json_line(start) << "\n";
  for (std::size_t i = 0; i < n; ++i) {
    Event e = Story::write(2, static_cast<std::int64_t>(i / 4), static_cast<std::int64_t>(i % 4), 2);
    e.source = "w1";
    e.kind = i % 2 == 0 ? EventKind::kWriteInvoke : EventKind::kWriteOk;
    e.t_ns = kT0 + static_cast<std::int64_t>(i) * 100 * kMs;
    out << to_json_line(e) << "\n";
  }
  return file;
}

TEST(LongRunReport, ThePageStaysUnderFiveMegabytesAndDrawsTheWholeRunAndItsWindows) {
  const fs::path d = fresh_dir("report-long");
  const std::size_t n = 40'000;  // 4,000 s of writes: ten times what a page draws
  const fs::path file = long_history(d, n);
  const ReportHistory h = load_report_history(file);
  ASSERT_EQ(h.first.size(), kReportHistoryEvents);
  ASSERT_EQ(h.events, n + 1);
  EXPECT_EQ(h.overview.seconds.size(), 4000u);
  Scenario sc = smoke_scenario();
  Analysis a;
  CheckerResult c;
  c.name = "stale-write-accepted";
  Anomaly an;
  an.name = "stale-write-accepted";
  an.description = "w1's write with token 2 was accepted below high-water 3";
  an.evidence = {1500, 1502};  // +149.9 s and +150.1 s
  for (std::size_t i : an.evidence) a.evidence_events.emplace(i, Event{});
  a.evidence_events[1500].t_ns = kT0 + 1499 * 100 * kMs;
  a.evidence_events[1502].t_ns = kT0 + 1501 * 100 * kMs;
  c.anomalies.push_back(an);
  a.checkers.push_back(c);
  FaultWindow f;
  f.fault = "sigstop", f.target = "w1", f.inject_index = 1000, f.heal_index = 1060;
  f.inject_t_ns = kT0 + 100'000 * kMs, f.heal_t_ns = kT0 + 106'000 * kMs;
  a.figures.faults = {f};
  ScenarioResult r;
  r.scenario = "soak";
  r.verdict = "invalid";
  ReadBack rb;
  ReportData data{&sc, h.first, rb, a, r, "unit test", h.events, nullptr, &h.overview, std::nullopt,
                  "fencecheck report runs/soak"};
  const std::string html = render_report_html(data);
  EXPECT_LT(html.size(), 5'000'000u);
  EXPECT_THAT(html, HasSubstr("<section id=\"whole-run\">"));
  EXPECT_THAT(html, HasSubstr("data-seconds-per-bucket=\"17\""));  // 4,000 s in at most 240 buckets
  EXPECT_THAT(html, HasSubstr("class=\"ov-fault\""));
  EXPECT_THAT(html, HasSubstr("data-anomaly=\"stale-write-accepted\""));
  // The windows: the fault's from a lease TTL (2 s) before its inject to two after its heal, the
  // anomaly's from a TTL before its first evidence to a TTL after its last.
  EXPECT_THAT(html, HasSubstr("<code>fencecheck report runs/soak --from 98.0 --to 110.0</code>"));
  EXPECT_THAT(html, HasSubstr("<code>fencecheck report runs/soak --from 147.9 --to 152.1</code>"));

  // The anomaly's window as a page of its own: every event of it, numbered as in history.jsonl.
  const ReportWindow w = load_report_window(file, 147.9, 152.1);
  EXPECT_EQ(w.first_index, 1480u);  // event k (k >= 1) is received at (k - 1) x 100 ms
  EXPECT_EQ(w.events.size(), 43u);
  EXPECT_FALSE(w.cut);
  const Analysis wa = window_analysis(a, w.first_index, w.events.size());
  ReportData wd{&sc, w.events, rb, wa, r, "unit test", h.events, nullptr, &h.overview, w.first_index,
                "fencecheck report runs/soak", &a};
  const std::string page = render_report_html(wd);
  EXPECT_THAT(page, HasSubstr("A window of the run: history events 1480 to 1522 of 40001"));
  EXPECT_THAT(page, HasSubstr("<tr id=\"ev-20\" class=\"k-write-ok evidence\"><td>"));  // 1500, cited
  EXPECT_THAT(page, HasSubstr(">1500</"));
  EXPECT_THAT(page, Not(HasSubstr("<section id=\"figures\">")));  // the run's page has them
  EXPECT_THAT(page, HasSubstr("class=\"ov-fault\""));            // the whole run's overview, from the run's analysis
  // A window that is cut says so.
  EXPECT_TRUE(load_report_window(file, 0, 4000, 100).cut);
}

// load_report_history: the first `limit` events and the count of all, every line parsed.
TEST(ReportHistory, KeepsTheFirstEventsCountsAllAndFindsABadLineBeyondThem) {
  Story st;
  const fs::path d = fresh_dir("report-history");
  {
    std::ofstream out(d / "history.jsonl");
    for (const Event& e : st.h) out << to_json_line(e) << "\n";
  }
  const ReportHistory five = load_report_history(d / "history.jsonl", 5);
  ASSERT_EQ(five.first.size(), 5u);
  EXPECT_EQ(five.events, st.h.size());
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(to_json_line(five.first[i]), to_json_line(st.h[i])) << i;
  const ReportHistory all = load_report_history(d / "history.jsonl");
  EXPECT_EQ(all.first.size(), st.h.size());
  EXPECT_EQ(all.events, st.h.size());
  std::ofstream(d / "history.jsonl", std::ios::app) << "{\"kind\":\"no.such.kind\",\"source\":\"w1\",\"t_ns\":1}\n";
  try {
    (void)load_report_history(d / "history.jsonl", 5);
    FAIL() << "a bad last line was not found";
  } catch (const HistoryError& e) {
    EXPECT_EQ(e.line(), st.h.size() + 1);
  }
}

TEST_F(ReportHtml, NoLeaseExpiredNoHeadline) {
  History h;
  for (std::size_t i = 0; i < s.h.size(); ++i)
    if (i != 11) h.add(s.h[i]);  // the lock service never expired w1's key
  const Analysis an = analyze(h, s.rb);
  ASSERT_TRUE(an.figures.expiries_during_work.empty());
  const ScenarioResult r = result_for(an, false);
  const std::string html = render_report_html(ReportData{&sc, h, s.rb, an, r});
  EXPECT_TRUE(headline_items(html).empty());
  EXPECT_THAT(html, Not(HasSubstr("id=\"headline\"")));
  EXPECT_TRUE(marks(html, "cue").empty());
}

TEST_F(ReportHtml, LinksEveryAnomalyToItsEvidenceAndEveryAnchorResolves) {
  Analysis with = a;
  Anomaly an;
  an.name = "interleaved-segment";
  an.description = "ledger segment 0 holds chunks written under 2 fencing tokens";
  an.key = "ledger";
  an.segment = 0;
  an.tokens = {2, 3};
  an.clients = {"w1", "w2"};
  an.evidence = {9, 14};
  with.checkers.front().anomalies.push_back(an);
  with.checkers.front().verdict = Verdict::kInvalid;
  with.verdict = Verdict::kInvalid;
  const std::string html = page(with, false);

  auto sections = start_tags(html, "section");
  auto it = std::find_if(sections.begin(), sections.end(), [](auto& t) { return has_class(t, "anomaly"); });
  ASSERT_NE(it, sections.end());
  EXPECT_EQ((*it)["id"], "anomaly-1");
  EXPECT_EQ((*it)["data-anomaly"], "interleaved-segment");
  const auto from = html.find("id=\"anomaly-1\"");
  const std::string section = html.substr(from, html.find("</section>", from) - from);
  EXPECT_THAT(section, HasSubstr("href=\"#ev-9\""));
  EXPECT_THAT(section, HasSubstr("href=\"#ev-14\""));
  // The cited writes are marked as evidence in the picture.
  EXPECT_TRUE(has_class(marks(html, "mark write", {{"id", "mark-9"}}).at(0), "evidence"));
  EXPECT_TRUE(has_class(marks(html, "mark write", {{"id", "mark-14"}}).at(0), "evidence"));

  // Every in-page link has its target, and ids are unique.
  std::multiset<std::string> ids;
  const std::regex id_re(R"re(\sid="([^"]+)")re"), href_re(R"re(href="#([^"]+)")re");
  for (auto i = std::sregex_iterator(html.begin(), html.end(), id_re); i != std::sregex_iterator(); ++i) ids.insert((*i)[1].str());
  for (const auto& id : ids) EXPECT_EQ(ids.count(id), 1u) << id;
  std::size_t links = 0;
  for (auto i = std::sregex_iterator(html.begin(), html.end(), href_re); i != std::sregex_iterator(); ++i, ++links)
    EXPECT_TRUE(ids.count((*i)[1].str())) << "dangling link #" << (*i)[1].str();
  EXPECT_GT(links, 40u);
  for (std::size_t i = 0; i < s.h.size(); ++i) EXPECT_TRUE(ids.count("ev-" + std::to_string(i))) << i;
}

TEST_F(ReportHtml, IsSelfContainedAndEscapesWhatItShows) {
  const std::string html = page(a);
  EXPECT_THAT(html, Not(HasSubstr("src=")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  EXPECT_THAT(html, Not(HasSubstr("@import")));
  EXPECT_THAT(html, Not(HasSubstr("url(http")));
  EXPECT_THAT(html, Not(HasSubstr("http://")));
  EXPECT_THAT(html, Not(HasSubstr("https://")));
  std::size_t scripts = 0;
  for (auto p = html.find("<script"); p != std::string::npos; p = html.find("<script", p + 1)) ++scripts;
  EXPECT_EQ(scripts, 1u);  // ours, inline
  // Event text is escaped, never markup.
  EXPECT_THAT(html, HasSubstr("w1 (pid 101) &lt;b&gt;&amp;amp;"));
  EXPECT_THAT(html, HasSubstr("&lt;fenced&gt; &amp; &quot;stopped&quot;"));
  EXPECT_THAT(html, Not(HasSubstr("<b>&amp;")));
  EXPECT_THAT(html, Not(HasSubstr("<fenced>")));
}

TEST_F(ReportHtml, ADrawnHistoryWithoutRunEventsOrScenarioStillRenders) {
  History h;
  Event e;
  e.source = "w9";
  e.kind = EventKind::kWriteInfo;
  e.t_ns = 5;
  e.key = "k";
  e.token = 1;
  h.add(e);
  const ReadBack rb;
  const Analysis none;
  ScenarioResult r;
  r.scenario = "odd";
  const std::string html = render_report_html(ReportData{nullptr, h, rb, none, r});
  EXPECT_EQ(marks(html, "lane worker", {{"data-worker", "w9"}}).size(), 1u);
  EXPECT_EQ(marks(html, "mark write unknown", {{"data-token", "1"}}).size(), 1u);
  EXPECT_THAT(html, HasSubstr("no faults injected"));
}

// ---- the stored runs: loader and `fencecheck report` ------------------------------------------

TEST(StoredRun, LoadsAFixtureAndJudgesItAsTheLiveRunDid) {
  const StoredRun run = load_run_directory(kFixtures / "sigstop-past-lease");
  ASSERT_TRUE(run.scenario);
  EXPECT_EQ(run.scenario->name(), "sigstop-past-lease");
  EXPECT_EQ(run.scenario->lease_ttl(), std::chrono::seconds(2));
  EXPECT_EQ(run.history.size(), 86u);
  EXPECT_EQ(run.readback.high_water.at("ledger"), 6);
  const Judgement j = judge_stored_run(run);
  EXPECT_EQ(j.result.verdict, "valid");
  EXPECT_TRUE(j.result.met);
  EXPECT_EQ(j.result.exit_code, kExitMet);
  EXPECT_EQ(j.result.rejected_writes, 1);
  EXPECT_EQ(j.result.expiries_during_work, 1);
  ASSERT_TRUE(j.result.longest_pause_s.has_value());
  EXPECT_NEAR(*j.result.longest_pause_s, 6.003, 0.001);
  EXPECT_EQ(j.result.longest_pause_source, "holder");
  // The same conclusion as the stored verdict.json of the live run.
  const auto stored = nlohmann::json::parse(slurp(kFixtures / "sigstop-past-lease" / "verdict.json"));
  EXPECT_EQ(stored["verdict"], j.result.verdict);
  EXPECT_EQ(stored["expectation"]["met"], j.result.met);

  const StoredRun unfenced = load_run_directory(kFixtures / "sigstop-past-lease-unfenced");
  const Judgement u = judge_stored_run(unfenced);
  EXPECT_EQ(u.result.verdict, "invalid");
  EXPECT_TRUE(u.result.met);  // the control group must show the anomaly
  EXPECT_THAT(u.result.anomalies, ::testing::Contains("interleaved-segment"));
  EXPECT_EQ(u.result.expectation, "anomaly: interleaved-segment");
}

// The judgement reads history.jsonl as a stream, not the events StoredRun keeps for the page: a
// run whose page history holds only its first events is judged on all of them.
TEST(StoredRun, IsJudgedFromItsWholeHistoryFileNotThePagesFirstEvents) {
  StoredRun run = load_run_directory(kFixtures / "sigstop-past-lease-unfenced");
  EXPECT_EQ(run.history_events, run.history.size());
  const Judgement whole = judge_stored_run(run);
  ASSERT_EQ(whole.result.verdict, "invalid");
  run.history.events.resize(5);  // as a long run's page history would be cut
  const Judgement j = judge_stored_run(run);
  EXPECT_EQ(j.result.verdict, "invalid");
  EXPECT_EQ(j.result.anomalies, whole.result.anomalies);
  EXPECT_EQ(j.result.rejected_writes, whole.result.rejected_writes);
  EXPECT_EQ(j.result.duration_s, whole.result.duration_s);
  EXPECT_EQ(to_json(j.analysis, j.expectation).dump(), to_json(whole.analysis, whole.expectation).dump());
}

TEST(StoredRun, ATimedOutHistoryDoesNotMeetItsExpectation) {
  const fs::path d = copy_fixture("sigstop-past-lease", "timeout");
  std::string h = slurp(d / "history.jsonl");
  const auto at = h.find("\"detail\":\"done\",\"kind\":\"run.end\"");
  ASSERT_NE(at, std::string::npos);
  h.replace(at, 15, "\"detail\":\"timeout\"");
  std::ofstream(d / "history.jsonl", std::ios::trunc) << h;
  const Judgement j = judge_stored_run(load_run_directory(d));
  EXPECT_FALSE(j.result.met);
  EXPECT_EQ(j.result.exit_code, kExitNotMet);
  ASSERT_FALSE(j.result.reasons.empty());
  EXPECT_EQ(j.result.reasons.front(), "the run hit its timeout of 60s");
}

// `fencecheck run` judges a run whose planned fault never took effect as not met (it proved nothing
// about that fault); judging the stored run again must say the same, not flip it to met.
TEST(StoredRun, APlannedFaultThatNeverTookEffectDoesNotMeetItsExpectation) {
  const fs::path d = copy_fixture("sigstop-past-lease", "fault-not-taken");
  auto plan = nlohmann::json::parse(slurp(d / "scenario.json"));
  const nlohmann::json extra = {{"kind", "sigstop"}, {"target", "w2"}, {"duration", "1s"},
                                {"trigger", {{"worker", "w2"}, {"event", "write.ok"}, {"count", 99}}}};
  // Two more faults on w2 that never took effect: one fired but could not be injected (the log
  // event below), the other's trigger never happened.
  plan["faults"].push_back(extra);
  plan["faults"].push_back(extra);
  plan["expect"].erase("pause_tolerance");  // met without the new faults: only they can fail it
  std::ofstream(d / "scenario.json", std::ios::trunc) << plan.dump(2);
  std::ofstream(d / "history.jsonl", std::ios::app)
      << R"({"detail":"sigstop on w2 not injected: the worker is not running","fault":"sigstop","kind":"log",)"
      << R"("source":"harness","src_ns":1,"t_ns":1,"target":"w2"})" << "\n";
  const Judgement j = judge_stored_run(load_run_directory(d));
  EXPECT_EQ(j.result.verdict, "valid");
  EXPECT_FALSE(j.result.met);
  EXPECT_EQ(j.result.exit_code, kExitNotMet);
  EXPECT_THAT(j.result.reasons,
              ::testing::ElementsAre("faults[1] (sigstop on w2) could not be injected: the worker is not running",
                                     "faults[2] (sigstop on w2) never fired: its trigger did not happen before the run ended"));
}

// A fault whose heal did not take effect (the harness's "not healed" log event, no fault.heal after
// it) was still in effect when the run ended: `fencecheck run` and `fencecheck report` both judge
// the run not met and name it. A failed attempt that a later heal made good is no reason.
TEST(StoredRun, AFaultLeftInEffectDoesNotMeetItsExpectationAndIsNamed) {
  const std::string not_healed =
      R"({"detail":"sigstop on w1 not healed: sigstop w1 (pid 29931): pid 29931: kill(SIGCONT) failed: )"
      R"(Operation not permitted; it is still in effect and stays outstanding in faults.ledger",)"
      R"("fault":"sigstop","kind":"log","source":"harness","src_ns":6199012849367,"t_ns":6199012849367,"target":"w1"})";
  const auto with_heal_line = [&](const std::string& name, bool keep_heal) {
    const fs::path d = copy_fixture("sigstop-past-lease", name);
    std::string h = slurp(d / "history.jsonl");
    const auto at = h.find(R"("fault":"sigstop","kind":"fault.heal")");
    EXPECT_NE(at, std::string::npos);
    const auto begin = h.rfind('\n', at) + 1;
    h.insert(begin, not_healed + "\n");  // the failed attempt, just before the heal line
    if (!keep_heal) {
      const auto heal_begin = begin + not_healed.size() + 1;
      h.erase(heal_begin, h.find('\n', heal_begin) + 1 - heal_begin);
    }
    std::ofstream(d / "history.jsonl", std::ios::trunc) << h;
    return judge_stored_run(load_run_directory(d));
  };

  const Judgement left = with_heal_line("not-healed", /*keep_heal=*/false);
  EXPECT_FALSE(left.result.met);
  EXPECT_THAT(left.result.reasons,
              ::testing::Contains("fault not healed, still in effect when the run ended: sigstop on w1: sigstop w1 (pid "
                                  "29931): pid 29931: kill(SIGCONT) failed: Operation not permitted; it is still in "
                                  "effect and stays outstanding in faults.ledger"));

  const Judgement retried = with_heal_line("healed-on-retry", /*keep_heal=*/true);
  EXPECT_TRUE(retried.result.met) << ::testing::PrintToString(retried.result.reasons);
  EXPECT_THAT(retried.result.reasons, ::testing::Not(::testing::Contains(HasSubstr("not healed"))));
}

TEST(StoredRun, EveryMissingOrBadFileIsNamed) {
  auto error_of = [](const fs::path& dir) -> std::pair<fs::path, std::string> {
    try {
      (void)load_run_directory(dir);
    } catch (const RunFileError& e) {
      return {e.file(), e.message()};
    }
    return {};
  };
  const fs::path root = fresh_dir("bad-files");
  EXPECT_EQ(error_of(root / "nope").first, root / "nope");
  EXPECT_EQ(error_of(root / "nope").second, "no such run directory");

  fs::path d = copy_fixture("sigstop-past-lease", "no-history");
  fs::remove(d / "history.jsonl");
  EXPECT_EQ(error_of(d).first, d / "history.jsonl");
  EXPECT_EQ(error_of(d).second, "missing");

  d = copy_fixture("sigstop-past-lease", "bad-history");
  std::ofstream(d / "history.jsonl", std::ios::app) << "{\"kind\":\"no.such.kind\",\"source\":\"w1\",\"t_ns\":1}\n";
  auto [file, msg] = error_of(d);
  EXPECT_EQ(file, d / "history.jsonl");
  EXPECT_THAT(msg, HasSubstr("line 87: "));
  EXPECT_THAT(msg, HasSubstr("no.such.kind"));

  d = copy_fixture("sigstop-past-lease", "no-readback");
  fs::remove(d / "readback.json");
  EXPECT_EQ(error_of(d).first, d / "readback.json");
  EXPECT_THAT(error_of(d).second, HasSubstr("missing"));

  d = copy_fixture("sigstop-past-lease", "bad-readback");
  std::ofstream(d / "readback.json", std::ios::trunc) << "{\"resource\": \"store\"";
  EXPECT_EQ(error_of(d).first, d / "readback.json");
  EXPECT_THAT(error_of(d).second, HasSubstr("not valid JSON"));

  d = copy_fixture("sigstop-past-lease", "bad-plan");
  auto plan = nlohmann::json::parse(slurp(d / "scenario.json"));
  plan["lease_ttl"] = "fast";
  std::ofstream(d / "scenario.json", std::ios::trunc) << plan.dump(2);
  std::tie(file, msg) = error_of(d);
  EXPECT_EQ(file, d / "scenario.json");
  EXPECT_THAT(msg, HasSubstr("not a valid scenario: lease_ttl: expected a duration"));
}

TEST(ReportCommand, RewritesTheReportsAndReturnsTheScenariosExitCode) {
  const fs::path d = copy_fixture("sigstop-past-lease-unfenced", "command");
  fs::remove(d / "verdict.json");
  // The run started when its plan was written: junit.xml keeps that time, not the time of `report`.
  fs::last_write_time(d / "scenario.json",
                      fs::file_time_type::clock::from_sys(std::chrono::sys_seconds{std::chrono::seconds{1764504000}}));
  const fs::path suite = d.parent_path() / "out" / "suite.xml";
  std::ostringstream out, err;
  ReportCommandOptions o;
  o.run_dirs = {d};
  o.junit = suite;
  EXPECT_EQ(report_command(o, out, err), kExitMet) << err.str();
  EXPECT_EQ(err.str(), "");
  EXPECT_THAT(out.str(), HasSubstr("sigstop-past-lease-unfenced  anomaly: interleaved-segment  invalid  yes  "
                                   "interleaved-segment,stale-write-accepted"));
  const auto verdict = nlohmann::json::parse(slurp(d / "verdict.json"));
  EXPECT_EQ(verdict["verdict"], "invalid");
  EXPECT_EQ(verdict["expectation"]["met"], true);
  pugi::xml_document doc;
  ASSERT_TRUE(doc.load_file((d / "junit.xml").c_str()));
  EXPECT_STREQ(doc.child("testsuites").child("testsuite").attribute("name").value(), "smoke");
  EXPECT_STREQ(doc.child("testsuites").child("testsuite").attribute("timestamp").value(), "2025-11-30T12:00:00");
  EXPECT_STREQ(doc.child("testsuites").child("testsuite").child("testcase").attribute("name").value(),
               "sigstop-past-lease-unfenced");
  ASSERT_TRUE(doc.load_file(suite.c_str()));
  EXPECT_STREQ(doc.child("testsuites").attribute("tests").value(), "1");
  EXPECT_STREQ(doc.child("testsuites").child("testsuite").attribute("timestamp").value(), "2025-11-30T12:00:00");
  EXPECT_THAT(slurp(d / "report.html"), HasSubstr("<meta name=\"generator\" content=\"fencecheck report\">"));

  // JSON: the same fields as `run --json`.
  std::ostringstream jout;
  o.json = true;
  o.junit.clear();
  EXPECT_EQ(report_command(o, jout, err), kExitMet);
  const auto j = nlohmann::json::parse(jout.str());
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["scenario"], "sigstop-past-lease-unfenced");
  EXPECT_EQ(j[0]["met"], true);
  EXPECT_EQ(j[0]["expiries_during_work"], 1);
}

TEST(ReportCommand, AnUnmetExpectationIsAJUnitFailureNamingTheAnomalyAndItsEvidence) {
  // The unfenced control's stored run judged as if it had expected safety (a real run's history
  // with interleaved writes): exit 1, and junit.xml a schema-valid <failure> that names both
  // anomalies and lists the events that prove them.
  const fs::path d = copy_fixture("sigstop-past-lease-unfenced", "command-fail");
  auto plan = nlohmann::json::parse(slurp(d / "scenario.json"));
  plan["expect"] = {{"outcome", "safe"}};
  std::ofstream(d / "scenario.json", std::ios::trunc) << plan.dump(2);
  std::ostringstream out, err;
  ReportCommandOptions o;
  o.run_dirs = {d};
  EXPECT_EQ(report_command(o, out, err), kExitNotMet);
  EXPECT_THAT(out.str(), HasSubstr("sigstop-past-lease-unfenced  safe         invalid  NO"));
  pugi::xml_document doc;
  ASSERT_TRUE(doc.load_file((d / "junit.xml").c_str()));
  auto suite = doc.child("testsuites").child("testsuite");
  EXPECT_STREQ(suite.attribute("failures").value(), "1");
  auto failure = suite.child("testcase").child("failure");
  ASSERT_TRUE(failure);
  EXPECT_STREQ(failure.attribute("type").value(), "interleaved-segment,stale-write-accepted");
  EXPECT_THAT(std::string(failure.attribute("message").value()),
              HasSubstr("expected a safe run, but checker interleaved-segment found interleaved-segment"));
  const std::string details = failure.text().get();
  const auto verdict = nlohmann::json::parse(slurp(d / "verdict.json"));
  for (const auto& c : verdict["checkers"])
    for (const auto& an : c["anomalies"]) {
      EXPECT_THAT(details, HasSubstr("anomaly " + an["name"].get<std::string>() + " (checker "));
      for (const auto& i : an["evidence"]) EXPECT_THAT(details, HasSubstr("    #" + std::to_string(i.get<int>()) + " +"));
    }
  if (have_xmllint()) {
    const auto [rc, messages] = validate_junit(d / "junit.xml");
    EXPECT_EQ(rc, 0) << messages;
  }
}

TEST(ReportCommand, VerdictJsonHasExactlyTheDocumentedFields) {
  // docs/report-format.md is verdict.json's schema: every field today's verdict.json carries (top
  // level, checkers[], their anomalies[], figures) is documented there, and every field its tables
  // name is written.
  const fs::path d = copy_fixture("sigstop-past-lease-unfenced", "command-schema");
  std::ostringstream out, err;
  ReportCommandOptions o;
  o.run_dirs = {d};
  ASSERT_EQ(report_command(o, out, err), kExitMet) << err.str();
  const auto v = nlohmann::json::parse(slurp(d / "verdict.json"));
  std::set<std::string> written;
  auto keys_of = [&written](const nlohmann::json& j) {
    for (const auto& [k, x] : j.items()) written.insert(k);
  };
  keys_of(v);
  keys_of(v["figures"]);
  ASSERT_FALSE(v["checkers"].empty());
  for (const auto& c : v["checkers"]) {
    keys_of(c);
    for (const auto& a : c["anomalies"]) keys_of(a);
  }

  const std::string doc = slurp(kSource / "docs" / "report-format.md");
  const auto from = doc.find("## verdict.json");
  const auto to = doc.find("## junit.xml");
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  const std::string section = doc.substr(from, to - from);
  for (const auto& k : written)
    EXPECT_TRUE(section.find("`" + k + "`") != std::string::npos || section.find("\"" + k + "\"") != std::string::npos)
        << "verdict.json writes '" << k << "', which docs/report-format.md does not document";
  // The first column of each field table names fields; each must be written.
  std::set<std::string> documented;
  const std::regex row(R"(\n\| ([^|]*) \|)");
  for (auto it = std::sregex_iterator(section.begin(), section.end(), row); it != std::sregex_iterator(); ++it) {
    const std::string cell = (*it)[1].str();
    const std::regex name("`([a-z_]+)`");
    for (auto n = std::sregex_iterator(cell.begin(), cell.end(), name); n != std::sregex_iterator(); ++n) documented.insert((*n)[1].str());
  }
  EXPECT_GT(documented.size(), 25u);
  for (const auto& k : documented) EXPECT_TRUE(written.count(k)) << "docs/report-format.md documents '" << k << "', which verdict.json lacks";
}

TEST(ReportCommand, ABadRunDirectoryIsExit2AndWritesNothing) {
  const fs::path good = copy_fixture("sigstop-past-lease", "cmd-bad");
  fs::remove(good / "verdict.json");
  const fs::path bad = good.parent_path() / "empty";
  fs::create_directories(bad);
  std::ostringstream out, err;
  ReportCommandOptions o;
  o.run_dirs = {good, bad};
  EXPECT_EQ(report_command(o, out, err), kExitBadInput);
  EXPECT_EQ(err.str(), "fencecheck report: " + (bad / "scenario.json").string() + ": missing\n");
  EXPECT_EQ(out.str(), "");
  EXPECT_FALSE(fs::exists(good / "verdict.json"));  // nothing written when any directory is bad
  EXPECT_FALSE(fs::exists(good / "report.html"));
}

TEST(ReportCommand, PointsOutAVerdictThatChanged) {
  const fs::path d = copy_fixture("sigstop-past-lease", "changed");
  auto v = nlohmann::json::parse(slurp(d / "verdict.json"));
  v["verdict"] = "invalid";
  v["expectation"]["met"] = false;
  std::ofstream(d / "verdict.json", std::ios::trunc) << v.dump();
  std::ostringstream out, err;
  ReportCommandOptions o;
  o.run_dirs = {d};
  EXPECT_EQ(report_command(o, out, err), kExitMet);
  EXPECT_EQ(err.str(), "fencecheck report: " + d.string() +
                           ": the stored verdict was invalid (expectation not met); judged again: valid (expectation met)\n");
}

// ---- the table -----------------------------------------------------------------------------------

TEST(ResultsTable, ExpiriesNobodyCouldCountAreNotMeasuredNeverZero) {
  // Lock-service kind none: no issuer history, so no lease expiry can be counted.
  Scenario none = parse_scenario("name: nolock\nlease_ttl: 2s\nlock_service: {kind: none}\nresource: {kind: store}\n"
                                 "job: {key: ledger}\nworkers: [{id: w1, command: [/bin/true]}]\nexpect: {outcome: safe}\n",
                                 "none.yaml");
  ScenarioResult r;
  r.scenario = "nolock";
  summarize_analysis(r, Analysis{}, none);
  EXPECT_FALSE(r.expiries_measured);
  EXPECT_TRUE(r.to_json().at("expiries_during_work").is_null());
  EXPECT_THAT(format_results_table({r}), HasSubstr("  not measured  "));
  EXPECT_EQ(expiries_text(r), "not measured (no issuer history)");
  summarize_analysis(r, Analysis{}, smoke_scenario());
  EXPECT_TRUE(r.expiries_measured);
  EXPECT_EQ(r.to_json().at("expiries_during_work"), 0);
  EXPECT_EQ(expiries_text(r), "0");

  // A black box's holding on etcd ended and etcd's watch does not say why: the one expiry proven
  // is a lower bound, never a complete count.
  Analysis undecided;
  undecided.figures.expiries_during_work.resize(1);
  undecided.figures.expiries_undecided = 2;
  summarize_analysis(r, undecided, smoke_scenario());
  EXPECT_FALSE(r.expiries_measured);
  EXPECT_EQ(r.expiries_undecided, 2);
  EXPECT_TRUE(r.to_json().at("expiries_during_work").is_null());
  EXPECT_EQ(r.to_json().at("expiries_during_work_at_least"), 1);
  EXPECT_EQ(r.to_json().at("expiries_undecided"), 2);
  EXPECT_THAT(format_results_table({r}), HasSubstr("  >=1 (not measured)  "));
  EXPECT_EQ(expiries_text(r), "not measured: at least 1, 2 undecided (a black box's holding ended and the lock "
                              "service did not say whether by expiry or release)");
}

TEST(ResultsTable, HasTheIssuesColumnsAndTheFigures) {
  ScenarioResult a;
  a.scenario = "sigstop-past-lease";
  a.expectation = "safe";
  a.verdict = "valid";
  a.met = true;
  a.rejected_writes = 1;
  a.expiries_during_work = 1;
  a.longest_pause_s = 6.0024;
  a.longest_pause_source = "holder";
  a.duration_s = 8.36;
  a.run_dir = "runs/x";
  ScenarioResult b = a;
  b.scenario = "unfenced";
  b.expectation = "anomaly: interleaved-segment";
  b.verdict = "invalid";
  b.met = false;
  b.anomalies = {"interleaved-segment", "stale-write-accepted"};
  b.rejected_writes = 0;
  b.reasons = {"why not"};
  const std::string t = format_results_table({a, b});
  EXPECT_EQ(t,
            "\n"
            "scenario            expectation                   verdict  met  anomalies                                 rejected  "
            "expiries  longest pause  duration\n"
            "sigstop-past-lease  safe                          valid    yes  -                                                1  "
            "       1          6.00s      8.4s\n"
            "    run directory: runs/x\n"
            "unfenced            anomaly: interleaved-segment  invalid  NO   interleaved-segment,stale-write-accepted         0  "
            "       1          6.00s      8.4s\n"
            "    why not\n"
            "    run directory: runs/x\n");
}

TEST(ResultsTable, RepeatedRunsAreEachARowAJUnitCaseAndASummaryLine) {
  std::vector<ScenarioResult> results;
  for (int i = 1; i <= 3; ++i) {
    ScenarioResult r;
    r.scenario = "catalogue-08-unfenced-side-effect-broken";
    r.expectation = "anomaly: duplicate-effect";
    r.verdict = i == 2 ? "valid" : "invalid";
    r.met = i != 2;
    r.exit_code = r.met ? kExitMet : kExitNotMet;
    r.anomalies = r.met ? std::vector<std::string>{"duplicate-effect"} : std::vector<std::string>{};
    r.run_dir = "runs/r" + std::to_string(i);
    r.repetition = i;
    r.repetitions = 3;
    results.push_back(r);
  }
  ScenarioResult once;
  once.scenario = "smoke";
  once.verdict = "valid";
  once.met = true;
  results.push_back(once);

  EXPECT_EQ(results[1].label(), "catalogue-08-unfenced-side-effect-broken #2/3");
  EXPECT_EQ(once.label(), "smoke");
  const std::string t = format_results_table(results);
  EXPECT_NE(t.find("catalogue-08-unfenced-side-effect-broken #1/3"), std::string::npos) << t;
  EXPECT_NE(t.find("catalogue-08-unfenced-side-effect-broken #3/3"), std::string::npos) << t;
  EXPECT_NE(t.find("run directory: runs/r2"), std::string::npos) << t;
  EXPECT_EQ(format_repeat_summary(results),
            "\nrepeated runs (expectation met / runs):\n"
            "  catalogue-08-unfenced-side-effect-broken  2/3  (invalid 2, valid 1)\n");
  EXPECT_EQ(format_repeat_summary({once}), "");

  const nlohmann::json j = results[2].to_json();
  EXPECT_EQ(j["repetition"], 3);
  EXPECT_EQ(j["repetitions"], 3);
  EXPECT_EQ(junit_case(results[1], nullptr, 0, "catalogue").name, "catalogue-08-unfenced-side-effect-broken #2/3");
  EXPECT_EQ(junit_case(results[1], nullptr, 0, "catalogue").status, JUnitCase::Status::kFailed);
}

// ---- --keep ----------------------------------------------------------------------------------------

TEST(Retention, KeepsTheNewestAndTheProtectedAndTouchesNothingElse) {
  const fs::path root = fresh_dir("keep");
  auto run_dir = [&](const std::string& name, bool plan) {
    fs::create_directories(root / name / "logs");
    std::ofstream(root / name / "history.jsonl") << "\n";
    if (plan) std::ofstream(root / name / "scenario.json") << "{}";
    return root / name;
  };
  const fs::path a = run_dir("20260101T000000Z-a", true);
  const fs::path b = run_dir("20260102T000000Z-b", true);
  const fs::path b2 = run_dir("20260102T000000Z-b-2", true);
  const fs::path c = run_dir("20260103T000000Z-c", true);
  const fs::path no_plan = run_dir("20260100T000000Z-old-but-not-a-run", false);
  const fs::path not_named = run_dir("my-notes", true);
  const fs::path no_scenario = run_dir("20250101T000000Z-", true);     // a stamp, but no scenario name
  const fs::path bad_stamp = run_dir("2025010xT000000Z-old", true);    // not a stamp
  fs::create_directory_symlink(c.filename(), root / "latest");
  fs::create_directory_symlink(a, root / "20250101T000000Z-link");  // a symlink named like a run
  std::ofstream(root / "20250101T000000Z-file") << "x";

  const PruneResult r = prune_run_root(root, 2, {a});
  EXPECT_THAT(r.kept, ::testing::ElementsAre(c, b2, a));
  EXPECT_THAT(r.removed, ::testing::ElementsAre(b));
  EXPECT_TRUE(r.errors.empty());
  EXPECT_TRUE(fs::exists(a / "scenario.json"));
  EXPECT_FALSE(fs::exists(b));
  EXPECT_TRUE(fs::exists(b2));
  EXPECT_TRUE(fs::exists(c));
  EXPECT_TRUE(fs::exists(no_plan));
  EXPECT_TRUE(fs::exists(not_named));
  EXPECT_TRUE(fs::exists(no_scenario));
  EXPECT_TRUE(fs::exists(bad_stamp));
  EXPECT_TRUE(fs::is_symlink(root / "latest"));
  EXPECT_TRUE(fs::is_symlink(root / "20250101T000000Z-link"));
  EXPECT_TRUE(fs::exists(root / "20250101T000000Z-file"));

  const PruneResult zero = prune_run_root(root, 0, {});
  ASSERT_EQ(zero.errors.size(), 1u);
  EXPECT_TRUE(zero.removed.empty());
  EXPECT_TRUE(fs::exists(c));
}

// Two harnesses on one run root: the one that ends first with --keep must not remove the run the
// other is still writing (it failed with "cannot write .readback.json.tmp", exit 4), nor a killed
// run whose ledger still lists a fault that `fencecheck cleanup` has to heal.
TEST(Retention, NeverRemovesALiveRunOrOneWithUnhealedFaults) {
  const fs::path root = fresh_dir("keep-live");
  std::optional<RunDirectory> live = RunDirectory::create(root, "live");
  live->write_json("scenario.json", nlohmann::json::object());
  auto finished_run = [&](const std::string& name) {
    const fs::path d = root / name;
    fs::create_directories(d);
    std::ofstream(d / "scenario.json") << "{}";
    return d;
  };
  const fs::path unhealed = finished_run("20000101T000000Z-killed");
  std::ofstream(unhealed / "faults.ledger") << R"({"op":"inject","id":1,"kind":"sigstop","pid":1})" << "\n";
  const fs::path healed = finished_run("20000101T000001Z-killed-then-cleaned");
  std::ofstream(healed / "faults.ledger") << R"({"op":"inject","id":1,"kind":"sigstop","pid":1})" << "\n"
                                          << R"({"op":"heal","id":1})" << "\n";
  const fs::path newest = finished_run("29991231T235959Z-newest");

  EXPECT_TRUE(RunDirectory::in_use(live->path()));
  EXPECT_FALSE(RunDirectory::in_use(newest));
  const PruneResult r = prune_run_root(root, 1, {});
  EXPECT_THAT(r.kept, ::testing::ElementsAre(newest, live->path(), unhealed));
  EXPECT_THAT(r.removed, ::testing::ElementsAre(healed));
  EXPECT_TRUE(fs::exists(live->path() / "scenario.json"));

  const fs::path live_dir = live->path();
  live.reset();  // the run ended: its directory is an ordinary old run now
  EXPECT_FALSE(RunDirectory::in_use(live_dir));
  const PruneResult after = prune_run_root(root, 1, {});
  EXPECT_THAT(after.removed, ::testing::ElementsAre(live_dir));
  EXPECT_FALSE(fs::exists(live_dir));
  EXPECT_TRUE(fs::exists(unhealed));
}

// Two run roots, one scenario, one second: the CI's residue check once found six network
// namespaces of two runs that had the same id, each started from its own run root (ctest's
// fault_<scenario>_on_zookeeper and _on_redis) and each deleting or missing the other's. The id is
// claimed machine-wide first, so the second run takes "-2" even though its run root is empty.
TEST(RunDirectory, TwoRunRootsInOneSecondNeverShareARunId) {
  const fs::path a = fresh_dir("ids-a");
  const fs::path b = fresh_dir("ids-b");
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::optional<RunDirectory> first = RunDirectory::create(a, "same-scenario");
    std::optional<RunDirectory> second = RunDirectory::create(b, "same-scenario");
    ASSERT_NE(first->run_id(), second->run_id());
    const fs::path marker = run_ids_directory() / first->run_id();
    EXPECT_TRUE(fs::exists(marker)) << marker;
    EXPECT_TRUE(fs::exists(run_ids_directory() / second->run_id()));
    if (first->run_id().substr(0, 16) != second->run_id().substr(0, 16)) continue;  // a second passed between
    EXPECT_EQ(second->run_id(), first->run_id() + "-2");
    EXPECT_EQ(second->path(), b / (first->run_id() + "-2"));
    EXPECT_FALSE(fs::exists(b / first->run_id()));
    first.reset();  // the run ended: its id is free again, and nothing is left of it
    EXPECT_FALSE(fs::exists(marker));
    second.reset();
    return;
  }
  FAIL() << "five pairs of runs each straddled a second";
}

// ---- nights: --keep-nights, --keep-days, the night's summary ------------------------------------

namespace {

/// A finished run directory under root, of night `night` ("" : none recorded, as before nights).
fs::path night_run(const fs::path& root, const std::string& name, const std::string& night) {
  fs::create_directories(root / name / "logs");
  std::ofstream(root / name / "scenario.json") << "{}";
  if (!night.empty()) record_night(root / name, night);
  return root / name;
}

/// A night summary file for `night` under root, as write_night_summary leaves one.
fs::path night_file(const fs::path& root, const std::string& night) {
  const fs::path f = night_summary_path(root, night);
  std::ofstream(f) << R"({"night":")" << night << R"("})";
  return f;
}

}  // namespace

// `--keep 30` of a 5-scenario suite is 6 nights; `--keep-nights N` counts invocations, and keeps or
// removes all run directories of one together, with the night's summary.
TEST(Retention, KeepNightsKeepsTheNewestNightsWholeWithTheirSummaries) {
  const fs::path root = fresh_dir("keep-nights");
  const std::string n1 = "20260101T023000Z-11", n2 = "20260102T023000Z-22", n3 = "20260103T023000Z-33";
  const fs::path legacy = night_run(root, "20251231T023000Z-before-nights", "");
  const fs::path a1 = night_run(root, "20260101T023000Z-a", n1);
  const fs::path a2 = night_run(root, "20260101T023100Z-b", n1);
  const fs::path b1 = night_run(root, "20260102T023000Z-a", n2);
  const fs::path b2 = night_run(root, "20260102T023100Z-b", n2);
  const fs::path b3 = night_run(root, "20260102T023200Z-c", n2);
  const fs::path c1 = night_run(root, "20260103T023000Z-a", n3);
  const fs::path s1 = night_file(root, n1), s2 = night_file(root, n2), s3 = night_file(root, n3);
  const fs::path orphan_summary = night_file(root, "20250101T000000Z-1");  // a night with no run dirs left: not ours to judge
  fs::create_directory_symlink(c1.filename(), root / "latest");
  fs::create_directory_symlink(b2.filename(), root / "latest-failed");

  const PruneResult r = prune_run_root(root, RetentionPolicy{RetentionPolicy::Unit::kNights, 2, 0}, {});
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_THAT(r.kept, ::testing::ElementsAre(c1, b3, b2, b1));
  EXPECT_THAT(r.removed, ::testing::ElementsAre(legacy, a1, a2));
  EXPECT_THAT(r.removed_summaries, ::testing::ElementsAre(s1));
  for (const auto& gone : {legacy, a1, a2, s1}) EXPECT_FALSE(fs::exists(gone)) << gone;
  for (const auto& there : {b1, b2, b3, c1, s2, s3, orphan_summary}) EXPECT_TRUE(fs::exists(there)) << there;
  EXPECT_TRUE(fs::is_symlink(root / "latest"));
  EXPECT_TRUE(fs::exists(root / "latest-failed"));

  // The same root with --keep 2 (run directories) would split night 2: that is what nights avoid.
  const PruneResult dirs = prune_run_root(root, 2, {});
  EXPECT_THAT(dirs.removed, ::testing::ElementsAre(b1, b2));
  EXPECT_TRUE(dirs.removed_summaries.empty()) << "night 2 still has a run directory";
  EXPECT_TRUE(fs::exists(s2));

  const PruneResult zero = prune_run_root(root, RetentionPolicy{RetentionPolicy::Unit::kNights, 0, 0}, {});
  ASSERT_EQ(zero.errors.size(), 1u);
  EXPECT_EQ(zero.errors.front(), "--keep-nights must be at least 1");
}

TEST(Retention, ANightWithARunThatMustStayIsKeptWhole) {
  const fs::path root = fresh_dir("keep-nights-whole");
  const std::string old = "20260101T023000Z-11", mine = "20260102T023000Z-22";
  const fs::path o1 = night_run(root, "20260101T023000Z-a", old);
  const fs::path o2 = night_run(root, "20260101T023100Z-killed", old);
  std::ofstream(o2 / "faults.ledger") << R"({"op":"inject","id":1,"kind":"sigstop","pid":1})" << "\n";
  const fs::path m1 = night_run(root, "20260102T023000Z-a", mine);
  const fs::path newer = night_run(root, "20260103T023000Z-a", "20260103T023000Z-33");
  // keep 1 night: the newest is kept by count, `mine` by protection (this invocation's), and the
  // old night because one of its runs still lists a fault `fencecheck cleanup` must heal.
  const PruneResult r = prune_run_root(root, RetentionPolicy{RetentionPolicy::Unit::kNights, 1, 0}, {m1});
  EXPECT_TRUE(r.removed.empty());
  EXPECT_THAT(r.kept, ::testing::ElementsAre(newer, m1, o2, o1));
  std::ofstream(o2 / "faults.ledger", std::ios::app) << R"({"op":"heal","id":1})" << "\n";
  const PruneResult healed = prune_run_root(root, RetentionPolicy{RetentionPolicy::Unit::kNights, 1, 0}, {m1});
  EXPECT_THAT(healed.removed, ::testing::ElementsAre(o1, o2));
}

TEST(Retention, KeepDaysRemovesTheNightsThatBeganLongerAgoWhole) {
  const fs::path root = fresh_dir("keep-days");
  // now: 2026-01-10 02:00:00 UTC (1768010400)
  const std::time_t now = 1768010400;
  const std::string began_3d = "20260107T020000Z-1", began_2d_1s = "20260108T015959Z-2", began_1d = "20260109T020000Z-3";
  const fs::path x = night_run(root, "20260107T020000Z-a", began_3d);
  // This night began 2 d + 1 s ago and ran past the 2-day line: it goes whole, by when it began.
  const fs::path y1 = night_run(root, "20260108T015959Z-a", began_2d_1s);
  const fs::path y2 = night_run(root, "20260108T020001Z-b", began_2d_1s);
  const fs::path z = night_run(root, "20260109T020000Z-a", began_1d);
  const fs::path no_night = night_run(root, "20260108T020000Z-exactly-2d", "");  // 2 d ago exactly: gone
  const PruneResult r = prune_run_root(root, RetentionPolicy{RetentionPolicy::Unit::kDays, 2, now}, {});
  EXPECT_TRUE(r.errors.empty());
  EXPECT_THAT(r.kept, ::testing::ElementsAre(z));
  EXPECT_THAT(r.removed, ::testing::ElementsAre(x, y1, no_night, y2));
  const PruneResult three = prune_run_root(root, RetentionPolicy{RetentionPolicy::Unit::kDays, 3, now}, {});
  EXPECT_TRUE(three.removed.empty());
}

TEST(Night, IdsSortByStartAndTheRunDirectoryRecordsIt) {
  EXPECT_EQ(new_night_id(1768010400, 4242), "20260110T020000Z-4242");
  const fs::path d = fresh_dir("night-record");
  EXPECT_EQ(recorded_night(d), std::nullopt);
  record_night(d, "20260110T020000Z-4242");
  EXPECT_EQ(recorded_night(d), "20260110T020000Z-4242");
  std::ofstream(d / "night") << "../../etc/passwd\n";  // never a path: retention builds a file name from it
  EXPECT_EQ(recorded_night(d), std::nullopt);
  std::ofstream(d / "night") << "\n";
  EXPECT_EQ(recorded_night(d), std::nullopt);
}

TEST(Night, AMetRunWhosePlannedFaultsCouldNotRunIsIncompleteNotFailedAndSaysWhy) {
  // Issue 32: a soak whose netem faults this kernel cannot give printed "1 of 1 met their
  // expectation" and then "FAILED soak-mixed (exit 3)". One truthful line instead.
  const fs::path root = fresh_dir("night-incomplete");
  ScenarioResult soak;
  soak.scenario = "soak-mixed";
  soak.exit_code = 3;
  soak.met = true;
  soak.verdict = "valid";
  soak.run_dir = root / "20260110T020010Z-soak-mixed";
  fs::create_directories(soak.run_dir);
  soak.reasons = {"met its expectation, but 3 planned netem faults could not run on this machine (no sch_netem): exit 3 "
                  "(`fencecheck run --skip-unavailable` accepts a run without them)"};
  ScenarioResult unmet;
  unmet.scenario = "violates";
  unmet.exit_code = 1;
  unmet.run_dir = root / "20260110T020020Z-violates";
  fs::create_directories(unmet.run_dir);
  NightSummary night;
  night.id = "20260110T020000Z-1";
  night.results = {soak, unmet};
  const NightFiles files = write_night_summary(root, night);
  const std::string footer = format_night_footer(night, files, root);
  EXPECT_THAT(footer, HasSubstr("1 of 2 met their expectation (1 of them incomplete: not every planned fault ran)\n"));
  EXPECT_THAT(footer, HasSubstr("  INCOMPLETE soak-mixed (exit 3): met its expectation, but 3 planned netem faults could not "
                                "run on this machine (no sch_netem): exit 3 (`fencecheck run --skip-unavailable` accepts a "
                                "run without them): " + (soak.run_dir / "report.html").string() + "\n"));
  EXPECT_THAT(footer, Not(HasSubstr("FAILED soak-mixed")));
  EXPECT_THAT(footer, HasSubstr("  FAILED violates (exit 1): "));
}

TEST(Night, TheSummaryListsEveryScenarioAndLatestFailedPointsAtTheFirstFailure) {
  const fs::path root = fresh_dir("night-summary");
  auto result = [&](const std::string& name, int code, bool met, const std::string& verdict, bool with_dir) {
    ScenarioResult r;
    r.scenario = name;
    r.exit_code = code;
    r.met = met;
    r.verdict = verdict;
    r.expectation = "safe";
    if (with_dir) {
      r.run_dir = root / ("20260110T0200" + std::to_string(10 + code) + "Z-" + name);
      fs::create_directories(r.run_dir);
    } else {
      r.reasons.push_back("etcd is not installed: install Debian's etcd-server");
    }
    return r;
  };
  NightSummary night;
  night.id = "20260110T020000Z-4242";
  night.started = 1768010400;
  night.finished = 1768010460;
  night.exit_code = 3;
  night.results = {result("passes", 0, true, "valid", true), result("no-etcd", 3, false, "unknown", false),
                   result("violates", 1, false, "invalid", true), result("also-violates", 1, false, "invalid", true)};
  ScenarioResult skipped = result("skipped", 3, false, "unknown", false);
  skipped.skipped = true;  // --skip-unavailable: not a failure of the night
  night.results.push_back(skipped);

  const NightFiles files = write_night_summary(root, night);
  EXPECT_EQ(files.summary, root / "night-20260110T020000Z-4242.json");
  ASSERT_TRUE(files.first_failed);
  EXPECT_EQ(*files.first_failed, night.results[2].run_dir);
  EXPECT_EQ(fs::read_symlink(root / "latest-failed"), night.results[2].run_dir.filename());
  EXPECT_EQ(fs::read_symlink(root / "latest-night.json"), files.summary.filename());

  const auto doc = nlohmann::json::parse(std::ifstream(files.summary));
  EXPECT_EQ(doc["night"], night.id);
  EXPECT_EQ(doc["started"], "2026-01-10T02:00:00Z");
  EXPECT_EQ(doc["finished"], "2026-01-10T02:01:00Z");
  EXPECT_EQ(doc["exit_code"], 3);
  EXPECT_EQ(doc["interrupted"], false);
  EXPECT_EQ(doc["scenarios"], 5);
  EXPECT_EQ(doc["met"], 1);
  EXPECT_EQ(doc["failed"], nlohmann::json({"no-etcd", "violates", "also-violates"}));
  ASSERT_EQ(doc["runs"].size(), 5u);
  EXPECT_EQ(doc["runs"][2]["scenario"], "violates");
  EXPECT_EQ(doc["runs"][2]["verdict"], "invalid");
  EXPECT_EQ(doc["runs"][2]["met"], false);
  EXPECT_EQ(doc["runs"][2]["exit_code"], 1);
  EXPECT_EQ(doc["runs"][2]["run_dir"], night.results[2].run_dir.string());
  EXPECT_EQ(doc["runs"][2]["run_id"], night.results[2].run_dir.filename().string());
  EXPECT_EQ(doc["runs"][1]["run_id"], "");
  EXPECT_EQ(doc["runs"][0]["met"], true);
  EXPECT_EQ(doc["runs"][4]["skipped"], true);

  const std::string footer = format_night_footer(night, files, root);
  EXPECT_THAT(footer, HasSubstr("night 20260110T020000Z-4242: 1 of 5 met their expectation\n"));
  EXPECT_THAT(footer, HasSubstr("  FAILED violates (exit 1): " + (night.results[2].run_dir / "report.html").string() + "\n"));
  EXPECT_THAT(footer, HasSubstr("  FAILED no-etcd (exit 3): etcd is not installed: install Debian's etcd-server\n"));
  EXPECT_THAT(footer, Not(HasSubstr("FAILED passes")));
  EXPECT_THAT(footer, Not(HasSubstr("FAILED skipped")));
  EXPECT_THAT(footer, HasSubstr("summary: " + files.summary.string() + "\n"));
  EXPECT_THAT(footer, HasSubstr((root / "latest-failed").string() + " -> " + night.results[2].run_dir.filename().string()));

  // The next night meets every expectation: latest-failed goes (it would point at an old failure).
  NightSummary next;
  next.id = "20260111T020000Z-5151";
  next.results = {night.results[0]};
  const NightFiles next_files = write_night_summary(root, next);
  EXPECT_FALSE(next_files.first_failed);
  EXPECT_FALSE(fs::exists(fs::symlink_status(root / "latest-failed")));
  EXPECT_EQ(fs::read_symlink(root / "latest-night.json"), "night-20260111T020000Z-5151.json");
  EXPECT_TRUE(fs::exists(files.summary)) << "the older night's summary stays until retention removes its runs";
  EXPECT_THAT(format_night_footer(next, next_files, root), Not(HasSubstr("latest-failed")));
}

// ---- progress ----------------------------------------------------------------------------------

TEST(Progress, ExpectedDurationOfTheSmokeScenario) {
  // 1 s services + max(2 workers x 12 chunks x 100 ms, 2 x 100 ms + 6 s + 1.2 s) = 8.4 s.
  EXPECT_EQ(expected_duration(smoke_scenario()), std::chrono::milliseconds(8400));
}

struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() {
    EXPECT_EQ(::pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
  }
  ~Pipe() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  std::string drain() const {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    return out;
  }
  /// A 300-column progress line into this pipe, redrawn by the observer's hooks only.
  [[nodiscard]] ProgressObserver::Options options() const {
    ProgressObserver::Options o;
    o.fd = fds[1];
    o.width = 300;
    o.refresh = std::chrono::hours(1);
    return o;
  }
};

TEST(Progress, DrawsScenarioPhaseFaultsAndRejectionsThenAPermanentLine) {
  Pipe p;
  const Scenario sc = smoke_scenario();
  const ProgressObserver::Options o = p.options();
  {
    ProgressObserver progress(o);
    progress.set_position(1, 2);
    progress.on_start(sc, "runs/x");
    progress.on_phase(sc, "workers");
    Story s;
    progress.on_event(sc, s.h[10]);  // fault.inject sigstop w1
    EXPECT_THAT(progress.status_line(), ::testing::StartsWith("[1/2] sigstop-past-lease  workers  "));
    EXPECT_THAT(progress.status_line(), HasSubstr(" / ~8s"));
    EXPECT_THAT(progress.status_line(), HasSubstr("  w1 sigstop  rejected 0  | sigstop w1"));
    progress.on_event(sc, s.h[22]);  // healed
    progress.on_event(sc, s.h[25]);  // w1's write rejected
    EXPECT_THAT(progress.status_line(), HasSubstr("  rejected 1  | w1's write with token 2 rejected"));
    EXPECT_THAT(progress.status_line(), Not(HasSubstr("w1 sigstop")));
    const std::string drawn = p.drain();
    EXPECT_THAT(drawn, HasSubstr("\r\033[K[1/2] sigstop-past-lease  starting  "));
    EXPECT_THAT(drawn, HasSubstr("\r\033[K[1/2] sigstop-past-lease  workers  "));

    ScenarioResult r;
    r.scenario = sc.name();
    r.met = true;
    r.verdict = "valid";
    r.duration_s = 8.36;
    r.run_dir = "runs/x";
    progress.on_finish(sc, r, Analysis{}, RunFigures{});
    EXPECT_EQ(p.drain(), "\r\033[K[1/2] sigstop-past-lease: met (valid) 8.4s  runs/x/report.html\n");
    EXPECT_EQ(progress.status_line(), "");
    progress.scenario_done(r);  // idempotent
    EXPECT_EQ(p.drain(), "");
  }
  EXPECT_EQ(p.drain(), "");  // nothing left to erase
}

TEST(Progress, TellsALeaseExpiryFromARelease) {
  Pipe p;
  const Scenario sc = smoke_scenario();
  ProgressObserver progress(p.options());
  progress.set_position(1, 1);
  progress.on_start(sc, "runs/x");
  Story s;
  progress.on_event(sc, s.h[4]);   // w1 acquired token 2
  progress.on_event(sc, s.h[11]);  // the lock service deletes w1's key: nobody released it
  EXPECT_THAT(progress.status_line(), HasSubstr("| the lock service deleted w1's key (token 2)"));
  progress.on_event(sc, s.h[12]);  // w2 acquired token 3
  progress.on_event(sc, s.h[18]);  // w2 releases ...
  progress.on_event(sc, s.h[19]);  // ... and the delete is that release
  EXPECT_THAT(progress.status_line(), HasSubstr("| w2 released token 3"));
}

// An anomaly found while the run goes (RunObserver::on_anomaly) shows as ANOMALIES n and as the
// latest event; the next scenario starts again from none.
TEST(Progress, ShowsAnomaliesFoundWhileTheRunGoesPerScenario) {
  Pipe p;
  const Scenario sc = smoke_scenario();
  ProgressObserver progress(p.options());
  progress.set_position(1, 2);
  progress.on_start(sc, "runs/x");
  EXPECT_THAT(progress.status_line(), Not(HasSubstr("ANOMALIES")));
  LiveAnomaly a;
  a.anomaly.name = "stale-write-accepted";
  a.anomaly.key = "ledger";
  progress.on_anomaly(sc, a);
  progress.on_anomaly(sc, a);
  EXPECT_THAT(progress.status_line(), HasSubstr("  rejected 0  ANOMALIES 2  | anomaly: stale-write-accepted on ledger"));
  progress.set_position(2, 2);
  progress.on_start(sc, "runs/y");
  EXPECT_THAT(progress.status_line(), Not(HasSubstr("ANOMALIES")));
}

TEST(Progress, ADisabledObserverWritesNothing) {
  Pipe p;
  const Scenario sc = smoke_scenario();
  ProgressObserver::Options o;
  o.fd = p.fds[1];
  o.enabled = false;
  {
    ProgressObserver progress(o);
    progress.set_position(1, 1);
    progress.on_start(sc, "runs/x");
    progress.on_phase(sc, "workers");
    Story s;
    progress.on_event(sc, s.h[25]);
    ScenarioResult r;
    progress.on_finish(sc, r, Analysis{}, RunFigures{});
  }
  EXPECT_EQ(p.drain(), "");
}

TEST(Progress, LogLinesDoNotTearTheStatusLine) {
  Pipe p;
  const Scenario sc = smoke_scenario();
  const ProgressObserver::Options o = p.options();
  std::ostringstream logged;
  auto inner = std::make_shared<spdlog::sinks::ostream_sink_mt>(logged);
  {
    ProgressObserver progress(o);
    auto logger = std::make_shared<spdlog::logger>("progress-test", progress.wrap_sink(inner));
    logger->set_pattern("%v");
    logger->info("before any scenario");
    EXPECT_EQ(p.drain(), "");  // no status line yet: nothing to erase or redraw
    progress.set_position(2, 2);
    progress.on_start(sc, "runs/x");
    (void)p.drain();
    logger->info("etcd started");
    EXPECT_EQ(logged.str(), "before any scenario\netcd started\n");
    const std::string around = p.drain();
    EXPECT_THAT(around, ::testing::StartsWith("\r\033[K\r\033[K[2/2] sigstop-past-lease  starting  "));
  }
}

}  // namespace

// ---- black-box workers and protocol errors (issue 13) -----------------------------------------

namespace {

/// The story without any event of w2's own: w2 is a black box (the lock service, the harness and
/// the store still saw it). Plus a line of w1's that broke the worker protocol.
struct SilentW2 {
  Story s;
  History h;
  Scenario sc = smoke_scenario();
  Analysis a;
  ScenarioResult r;
  std::size_t protocol_error = 0;

  SilentW2() {
    for (const Event& e : s.h)
      if (e.source != "w2") h.add(e);
    Event pe;
    pe.t_ns = h[h.size() - 1].t_ns;
    pe.source = "harness";
    pe.kind = EventKind::kProtocolError;
    pe.target = "w1";
    pe.line_no = 7;
    pe.detail = "w1 line 7: write.ok has no field 'token'";
    pe.line = R"({"kind":"write.ok","key":"<ledger>","chunk":1})";
    protocol_error = h.add(pe);
    a = analyze(h, s.rb, CheckContext::of(sc));
    r = result_for(a, false);
    r.reasons = evaluate_expectation(sc, a).reasons;
    summarize_analysis(r, a, sc);
  }
};

}  // namespace

TEST(BlackBoxReport, TheAnalysisNamesTheSilentWorkerAndTheProtocolError) {
  SilentW2 x;
  EXPECT_THAT(x.a.black_box_workers, ::testing::ElementsAre("w2"));
  ASSERT_EQ(x.a.protocol_errors.size(), 1u);
  EXPECT_THAT(x.r.black_box_workers, ::testing::ElementsAre("w2"));
  ASSERT_EQ(x.r.protocol_errors.size(), 1u);
  EXPECT_EQ(x.r.reasons.front(),
            "w1's event line 7 broke the worker protocol: write.ok has no field 'token' \xE2\x80\x94 the run cannot be "
            "judged safe");
  const nlohmann::json j = x.r.to_json();
  EXPECT_EQ(j["black_box_workers"], (nlohmann::json{"w2"}));
  EXPECT_EQ(j["protocol_errors"][0]["line_no"], 7);
  EXPECT_EQ(j["protocol_errors"][0]["line"], R"({"kind":"write.ok","key":"<ledger>","chunk":1})");
}

TEST(BlackBoxReport, TheTextTableSaysBlackBoxAndShowsTheOffendingLine) {
  SilentW2 x;
  x.r.reasons = {"why not"};
  x.r.run_dir = "runs/x";
  const std::string t = format_results_table({x.r});
  EXPECT_THAT(t, HasSubstr("    why not\n"
                           "    w1's line 7 as received: {\"kind\":\"write.ok\",\"key\":\"<ledger>\",\"chunk\":1}\n"
                           "    w2: black box: judged from the lock service and the resource\n"
                           "    run directory: runs/x\n"));
  ProtocolError long_line{"w3", 2, "", std::string(300, 'x'), 0};
  EXPECT_EQ(protocol_error_line_text(long_line, 10), "w3's line 2 as received: xxxxxxxxxx\xE2\x80\xA6");
}

TEST(BlackBoxReport, JUnitFailureTextHasTheProtocolErrorAndTheBlackBox) {
  SilentW2 x;
  const JUnitCase c = junit_case(x.r, &x.a, kT0, "smoke");
  EXPECT_EQ(c.status, JUnitCase::Status::kFailed);
  EXPECT_EQ(c.message,
            "w1's event line 7 broke the worker protocol: write.ok has no field 'token' \xE2\x80\x94 the run cannot be "
            "judged safe");
  EXPECT_THAT(c.details, HasSubstr("\nprotocol errors (the run cannot be judged safe):\n"
                                   "  - w1's line 7 as received: {\"kind\":\"write.ok\",\"key\":\"<ledger>\",\"chunk\":1}\n"));
  EXPECT_THAT(c.details, HasSubstr("w2: black box: judged from the lock service and the resource\n"));
  EXPECT_THAT(c.system_out, HasSubstr("w2: black box: judged from the lock service and the resource\n"));
  // It survives the XML round trip (the line's '<' escaped by pugixml).
  pugi::xml_document doc;
  ASSERT_TRUE(doc.load_string(render_junit(JUnitSuite{"smoke", "2025-11-30T12:00:00", "ci-7", {c}}).c_str()));
  EXPECT_THAT(std::string(doc.child("testsuites").child("testsuite").child("testcase").child("failure").text().get()),
              HasSubstr(R"(w1's line 7 as received: {"kind":"write.ok","key":"<ledger>","chunk":1})"));
}

TEST(BlackBoxReport, ReportHtmlMarksTheBlackBoxAndListsTheProtocolErrorWithItsLine) {
  SilentW2 x;
  const std::string page = render_report_html(ReportData{&x.sc, x.h, x.s.rb, x.a, x.r, "unit test"});
  std::vector<std::string> black;
  for (auto& t : start_tags(page, "g"))
    if (has_class(t, "lane") && t.count("data-black-box")) black.push_back(t["data-worker"]);
  EXPECT_THAT(black, ::testing::ElementsAre("w2"));
  EXPECT_THAT(element_text(page, "black-box-workers"),
              HasSubstr("<li data-worker=\"w2\"><b>w2</b>: black box: judged from the lock service and the resource"));
  EXPECT_THAT(page, HasSubstr("<section id=\"protocol-errors\">"));
  EXPECT_THAT(page, HasSubstr("<code class=\"offending-line\">{&quot;kind&quot;:&quot;write.ok&quot;,&quot;key&quot;:&quot;"
                              "&lt;ledger&gt;&quot;,&quot;chunk&quot;:1}</code>"));
  EXPECT_THAT(page, HasSubstr("href=\"#ev-" + std::to_string(x.protocol_error) + "\""));
  // Without a black box or a protocol error, neither part is drawn.
  Story plain;
  const Analysis pa = analyze(plain.h, plain.rb, CheckContext::of(x.sc));
  const ScenarioResult pr = result_for(pa, true);
  const std::string clean = render_report_html(ReportData{&x.sc, plain.h, plain.rb, pa, pr, "unit test"});
  EXPECT_THAT(clean, Not(HasSubstr("black-box-workers")));
  EXPECT_THAT(clean, Not(HasSubstr("protocol-errors")));
}

// ---- the longest pause and who measured it (issue 31 item 6) ------------------------------------

namespace {

Scenario pause_scenario(const std::string& w1, const std::string& w2) {
  return parse_scenario("name: p\nlease_ttl: 2s\nresource: {kind: store}\njob: {key: k}\nworkers:\n  - {id: w1" + w1 +
                            "}\n  - {id: w2" + w2 + "}\nexpect: {outcome: safe}\n",
                        "p.yaml");
}

FaultWindow stop_window(const std::string& fault, const std::string& target, double seconds) {
  FaultWindow f;
  f.fault = fault;
  f.target = target;
  f.actual = std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9));
  return f;
}

PauseObservation measured(const std::string& worker, double seconds) {
  PauseObservation p;
  p.worker = worker;
  p.duration = std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9));
  return p;
}

}  // namespace

TEST(LongestPause, ACommandWorkerThatMeasuresNothingShowsTheHarnessWindowNeverAZero) {
  const Scenario sc = pause_scenario(", command: [/bin/true]", ", command: [/bin/true]");
  Analysis a;
  a.figures.faults = {stop_window("sigstop", "w1", 6.004), stop_window("cpu-throttle", "w2", 9.0)};
  ScenarioResult r;
  summarize_analysis(r, a, sc);
  // The sigstop's window, labelled as the harness's; a CPU quota does not stop the worker.
  ASSERT_TRUE(r.longest_pause_s.has_value());
  EXPECT_DOUBLE_EQ(*r.longest_pause_s, 6.004);
  EXPECT_EQ(r.longest_pause_source, "harness");
  EXPECT_EQ(longest_pause_text(r), "6.00 s (harness: fault window)");
  EXPECT_EQ(r.to_json()["longest_pause_source"], "harness");
  EXPECT_THAT(format_results_table({r}), ::testing::HasSubstr("6.00s (harness)"));

  // No stopping fault at all: not measured, and the JSON says null, not 0.
  Analysis quiet;
  quiet.figures.faults = {stop_window("cpu-throttle", "w2", 9.0)};
  ScenarioResult q;
  summarize_analysis(q, quiet, sc);
  EXPECT_FALSE(q.longest_pause_s.has_value());
  EXPECT_EQ(longest_pause_text(q), "not measured");
  EXPECT_TRUE(q.to_json()["longest_pause_s"].is_null());
  EXPECT_THAT(format_results_table({q}), ::testing::HasSubstr("not measured"));
}

TEST(LongestPause, TheHoldersOwnMeasureIsUsedWhereItHasOneAndTheReferenceWorkersZeroIsMeasured) {
  // w1 is the reference worker (it always measures): no pause event means it saw no pause.
  const Scenario builtin = pause_scenario("", "");
  Analysis none;
  ScenarioResult r0;
  summarize_analysis(r0, none, builtin);
  ASSERT_TRUE(r0.longest_pause_s.has_value());
  EXPECT_EQ(*r0.longest_pause_s, 0.0);
  EXPECT_EQ(longest_pause_text(r0), "0.00 s (holder)");

  // A command worker that reported a pause: its own figure, even when the fault window was longer
  // (its pause events are the finer measure of its own stop); the other worker's window counts too.
  const Scenario cmd = pause_scenario(", command: [/bin/true]", ", command: [/bin/true]");
  Analysis a;
  a.figures.longest_pause["w1"] = measured("w1", 5.9);
  a.figures.faults = {stop_window("freeze", "w1", 6.1), stop_window("self-stop", "w2", 3.0)};
  ScenarioResult r;
  summarize_analysis(r, a, cmd);
  ASSERT_TRUE(r.longest_pause_s.has_value());
  EXPECT_DOUBLE_EQ(*r.longest_pause_s, 5.9);
  EXPECT_EQ(r.longest_pause_source, "holder");
  // w2's 7 s stop is longer than w1's measured 5.9 s: the harness's window is the run's longest.
  a.figures.faults = {stop_window("freeze", "w1", 6.1), stop_window("self-stop", "w2", 7.0)};
  summarize_analysis(r, a, cmd);
  EXPECT_DOUBLE_EQ(*r.longest_pause_s, 7.0);
  EXPECT_EQ(r.longest_pause_source, "harness");
}

// ---- how a worker ends: job.done, job.gave_up and its exit (issue 31, item 4) --------------------

namespace {

/// A two-worker scenario of fencecheck-workers (no command to look up): the shortfall rules below
/// do not depend on which program a worker is.
Scenario two_workers() {
  return parse_scenario("name: ends\nlease_ttl: 2s\nresource: {kind: store}\n"
                        "job: {key: ledger, segments: 1, chunks: 2}\n"
                        "workers: [{id: w1}, {id: w2}]\nexpect: {outcome: safe}\n");
}

struct Ends {
  History h;
  std::int64_t t = 1000;
  Event& add(const std::string& source, EventKind kind) {
    Event e;
    e.t_ns = t += 1000;
    e.source = source;
    e.kind = kind;
    h.add(e);
    return h.events.back();
  }
  /// w: hello, acquire.ok (token 5), one acknowledged write.
  void speaks(const std::string& w) {
    add(w, EventKind::kHello).protocol = 1;
    Event& a = add(w, EventKind::kAcquireOk);
    a.token = 5, a.lock_key = "fencecheck/ends/" + w;
    Event& ok = add(w, EventKind::kWriteOk);
    ok.token = 5, ok.key = "ledger", ok.segment = 0, ok.chunk = 0;
  }
  void exits(const std::string& w, const std::string& how, const std::string& stderr_tail = "") {
    Event& e = add("harness", EventKind::kWorkerExit);
    e.target = w, e.detail = how, e.line = stderr_tail;
  }
  /// Both workers' shortfalls: w2 always speaks, finishes and exits 0.
  std::vector<std::string> shortfalls() {
    speaks("w2");
    add("w2", EventKind::kJobDone).token = 5;
    exits("w2", "exit 0");
    return run_shortfalls(two_workers(), h);
  }
};

const std::string kTraceback =
    "Traceback (most recent call last):\n  File \"worker.py\", line 9, in <module>\nZeroDivisionError: division by zero";

}  // namespace

TEST(WorkerEnds, AnExit1WithoutGaveUpIsACrashWithItsStderrTail) {
  Ends x;
  x.speaks("w1");
  x.exits("w1", "exit 1", kTraceback);
  EXPECT_THAT(x.shortfalls(), ElementsAre("worker w1 crashed: exit 1 without job.gave_up (exit 1 alone does not say it "
                                          "gave up); see logs/w1.log; its last stderr lines:\n" + kTraceback));
}

TEST(WorkerEnds, AnExit0WithTheJobUnfinishedIsACrash) {
  Ends x;
  x.speaks("w1");
  x.exits("w1", "exit 0", "connection reset");
  EXPECT_THAT(x.shortfalls(), ElementsAre("worker w1 crashed: exit 0 with its job unfinished (no job.done, no job.gave_up); "
                                          "see logs/w1.log; its last stderr lines:\nconnection reset"));
}

TEST(WorkerEnds, AnExitItsEventsAccountForIsJudgedByTheCheckersAlone) {
  struct Case {
    const char* name;
    std::string source;  // who said it ("" nobody)
    EventKind kind;
    std::string detail;
    std::string exit;
  };
  const Case cases[] = {
      {"it gave up, then exit 1", "w1", EventKind::kJobGaveUp, "fenced out 20 times", "exit 1"},
      {"it gave up, then exit 0", "w1", EventKind::kJobGaveUp, "fenced out 20 times", "exit 0"},
      {"the harness asked it to stop, then exit 0", "harness", EventKind::kLog,
       "schedule over after 10s (3 fault(s) fired): healing what is in effect, stopping the workers", "exit 0"},
      {"the harness ended it", "", EventKind::kLog, "", "terminated by the harness, exit 143"},
  };
  for (const Case& c : cases) {
    Ends x;
    x.speaks("w1");
    if (!c.source.empty()) x.add(c.source, c.kind).detail = c.detail;
    x.exits("w1", c.exit, "a line of stderr");
    EXPECT_THAT(x.shortfalls(), IsEmpty()) << c.name;
  }
}

TEST(WorkerEnds, ABlackBoxsExit0IsItsWordAndItsExit1ACrash) {
  Ends quiet;
  quiet.exits("w1", "exit 0");
  EXPECT_THAT(quiet.shortfalls(), IsEmpty());
  Ends crashed;
  crashed.exits("w1", "exit 1", "Exception in thread \"main\" java.lang.IllegalStateException");
  EXPECT_THAT(crashed.shortfalls(),
              ElementsAre("worker w1 crashed: exit 1 from a black box (it sends no events, so only exit 0 says its job is "
                          "done); see logs/w1.log; its last stderr lines:\nException in thread \"main\" "
                          "java.lang.IllegalStateException"));
}

TEST(WorkerEnds, AnyOtherStatusIsAFailureWhateverTheWorkerSaid) {
  Ends x;
  x.speaks("w1");
  x.add("w1", EventKind::kJobGaveUp).detail = "giving up";
  x.exits("w1", "exit 137");
  EXPECT_THAT(x.shortfalls(), ElementsAre("worker w1 failed: exit 137 (killed by signal 9); see logs/w1.log"));
}
