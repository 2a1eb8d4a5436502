// fencecheck — the SIGSTOP fault: the holder stops executing (as in a long GC pause, a VM
// suspend, or a debugger) and resumes with every belief intact. SIGSTOP cannot be caught or
// ignored (signal(7)), so the target gets no chance to notice; SIGCONT resumes it.
//
// It acts on the worker's whole process tree (process_tree.h): the worker and every process it
// forked. Inject stops the root first, then walks its descendants and stops each, and walks again
// once every process it stopped is observed stopped (state 'T' in /proc/<pid>/task/*/stat), until
// a walk finds no process left to stop: a stopped process cannot fork, so a walk made after all
// are stopped sees the final tree (converge_tree()). A process forked while the walk ran is
// stopped too.
//
// Safety: it only signals processes of the tree it was given, identified by PID and start time
// (ProcessRef, process.h) and signalled through a pidfd opened after that check (open_pidfd()),
// so a reused PID is never signalled. SIGCONT on every exit path: heal() (also from the guard and
// the destructor), an async-signal-safe emergency_continue_all() that the harness calls from its
// SIGINT/SIGTERM handler, and the ledger healer (`fencecheck cleanup`), which walks the tree from
// the recorded root and continues every stopped process in it.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "fencecheck/faults/fault.h"
#include "fencecheck/faults/process.h"
#include "fencecheck/faults/process_tree.h"

namespace fencecheck::faults {

/// How long inject() waits for the processes it sent SIGSTOP to be observed stopped before it
/// walks the tree again regardless (a thread in uninterruptible sleep, 'D', stops only when it
/// leaves it; it cannot fork meanwhile either).
inline constexpr std::chrono::milliseconds kSigstopSettleTimeout{2000};

/// Not thread-safe (fault.h): one thread drives it; emergency_continue_all() may run concurrently.
class SigstopFault final : public Fault {
 public:
  /// A test's seam: called before each SIGSTOP or SIGCONT this fault sends, with the process and
  /// the signal; a non-zero return (an errno, e.g. EPERM) makes that send fail with it, and the
  /// signal is not sent. Empty: every signal is sent.
  using SignalFilter = std::function<int(const ProcessRef& process, int sig)>;

  /// target: the worker process, the root of the tree. target_name is the worker id, for
  /// messages and the ledger.
  SigstopFault(ProcessRef target, std::string target_name, SignalFilter filter = {});
  ~SigstopFault() override;
  SigstopFault(const SigstopFault&) = delete;
  SigstopFault& operator=(const SigstopFault&) = delete;

  [[nodiscard]] std::string_view kind() const override { return "sigstop"; }
  [[nodiscard]] std::string target() const override;
  /// Sends SIGSTOP to every process of the tree (converging walk, above). Throws FaultError when
  /// the root is gone or is not the one started, when more than 1024 processes would be stopped
  /// at once (the emergency table's size), when a kill fails, or when the tree still changes
  /// after 100 walks; then every process it stopped is continued again through heal(), and one
  /// that could not be is kept stopped and listed, active() stays true (Fault::inject()).
  void inject() override;
  /// Sends SIGCONT to every process this fault stopped that is still that process, deepest first
  /// and the root last (the reverse of the order they were stopped in), so that the worker the
  /// harness talks to resumes once the processes it started run again. A gone process counts as
  /// healed. Each SIGCONT's result is checked, and the process read back: still stopped ('T' in
  /// /proc/<pid>/stat right after a delivered SIGCONT, which resumes it before the call returns)
  /// counts as not healed. Returns false when any process could not be continued: those stay
  /// stopped and listed (stopped()), active() stays true, heal_failure() names each pid and why,
  /// and a later heal() retries them.
  [[nodiscard]] bool heal() noexcept override;
  [[nodiscard]] bool active() const override { return active_; }
  /// {"pid","start_ticks","target"}: the root. Written before inject(), when the descendants are
  /// not yet known; the ledger healer finds them by walking the tree from the root.
  [[nodiscard]] nlohmann::json ledger_record() const override;

  /// The processes this fault holds stopped, root first, in the order they were stopped; empty
  /// when it is not active.
  [[nodiscard]] std::vector<ProcessRef> stopped() const;
  /// The last inject()'s walks (2 for a tree that did not change while it was stopped).
  [[nodiscard]] const ConvergeResult& last_walk() const { return walk_; }

 private:
  struct Stopped {
    ProcessRef ref;
    int pidfd = -1;  // -1: no pidfd (kernel < 5.3, or no fd to spare): checked kill(2) instead
    int slot = -1;   // index in the emergency table
  };
  bool stop(const TreeMember& m);
  void settle() const;
  /// SIGCONT to every process stopped_ holds, deepest first; keeps those that did not resume
  /// and returns why ("" when none).
  std::string continue_all() noexcept;
  /// Frees the emergency slots and pidfds of stopped_ and empties it.
  void release_all() noexcept;

  /// The signal to `s`, through its pidfd or a checked kill(2), after the filter. 0 or an errno.
  int send(const ProcessRef& ref, int pidfd, int sig) const noexcept;

  ProcessRef ref_;
  std::string name_;
  SignalFilter filter_;
  bool active_ = false;
  std::vector<Stopped> stopped_;
  ConvergeResult walk_;
};

/// Sends SIGCONT to every process a live SigstopFault has stopped (every process of each stopped
/// tree). Async-signal-safe (only atomics, pidfd_send_signal(2) and kill(2); errno is preserved):
/// call it from a signal handler before exiting.
void emergency_continue_all() noexcept;

}  // namespace fencecheck::faults
