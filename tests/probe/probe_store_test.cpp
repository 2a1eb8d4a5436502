// fencecheck probe against the real fencecheck-store through the store kind, as a user runs it:
// the fencecheck binary, a resource file, --json and --junit. Each fencing mode must come out as
// designed: per-key keeps every rule; none breaks lower-token-rejected and concurrent; global
// breaks per-key; check-then-write (a short check window) breaks concurrent. Bad files are exit 2
// at file:line:col; a store that cannot be started is exit 3.
#include <chrono>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <pugixml.hpp>

#include "../integration/run_util.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Probe {
  fctest::Result result;
  nlohmann::json json;
  pugi::xml_document junit;
  fs::path work;
  double wall_s = 0;

  std::map<std::string, std::string> verdicts() const {
    std::map<std::string, std::string> out;
    for (const auto& r : json["rules"]) out[r["rule"].get<std::string>()] = r["verdict"].get<std::string>();
    return out;
  }
  const nlohmann::json& rule(const std::string& name) const {
    for (const auto& r : json["rules"])
      if (r["rule"] == name) return r;
    throw std::logic_error("no rule " + name);
  }
  pugi::xml_node junit_case(const std::string& name) const {
    return junit.child("testsuites").child("testsuite").find_child_by_attribute("testcase", "name", name.c_str());
  }
};

