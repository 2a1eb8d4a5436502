// fencecheck — one interface for every fault kind, and the RAII guard that heals it.
//
// Rules (docs/architecture.md, "Faults"; after Jepsen's nemeses and Chaos Mesh): a fault acts on ONE target; choosing
// targets and times is the orchestrator's job. inject() and heal() are idempotent. heal() never
// throws, treats a vanished target as healed, and says whether it took effect: a fault it could
// not undo stays active (a later heal() retries). Faults never verify the system: checkers do.
// Every injection is written to the run's FaultLedger BEFORE it takes effect, and its heal only
// once the heal took effect (FaultLedger::heal), so `fencecheck cleanup` can heal what a kill -9'ed
// harness, or a heal that failed, left behind.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace fencecheck::faults {

/// A fault could not be injected; nothing of it is left in effect. what() names the fault, the
/// target and the cause (e.g. "sigstop w1 (pid 123): process is gone").
class FaultError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The environment lacks what a fault needs (root, a cgroup controller, netns support): the
/// harness exits 3 (docs/architecture.md, "Exit codes") unless the scenario's fault is skipped.
class FaultUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One fault on one target. Not thread-safe: the orchestrator drives each fault from one thread
/// (heal() may additionally be called from the cleanup path after that thread is done).
class Fault {
 public:
  virtual ~Fault() = default;
  /// Stable kind name as scenarios spell it: "sigstop", "cpu-throttle", "freeze", "partition",
  /// "netem". It names the fault kind (fault_kind.h) whose heal_record() heals its ledger record.
  [[nodiscard]] virtual std::string_view kind() const = 0;
  /// Human name of the target, e.g. "w1 (pid 4242)".
  [[nodiscard]] virtual std::string target() const = 0;
  /// Makes the fault take effect. Idempotent. Throws FaultError (or FaultUnavailable) after
  /// undoing, through heal(), what it did before it failed (undo_failed_inject()). When that undo
  /// took effect nothing is in effect and active() is false; when it did not, active() stays true,
  /// heal_failure() and the message say why, and the caller must heal() it again (FaultLedger::heal
  /// records the heal only once it takes effect; until then the ledger keeps it outstanding).
  virtual void inject() = 0;
  /// Undoes it. Idempotent, never throws; a vanished target counts as healed. Returns true when
  /// nothing of the fault is left in effect (healed now, earlier, or never injected); false when
  /// part of it could not be undone: active() stays true, heal_failure() says why, and a later
  /// heal() retries. The result is the only word on whether the machine is restored: never
  /// discard it (the ledger records a heal only on true).
  [[nodiscard]] virtual bool heal() noexcept = 0;
  [[nodiscard]] virtual bool active() const = 0;
  /// Why the last heal() did not take effect (e.g. "cannot remove cgroup ...: Device or resource
  /// busy for 2000 ms"); empty when it did, or before any heal().
  [[nodiscard]] const std::string& heal_failure() const { return heal_failure_; }
  /// What the ledger must hold to heal this fault from another process (kind-specific fields;
  /// "kind" is added by the ledger). Pure.
  [[nodiscard]] virtual nlohmann::json ledger_record() const = 0;

 protected:
  /// For heal()'s return: true, forgetting an earlier failure. Never throws.
  bool healed() noexcept {
    heal_failure_.clear();
    return true;
  }
  /// For inject()'s failure path: the caller has left the fault active() with what the failed
  /// inject did so far (heal() undoes exactly that); this calls heal() and returns `failure` with
  /// its outcome appended ("; undone", or "; its undo failed too: <why>; still in effect until a
  /// heal takes effect"), the message for the caller to throw. When the undo failed, active() stays
  /// true and heal_failure() says why, so the caller's heal() retries. Throws only std::bad_alloc.
  [[nodiscard]] std::string undo_failed_inject(const std::string& failure) {
    if (heal()) return failure + "; undone";
    return failure + "; its undo failed too: " + heal_failure() + "; still in effect until a heal takes effect";
  }
  /// For heal()'s return: false, keeping why for heal_failure(). Never throws (on a failed
  /// allocation the reason is left empty).
  bool not_healed(std::string_view why) noexcept {
    try {
      heal_failure_.assign(why);
    } catch (...) {  // std::bad_alloc: the false return still says it; the reason cannot be kept
      heal_failure_.clear();
    }
    return false;
  }

 private:
  std::string heal_failure_;
};

/// Heals its fault when it goes out of scope, on every path (return, exception, unwinding).
class FaultGuard {
 public:
  explicit FaultGuard(Fault& fault) : fault_(&fault) {}
  /// A heal that did not take effect here leaves the fault active(); the guard has no one to tell,
  /// so whoever needs the machine restored checks active() or records the fault in a ledger.
  ~FaultGuard() { if (fault_) (void)fault_->heal(); }
  FaultGuard(const FaultGuard&) = delete;
  FaultGuard& operator=(const FaultGuard&) = delete;
  /// Stops guarding (the caller healed it itself).
  void release() { fault_ = nullptr; }

 private:
  Fault* fault_;
};

}  // namespace fencecheck::faults
