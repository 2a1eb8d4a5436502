// fencecheck — identifying a process the harness started, robustly against PID reuse.
//
// A PID alone is not an identity: after a process exits its PID can be handed to an unrelated
// process. The harness only ever signals processes it started (design.md, safety rules), so a
// ProcessRef pairs the PID with the process's start time (field 22 of /proc/<pid>/stat, in clock
// ticks since boot — see proc(5)); every signal is preceded by a check that both still match.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace fencecheck::faults {

struct ProcessRef {
  pid_t pid = 0;
  std::uint64_t start_ticks = 0;  ///< /proc/<pid>/stat field 22 (starttime), clock ticks since boot

  /// Reads the identity of a live process; nullopt when /proc/<pid> does not exist (exited).
  [[nodiscard]] static std::optional<ProcessRef> of(pid_t pid);
  /// True when a process with this PID exists and has the same start time (not a reused PID).
  [[nodiscard]] bool same_process_alive() const;
  bool operator==(const ProcessRef&) const = default;
};

/// The one-letter state from /proc/<pid>/stat ('R', 'S', 'T' stopped, 'Z', ...); nullopt when the
/// process is gone. Used by tests and benchmarks to observe a SIGSTOP taking effect.
[[nodiscard]] std::optional<char> process_state(pid_t pid);

/// The raw text of /proc/<pid>/stat; nullopt when the process is gone.
[[nodiscard]] std::optional<std::string> read_proc_stat(pid_t pid);

}  // namespace fencecheck::faults