/// Writes `resource_yaml` to a file and probes it with --json and --junit.
Probe probe(const std::string& name, const std::string& resource_yaml, std::vector<std::string> extra = {}) {
  Probe p;
  p.work = fctest::fresh_dir("probe-" + name);
  std::ofstream(p.work / "resource.yaml") << resource_yaml;
  std::vector<std::string> args{"probe", "resource.yaml", "--run-root", "runs", "--json", "probe.json", "--junit", "probe.xml"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto t0 = std::chrono::steady_clock::now();
  p.result = fctest::run_fencecheck(args, p.work);
  p.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (fs::exists(p.work / "probe.json")) p.json = nlohmann::json::parse(fctest::slurp(p.work / "probe.json"));
  if (fs::exists(p.work / "probe.xml")) (void)p.junit.load_file((p.work / "probe.xml").c_str());
  ::testing::Test::RecordProperty("probe_wall_s_" + name, std::to_string(p.wall_s));
  std::cerr << "probe " << name << ": exit " << p.result.code << ", " << p.wall_s << " s wall (rules "
            << p.json.value("duration_s", 0.0) << " s, store start " << p.json.value("open_s", 0.0) << " s)\n";
  return p;
}

TEST(ProbeStore, PerKeyKeepsEveryRule) {
  const Probe p = probe("per-key", "resource:\n  kind: store\n  fencing: per-key\n");
  ASSERT_EQ(p.result.code, 0) << p.result.out << p.result.err;
  const std::map<std::string, std::string> all_hold{
      {"lower-token-rejected", "holds"}, {"equal-token", "holds"},    {"per-key", "holds"},
      {"concurrent", "holds"},           {"rejection-changes-nothing", "holds"}, {"token-required", "holds"},
      {"survives-restart", "holds"}};
  EXPECT_EQ(p.verdicts(), all_hold);
  EXPECT_EQ(p.json["exit_code"], 0);
  EXPECT_EQ(p.json["resource"]["kind"], "store");
  EXPECT_EQ(p.json["resource"]["design"], "per-key");
  EXPECT_TRUE(p.json["resource"]["embedded"].get<bool>());
  EXPECT_THAT(p.json["resource"]["endpoint"]["url"].get<std::string>(), StartsWith("http://127.0.0.1:"));

  // Every key has the probe's prefix; 50 rounds by default, each on its own key.
  const std::string prefix = p.json["key_prefix"];
  EXPECT_THAT(prefix, ::testing::MatchesRegex("fencecheck-probe-[0-9a-f]{8}"));
  EXPECT_EQ(p.json["keys"].size(), 63u);  // 7 lower-<b>, equal, per-key-a/b, 50 rounds, no-change, token, restart
  for (const auto& k : p.json["keys"]) EXPECT_THAT(k.get<std::string>(), StartsWith(prefix + "-"));

  // The store's own replies, as the steps recorded them.
  const auto& lower = p.rule("lower-token-rejected")["steps"];
  ASSERT_EQ(lower.size(), 14u);  // b then b - 1 at each of 7 boundaries, 9 -> 10 up to 2^53
  for (std::size_t i = 0; i < lower.size(); i += 2) {
    EXPECT_EQ(lower[i]["outcome"], "accepted");
    EXPECT_EQ(lower[i]["http_status"], 200);
    EXPECT_EQ(lower[i + 1]["outcome"], "rejected");
    EXPECT_EQ(lower[i + 1]["http_status"], 409);
    EXPECT_EQ(lower[i + 1]["high_water"], lower[i]["token"]);
  }
  EXPECT_EQ(lower[12]["token"], std::int64_t{1} << 53);
  const auto& token = p.rule("token-required")["steps"];
  ASSERT_EQ(token.size(), 5u);  // three bad requests, the control, the read-back
  for (int i = 0; i < 3; ++i) EXPECT_EQ(token[i]["http_status"], 400) << token[i].dump();
  EXPECT_THAT(token[0]["error"].get<std::string>(), HasSubstr("missing header Fencing-Token"));
  EXPECT_THAT(token[1]["error"].get<std::string>(), HasSubstr("bad header Fencing-Token"));
  EXPECT_EQ(token[3]["http_status"], 200);
  const auto& restart = p.rule("survives-restart")["steps"];
  ASSERT_EQ(restart.size(), 4u);
  EXPECT_EQ(restart[2]["op"], "restart");
  EXPECT_EQ(restart[3]["outcome"], "rejected");
  EXPECT_EQ(restart[3]["high_water"], restart[0]["token"]);  // the mark came back from the store's log
  EXPECT_THAT(p.rule("concurrent")["evidence"].get<std::string>(),
              HasSubstr("checked: replies in real time, reply seqs, the accept log"));

  // JUnit: seven passing cases.
  auto suite = p.junit.child("testsuites").child("testsuite");
  EXPECT_STREQ(suite.attribute("tests").value(), "7");
  EXPECT_STREQ(suite.attribute("failures").value(), "0");
  EXPECT_STREQ(suite.attribute("errors").value(), "0");
  EXPECT_STREQ(suite.attribute("skipped").value(), "0");
  // The table on stdout, and the probe's directory gone (everything held).
  EXPECT_THAT(p.result.out, HasSubstr("7 rules: 7 hold, 0 broken, 0 not applicable, 0 unknown"));
  EXPECT_TRUE(fs::is_empty(p.work / "runs"));
  // The goal: seconds. Measured in the JSON (rules only) and here (the whole command).
  EXPECT_LT(p.json["duration_s"].get<double>(), 10.0);
}

TEST(ProbeStore, NoneBreaksLowerTokenRejectedAndConcurrent) {
  const Probe p = probe("none", "resource: {kind: store, fencing: none}\n");
  ASSERT_EQ(p.result.code, 1) << p.result.out << p.result.err;
  const auto v = p.verdicts();
  EXPECT_EQ(v.at("lower-token-rejected"), "broken");
  EXPECT_EQ(v.at("concurrent"), "broken");
  EXPECT_EQ(v.at("equal-token"), "holds");
  EXPECT_EQ(v.at("per-key"), "holds");
  EXPECT_EQ(v.at("token-required"), "holds");  // the store parses the header in every mode
  EXPECT_EQ(v.at("rejection-changes-nothing"), "unknown");  // nothing is ever rejected
  EXPECT_EQ(v.at("survives-restart"), "unknown");
  EXPECT_EQ(p.rule("lower-token-rejected")["anomaly"], "stale-write-accepted");
  const auto& lower = p.rule("lower-token-rejected")["steps"];
  EXPECT_EQ(lower[1]["outcome"], "accepted");
  EXPECT_LT(lower[1]["token"].get<std::int64_t>(), lower[0]["token"].get<std::int64_t>());

  // concurrent's proof: a pair on one key, the lower token sent after the higher one's accept came back.
  const auto& steps = p.rule("concurrent")["steps"];
  ASSERT_GE(steps.size(), 2u);
  EXPECT_EQ(steps[0]["key"], steps[1]["key"]);
  EXPECT_GT(steps[0]["token"].get<std::int64_t>(), steps[1]["token"].get<std::int64_t>());
  EXPECT_LT(steps[0]["replied_ms"].get<double>(), steps[1]["sent_ms"].get<double>());
  EXPECT_EQ(steps[1]["outcome"], "accepted");

  EXPECT_THAT(p.result.out, HasSubstr("\nlower-token-rejected: broken (stale-write-accepted)\n"));
  EXPECT_THAT(p.result.out, HasSubstr("\nconcurrent: broken (stale-write-accepted)\n"));
  auto failure = p.junit_case("concurrent").child("failure");
  ASSERT_TRUE(failure);
  EXPECT_STREQ(failure.attribute("type").value(), "stale-write-accepted");
  EXPECT_TRUE(p.junit_case("per-key").child("failure").empty());
  // Kept for the post-mortem: the store's data and log.
  EXPECT_FALSE(fs::is_empty(p.work / "runs"));
  EXPECT_FALSE(p.json["probe_dir"].is_null());
}

TEST(ProbeStore, GlobalBreaksPerKey) {
  const Probe p = probe("global", "resource:\n  kind: store\n  fencing: global\n");
  ASSERT_EQ(p.result.code, 1) << p.result.out << p.result.err;
  const auto v = p.verdicts();
  EXPECT_EQ(v.at("per-key"), "broken");
  for (const auto& [rule, verdict] : v)
    if (rule != "per-key") {
      EXPECT_EQ(verdict, "holds") << rule;
    }
  const auto& r = p.rule("per-key");
  EXPECT_EQ(r["anomaly"], "cross-key-rejection");
  EXPECT_EQ(r["steps"][1]["outcome"], "rejected");
  EXPECT_THAT(r["steps"][1]["error"].get<std::string>(), HasSubstr("global high-water mark"));
  EXPECT_EQ(r["steps"][1]["high_water"], r["steps"][0]["token"]);
  EXPECT_STREQ(p.junit_case("per-key").child("failure").attribute("type").value(), "cross-key-rejection");
}

TEST(ProbeStore, CheckThenWriteBreaksConcurrent) {
  // 20 rounds: each write waits out the 20 ms window, so a round costs up to 3 windows.
  const Probe p = probe("check-then-write", "resource:\n  kind: store\n  fencing: check-then-write\n  check_window: 20ms\n",
                        {"--rounds", "20"});
  ASSERT_EQ(p.result.code, 1) << p.result.out << p.result.err;
  const auto v = p.verdicts();
  EXPECT_EQ(v.at("concurrent"), "broken");
  for (const auto& [rule, verdict] : v)
    if (rule != "concurrent") {
      EXPECT_EQ(verdict, "holds") << rule;  // one writer at a time sees no race
    }
  // The store's accept log shows the lower token accepted after the higher one (a higher seq).
  bool log_cited = false;
  const auto& steps = p.rule("concurrent")["steps"];
  for (std::size_t i = 0; i + 1 < steps.size(); ++i)
    if (steps[i]["op"] == "log" && steps[i + 1]["op"] == "log") {
      log_cited = true;
      EXPECT_EQ(steps[i]["key"], steps[i + 1]["key"]);
      EXPECT_GT(steps[i]["token"].get<std::int64_t>(), steps[i + 1]["token"].get<std::int64_t>());
      EXPECT_LT(steps[i]["seq"].get<std::int64_t>(), steps[i + 1]["seq"].get<std::int64_t>());
      break;
    }
  EXPECT_TRUE(log_cited) << p.rule("concurrent").dump(2);
}

TEST(ProbeStore, AScenarioIsProbedForItsResource) {
  const fs::path work = fctest::fresh_dir("probe-scenario");
  const auto r = fctest::run_fencecheck(
      {"probe", std::string(FENCECHECK_SOURCE_DIR) + "/scenarios/catalogue/03-global-high-water-broken.yaml", "--run-root",
       "runs", "--json", "-", "--rounds", "5"},
      work);
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);  // --json -: JSON alone on stdout
  EXPECT_EQ(j["resource"]["design"], "global");
  EXPECT_EQ(j["options"]["rounds"], 5);
  EXPECT_EQ(j["rules"][2]["rule"], "per-key");
  EXPECT_EQ(j["rules"][2]["verdict"], "broken");
}

