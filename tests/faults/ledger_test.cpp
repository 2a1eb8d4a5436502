// The fault ledger: written before injection, read back by cleanup, healed from records alone.
#include <gtest/gtest.h>

#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

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
  EXPECT_TRUE(f.heal());
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

// ---------------------------------------------------------------------------------------------
// A heal that does not take effect is reported (Fault::heal() returns false, heal_failure() says
// why), is not recorded in the ledger (FaultLedger::heal), and `fencecheck cleanup`
// (heal_outstanding) still finds it outstanding until a heal really takes effect.
//
// The failing SIGCONT is a real one: the target runs as another user (nobody) in another session,
// and the heal runs on a thread without CAP_KILL, which kill(2)'s permission rule then refuses
// (EPERM; SIGCONT is allowed within a session, hence the target's own). Capabilities are per
// thread (capabilities(7), capset(2)), so the rest of the test keeps root's.

namespace {

constexpr uid_t kNobody = 65534;

/// `sleep 60` running as nobody (uid and gid 65534) in a session of its own; killed and reaped
/// on scope exit.
class NobodyChild {
 public:
  NobodyChild() {
    pid_ = ::fork();
    if (pid_ == 0) {
      // A session of its own: kill(2) lets any process send SIGCONT within its session.
      if (::setsid() < 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(126);
      ::execlp("sleep", "sleep", "60", static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~NobodyChild() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  NobodyChild(const NobodyChild&) = delete;
  NobodyChild& operator=(const NobodyChild&) = delete;
  [[nodiscard]] pid_t pid() const { return pid_; }
  /// Waits (bounded) until the child runs `sleep` as nobody: before that it is still root in this
  /// session, and a SIGCONT to it would be allowed.
  [[nodiscard]] bool wait_ready() const {
    return fctest::wait_until(
        [&] {
          std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
          bool name = false, uid = false;
          for (std::string line; std::getline(status, line);) {
            name = name || line == "Name:\tsleep";
            uid = uid || line.rfind("Uid:\t65534\t", 0) == 0;
          }
          return name && uid;
        },
        std::chrono::seconds(10));
  }

 private:
  pid_t pid_ = -1;
};

/// Runs fn on a thread of its own whose effective capabilities lack CAP_KILL. Returns "" or why
/// the capability could not be dropped.
template <typename F>
std::string without_cap_kill(F fn) {
  std::string error;
  std::thread t([&] {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};  // pid 0: this thread
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
    if (::syscall(SYS_capget, &header, data) != 0) {
      error = std::string("capget: ") + std::strerror(errno);
      return;
    }
    data[CAP_TO_INDEX(CAP_KILL)].effective &= ~CAP_TO_MASK(CAP_KILL);
    if (::syscall(SYS_capset, &header, data) != 0) {
      error = std::string("capset: ") + std::strerror(errno);
      return;
    }
    fn();
  });
  t.join();
  return error;
}

/// Skips the test unless root: the target is started as another user (setuid(2) needs root).
#define REQUIRE_ROOT() \
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: the target runs as another user (setuid)"

}  // namespace

TEST(SigstopHealFailure, ARefusedSigcontIsNotAHealAndALaterHealRetries) {
  REQUIRE_ROOT();
  NobodyChild child;
  ASSERT_TRUE(child.wait_ready());
  auto ref = ProcessRef::of(child.pid());
  ASSERT_TRUE(ref);
  SigstopFault fault(*ref, "w1");
  fault.inject();
  ASSERT_TRUE(fctest::wait_state(child.pid(), [](char s) { return s == 'T'; }));

  bool healed = true;
  ASSERT_EQ(without_cap_kill([&] { healed = fault.heal(); }), "");
  EXPECT_FALSE(healed);
  EXPECT_TRUE(fault.active());
  EXPECT_EQ(fault.heal_failure(), "sigstop w1 (pid " + std::to_string(child.pid()) + "): pid " +
                                      std::to_string(child.pid()) + ": kill(SIGCONT) failed: Operation not permitted");
  EXPECT_EQ(fault.stopped(), std::vector<ProcessRef>{*ref});  // kept for the retry
  EXPECT_EQ(process_state(child.pid()), 'T');

  EXPECT_TRUE(fault.heal());  // with CAP_KILL: it takes effect
  EXPECT_FALSE(fault.active());
  EXPECT_EQ(fault.heal_failure(), "");
  EXPECT_TRUE(fctest::wait_state(child.pid(), [](char s) { return s != 'T'; }));
}

TEST(SigstopHealFailure, AFailedHealIsNotRecordedAndCleanupStillSeesIt) {
  REQUIRE_ROOT();
  auto path = temp_ledger("sigstop.ledger");
  NobodyChild child;
  ASSERT_TRUE(child.wait_ready());
  SigstopFault fault(*ProcessRef::of(child.pid()), "w1");
  FaultLedger ledger(path, "r1");
  const auto id = ledger.record_inject(fault);
  fault.inject();
  ASSERT_TRUE(fctest::wait_state(child.pid(), [](char s) { return s == 'T'; }));

  bool healed = true;
  std::vector<std::string> said;
  ASSERT_EQ(without_cap_kill([&] {
              healed = ledger.heal(fault, id);
              said = heal_outstanding(path, /*force=*/true);  // cleanup, refused the same way
            }),
            "");
  EXPECT_FALSE(healed);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0], "sigstop: heal failed: sigstop w1: not healed: pid " + std::to_string(child.pid()) +
                         ": kill(SIGCONT) failed: Operation not permitted");
  const auto left = FaultLedger::outstanding(path);  // neither wrote a heal entry
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0]["id"], id);
  EXPECT_EQ(process_state(child.pid()), 'T');

  // Cleanup that can signal it heals it, and records that.
  said = heal_outstanding(path, /*force=*/true);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0], "sigstop w1: continued pid " + std::to_string(child.pid()));
  EXPECT_TRUE(FaultLedger::outstanding(path).empty());
  EXPECT_TRUE(fctest::wait_state(child.pid(), [](char s) { return s != 'T'; }));
}

// FaultLedger::heal with a fault whose heal fails, whatever the kind: nothing is recorded until
// a heal takes effect.
namespace {
class StuckFault final : public Fault {
 public:
  bool stuck = true;
  [[nodiscard]] std::string_view kind() const override { return "stuck-test"; }
  [[nodiscard]] std::string target() const override { return "t1"; }
  void inject() override { active_ = true; }
  [[nodiscard]] bool heal() noexcept override {
    if (!active_) return healed();
    if (stuck) return not_healed("stuck-test t1: still stuck");
    active_ = false;
    return healed();
  }
  [[nodiscard]] bool active() const override { return active_; }
  [[nodiscard]] nlohmann::json ledger_record() const override { return {{"target", "t1"}}; }

 private:
  bool active_ = false;
};
}  // namespace

TEST(FaultLedgerHeal, RecordsAHealOnlyOnceItTookEffect) {
  auto path = temp_ledger("stuck.ledger");
  StuckFault f;
  FaultLedger ledger(path, "r1");
  const auto id = ledger.record_inject(f);
  f.inject();
  EXPECT_FALSE(ledger.heal(f, id));
  EXPECT_EQ(f.heal_failure(), "stuck-test t1: still stuck");
  EXPECT_EQ(FaultLedger::outstanding(path).size(), 1u);
  f.stuck = false;
  EXPECT_TRUE(ledger.heal(f, id));
  EXPECT_EQ(f.heal_failure(), "");
  EXPECT_TRUE(FaultLedger::outstanding(path).empty());
}
