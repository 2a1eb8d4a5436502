// tests/resources: a resource kind defined here, in the test, and registered at run time
// (register_resource_kind), proves the resource axis's seam (issue 33): the scenario loader, the
// writer factory, preflight, `fencecheck cleanup`'s orphan sweep and the orchestrator's worker
// environment all reach the kind through the registry and its hooks, with no line of harness code
// naming it. Label unit: nothing is started but the run's own command worker (sh).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../support/listed_orphans.h"
#include "../support/temp_dir.h"
#include "fencecheck/harness/orchestrator.h"
#include "fencecheck/harness/preflight.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/resources/resource_kind.h"
#include "fencecheck/resources/writer.h"

namespace fencecheck {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ---- The test-only kind: "shelf", a resource with `slots` (1-8) and a `label`; its worker writes
// nothing anywhere but counts; its orphans are the lines of <run_dir>/shelf.orphans ("stuck" ones
// cannot be stopped).

class ShelfWriter final : public ResourceWriter {
 public:
  explicit ShelfWriter(std::int64_t slots) : slots_(slots) {}
  std::string_view kind() const override { return "shelf"; }
  WriteReply write(std::string_view, std::int64_t, std::int64_t chunk, FencingToken, std::string_view,
                   std::string_view) override {
    WriteReply r;
    r.outcome = chunk < slots_ ? WriteOutcome::kAccepted : WriteOutcome::kRejected;
    return r;
  }
  std::int64_t slots() const { return slots_; }

 private:
  std::int64_t slots_;
};

class ShelfInstance final : public resources::ResourceInstance {
 public:
  explicit ShelfInstance(std::string spot) : spot_(std::move(spot)) {}
  nlohmann::json endpoint() const override { return {{"kind", "shelf"}, {"spot", spot_}}; }
  std::string describe() const override { return "shelf " + spot_; }
  bool healthy() override { return true; }
  ReadBack readback() override { return {}; }
  void stop() override {}

 private:
  std::string spot_;
};

class ShelfKind final : public resources::ResourceKind {
 public:
  std::string_view name() const override { return "shelf"; }
  std::vector<std::string_view> fields() const override { return {"slots", "label"}; }
  nlohmann::json parse(const fencecheck::KindFields& f) const override {
    nlohmann::json out = nlohmann::json::object();
    out["slots"] = f.has("slots") ? f.integer("slots", 1, 8) : 4;
    out["label"] = f.has("label") ? f.string("label") : "plain";
    if (out["label"] == "") f.fail("label", "label is empty");
    return out;
  }
  bool embedded(const nlohmann::json&) const override { return true; }
  resources::Evidence evidence(const nlohmann::json&) const override { return {}; }
  std::string design(const nlohmann::json& config) const override { return "shelf of " + config["slots"].dump(); }
  std::unique_ptr<resources::ResourceInstance> open(const nlohmann::json& config,
                                                    const resources::ResourceRunContext& ctx) const override {
    return std::make_unique<ShelfInstance>(config.value("label", "") + "@" + ctx.run_id);
  }
  std::vector<std::string> programs(const nlohmann::json&) const override { return {"shelf-keeper"}; }
  std::vector<std::pair<std::string, std::string>> worker_env(const nlohmann::json& endpoint) const override {
    return {{"SHELF_SPOT", endpoint.value("spot", "")}};
  }
  std::unique_ptr<ResourceWriter> make_writer(const nlohmann::json& endpoint, std::chrono::milliseconds) const override {
    if (!endpoint.contains("slots")) throw std::invalid_argument("shelf endpoint: no \"slots\"");
    return std::make_unique<ShelfWriter>(endpoint["slots"].get<std::int64_t>());
  }
  resources::OrphanReport stop_orphans(const fs::path& run_dir, bool force) const override {
    return testing::listed_orphans<resources::OrphanReport>(run_dir / "shelf.orphans", "shelf", force);
  }
};

const ShelfKind kShelf;

/// Registers the kind once for the whole program (the registry has no unregistration).
class RegisterShelf : public ::testing::Environment {
 public:
  void SetUp() override { resources::register_resource_kind(kShelf); }
};
[[maybe_unused]] auto* const kRegistered = ::testing::AddGlobalTestEnvironment(new RegisterShelf);

const std::string kHead = "name: t\nlease_ttl: 2s\nlock_service: {kind: none}\n";
const std::string kTail = "job: {key: k}\nworkers:\n  - {id: w1, command: [/bin/true]}\nexpect: {outcome: safe}\n";

harness::ScenarioError load_error(const std::string& yaml) {
  try {
    (void)harness::parse_scenario(yaml, "shelf.yaml");
  } catch (const harness::ScenarioError& e) {
    return e;
  }
  ADD_FAILURE() << "loaded without error:\n" << yaml;
  return harness::ScenarioError("", 0, 0, "");
}

// ---- The registry

TEST(TestOnlyResourceKind, IsFoundByNameAfterTheBuiltInKinds) {
  EXPECT_EQ(resources::find_resource_kind("shelf"), &kShelf);
  EXPECT_THAT(resources::resource_kind_names(), ElementsAre("store", "postgres", "http", "shelf"));
  EXPECT_THAT(resource_writer_names(), ElementsAre("store", "postgres", "http", "shelf"));
}

TEST(TestOnlyResourceKind, ASecondKindOfTheSameNameIsRefused) {
  const ShelfKind again;
  try {
    resources::register_resource_kind(again);
    FAIL() << "a duplicate name was registered";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "resource kind \"shelf\" is already registered");
  }
  EXPECT_EQ(resources::find_resource_kind("shelf"), &kShelf) << "the first registration stands";
  EXPECT_THROW(resources::register_resource_kind(resources::find_resource_kind("store")[0]), std::invalid_argument);
  EXPECT_THAT(resources::resource_kind_names(), ElementsAre("store", "postgres", "http", "shelf"));
}