TEST(ProbeStore, BadFilesAreExitTwoAtFileLineColumn) {
  const fs::path work = fctest::fresh_dir("probe-bad");
  std::ofstream(work / "typo.yaml") << "resource:\n  kind: store\n  fencing: per_key\n";
  std::ofstream(work / "syntax.yaml") << "resource: {kind: store\n";
  std::ofstream(work / "json.json") << R"({"resource": {"kind": "store", "check_window": "5ms"}})";
  const std::map<std::string, std::string> want{
      {"typo.yaml", "typo.yaml:3:12: resource.fencing: unknown fencing mode \"per_key\"; expected one of: per-key, none, "
                    "global, check-then-write\n"},
      {"syntax.yaml", "syntax.yaml:2:1: YAML syntax error: end of map flow not found\n"},
      {"json.json", "json.json:1:48: resource.check_window: check_window is only for fencing check-then-write (fencing is "
                    "per-key)\n"},
  };
  for (const auto& [file, message] : want) {
    // Each run in a directory of its own (run_fencecheck's output files are per directory).
    const fs::path dir = work / ("run-" + file);
    fs::create_directories(dir);
    const auto r = fctest::run_fencecheck({"probe", "../" + file, "--run-root", "runs"}, dir);
    EXPECT_EQ(r.code, 2) << file;
    EXPECT_EQ(r.err, "../" + message) << file;
    EXPECT_EQ(r.out, "") << file;
    EXPECT_FALSE(fs::exists(dir / "runs")) << file;  // nothing was started
  }
  const fs::path dir = work / "run-rounds";
  fs::create_directories(dir);
  const auto r = fctest::run_fencecheck({"probe", "../typo.yaml", "--rounds", "0"}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--rounds: Value 0 not in range 1 to 100000"));
}

TEST(ProbeStore, AStoreThatCannotBeStartedIsExitThree) {
  const fs::path work = fctest::fresh_dir("probe-unavailable");
  std::ofstream(work / "resource.yaml") << "resource: {kind: store}\n";
  fs::create_directories(work / "empty-bin");
  const auto r = fctest::run_fencecheck({"probe", "resource.yaml", "--run-root", "runs", "--bin-dir", "empty-bin"}, work);
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_EQ(r.err, "fencecheck probe: resource store (resource.yaml): fencecheck-store not found in empty-bin (it is built "
                   "beside fencecheck; FENCECHECK_BIN_DIR or --bin-dir point elsewhere)\n");
  EXPECT_TRUE(fs::is_empty(work / "runs"));
}

}  // namespace
