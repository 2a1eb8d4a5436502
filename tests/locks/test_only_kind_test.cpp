// tests/locks: a lock-service kind defined here, in the test, and registered at run time
// (register_lock_service_kind), proves the lock-service axis's seam (issue 33): the scenario
// loader (its fields, its endpoint spelling, the unknown-kind message) and `fencecheck cleanup`'s
// orphan sweep reach the kind through the registry and its hooks, with no line of harness code
// naming it. Label unit: nothing is started.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../support/listed_orphans.h"
#include "../support/temp_dir.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/locks/lock_service_kind.h"

namespace fencecheck {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;

// ---- The test-only kind: "latch", with `latch_mode` (soft or hard), endpoints "latch://host:port";
// its orphans are the lines of <run_dir>/latch.orphans ("stuck" ones cannot be stopped). It starts
// nothing: open() says so.

const std::vector<std::string_view> kModes{"soft", "hard"};

class LatchKind final : public locks::LockServiceKind {
 public:
  std::string_view name() const override { return "latch"; }
  std::vector<std::string_view> fields() const override { return {"latch_mode"}; }
  nlohmann::json parse(const fencecheck::KindFields& f) const override {
    return {{"latch_mode", f.has("latch_mode") ? kModes[f.choice("latch_mode", kModes, "latch mode")] : "soft"}};
  }
  std::string check_endpoint(std::string_view endpoint) const override {
    if (endpoint.rfind("latch://", 0) == 0) return "";
    return "expected a latch endpoint like \"latch://127.0.0.1:7000\", got \"" + std::string(endpoint) + "\"";
  }
  std::string token_description() const override { return "the latch's turn number"; }
  std::string restart_effect(const nlohmann::json&) const override { return "a latch forgets nothing"; }
  std::unique_ptr<locks::LockServiceInstance> open(const std::vector<std::string>&, const nlohmann::json&,
                                                   const locks::LockServiceRunContext&) const override {
    throw locks::LockServiceUnavailable("latch: a test-only kind starts nothing");
  }
  locks::OrphanReport stop_orphans(const fs::path& run_dir, bool force) const override {
    return testing::listed_orphans<locks::OrphanReport>(run_dir / "latch.orphans", "latch", force);
  }
};

const LatchKind kLatch;

/// Registers the kind once for the whole program (the registry has no unregistration).
class RegisterLatch : public ::testing::Environment {
 public:
  void SetUp() override { locks::register_lock_service_kind(kLatch); }
};
[[maybe_unused]] auto* const kRegistered = ::testing::AddGlobalTestEnvironment(new RegisterLatch);

const std::string kHead = "name: t\nlease_ttl: 2s\nresource: {kind: store}\n";
const std::string kTail = "job: {key: ledger}\nworkers:\n  - id: w1\nexpect: {outcome: safe}\n";

harness::ScenarioError load_error(const std::string& yaml) {
  try {
    (void)harness::parse_scenario(yaml, "latch.yaml");
  } catch (const harness::ScenarioError& e) {
    return e;
  }
  ADD_FAILURE() << "loaded without error:\n" << yaml;
  return harness::ScenarioError("", 0, 0, "");
}

TEST(TestOnlyLockServiceKind, IsFoundByNameAfterTheBuiltInKinds) {
  EXPECT_EQ(locks::find_lock_service_kind("latch"), &kLatch);
  EXPECT_THAT(locks::lock_service_kind_names(), ElementsAre("etcd", "zookeeper", "redis", "redlock", "none", "latch"));
}

TEST(TestOnlyLockServiceKind, ASecondKindOfTheSameNameIsRefused) {
  const LatchKind again;
  try {
    locks::register_lock_service_kind(again);
    FAIL() << "a duplicate name was registered";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "lock service kind \"latch\" is already registered");
  }
  EXPECT_THROW(locks::register_lock_service_kind(*locks::find_lock_service_kind("etcd")), std::invalid_argument);
  EXPECT_EQ(locks::find_lock_service_kind("latch"), &kLatch) << "the first registration stands";
  EXPECT_THAT(locks::lock_service_kind_names(), ElementsAre("etcd", "zookeeper", "redis", "redlock", "none", "latch"));
}

TEST(TestOnlyLockServiceKind, TheLoaderTakesItsFieldsAndEndpoints) {
  auto s = harness::parse_scenario(kHead + "lock_service: {kind: latch, latch_mode: hard}\n" + kTail, "latch.yaml");
  EXPECT_EQ(s.lock_service().kind, "latch");
  EXPECT_EQ(s.lock_service().config, (nlohmann::json{{"latch_mode", "hard"}}));
  EXPECT_TRUE(s.lock_service().embedded());
  s = harness::parse_scenario(kHead + "lock_service: {kind: latch, endpoints: [\"latch://10.0.0.1:7000\"]}\n" + kTail, "latch.yaml");
  EXPECT_EQ(s.lock_service().config, (nlohmann::json{{"latch_mode", "soft"}}));
  EXPECT_EQ(s.lock_service().endpoints, std::vector<std::string>{"latch://10.0.0.1:7000"});
}

TEST(TestOnlyLockServiceKind, TheLoaderRefusesItsWrongFieldsAtTheirPlace) {
  auto e = load_error(kHead + "lock_service:\n  kind: latch\n  latch_mode: medium\n");
  EXPECT_EQ(e.line(), 6);
  EXPECT_EQ(e.column(), 15);
  EXPECT_EQ(e.message(), "lock_service.latch_mode: unknown latch mode \"medium\"; expected one of: soft, hard");
  EXPECT_EQ(std::string(e.what()).rfind("latch.yaml:6:15: ", 0), 0u) << e.what();

  e = load_error(kHead + "lock_service: {kind: latch, endpoints: [\"http://10.0.0.1:2379\"]}\n");
  EXPECT_EQ(e.line(), 4);
  EXPECT_EQ(e.column(), 41);
  EXPECT_EQ(e.message(),
            "lock_service.endpoints[0]: expected a latch endpoint like \"latch://127.0.0.1:7000\", got "
            "\"http://10.0.0.1:2379\"");

  e = load_error(kHead + "lock_service: {kind: etcd, latch_mode: hard}\n");
  EXPECT_EQ(e.line(), 4);
  EXPECT_THAT(e.message(), ::testing::StartsWith("lock_service: \"latch_mode\" is a field of lock service kind latch, "
                                                 "not of kind etcd; kind etcd takes: "));
}

TEST(TestOnlyLockServiceKind, TheUnknownKindMessageListsIt) {
  const auto e = load_error(kHead + "lock_service: {kind: chubby}\n");
  EXPECT_EQ(e.line(), 4);
  EXPECT_EQ(e.column(), 22);
  EXPECT_EQ(e.message(),
            "lock_service.kind: unknown lock service kind \"chubby\"; expected one of: etcd, zookeeper, redis, redlock, none, latch");
}

TEST(TestOnlyLockServiceKind, CleanupsOrphanSweepReportsItsSentencesAndWhatItCouldNotStop) {
  testing::TempDir run("latch-run");
  std::ofstream(run.path() / "latch.orphans") << "pid 77\nstuck\n";
  const auto report = locks::stop_orphaned_lock_services(run.path(), false);
  EXPECT_THAT(report.said, ElementsAre("latch: stopped orphan pid 77", "latch: an orphan could not be stopped"));
  EXPECT_EQ(report.not_stopped, 1);
}

}  // namespace
}  // namespace fencecheck
