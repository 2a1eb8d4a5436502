// The fault axis's seam (fencecheck/faults/fault_kind.h): a fault kind defined here, in tests/,
// registered at run time, with no line of harness code written for it. The loader reads its own
// parameters through it (errors with file:line:col), refuses its parameters on other kinds and
// other kinds' on it, lists it among the known kinds; preflight asks it what the machine lacks;
// the harness builds its Fault through it; the schedule draws it; `fencecheck cleanup`'s ledger
// sweep heals its records with its healer; scenario.json carries its parameters and reads back.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fencecheck/faults/fault_kind.h"
#include "fencecheck/faults/ledger.h"
#include "fencecheck/harness/fault_plan.h"
#include "fencecheck/harness/orchestrator.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/harness/schedule.h"
#include "../support/temp_dir.h"

namespace fencecheck::harness {
namespace {

/// What the test kind's Faults and healer did, in order.
std::vector<std::string>& poke_log() {
  static std::vector<std::string> log;
  return log;
}

/// A fault that only writes down what it is asked to do: "poke <target> <strength>".
class PokeFault final : public faults::Fault {
 public:
  PokeFault(std::string target, std::int64_t strength) : target_(std::move(target)), strength_(strength) {}
  std::string_view kind() const override { return "test-poke"; }
  std::string target() const override { return target_; }
  void inject() override {
    poke_log().push_back("poke " + target_ + " " + std::to_string(strength_));
    active_ = true;
  }
  bool heal() noexcept override {
    if (active_) poke_log().push_back("unpoke " + target_);
    active_ = false;
    return healed();
  }
  bool active() const override { return active_; }
  nlohmann::json ledger_record() const override { return {{"target", target_}, {"strength", strength_}}; }

 private:
  std::string target_;
  std::int64_t strength_;
  bool active_ = false;
};

/// The test-only kind: one parameter, strength (1 .. 10, default 3); above 5 it "needs the poke
/// device", which this machine never has.
class PokeKind final : public faults::FaultKind {
 public:
  std::string_view name() const override { return "test-poke"; }
  std::vector<std::string_view> fields() const override { return {"strength"}; }
  nlohmann::json parse(const fencecheck::KindFields& f) const override {
    return {{"strength", f.has("strength") ? f.integer("strength", 1, 10) : 3}};
  }
  std::vector<std::string> missing_prerequisites(const nlohmann::json& params, const std::string& what) const override {
    if (params.at("strength").get<int>() <= 5) return {};
    return {what + " needs the poke device for a strength above 5"};
  }
  std::unique_ptr<faults::Fault> make(const nlohmann::json& params, const faults::FaultContext& ctx) const override {
    (void)ctx.need_process(name());
    return std::make_unique<PokeFault>(ctx.target, params.at("strength").get<std::int64_t>());
  }
  std::string heal_record(const nlohmann::json& entry) const override {
    poke_log().push_back("healed record of " + entry.at("target").get<std::string>());
    return "unpoked " + entry.at("target").get<std::string>();
  }
};

const PokeKind kPoke;

/// A fault whose inject acts, then fails, and whose undo never takes effect: what a cgroup that
/// cannot be removed or a filter that cannot be deleted looks like to the orchestrator.
class StuckFault final : public faults::Fault {
 public:
  explicit StuckFault(std::string target) : target_(std::move(target)) {}
  std::string_view kind() const override { return "test-stuck"; }
  std::string target() const override { return target_; }
  void inject() override {
    poke_log().push_back("stuck " + target_);
    active_ = true;
    throw faults::FaultError(undo_failed_inject("test-stuck on " + target_ + ": the second step failed"));
  }
  bool heal() noexcept override {
    poke_log().push_back("unstick tried");
    return not_healed("test-stuck: the device is busy");
  }
  bool active() const override { return active_; }
  nlohmann::json ledger_record() const override { return {{"target", target_}}; }

 private:
  std::string target_;
  bool active_ = false;
};

class StuckKind final : public faults::FaultKind {
 public:
  std::string_view name() const override { return "test-stuck"; }
  std::unique_ptr<faults::Fault> make(const nlohmann::json&, const faults::FaultContext& ctx) const override {
    (void)ctx.need_process(name());
    return std::make_unique<StuckFault>(ctx.target);
  }
  std::string heal_record(const nlohmann::json& entry) const override {
    return "unstuck " + entry.at("target").get<std::string>();
  }
};

const StuckKind kStuck;

class TestOnlyFaultKind : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (faults::find_fault_kind("test-poke") == nullptr) faults::register_fault_kind(kPoke);
    if (faults::find_fault_kind("test-stuck") == nullptr) faults::register_fault_kind(kStuck);
  }
  void SetUp() override { poke_log().clear(); }
};

const std::string kHead =
    "name: t\nlease_ttl: 2s\nresource: {kind: store}\njob: {key: k}\nworkers: [{id: w1}, {id: w2}]\n"
    "expect: {outcome: safe}\n";

