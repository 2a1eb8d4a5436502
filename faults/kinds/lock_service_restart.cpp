// Fault kind lock-service-restart: stop the embedded lock service for `duration`, then start it
// again at the same address, on the same data or (fresh_data: true) on an empty data directory:
// what that does to the token counter is the lock-service kind's restart_effect() (etcd's revision
// counter resets: catalogue item 7). Acts on the lock service (target "lock-service"), through the
// harness's LockServiceControl.
#include "kinds.h"

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

class LockServiceRestart final : public FaultKind {
 public:
  std::string_view name() const override { return "lock-service-restart"; }
  FaultTarget target() const override { return FaultTarget::kLockService; }
  std::vector<std::string_view> fields() const override { return {"fresh_data"}; }
  nlohmann::json parse(const KindFields& f) const override {
    return {{"fresh_data", f.has("fresh_data") && f.boolean("fresh_data")}};
  }
  std::unique_ptr<Fault> make(const nlohmann::json& params, const FaultContext& ctx) const override {
    return std::make_unique<LockServiceRestartFault>(ctx.need_lock_service(name()), params.value("fresh_data", false));
  }
  /// The embedded lock service dies with its harness (PR_SET_PDEATHSIG): nothing to restart.
  std::string heal_record(const nlohmann::json&) const override {
    return "lock-service-restart: the embedded lock service ended with its harness; nothing to restart";
  }
};

}  // namespace

const FaultKind& lock_service_restart_kind() {
  static const LockServiceRestart k;
  return k;
}

}  // namespace fencecheck::faults::detail
