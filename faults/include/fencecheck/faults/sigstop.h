// fencecheck — the SIGSTOP fault: the holder stops executing (as in a long GC pause, a VM
// suspend, or a debugger) and resumes with every belief intact. SIGSTOP cannot be caught or
// ignored (signal(7)), so the target gets no chance to notice; SIGCONT resumes it.
//
// Safety: it only signals a process the harness started, identified by PID and start time
// (ProcessRef), re-checked before every signal, so a reused PID is never signalled.
// SIGCONT on every exit path: the guard's destructor, heal_all(), and an async-signal-safe
// emergency_continue_all() that the harness calls from its SIGINT/SIGTERM handler.
#pragma once

#include <string>

#include "fencecheck/faults/fault.h"
#include "fencecheck/faults/process.h"

namespace fencecheck::faults {

class SigstopFault final : public Fault {
 public:
  /// target_name is the worker id, for messages and the ledger.
  SigstopFault(ProcessRef target, std::string target_name);
  ~SigstopFault() override;

  [[nodiscard]] std::string_view kind() const override { return "sigstop"; }
  [[nodiscard]] std::string target() const override;
  /// Sends SIGSTOP. Throws FaultError when the process is gone or is not the one started.
  void inject() override;
  /// Sends SIGCONT if this fault stopped it; a gone process counts as healed.
  void heal() noexcept override;
  [[nodiscard]] bool active() const override { return active_; }
  [[nodiscard]] nlohmann::json ledger_record() const override;

 private:
  ProcessRef ref_;
  std::string name_;
  bool active_ = false;
  int slot_ = -1;  // index in the emergency table while active
};

/// Sends SIGCONT to every process a live SigstopFault has stopped. Async-signal-safe (only
/// atomics and kill(2)): call it from a signal handler before exiting.
void emergency_continue_all() noexcept;

}  // namespace fencecheck::faults