std::string load_error(const std::string& yaml) {
  try {
    (void)parse_scenario(yaml, "p.yaml");
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "(loaded)";
}

TEST_F(TestOnlyFaultKind, TheRegistryHasItOnceAfterTheBuiltInKinds) {
  EXPECT_EQ(faults::find_fault_kind("test-poke"), &kPoke);
  EXPECT_EQ(faults::fault_kind_names(),
            (std::vector<std::string_view>{"sigstop", "cpu-throttle", "freeze", "partition", "netem",
                                           "lock-service-restart", "clock-jump", "self-stop", "test-poke", "test-stuck"}));
  EXPECT_THROW(faults::register_fault_kind(kPoke), std::invalid_argument);
  EXPECT_TRUE(targets_worker("test-poke"));
  EXPECT_FALSE(stops_process("test-poke"));
  EXPECT_FALSE(needs_network_namespaces("test-poke"));
}

TEST_F(TestOnlyFaultKind, TheLoaderReadsItsParametersThroughIt) {
  const Scenario s =
      parse_scenario(kHead + "faults: [{kind: test-poke, target: w2, trigger: {at: 1s}, duration: 2s, strength: 7}]\n", "p.yaml");
  ASSERT_EQ(s.faults().size(), 1u);
  EXPECT_EQ(s.faults()[0].kind, "test-poke");
  EXPECT_EQ(s.faults()[0].target, "w2");
  EXPECT_EQ(s.faults()[0].params, (nlohmann::json{{"strength", 7}}));
  // Its default, filled by its parse().
  const Scenario d = parse_scenario(kHead + "faults: [{kind: test-poke, target: w1, trigger: {at: 1s}, duration: 2s}]\n", "p.yaml");
  EXPECT_EQ(d.faults()[0].params, (nlohmann::json{{"strength", 3}}));
  // scenario.json carries the parameters and reads back to the same plan.
  EXPECT_TRUE(scenario_from_json(to_json(s), "scenario.json") == s);
}

TEST_F(TestOnlyFaultKind, ItsErrorsCarryTheFileLineAndColumn) {
  EXPECT_EQ(load_error(kHead + "faults: [{kind: test-poke, target: w1, trigger: {at: 1s}, duration: 2s, strength: 11}]\n"),
            "p.yaml:7:83: faults[0].strength: expected an integer between 1 and 10, got 11");
  // Another kind's parameter on it, and its parameter on another kind: each names the owner.
  EXPECT_EQ(load_error(kHead + "faults: [{kind: test-poke, target: w1, trigger: {at: 1s}, duration: 2s, quota: 5%}]\n"),
            "p.yaml:7:73: faults[0]: \"quota\" is a field of fault kind cpu-throttle, not of kind test-poke; kind "
            "test-poke takes: kind, target, trigger, duration, strength");
  EXPECT_EQ(load_error(kHead + "faults: [{kind: sigstop, target: w1, trigger: {at: 1s}, duration: 2s, strength: 4}]\n"),
            "p.yaml:7:71: faults[0]: \"strength\" is a field of fault kind test-poke, not of kind sigstop; kind "
            "sigstop takes: kind, target, trigger, duration");
  // The whole list of known kinds, the test kind last.
  EXPECT_EQ(load_error(kHead + "faults: [{kind: test-pokes, target: w1, trigger: {at: 1s}, duration: 2s}]\n"),
            "p.yaml:7:17: faults[0].kind: unknown fault kind \"test-pokes\"; expected one of: sigstop, cpu-throttle, "
            "freeze, partition, netem, lock-service-restart, clock-jump, self-stop, test-poke, test-stuck");
}

TEST_F(TestOnlyFaultKind, PreflightAsksItWhatTheMachineLacks) {
  const Scenario weak =
      parse_scenario(kHead + "faults: [{kind: test-poke, target: w1, trigger: {at: 1s}, duration: 2s, strength: 5}]\n", "p.yaml");
  for (const auto& need : missing_prerequisites(weak)) EXPECT_EQ(need.find("poke"), std::string::npos) << need;
  const Scenario strong =
      parse_scenario(kHead + "faults: [{kind: test-poke, target: w1, trigger: {at: 1s}, duration: 2s, strength: 6}]\n", "p.yaml");
  const auto missing = missing_prerequisites(strong);
  EXPECT_NE(std::find(missing.begin(), missing.end(), "test-poke on w1 needs the poke device for a strength above 5"),
            missing.end());
}

TEST_F(TestOnlyFaultKind, TheHarnessBuildsItsFaultThroughIt) {
  const Scenario s =
      parse_scenario(kHead + "faults: [{kind: test-poke, target: w2, trigger: {at: 1s}, duration: 2s, strength: 9}]\n", "p.yaml");
  // Without the target's process the kind's FaultContext::need_process refuses.
  EXPECT_THROW((void)make_fault(s.faults()[0], std::nullopt, "run-1", nullptr, nullptr), faults::FaultError);
  auto fault = make_fault(s.faults()[0], faults::ProcessRef::of(::getpid()), "run-1", nullptr, nullptr);
  ASSERT_NE(fault, nullptr);
  EXPECT_EQ(fault->kind(), "test-poke");
  fault->inject();
  EXPECT_TRUE(fault->heal());
  EXPECT_EQ(poke_log(), (std::vector<std::string>{"poke w2 9", "unpoke w2"}));
}

TEST_F(TestOnlyFaultKind, AScheduleDrawsIt) {
  const Scenario s = parse_scenario(
      "name: t\nlease_ttl: 2s\ntimeout: 120s\nresource: {kind: store}\njob: {key: k}\nworkers: [{id: w1}, {id: w2}]\n"
      "expect: {outcome: safe}\n"
      "schedule:\n  duration: 30s\n  interval: {min: 1s, max: 2s}\n"
      "  faults:\n    - {kind: test-poke, duration: {min: 100ms, max: 200ms}, strength: 2}\n",
      "p.yaml");
  const auto plan = plan_schedule(*s.schedule(), 1);
  ASSERT_FALSE(plan.empty());
  for (const auto& p : plan) {
    EXPECT_EQ(p.fault.kind, "test-poke");
    EXPECT_EQ(p.fault.params, (nlohmann::json{{"strength", 2}}));
  }
}

TEST_F(TestOnlyFaultKind, CleanupHealsItsLedgerRecordsWithItsHealer) {
  const auto dir = std::filesystem::temp_directory_path() / ("fencecheck-test-poke-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto path = dir / "faults.ledger";
  {
    faults::FaultLedger ledger(path, "run-1");
    PokeFault fault("w1", 4);
    (void)ledger.record_inject(fault);  // its harness never heals it: what a kill -9 leaves
  }
  ASSERT_EQ(faults::FaultLedger::outstanding(path).size(), 1u);
  // force: the entry's writer (this process) is alive; cleanup would leave it alone otherwise.
  const auto said = faults::heal_outstanding(path, /*force=*/true);
  EXPECT_EQ(said, (std::vector<std::string>{"unpoked w1"}));
  EXPECT_EQ(poke_log(), (std::vector<std::string>{"healed record of w1"}));
  EXPECT_TRUE(faults::FaultLedger::outstanding(path).empty());
  std::filesystem::remove_all(dir);
}

// The orchestrator's failed-inject path, through a real run: the inject acted and failed, its undo
// did not take effect, so the ledger keeps the fault outstanding (no heal entry), the run tries
// once more at its end, names it, fails with the environment's exit code, and `cleanup`'s sweep
// heals it later with the kind's healer.
TEST_F(TestOnlyFaultKind, AFailedInjectWhoseUndoFailsStaysOutstandingAndTheRunSaysSo) {
  testing::TempDir root("stuck-runs");
  const Scenario sc = parse_scenario(
      "name: stuck\nlease_ttl: 2s\nlock_service: {kind: none}\nresource: {kind: store}\njob: {key: k}\n"
      "workers:\n  - {id: w1, command: [/bin/sleep, '2']}\n"
      "faults: [{kind: test-stuck, target: w1, trigger: {at: 200ms}, duration: 1s}]\n"
      "expect: {outcome: safe}\n",
      "stuck.yaml");
  RunOptions opt;
  opt.run_root = root.path();
  const ScenarioResult result = run_scenario(sc, opt);
  EXPECT_FALSE(result.met);
  EXPECT_EQ(result.exit_code, 3);
  bool named = false;
  for (const auto& r : result.reasons)
    named = named || r.find("fault not healed, still in effect when the run ended: test-stuck on w1: test-stuck: the "
                            "device is busy") != std::string::npos;
  EXPECT_TRUE(named) << ::testing::PrintToString(result.reasons);
  // Acted once, its undo tried by the failed inject, by the ledger's heal, and once more at the end.
  ASSERT_FALSE(poke_log().empty());
  EXPECT_EQ(poke_log().front(), "stuck w1");
  EXPECT_GE(std::count(poke_log().begin(), poke_log().end(), "unstick tried"), 2);
  // The history says it was not undone.
  std::ifstream history(result.run_dir / "history.jsonl");
  std::string line;
  bool said = false;
  while (std::getline(history, line)) said = said || line.find("not undone after its inject failed") != std::string::npos;
  EXPECT_TRUE(said);
  // Outstanding in the ledger: an inject entry and no heal.
  const auto ledger = result.run_dir / "faults.ledger";
  const auto outstanding = faults::FaultLedger::outstanding(ledger);
  ASSERT_EQ(outstanding.size(), 1u);
  EXPECT_EQ(outstanding[0].value("kind", ""), "test-stuck");
  // cleanup's sweep (its harness, this process, is alive: force) heals it with the kind's healer.
  EXPECT_EQ(faults::heal_outstanding(ledger, /*force=*/true), (std::vector<std::string>{"unstuck w1"}));
  EXPECT_TRUE(faults::FaultLedger::outstanding(ledger).empty());
}

}  // namespace
}  // namespace fencecheck::harness
