// Fault kind clock-jump (faults/kinds/clock_jump.cpp) without a server: its fields, its member
// targets only, the offset it writes into a member's clock file (fencecheck/faults/clock_offset.h,
// what the clock shim reads), its heal back to 0, its ledger record and cleanup's healer of it.
// A real server under the shim: tests/locks/clock_shim_test.cpp and redlock_kind_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "../support/fake_resource_fields.h"
#include "../support/temp_dir.h"
#include "fencecheck/faults/clock_offset.h"
#include "fencecheck/faults/fault_kind.h"

namespace {

using namespace std::chrono_literals;
using fencecheck::faults::ClockOffsetFile;
using fencecheck::faults::FaultContext;
using fencecheck::faults::MemberRef;
using fencecheck::testing::FakeFields;
using fencecheck::testing::FieldError;

const fencecheck::faults::FaultKind& kind() { return *fencecheck::faults::find_fault_kind("clock-jump"); }

/// A member whose data directory holds a clock file, as the redlock kind makes it.
MemberRef member(int index, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  ClockOffsetFile created(dir / "clock-offset");
  MemberRef m;
  m.index = index;
  m.data_dir = dir;
  m.endpoint = "redis://127.0.0.1:1";
  return m;
}

long long offset_ms(const std::filesystem::path& dir) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(ClockOffsetFile(dir / "clock-offset").current()).count();
}

TEST(ClockJumpKind, FieldsNormalisedAndRefused) {
  ASSERT_NE(fencecheck::faults::find_fault_kind("clock-jump"), nullptr);
  EXPECT_EQ(kind().parse(FakeFields{{"jump", "15s"}}), (nlohmann::json{{"jump", "+15s"}, {"drift_ppm", 0}}));
  EXPECT_EQ(kind().parse(FakeFields{{"jump", "-30s"}}), (nlohmann::json{{"jump", "-30s"}, {"drift_ppm", 0}}));
  EXPECT_EQ(kind().parse(FakeFields{{"drift_ppm", 200000}}), (nlohmann::json{{"jump", "+0s"}, {"drift_ppm", 200000}}));
  const auto normal = kind().parse(FakeFields{{"jump", "+1500ms"}, {"drift_ppm", -5}});
  EXPECT_EQ(kind().parse(FakeFields(normal)), normal) << "parse of its own output gives it back";
  EXPECT_THROW((void)kind().parse(FakeFields{}), FieldError) << "neither a jump nor a drift";
  EXPECT_THROW((void)kind().parse(FakeFields{{"jump", "soon"}}), FieldError);
  EXPECT_THROW((void)kind().parse(FakeFields{{"drift_ppm", 2000000}}), FieldError);
}

TEST(ClockJumpKind, AimsAtMembersOnly) {
  EXPECT_EQ(kind().check_target({}, true), "");
  EXPECT_NE(kind().check_target({}, false).find("target: {lock_service: {member: N}}"), std::string::npos);
}

TEST(ClockJumpKind, MovesEachMembersClockAndHealsItBackToZero) {
  fencecheck::testing::TempDir dir("clock-jump");
  FaultContext ctx;
  ctx.target = "lock-service";
  ctx.members = {member(1, dir.path() / "m1"), member(3, dir.path() / "m3")};
  ctx.members_why = "majority, for the test";
  MemberRef other = member(2, dir.path() / "m2");
  ctx.other_members = {other};
  auto fault = kind().make(kind().parse(FakeFields{{"jump", "+15s"}}), ctx);
  EXPECT_EQ(fault->kind(), "clock-jump");
  fault->inject();
  EXPECT_TRUE(fault->active());
  EXPECT_NEAR(static_cast<double>(offset_ms(dir.path() / "m1")), 15000.0, 1.0);
  EXPECT_NEAR(static_cast<double>(offset_ms(dir.path() / "m3")), 15000.0, 1.0);
  EXPECT_EQ(offset_ms(dir.path() / "m2"), 0) << "a member not aimed at keeps the machine's clock";

  const auto record = fault->ledger_record();
  ASSERT_TRUE(record.contains("parts")) << record.dump();
  EXPECT_EQ(record["parts"][0]["clock_file"], (dir.path() / "m1" / "clock-offset").string());
  EXPECT_EQ(record["parts"][0]["jump_ns"], 15'000'000'000LL);

  EXPECT_TRUE(fault->heal());
  EXPECT_FALSE(fault->active());
  EXPECT_EQ(offset_ms(dir.path() / "m1"), 0);
  EXPECT_EQ(offset_ms(dir.path() / "m3"), 0);
}

TEST(ClockJumpKind, CleanupSetsALeftOffsetBackToZero) {
  fencecheck::testing::TempDir dir("clock-jump");
  FaultContext ctx;
  ctx.members = {member(3, dir.path() / "m3")};
  auto fault = kind().make(kind().parse(FakeFields{{"jump", "-30s"}, {"drift_ppm", 1000}}), ctx);
  fault->inject();
  nlohmann::json entry = fault->ledger_record();  // a single member: the part itself
  entry["kind"] = "clock-jump";
  EXPECT_LT(offset_ms(dir.path() / "m3"), -29'000);
  // The harness is gone (kill -9): only the record is left.
  const std::string said = kind().heal_record(entry);
  EXPECT_NE(said.find("set back to 0"), std::string::npos) << said;
  EXPECT_EQ(offset_ms(dir.path() / "m3"), 0);
  std::filesystem::remove_all(dir.path() / "m3");
  EXPECT_NE(kind().heal_record(entry).find("nothing to undo"), std::string::npos);
}

TEST(ClockJumpKind, AMemberWithoutTheShimIsUnavailable) {
  fencecheck::testing::TempDir dir("clock-jump");
  FaultContext ctx;
  MemberRef m;
  m.index = 2;
  m.data_dir = dir.path();  // no clock-offset file: started without the shim
  ctx.members = {m};
  EXPECT_THROW((void)kind().make(kind().parse(FakeFields{{"jump", "+15s"}}), ctx), fencecheck::faults::FaultUnavailable);
  ctx.members = {};
  EXPECT_THROW((void)kind().make(kind().parse(FakeFields{{"jump", "+15s"}}), ctx), fencecheck::faults::FaultError);
}

}  // namespace
