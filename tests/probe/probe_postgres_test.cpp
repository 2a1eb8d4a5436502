// fencecheck probe against an embedded PostgreSQL through kind postgres, with the designs of
// docs/resource-postgres.md ("Four broken designs, and their fixes") read from that file: the
// probe must name the broken rule of each broken design and pass each fix and the default SQL.
// Skipped where the postgres kind has not landed (no docs/resource-postgres.md).
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../integration/run_util.h"

namespace {

namespace fs = std::filesystem;

const fs::path kDesignsDoc = fs::path(FENCECHECK_SOURCE_DIR) / "docs/resource-postgres.md";

/// Each "```yaml\n# design X (broken|fixed): ...```" block of the doc, by "X-broken" / "X-fixed".
std::map<std::string, std::string> designs() {
  std::map<std::string, std::string> out;
  const std::string doc = fctest::slurp(kDesignsDoc);
  static const std::regex block(R"(```yaml\n(# design ([a-z]) \((broken|fixed)\)[\s\S]*?)```)");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), block); it != std::sregex_iterator(); ++it)
    out[(*it)[2].str() + "-" + (*it)[3].str()] = (*it)[1].str();
  out["default"] = "resource:\n  kind: postgres\n";
  return out;
}

struct Design {
  std::string name;
  std::map<std::string, std::string> broken;  ///< the rules that must not hold, and their verdicts
  std::vector<std::string> extra;             ///< options
};

/// How ctest and gtest name a case's parameter: the design's name.
void PrintTo(const Design& d, std::ostream* os) { *os << d.name; }

class ProbePostgres : public ::testing::TestWithParam<Design> {};

TEST_P(ProbePostgres, NamesTheBrokenRuleOrPassesTheFix) {
  if (!fs::exists(kDesignsDoc)) GTEST_SKIP() << "the postgres kind has not landed here (" << kDesignsDoc << " is missing)";
  const Design& d = GetParam();
  const auto all = designs();
  ASSERT_TRUE(all.count(d.name)) << "no block \"# design " << d.name << "\" in " << kDesignsDoc;
  const fs::path work = fctest::fresh_dir("probe-pg-" + d.name);
  std::ofstream(work / "resource.yaml") << all.at(d.name);
  std::vector<std::string> args{"probe", "resource.yaml", "--run-root", "runs", "--json", "probe.json"};
  args.insert(args.end(), d.extra.begin(), d.extra.end());
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = fctest::run_fencecheck(args, work);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(fs::exists(work / "probe.json")) << r.code << "\n" << r.out << r.err;
  const auto j = nlohmann::json::parse(fctest::slurp(work / "probe.json"));
  std::cerr << "probe postgres " << d.name << ": exit " << r.code << ", " << wall << " s wall (rules " << j["duration_s"]
            << " s, PostgreSQL start " << j["open_s"] << " s)\n";

  std::map<std::string, std::string> want;
  for (const auto& name : {"lower-token-rejected", "equal-token", "per-key", "concurrent", "rejection-changes-nothing",
                           "survives-restart"})
    want[name] = "holds";
  want["token-required"] = "not-applicable";  // typed SQL parameters: no url to send a raw request to
  for (const auto& [rule, verdict] : d.broken) want[rule] = verdict;
  std::map<std::string, std::string> got;
  for (const auto& rule : j["rules"]) got[rule["rule"].get<std::string>()] = rule["verdict"].get<std::string>();
  EXPECT_EQ(got, want) << r.out;
  EXPECT_EQ(r.code, d.broken.empty() ? 0 : 1) << r.out << r.err;
  EXPECT_EQ(j["resource"]["kind"], "postgres");
  EXPECT_TRUE(j["resource"]["embedded"].get<bool>());
  EXPECT_FALSE(j["resource"]["endpoint"].contains("url"));
}

INSTANTIATE_TEST_SUITE_P(
    Designs, ProbePostgres,
    ::testing::Values(
        Design{"default", {}, {}},
        // (a) no fence predicate: nothing is ever rejected, so the rules that need a rejection are unknown.
        Design{"a-broken",
               {{"lower-token-rejected", "broken"}, {"concurrent", "broken"}, {"rejection-changes-nothing", "unknown"},
                {"survives-restart", "unknown"}},
               {}},
        Design{"a-fixed", {}, {}},
        // (b) SELECT the fence, then write, with pg_sleep(0.2) between: every write takes 0.2 s, so fewer rounds.
        Design{"b-broken", {{"concurrent", "broken"}}, {"--rounds", "5"}},
        Design{"b-fixed", {}, {"--rounds", "5"}},
        // (c) one fence row for the whole table.
        Design{"c-broken", {{"per-key", "broken"}}, {}},
        Design{"c-fixed", {}, {}},
        // (d) a strict comparison: the holder's own second write under its token is refused.
        Design{"d-broken", {{"equal-token", "broken"}}, {}},
        Design{"d-fixed", {}, {}}),
    [](const ::testing::TestParamInfo<Design>& param_info) {
      std::string n = param_info.param.name;
      for (char& c : n)
        if (c == '-') c = '_';
      return n;
    });

}  // namespace
