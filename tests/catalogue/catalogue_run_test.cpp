// One catalogue scenario, run for real: `catalogue_run_test SCENARIO.yaml` runs the real
// fencecheck on that one file (its own run root) and asserts, from the run directory's
// verdict.json, that the verdict met the scenario's expectation: a broken design's run is
// invalid and names every anomaly the scenario expects; a correct design's run is valid with no
// anomaly (under lock-service kind none, the issuer's checkers are unknown for want of its history,
// and a correct design's run cannot be valid: its scenario lists those checkers in
// expect.accept_unknown, and its run is met with an unknown verdict, none of them invalid). CMake registers one ctest test per file of scenarios/catalogue/ (label catalogue), so
// ctest -j2 runs two at a time.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "../integration/run_util.h"
#include "fencecheck/harness/scenario.h"

namespace {

using namespace fencecheck::harness;
namespace fs = std::filesystem;

std::string g_scenario;  // argv[1]

TEST(CatalogueRun, VerdictMeetsTheExpectation) {
  ASSERT_FALSE(g_scenario.empty()) << "usage: catalogue_run_test SCENARIO.yaml";
  const Scenario sc = load_scenario(g_scenario);
  const fs::path work = fctest::fresh_dir("catalogue-" + sc.name());
  const fs::path root = work / "runs";
  const fctest::Result r = fctest::run_fencecheck({"run", "--run-root", root.string(), "--json", g_scenario}, work);
  const fs::path dir = fctest::only_run_dir(root);
  ASSERT_FALSE(dir.empty()) << "no run directory; exit " << r.code << "\n" << r.out << r.err;
  SCOPED_TRACE("run directory " + dir.string());
  const nlohmann::json v = nlohmann::json::parse(fctest::slurp(dir / "verdict.json"));

  // What the checkers found, from verdict.json itself.
  // Every checker decides, with one exception: in a broken design's run (invalid whatever else is
  // found) a checker the run's history cannot serve may say unknown with its reason, when it is
  // not one the scenario expects. Redis's pair b: the restarted server's first holding can come
  // and go before the watch has subscribed again, so ungranted-holding cannot match it (never
  // valid, docs/scenario-format.md); it must not fail the pair whose anomalies are found.
  const auto& expect = sc.expect();
  std::set<std::string> found;
  // Lock-service kind none has no issuer history: the checkers that read it are unknown for that
  // reason alone (checker.h, kNoIssuerHistory), and for no other.
  const bool no_issuer = sc.lock_service().kind == kNoLockService;
  const auto& accepted = sc.expect().accept_unknown;
  for (const auto& c : v.at("checkers")) {
    const std::string name = c.at("name");
    const bool expected = std::find(expect.anomalies.begin(), expect.anomalies.end(), name) != expect.anomalies.end();
    const bool accepted_unknown = std::find(accepted.begin(), accepted.end(), name) != accepted.end();
    if (expect.outcome == Outcome::kAnomaly && !expected && c.at("verdict") == "unknown")
      EXPECT_FALSE(c.value("error", "").empty()) << "checker " << name << " is unknown without a reason: " << c.dump();
    else if (!(no_issuer && c.value("error", "") == "the scenario's lock service is kind none: no issuer history") &&
             !accepted_unknown)
      EXPECT_NE(c.at("verdict"), "unknown") << "checker " << name << " could not decide: " << c.dump();
    for (const auto& a : c.value("anomalies", nlohmann::json::array())) found.insert(a.at("name").get<std::string>());
  }
  if (expect.outcome == Outcome::kAnomaly) {
    EXPECT_EQ(v.at("verdict"), "invalid");
    for (const auto& name : expect.anomalies) EXPECT_TRUE(found.count(name)) << "expected anomaly " << name << " missing";
  } else if (!accepted.empty()) {
    EXPECT_NE(v.at("verdict"), "invalid");  // unknown only through the accepted checkers (above)
    EXPECT_TRUE(found.empty()) << "anomalies in a correct design's run: " << *found.begin();
  } else {
    EXPECT_EQ(v.at("verdict"), "valid");
    EXPECT_TRUE(found.empty()) << "anomalies in a correct design's run: " << *found.begin();
  }
  EXPECT_EQ(v.at("expectation").at("met"), true) << v.at("expectation").dump();
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const nlohmann::json results = nlohmann::json::parse(r.out);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].at("met"), true);
  if (!HasFailure()) fs::remove_all(work);  // keep a failed run's directory for the log
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc > 1) g_scenario = argv[1];
  return RUN_ALL_TESTS();
}
