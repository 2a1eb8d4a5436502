// fencecheck — one interface for every fault kind, and the RAII guard that heals it.
//
// Rules (design.md, after Jepsen's nemeses and Chaos Mesh): a fault acts on ONE target; choosing
// targets and times is the orchestrator's job. inject() and heal() are idempotent. heal() never
// throws and treats a vanished target as healed. Faults never verify the system: checkers do.
// Every injection is written to the run's FaultLedger BEFORE it takes effect, so
// `fencecheck cleanup` can heal what a kill -9'ed harness left behind.
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
/// harness exits 3 (design.md exit codes) unless the scenario's fault is skipped.
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
  /// "netem". It keys the ledger's healer table (ledger.cpp).
  [[nodiscard]] virtual std::string_view kind() const = 0;
  /// Human name of the target, e.g. "w1 (pid 4242)".
  [[nodiscard]] virtual std::string target() const = 0;
  /// Makes the fault take effect. Idempotent. Throws FaultError; on throw nothing is in effect.
  virtual void inject() = 0;
  /// Undoes it. Idempotent, never throws; a vanished target counts as healed.
  virtual void heal() noexcept = 0;
  [[nodiscard]] virtual bool active() const = 0;
  /// What the ledger must hold to heal this fault from another process (kind-specific fields;
  /// "kind" is added by the ledger). Pure.
  [[nodiscard]] virtual nlohmann::json ledger_record() const = 0;
};

/// Heals its fault when it goes out of scope, on every path (return, exception, unwinding).
class FaultGuard {
 public:
  explicit FaultGuard(Fault& fault) : fault_(&fault) {}
  ~FaultGuard() { if (fault_) fault_->heal(); }
  FaultGuard(const FaultGuard&) = delete;
  FaultGuard& operator=(const FaultGuard&) = delete;
  /// Stops guarding (the caller healed it itself).
  void release() { fault_ = nullptr; }

 private:
  Fault* fault_;
};

}  // namespace fencecheck::faults
