// The golden record of today's checkers (issue 16): what analyze() — the checkers in checkers.cpp
// and the figures — says on a fixed set of histories, so that the streaming checkers that replace
// them can be proven to give the same verdicts, anomalies and figures.
//
// The cases (golden_cases.h): the report fixtures (tests/report/fixtures/*), the report fuzz
// target's seed corpus (tests/fuzz/corpus/report/*), the checker tests' synthetic stories
// (tests/harness/history_builder.h), and seeded corruptions of each (an event dropped, two adjacent
// events swapped, a token changed, a write.ok duplicated, the history truncated).
// The record: tests/check/golden/checkers.jsonl, one line per case, {"case": name, "result": ...}.
//
//   check_golden_test            re-runs every case and compares with the record
//   check_golden_test --update   rewrites the record (also FENCECHECK_GOLDEN_UPDATE=1)
//
// A change of verdict must be explained in the commit that regenerates the record
// (docs/architecture.md, "The checkers' golden record").
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "golden_cases.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace fencecheck::golden;

namespace {

const fs::path kRecord = fs::path(FENCECHECK_SOURCE_DIR) / "tests" / "check" / "golden" / "checkers.jsonl";

/// The record as stored: case name -> result, in file order (names), failing the test on a bad line.
struct Record {
  std::vector<std::string> order;
  std::map<std::string, json> results;
};

Record read_record() {
  Record r;
  std::ifstream in(kRecord);
  if (!in) {
    ADD_FAILURE() << kRecord << " cannot be read: run check_golden_test --update";
    return r;
  }
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("case") || !j.contains("result")) {
      ADD_FAILURE() << kRecord << ":" << number << ": not a {\"case\", \"result\"} line";
      continue;
    }
    const std::string name = j["case"].get<std::string>();
    if (!r.results.emplace(name, j["result"]).second) ADD_FAILURE() << kRecord << ":" << number << ": case " << name << " twice";
    r.order.push_back(name);
  }
  return r;
}

/// Writes the record from the current checkers and prints what it holds. Returns the exit code.
int update_record() {
  const std::vector<Case> cases = all_cases();
  fs::create_directories(kRecord.parent_path());
  std::ofstream out(kRecord, std::ios::trunc);
  for (const Case& c : cases) out << json{{"case", c.name}, {"result", run_case(c)}}.dump() << '\n';
  out.close();
  if (!out) {
    std::cerr << "cannot write " << kRecord << '\n';
    return 1;
  }
  std::ifstream in(kRecord);
  std::vector<json> results;
  std::string line;
  while (std::getline(in, line)) results.push_back(json::parse(line)["result"]);
  const Tally t = tally(results);
  std::cout << "wrote " << kRecord.string() << ": " << t.cases << " cases (" << t.valid << " valid, " << t.invalid
            << " invalid, " << t.unknown << " unknown, " << t.load_errors << " load errors; " << t.anomalies
            << " anomalies)\n";
  return 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The comparison itself

TEST(FirstDifference, EqualDocumentsHaveNone) {
  const json a = json::parse(R"({"v": "valid", "n": [1, 2, {"x": null}], "f": 0.5})");
  EXPECT_EQ(first_difference(a, a), std::nullopt);
}

TEST(FirstDifference, NamesThePathAndBothValues) {
  const json recorded = json::parse(R"({"checkers": [{"name": "a", "tokens": [3, 4]}]})");
  const json now = json::parse(R"({"checkers": [{"name": "a", "tokens": [3, 5]}]})");
  EXPECT_EQ(first_difference(recorded, now), "/checkers/0[a]/tokens/1: recorded 4, now 5");
}

TEST(FirstDifference, AMissingOrExtraFieldAndALengthAreDifferences) {
  EXPECT_EQ(first_difference(json::parse(R"({"a": 1, "b": 2})"), json::parse(R"({"a": 1})")),
            "/b: recorded 2, now absent");
  EXPECT_EQ(first_difference(json::parse(R"({"a": 1})"), json::parse(R"({"a": 1, "c": "x"})")),
            "/c: recorded absent, now \"x\"");
  EXPECT_EQ(first_difference(json::parse("[1, 2]"), json::parse("[1, 2, 7]")),
            ": recorded 2 elements, now 3 (first extra: 7)");
  EXPECT_EQ(first_difference(json::parse(R"({"t": 1})"), json::parse(R"({"t": "1"})")),
            "/t: recorded 1, now \"1\"");
}

TEST(FirstDifference, FloatsWithinARelativeToleranceOfOneInABillionAreEqual) {
  EXPECT_EQ(first_difference(json(1.0), json(1.0 + 1e-12)), std::nullopt);
  EXPECT_EQ(first_difference(json(6.0e9), json(6.0e9 + 1.0)), std::nullopt);  // 1.7e-10 relative
  EXPECT_EQ(first_difference(json(0.0), json(0.0)), std::nullopt);
  EXPECT_NE(first_difference(json(1.0), json(1.0 + 1e-6)), std::nullopt);
  EXPECT_NE(first_difference(json(0.0), json(1e-300)), std::nullopt);
  // Integers are exact: 6000000000 and 6000000001 differ.
  EXPECT_NE(first_difference(json(6'000'000'000), json(6'000'000'001)), std::nullopt);
}

// ---------------------------------------------------------------------------------------------
// The record

TEST(GoldenRecord, TheCasesAreManyAndCoverEveryVerdictAndLoadErrors) {
  const std::vector<Case> cases = all_cases();
  std::set<std::string> names;
  for (const Case& c : cases) EXPECT_TRUE(names.insert(c.name).second) << "case " << c.name << " twice";
  EXPECT_GE(cases.size(), 100u);

  const Record record = read_record();
  std::vector<json> results;
  for (const auto& [name, result] : record.results) results.push_back(result);
  const Tally t = tally(results);
  EXPECT_EQ(t.cases, cases.size());
  EXPECT_GE(t.valid, 10u);
  EXPECT_GE(t.invalid, 10u);
  EXPECT_GE(t.unknown, 1u);
  EXPECT_GE(t.load_errors, 3u);
  EXPECT_GE(t.anomalies, 20u);
}

TEST(GoldenRecord, HoldsExactlyTheCurrentCasesInOrder) {
  const std::vector<Case> cases = all_cases();
  const Record record = read_record();
  std::vector<std::string> names;
  for (const Case& c : cases) names.push_back(c.name);
  EXPECT_EQ(record.order, names) << "the cases changed: run check_golden_test --update and explain it in the commit";
}

TEST(GoldenRecord, TodaysCheckersGiveTheRecordedResultOnEveryCase) {
  const Record record = read_record();
  std::size_t compared = 0, differing = 0;
  for (const Case& c : all_cases()) {
    const auto it = record.results.find(c.name);
    if (it == record.results.end()) {
      ADD_FAILURE() << "case " << c.name << ": not in the record (check_golden_test --update)";
      continue;
    }
    ++compared;
    const json now = run_case(c);
    if (const auto diff = first_difference(it->second, now)) {
      ++differing;
      ADD_FAILURE() << "case " << c.name << ": differs from the record at " << *diff;
    }
  }
  EXPECT_EQ(differing, 0u) << "of " << compared << " cases compared";
  EXPECT_GT(compared, 0u);
}

int main(int argc, char** argv) {
  bool update = false;
  if (const char* env = std::getenv("FENCECHECK_GOLDEN_UPDATE"); env != nullptr && std::strcmp(env, "1") == 0) update = true;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--update") == 0) update = true;
  if (update) return update_record();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
