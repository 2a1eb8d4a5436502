// Fault kind lock-service-restart: stop the embedded lock service for `duration`, then start it
// again at the same address, on the same data or (fresh_data: true) on an empty data directory:
// what that does to the token counter is the lock-service kind's restart_effect() (etcd's revision
// counter resets: catalogue item 7). Acts on the lock service (target "lock-service"), through the
// harness's LockServiceControl.
#include "kinds.h"
#include "member_faults.h"

namespace fencecheck::faults::detail {
namespace {

/// A lock-service outage: inject stops the lock service, heal starts it again.
class LockServiceRestartFault final : public Fault {
 public:
  LockServiceRestartFault(LockServiceControl& control, bool fresh_data) : control_(control), fresh_(fresh_data) {}
  ~LockServiceRestartFault() override { (void)heal(); }  // a last try; the ledger keeps it outstanding
  std::string_view kind() const override { return "lock-service-restart"; }
  std::string target() const override { return fresh_ ? "lock-service (fresh data)" : "lock-service"; }
  /// Stops the lock service. A stop that fails may have stopped part of it (a process killed, its
  /// data directory left): the undo starts it again on the SAME data (whatever is still running
  /// stays; start is a no-op then), and the FaultError says whether that took effect.
  void inject() override {
    if (active_) return;
    try {
      control_.stop_lock_service(fresh_);
    } catch (const std::exception& err) {
      active_ = true;
      undoing_ = true;
      throw FaultError(undo_failed_inject(std::string("lock-service-restart: the lock service did not stop: ") + err.what()));
    }
    active_ = true;
  }
  /// Starts the lock service again. A failure to start is logged and returns false (active() stays
  /// true; a later heal() tries again): the run then sees the outage continue.
  bool heal() noexcept override {
    if (!active_) return healed();
    try {
      control_.start_lock_service(fresh_ && !undoing_);
    } catch (const std::exception& err) {
      return not_healed(std::string("lock-service-restart: the lock service did not come back: ") + err.what());
    }
    active_ = false;
    undoing_ = false;
    return healed();
  }
  bool active() const override { return active_; }
  nlohmann::json ledger_record() const override { return {{"target", "lock-service"}, {"fresh_data", fresh_}}; }

 private:
  LockServiceControl& control_;
  bool fresh_;
  bool active_ = false;
  bool undoing_ = false;  ///< the heal undoes a failed stop: start on the same data
};

/// A member target (issue 35): kill -9 one member of the cluster (its data directory kept),
/// start it again on its own data at its own address at the heal.
class MemberRestartFault final : public Fault {
 public:
  MemberRestartFault(LockServiceControl& control, int index, std::string who)
      : control_(control), index_(index), who_(std::move(who)) {}
  ~MemberRestartFault() override { (void)heal(); }
  std::string_view kind() const override { return "lock-service-restart"; }
  std::string target() const override { return who_ + " (kill -9, restarted on its data)"; }
  void inject() override {
    if (active_) return;
    try {
      control_.stop_member(index_, /*kill9=*/true);
    } catch (const std::exception& err) {
      active_ = true;
      throw FaultError(undo_failed_inject("lock-service-restart: " + who_ + " did not stop: " + err.what()));
    }
    active_ = true;
  }
  bool heal() noexcept override {
    if (!active_) return healed();
    try {
      control_.start_member(index_);
    } catch (const std::exception& err) {
      return not_healed("lock-service-restart: " + who_ + " did not come back: " + err.what());
    }
    active_ = false;
    return healed();
  }
  bool active() const override { return active_; }
  nlohmann::json ledger_record() const override { return {{"target", who_}, {"member", index_}, {"kill9", true}}; }

 private:
  LockServiceControl& control_;
  int index_;
  std::string who_;
  bool active_ = false;
};

class LockServiceRestart final : public FaultKind {
 public:
  std::string_view name() const override { return "lock-service-restart"; }
  FaultTarget target() const override { return FaultTarget::kLockService; }
  std::vector<std::string_view> fields() const override { return {"fresh_data"}; }
  nlohmann::json parse(const KindFields& f) const override {
    return {{"fresh_data", f.has("fresh_data") && f.boolean("fresh_data")}};
  }
  /// "lock-service", or members (kill -9 and a restart on the member's own data: fresh_data is
  /// for the whole service only).
  std::string check_target(const nlohmann::json& params, bool member_target) const override {
    if (member_target && params.value("fresh_data", false))
      return "lock-service-restart of a member restarts it on its own data (kill -9, then start): fresh_data is "
             "for the whole lock service (target: lock-service)";
    return "";
  }
  /// fresh_data on the whole service: the lock-service kind says whether it can (a cluster cannot).
  LockServiceNeeds lock_service_needs(const nlohmann::json& params) const override {
    return {.fresh_data = params.value("fresh_data", false)};
  }
  std::unique_ptr<Fault> make(const nlohmann::json& params, const FaultContext& ctx) const override {
    if (!ctx.members.empty()) {
      LockServiceControl& control = ctx.need_lock_service(name());
      return members_fault(name(), ctx, [&](const MemberRef& m, const std::string& who) -> std::unique_ptr<Fault> {
        return std::make_unique<MemberRestartFault>(control, m.index, who);
      });
    }
    return std::make_unique<LockServiceRestartFault>(ctx.need_lock_service(name()), params.value("fresh_data", false));
  }
  /// The embedded lock service, every member of it, dies with its harness (PR_SET_PDEATHSIG):
  /// nothing to restart.
  std::string heal_record(const nlohmann::json& entry) const override {
    if (entry.contains("member") || entry.contains("parts"))
      return "lock-service-restart: the embedded cluster's members ended with their harness; nothing to restart";
    return "lock-service-restart: the embedded lock service ended with its harness; nothing to restart";
  }
};

}  // namespace

const FaultKind& lock_service_restart_kind() {
  static const LockServiceRestart k;
  return k;
}

}  // namespace fencecheck::faults::detail