// ---- The scenario loader

TEST(TestOnlyResourceKind, TheLoaderTakesItsFieldsAndFillsItsDefaults) {
  const auto s = harness::parse_scenario(kHead + "resource: {kind: shelf, slots: 3}\n" + kTail, "shelf.yaml");
  EXPECT_EQ(s.resource().kind, "shelf");
  EXPECT_EQ(s.resource().config, (nlohmann::json{{"slots", 3}, {"label", "plain"}}));
}

TEST(TestOnlyResourceKind, TheLoaderRefusesItsWrongFieldsAtTheirPlace) {
  auto e = load_error(kHead + "resource:\n  kind: shelf\n  slots: 9\n");
  EXPECT_EQ(e.line(), 6);
  EXPECT_EQ(e.column(), 10);
  EXPECT_THAT(e.message(), HasSubstr("resource.slots"));
  EXPECT_THAT(e.what(), HasSubstr("shelf.yaml:6:10: "));

  e = load_error(kHead + "resource: {kind: shelf, label: \"\"}\n");
  EXPECT_EQ(e.line(), 4);
  EXPECT_EQ(e.column(), 32);
  EXPECT_EQ(e.message(), "resource.label: label is empty");
}

TEST(TestOnlyResourceKind, FieldsOfOtherKindsNameTheirKindBothWays) {
  auto e = load_error(kHead + "resource: {kind: shelf, dsn: \"host=x\"}\n");
  EXPECT_EQ(e.line(), 4);
  EXPECT_EQ(e.message(),
            "resource: \"dsn\" is a field of resource kind postgres, not of kind shelf; kind shelf takes: kind, slots, label");
  e = load_error(kHead + "resource: {kind: store, slots: 2}\n");
  EXPECT_EQ(e.message(),
            "resource: \"slots\" is a field of resource kind shelf, not of kind store; kind store takes: kind, fencing, "
            "check_window");
}

TEST(TestOnlyResourceKind, TheUnknownKindMessageListsIt) {
  const auto e = load_error(kHead + "resource: {kind: mongodb}\n");
  EXPECT_EQ(e.line(), 4);
  EXPECT_EQ(e.column(), 18);
  EXPECT_EQ(e.message(), "resource.kind: unknown resource kind \"mongodb\"; expected one of: store, postgres, http, shelf");
}

// ---- The worker's writer

