// Fault kind lock-service-restart (faults/kinds/lock_service_restart.cpp) against a fake
// LockServiceControl: the outage and its heal, and a stop that fails, whose undo starts the lock
// service again on the same data, and whose failed undo leaves the fault active (outstanding).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "fencecheck/faults/fault_kind.h"

namespace fencecheck::faults {
namespace {

/// Records each call ("stop fresh-next=1", "start fresh=0") and fails where told.
class FakeControl final : public LockServiceControl {
 public:
  void stop_lock_service(bool fresh_data_next) override {
    calls.push_back("stop fresh-next=" + std::to_string(fresh_data_next));
    if (fail_stop) throw std::runtime_error("kill timed out");
  }
  void start_lock_service(bool fresh_data) override {
    calls.push_back("start fresh=" + std::to_string(fresh_data));
    if (fail_start) throw std::runtime_error("port in use");
  }
  std::vector<std::string> calls;
  bool fail_stop = false;
  bool fail_start = false;
};

std::unique_ptr<Fault> restart(FakeControl& control, bool fresh) {
  FaultContext ctx;
  ctx.target = "lock-service";
  ctx.lock_service = &control;
  return find_fault_kind("lock-service-restart")->make({{"fresh_data", fresh}}, ctx);
}

TEST(LockServiceRestartKind, StopsThenStartsOnAFreshDataDirectoryWhenAsked) {
  FakeControl control;
  auto f = restart(control, /*fresh=*/true);
  f->inject();
  EXPECT_TRUE(f->active());
  EXPECT_TRUE(f->heal());
  EXPECT_FALSE(f->active());
  EXPECT_EQ(control.calls, (std::vector<std::string>{"stop fresh-next=1", "start fresh=1"}));
}

TEST(LockServiceRestartKind, AFailedStopIsUndoneOnTheSameData) {
  FakeControl control;
  control.fail_stop = true;
  auto f = restart(control, /*fresh=*/true);
  try {
    f->inject();
    FAIL() << "inject did not throw";
  } catch (const FaultError& e) {
    EXPECT_EQ(std::string(e.what()), "lock-service-restart: the lock service did not stop: kill timed out; undone");
  }
  EXPECT_FALSE(f->active());
  // Never on empty data: the stop failed, so no outage happened that fresh_data describes.
  EXPECT_EQ(control.calls, (std::vector<std::string>{"stop fresh-next=1", "start fresh=0"}));
}

TEST(LockServiceRestartKind, AFailedUndoLeavesItActiveAndALaterHealRetries) {
  FakeControl control;
  control.fail_stop = true;
  control.fail_start = true;
  auto f = restart(control, /*fresh=*/false);
  try {
    f->inject();
    FAIL() << "inject did not throw";
  } catch (const FaultError& e) {
    EXPECT_NE(std::string(e.what()).find("its undo failed too: lock-service-restart: the lock service did not come "
                                         "back: port in use"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(f->active());
  EXPECT_FALSE(f->heal_failure().empty());
  control.fail_start = false;
  EXPECT_TRUE(f->heal());
  EXPECT_FALSE(f->active());
  EXPECT_EQ(control.calls, (std::vector<std::string>{"stop fresh-next=0", "start fresh=0", "start fresh=0"}));
}

TEST(LockServiceRestartKind, NeedsTheLockServiceFromItsContext) {
  FaultContext ctx;
  ctx.target = "lock-service";
  EXPECT_THROW((void)find_fault_kind("lock-service-restart")->make({{"fresh_data", false}}, ctx), std::invalid_argument);
}

}  // namespace
}  // namespace fencecheck::faults
