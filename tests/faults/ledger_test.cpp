// The fault ledger: written before injection, read back by cleanup, healed from records alone.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "child.h"
#include "fencecheck/faults/ledger.h"
#include "fencecheck/faults/sigstop.h"
#include "../support/remove_at_end.h"

using namespace fencecheck::faults;
namespace fs = std::filesystem;

namespace {
fs::path temp_ledger(const std::string& name) {
  const fs::path dir = fencecheck::testing::remove_at_end(fs::temp_directory_path() / ("fc-ledger-test-" + std::to_string(::getpid())));
  fs::create_directories(dir);
  fs::path p = dir / name;
  fs::remove(p);
  return p;
}
}  // namespace

TEST(FaultLedger, OutstandingIsInjectsWithoutHeals) {
  auto path = temp_ledger("a.ledger");
  fctest::SleepChild c1, c2;
  SigstopFault f1(*ProcessRef::of(c1.pid()), "w1"), f2(*ProcessRef::of(c2.pid()), "w2");
  {
    FaultLedger ledger(path, "run-1");
    auto id1 = ledger.record_inject(f1);
    auto id2 = ledger.record_inject(f2);
    EXPECT_EQ(id2, id1 + 1);
    ledger.record_heal(id1);
  }
  auto out = FaultLedger::outstanding(path);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["kind"], "sigstop");
  EXPECT_EQ(out[0]["target"], "w2");
  EXPECT_EQ(out[0]["pid"], c2.pid());
  EXPECT_EQ(out[0]["run_id"], "run-1");
  EXPECT_EQ(out[0]["harness_pid"], ::getpid());
  EXPECT_TRUE(FaultLedger::writer_alive(out[0]));  // this test process wrote it
}

TEST(FaultLedger, ATornLastLineIsIgnored) {
  auto path = temp_ledger("torn.ledger");
  fctest::SleepChild c;
  SigstopFault f(*ProcessRef::of(c.pid()), "w1");
  { FaultLedger(path, "r").record_inject(f); }
  { std::ofstream(path, std::ios::app) << "{\"op\":\"heal\",\"i"; }
  EXPECT_EQ(FaultLedger::outstanding(path).size(), 1u);
}

TEST(FaultLedger, HealOutstandingContinuesWhatADeadHarnessLeftStopped) {
  auto path = temp_ledger("dead.ledger");
  fctest::SleepChild c;
  auto ref = *ProcessRef::of(c.pid());
  {
    // A ledger as a kill -9'ed harness leaves it: an inject entry, the process stopped, no heal.
    std::ofstream out(path);
    out << nlohmann::json{{"op", "inject"}, {"id", 1}, {"kind", "sigstop"}, {"pid", ref.pid},
                          {"start_ticks", ref.start_ticks}, {"target", "w1"}, {"run_id", "r"},
                          {"harness_pid", 999999999}, {"harness_start_ticks", 1}}
               .dump()
        << "\n";
  }
  ASSERT_EQ(::kill(c.pid(), SIGSTOP), 0);
  ASSERT_TRUE(fctest::wait_state(c.pid(), [](char s) { return s == 'T'; }));
  auto said = heal_outstanding(path);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0], "sigstop w1: continued pid " + std::to_string(c.pid()));
  EXPECT_TRUE(fctest::wait_state(c.pid(), [](char s) { return s != 'T'; }));
  EXPECT_TRUE(FaultLedger::outstanding(path).empty());  // the heal was recorded
  EXPECT_TRUE(heal_outstanding(path).empty());          // and a second cleanup has nothing to do
}

TEST(FaultLedger, CleanupNeverTouchesALiveRun) {
  auto path = temp_ledger("live.ledger");
  fctest::SleepChild c;
  SigstopFault f(*ProcessRef::of(c.pid()), "w1");
  FaultLedger ledger(path, "r");
  ledger.record_inject(f);
  f.inject();
  auto said = heal_outstanding(path);  // our own (live) harness wrote it
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("still running"), std::string::npos);
  EXPECT_TRUE(fctest::wait_state(c.pid(), [](char s) { return s == 'T'; }));
  f.heal();
}

TEST(FaultLedger, ARecordOfAGoneProcessHealsAsGone) {
  auto path = temp_ledger("gone.ledger");
  ProcessRef ref;
  {
    fctest::SleepChild c;
    ref = *ProcessRef::of(c.pid());
  }
  std::ofstream(path) << nlohmann::json{{"op", "inject"}, {"id", 4}, {"kind", "sigstop"}, {"pid", ref.pid},
                                        {"start_ticks", ref.start_ticks}, {"target", "w9"}, {"harness_pid", 999999999}}
                             .dump()
                      << "\n";
  auto said = heal_outstanding(path);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("already gone"), std::string::npos);
}

TEST(FaultLedger, UnknownKindIsReportedNotThrown) {
  auto path = temp_ledger("unknown.ledger");
  std::ofstream(path) << R"({"op":"inject","id":1,"kind":"meteor","harness_pid":999999999})" << "\n";
  auto said = heal_outstanding(path);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("unknown fault kind 'meteor'"), std::string::npos);
}

// A damaged entry (a field of the wrong type) aborted `fencecheck cleanup` (an uncaught
// nlohmann type_error, exit 134) before it healed anything; now it is named and the rest healed.
// A damaged harness_pid names no live harness (writer_alive is false, and does not throw).
TEST(FaultLedger, ADamagedEntryIsReportedAndTheNextOneStillHealed) {
  auto path = temp_ledger("damaged.ledger");
  ProcessRef ref;
  {
    fctest::SleepChild c;
    ref = *ProcessRef::of(c.pid());
  }
  std::ofstream(path) << R"({"op":"inject","id":1,"kind":5,"harness_pid":"x","pid":1})" << "\n"
                      << nlohmann::json{{"op", "inject"}, {"id", 2}, {"kind", "sigstop"}, {"pid", ref.pid},
                                        {"start_ticks", ref.start_ticks}, {"target", "w9"}, {"harness_pid", 999999999}}
                             .dump()
                      << "\n";
  auto said = heal_outstanding(path);
  ASSERT_EQ(said.size(), 2u);
  EXPECT_NE(said[0].find("a damaged entry in " + path.string()), std::string::npos) << said[0];
  EXPECT_NE(said[0].find("cannot heal it"), std::string::npos) << said[0];
  EXPECT_NE(said[1].find("already gone"), std::string::npos) << said[1];
  EXPECT_FALSE(FaultLedger::writer_alive(nlohmann::json::parse(R"({"harness_pid":"x"})")));
  const auto left = FaultLedger::outstanding(path);
  ASSERT_EQ(left.size(), 1u);  // the damaged one stays for a person to look at
  EXPECT_EQ(left[0].value("id", 0), 1);
}