TEST(TestOnlyResourceKind, TheWriterFactoryBuildsItsWriter) {
  auto w = make_resource_writer({{"kind", "shelf"}, {"slots", 2}}, std::chrono::milliseconds(100));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->kind(), "shelf");
  EXPECT_EQ(dynamic_cast<ShelfWriter&>(*w).slots(), 2);
  EXPECT_EQ(w->write("k", 0, 1, FencingToken{1}, "w1", "x").outcome, WriteOutcome::kAccepted);
  EXPECT_EQ(w->write("k", 0, 2, FencingToken{1}, "w1", "x").outcome, WriteOutcome::kRejected);
  try {
    (void)make_resource_writer({{"kind", "shelf"}}, std::chrono::milliseconds(100));
    FAIL() << "an endpoint without slots was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "shelf endpoint: no \"slots\"");
  }
  try {
    (void)make_resource_writer({{"kind", "crate"}}, std::chrono::milliseconds(100));
    FAIL() << "an unknown kind was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "unknown resource kind \"crate\" in the endpoint; expected one of: store, postgres, http, shelf");
  }
}

// ---- Preflight, cleanup

TEST(TestOnlyResourceKind, PreflightAsksTheKindForItsPrograms) {
  std::vector<harness::Scenario> suite;
  suite.push_back(harness::parse_scenario(kHead + "resource: {kind: shelf}\n" + kTail, "shelf.yaml"));
  const auto needed = harness::needed_programs(suite);
  ASSERT_EQ(needed.size(), 1u);
  EXPECT_EQ(needed[0].name, "shelf-keeper");
  EXPECT_EQ(needed[0].why, "needed by scenarios whose resource kind is shelf");
  testing::TempDir bin("shelf-bin");
  EXPECT_EQ(harness::check_bin_dir(bin.path(), true, needed),
            "--bin-dir " + bin.path().string() + ": missing shelf-keeper [needed by scenarios whose resource kind is shelf]");
}

TEST(TestOnlyResourceKind, CleanupsOrphanSweepReportsItsSentencesAndWhatItCouldNotStop) {
  testing::TempDir run("shelf-run");
  std::ofstream(run.path() / "shelf.orphans") << "pid 41\nstuck\n";
  const auto report = resources::stop_orphaned_resources(run.path(), true);
  EXPECT_THAT(report.said, ElementsAre("shelf: stopped orphan pid 41 (forced)", "shelf: an orphan could not be stopped"));
  EXPECT_EQ(report.not_stopped, 1);
  fs::remove(run.path() / "shelf.orphans");
  const auto none = resources::stop_orphaned_resources(run.path(), false);
  EXPECT_TRUE(none.said.empty());
  EXPECT_EQ(none.not_stopped, 0);
}

// ---- A run

/// The orchestrator starts the kind's instance and gives a command worker the kind's own variables
/// (worker_env of the instance's endpoint) besides FENCECHECK_RESOURCE, with no harness code naming
/// the kind: the worker writes what it was given into its own directory.
TEST(TestOnlyResourceKind, ARunOpensItAndGivesACommandWorkerItsVariables) {
  testing::TempDir root("shelf-runs");
  const auto sc = harness::parse_scenario(
      "name: shelf-run\nlease_ttl: 2s\nlock_service: {kind: none}\nresource: {kind: shelf, label: oak}\n"
      "job: {key: k}\nworkers:\n"
      "  - id: w1\n"
      "    command: [/bin/sh, -c, 'printf \"%s|%s\" \"$SHELF_SPOT\" \"$FENCECHECK_RESOURCE\" > \"$FENCECHECK_WORKER_DIR/given\"']\n"
      "expect: {outcome: safe}\n",
      "shelf.yaml");
  harness::RunOptions opt;
  opt.run_root = root.path();
  const auto result = harness::run_scenario(sc, opt);
  std::ifstream in(result.run_dir / "workers" / "w1" / "given");
  ASSERT_TRUE(in) << "the worker did not run; reasons: " << ::testing::PrintToString(result.reasons);
  std::stringstream given;
  given << in.rdbuf();
  const std::string spot = "oak@" + result.run_dir.filename().string();
  const nlohmann::json endpoint{{"kind", "shelf"}, {"spot", spot}};
  EXPECT_EQ(given.str(), spot + "|" + endpoint.dump());
}

}  // namespace
}  // namespace fencecheck
