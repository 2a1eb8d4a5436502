// Integration tests of docs/resource-postgres.md's "Four broken designs, and their fixes": every
// ```yaml block there that starts with "# design " is read from the document itself, its
// `resource:` mapping parsed by the postgres kind as a scenario's would be, and run on its own
// embedded PostgreSQL against the fencing rules:
//   own token   the holder's second chunk under the same token is accepted
//   stale       a lower token after a higher one on the same key is rejected
//   per key     a lower token on another key is accepted
//   race        (designs with a pg_sleep window) a holder paused between check and write does not
//               land its lower token after a newer holder's higher one
// Each broken design must break exactly its rule; each fix must keep all of them.
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pg_test_util.h"

namespace {

using namespace fencecheck::pgtest;

struct Design {
  std::string id;  // "a (broken)"
  std::string yaml;
};

std::vector<Design> designs_in_doc() {
  std::ifstream in(std::string(FENCECHECK_SOURCE_DIR) + "/docs/resource-postgres.md");
  std::vector<Design> out;
  std::string line;
  std::optional<std::string> block;
  while (std::getline(in, line)) {
    if (!block && line == "```yaml") {
      block.emplace();
    } else if (block && line == "```") {
      if (block->rfind("# design ", 0) == 0) {
        const auto colon = block->find(':');
        out.push_back({block->substr(9, colon - 9), *block});
      }
      block.reset();
    } else if (block) {
      *block += line + "\n";
    }
  }
  return out;
}

nlohmann::json to_json(const YAML::Node& n) {
  if (n.IsMap()) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& kv : n) j[kv.first.as<std::string>()] = to_json(kv.second);
    return j;
  }
  if (n.IsSequence()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& item : n) j.push_back(to_json(item));
    return j;
  }
  return n.as<std::string>();
}

struct Rules {
  bool own_token = false;
  bool stale_rejected = false;
  bool per_key = false;
  std::optional<bool> race_safe;  // designs without a window: not run
  bool operator==(const Rules&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Rules& r) {
  os << "{own token " << r.own_token << ", stale rejected " << r.stale_rejected << ", per key " << r.per_key
     << ", race safe " << (r.race_safe ? (*r.race_safe ? "1" : "0") : "-") << "}";
  return os;
}

const std::map<std::string, Rules> kExpected{
    {"a (broken)", {true, false, true, std::nullopt}},  // no predicate: the stale write lands
    {"a (fixed)", {true, true, true, std::nullopt}},
    {"b (broken)", {true, true, true, false}},  // sequentially fine; the race lands the lower token
    {"b (fixed)", {true, true, true, true}},
    {"c (broken)", {true, true, false, std::nullopt}},  // one mark for every key
    {"c (fixed)", {true, true, true, std::nullopt}},
    {"d (broken)", {false, true, true, std::nullopt}},  // the holder's second chunk bounces
    {"d (fixed)", {true, true, true, std::nullopt}},
};

class DocDesign : public ::testing::TestWithParam<std::string> {};

TEST(PostgresDesignsDoc, HoldsEveryDesignPair) {
  std::map<std::string, int> seen;
  for (const auto& d : designs_in_doc()) ++seen[d.id];
  for (const auto& [id, rules] : kExpected) EXPECT_EQ(seen[id], 1) << "design " << id << " in the document";
  EXPECT_EQ(seen.size(), kExpected.size());
}

TEST_P(DocDesign, BreaksExactlyItsRule) {
  const std::string id = GetParam();
  std::optional<Design> design;
  for (auto& d : designs_in_doc())
    if (d.id == id) design = d;
  ASSERT_TRUE(design) << id;
  nlohmann::json fields = to_json(YAML::Load(design->yaml)["resource"]);
  ASSERT_EQ(fields["kind"], "postgres");
  fields.erase("kind");

  Rules got;
  {
    auto pgi = open_pg(fields, run_dir("design"));
    auto w = fencecheck::make_resource_writer(pgi->endpoint(), 5000ms);
    // Tokens rise from rule to rule, so one rule's mark never decides another's (design c has a
    // single mark for everything).
    EXPECT_EQ(put(*w, "own", 0, 0, 5, "w1").outcome, WriteOutcome::kAccepted);
    auto second = put(*w, "own", 0, 1, 5, "w1");
    got.own_token = second.outcome == WriteOutcome::kAccepted;
    EXPECT_EQ(put(*w, "stale", 0, 0, 7, "w2").outcome, WriteOutcome::kAccepted);
    auto stale = put(*w, "stale", 0, 1, 6, "w1");
    got.stale_rejected = stale.outcome == WriteOutcome::kRejected;
    EXPECT_EQ(put(*w, "key-a", 0, 0, 9, "w3").outcome, WriteOutcome::kAccepted);
    auto other = put(*w, "key-b", 0, 0, 8, "w4");
    got.per_key = other.outcome == WriteOutcome::kAccepted;
    for (const auto* r : {&second, &stale, &other})
      EXPECT_NE(r->outcome, WriteOutcome::kUnknown) << r->error;
    // What the read-back says agrees with what the writers were told.
    auto rb = pgi->readback();
    const std::size_t accepted = 3 + got.own_token + !got.stale_rejected + got.per_key;
    if (kind().evidence(kind().parse(FakeFields(fields))).accept_log) {
      EXPECT_EQ(rb.log.size(), accepted);
    }
  }
  bool windowed = false;
  if (fields["write"].is_array())
    for (auto& s : fields["write"])
      if (s == "SELECT pg_sleep(0.2)") {
        s = kPause;  // the window, as a pause of w1 alone (the test holds w1 there: race())
        windowed = true;
      }
  if (windowed) {
    auto pgi = open_pg(fields, run_dir("design-race"));
    auto r = race(*pgi);
    EXPECT_EQ(r.w2.outcome, WriteOutcome::kAccepted) << r.w2.error;
    bool lower_after_higher = false;
    for (std::size_t i = 1; i < r.rb.log.size(); ++i)
      lower_after_higher |= r.rb.log[i].token < r.rb.log[i - 1].token;
    got.race_safe = !lower_after_higher && r.rb.high_water.at("ledger") == 7;
  }
  EXPECT_EQ(got, kExpected.at(id)) << "design " << id;
}

std::vector<std::string> ids() {
  std::vector<std::string> out;
  for (const auto& [id, rules] : kExpected) out.push_back(id);
  return out;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& p) {
  std::string n;
  for (char c : p.param)
    if (std::isalnum(static_cast<unsigned char>(c))) n += c;
  return n;  // "abroken"
}

INSTANTIATE_TEST_SUITE_P(PostgresDesigns, DocDesign, ::testing::ValuesIn(ids()), test_name);

}  // namespace
