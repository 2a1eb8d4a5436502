// Fault kind clock-jump: moves the wall clock of lock-service members, never the machine's (issue
// 35; docs/lock-service-redlock.md, "How the clock jump works"). Each embedded redlock master runs
// with the clock shim preloaded (faults/clockshim/clock_shim.cpp), which adds the offset in the
// member's `<data_dir>/clock-offset` (fencecheck/faults/clock_offset.h) to every wall-clock read:
// Redis's key expiry follows mstime() (gettimeofday), so a jump forward past a key's TTL expires
// it on that member only, as a real clock step would (Kleppmann 2016, "How to do distributed
// locking": the clock-jump story). The embedded ZooKeeper ensemble's members run with the shim too
// (docs/lock-service-zookeeper.md, "Clock faults"): the JVM's System.currentTimeMillis moves (the
// member's log, and on the leader the ctime/mtime of the znodes it creates), its session expiry
// does not (System.nanoTime, CLOCK_MONOTONIC). etcd's members cannot take it (Go reads the clock
// through the vDSO, past the shim: docs/lock-service-etcd.md, "Clock faults"): the loader refuses
// it there (lock_service_needs, LockServiceKind::member_clock_problem).
//
//   - {kind: clock-jump, target: {lock_service: {member: 3}}, trigger: ..., duration: 20s,
//      jump: +15s}                 a step forward (or back: "-30s")
//   - ... drift_ppm: 200000        a clock that gains 200 ms per second from the injection on
//                                  (negative: loses), with or without a jump
// The heal sets the offset back to 0 (the member's clock steps back to the machine's). Its ledger
// record names the offset file: `fencecheck cleanup` sets it to 0 after a kill -9 of the harness
// (the members themselves end with their harness, PR_SET_PDEATHSIG, so nothing reads it then).
// Member targets only (the seam's target: {lock_service: member: N | minority | majority}); a
// member without the shim (a build without libfencecheck-clockshim.so) is FaultUnavailable.
#include <filesystem>

#include "fencecheck/faults/clock_offset.h"
#include "fencecheck/proto/units.h"
#include "kinds.h"
#include "member_faults.h"

namespace fencecheck::faults::detail {
namespace {

namespace fs = std::filesystem;

/// The offset file of one member.
fs::path clock_file(const fs::path& data_dir) { return data_dir / "clock-offset"; }

/// One member's clock moved by `jump` (and drifting at `ppm`) while active.
class ClockJumpFault final : public Fault {
 public:
  ClockJumpFault(fs::path file, std::string who, std::chrono::nanoseconds jump, std::int64_t ppm)
      : file_(std::move(file)), who_(std::move(who)), jump_(jump), ppm_(ppm) {}
  ~ClockJumpFault() override { (void)heal(); }
  std::string_view kind() const override { return "clock-jump"; }
  std::string target() const override {
    std::string what = who_ + " (wall clock " + (jump_.count() >= 0 ? "+" : "") + format_duration(jump_);
    if (ppm_ != 0) what += ", drift " + std::string(ppm_ > 0 ? "+" : "") + std::to_string(ppm_) + " ppm";
    return what + ")";
  }
  void inject() override {
    if (active_) return;
    try {
      ClockOffsetFile(file_).set(jump_, ppm_);
    } catch (const std::exception& err) {
      throw FaultError("clock-jump on " + who_ + ": cannot write its clock offset " + file_.string() + ": " + err.what());
    }
    active_ = true;
  }
  bool heal() noexcept override {
    if (!active_) return healed();
    try {
      ClockOffsetFile(file_).reset();
    } catch (const std::exception& err) {
      return not_healed("clock-jump on " + who_ + ": cannot set its clock offset back to 0 (" + file_.string() +
                        "): " + err.what());
    }
    active_ = false;
    return healed();
  }
  bool active() const override { return active_; }
  nlohmann::json ledger_record() const override {
    return {{"target", who_}, {"clock_file", file_.string()}, {"jump_ns", jump_.count()}, {"drift_ppm", ppm_}};
  }

 private:
  fs::path file_;
  std::string who_;
  std::chrono::nanoseconds jump_;
  std::int64_t ppm_;
  bool active_ = false;
};

class ClockJump final : public FaultKind {
 public:
  std::string_view name() const override { return "clock-jump"; }
  FaultTarget target() const override { return FaultTarget::kLockService; }
  std::vector<std::string_view> fields() const override { return {"jump", "drift_ppm"}; }
  nlohmann::json parse(const KindFields& f) const override {
    std::chrono::nanoseconds jump{0};
    if (f.has("jump")) {
      std::string error;
      const auto d = parse_signed_duration(f.string("jump"), &error);
      if (!d) f.fail("jump", "clock-jump's jump is a signed duration like \"+15s\" or \"-30s\": " + error);
      jump = *d;
    }
    const std::int64_t ppm = f.has("drift_ppm") ? f.integer("drift_ppm", -1'000'000, 1'000'000) : 0;
    if (jump.count() == 0 && ppm == 0)
      f.fail(f.has("jump") ? "jump" : "", "clock-jump needs a jump (\"+15s\") or a drift_ppm (200000), or both");
    return {{"jump", (jump.count() >= 0 ? "+" : "") + format_duration(jump)}, {"drift_ppm", ppm}};
  }
  std::string check_target(const nlohmann::json&, bool member_target) const override {
    if (member_target) return "";
    return "clock-jump moves the wall clock of lock-service members: aim it with target: {lock_service: {member: N}} "
           "(or minority, majority); a worker's clock is its design's clock_offset";
  }
  LockServiceNeeds lock_service_needs(const nlohmann::json&) const override { return {.member_clock = true}; }
  std::unique_ptr<Fault> make(const nlohmann::json& params, const FaultContext& ctx) const override {
    const auto jump = parse_signed_duration(params.value("jump", "+0s")).value_or(std::chrono::nanoseconds{0});
    const std::int64_t ppm = params.value("drift_ppm", std::int64_t{0});
    return members_fault(name(), ctx, [&](const MemberRef& m, const std::string& who) -> std::unique_ptr<Fault> {
      if (m.data_dir.empty() || !fs::exists(clock_file(m.data_dir)))
        throw FaultUnavailable("clock-jump on " + who + ": the member runs without the clock shim (" +
                               (m.data_dir.empty() ? std::string("not embedded by fencecheck")
                                                   : "no " + clock_file(m.data_dir).string()) +
                               "): only members started with libfencecheck-clockshim.so take it (redlock's "
                               "masters, ZooKeeper's ensemble members)");
      return std::make_unique<ClockJumpFault>(clock_file(m.data_dir), who, jump, ppm);
    });
  }
  /// The member's clock offset back to 0, if its file is still there (the member itself ended
  /// with its harness).
  std::string heal_record(const nlohmann::json& entry) const override {
    return heal_parts(entry, [](const nlohmann::json& part) {
      const fs::path file = part.value("clock_file", "");
      const std::string who = part.value("target", "a lock-service member");
      if (file.empty() || !fs::exists(file))
        return "clock-jump on " + who + ": its clock offset file is gone with its run's data; nothing to undo";
      ClockOffsetFile(file).reset();  // throws: the entry stays outstanding
      return "clock-jump on " + who + ": clock offset set back to 0 (" + file.string() + ")";
    });
  }
};

}  // namespace

const FaultKind& clock_jump_kind() {
  static const ClockJump k;
  return k;
}

}  // namespace fencecheck::faults::detail
