// fencecheck — identifying a process the harness started, robustly against PID reuse.
//
// A PID alone is not an identity: after a process exits its PID can be handed to an unrelated
// process. The harness only ever signals processes it started (docs/architecture.md, "Safety rules the harness keeps"), so a
// ProcessRef pairs the PID with the process's start time (field 22 of /proc/<pid>/stat, in clock
// ticks since boot — see proc(5)); every signal is preceded by a check that both still match.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace fencecheck::faults {

struct ProcessRef {
  pid_t pid = 0;
  std::uint64_t start_ticks = 0;  ///< /proc/<pid>/stat field 22 (starttime), clock ticks since boot

  /// Reads the identity of a live process; nullopt when /proc/<pid> does not exist (exited).
  /// proc: where procfs is mounted (a fake tree in unit tests). Thread-safe.
  [[nodiscard]] static std::optional<ProcessRef> of(pid_t pid, const std::filesystem::path& proc = "/proc");
  /// True when a process with this PID exists and has the same start time (not a reused PID).
  [[nodiscard]] bool same_process_alive(const std::filesystem::path& proc = "/proc") const;
  bool operator==(const ProcessRef&) const = default;
};

/// The fields of /proc/<pid>/stat (proc(5)) that the process faults use.
struct ProcStat {
  pid_t pid = 0;
  pid_t ppid = 0;                 ///< field 4: the parent's PID (0 for init)
  char state = '?';               ///< field 3: 'R', 'S', 'D', 'T' stopped, 't' traced, 'Z', 'X', ...
  std::uint64_t start_ticks = 0;  ///< field 22: clock ticks since boot
  [[nodiscard]] ProcessRef ref() const { return {pid, start_ticks}; }
};

/// Parses <proc>/<pid>/stat, or with tid > 0 <proc>/<pid>/task/<tid>/stat (that thread's state).
/// nullopt when it is gone or the text is not a stat line. Thread-safe.
[[nodiscard]] std::optional<ProcStat> read_stat(pid_t pid, const std::filesystem::path& proc = "/proc", pid_t tid = 0);

/// The one-letter state from /proc/<pid>/stat ('R', 'S', 'T' stopped, 'Z', ...); nullopt when the
/// process is gone. Used by tests and benchmarks to observe a SIGSTOP taking effect.
[[nodiscard]] std::optional<char> process_state(pid_t pid);

/// The raw text of /proc/<pid>/stat; nullopt when the process is gone.
[[nodiscard]] std::optional<std::string> read_proc_stat(pid_t pid);

/// A pidfd (pidfd_open(2), Linux >= 5.3) on the process `ref` names, opened only if the process
/// with that PID is still the one that started at ref.start_ticks: the start time is read AFTER
/// the pidfd is open, so the pidfd cannot refer to a process that reused the PID. A pidfd keeps
/// naming its process even after the PID is reused, so signals sent through it never reach
/// another process. Returns the fd (O_CLOEXEC; the caller closes it), -ESRCH when the process is
/// gone or the PID was reused, or -errno (-ENOSYS on kernels without pidfd_open, -EMFILE, ...).
/// Thread-safe.
[[nodiscard]] int open_pidfd(const ProcessRef& ref) noexcept;

/// Sends sig to the process ref names, only if it is still that process: through a pidfd
/// (open_pidfd) when the kernel has them, else a start-time check right before kill(2) (a window
/// of microseconds in which the PID could be reused). Returns 0, ESRCH when the process is gone or
/// the PID was reused, or another errno from the kill. Thread-safe.
[[nodiscard]] int signal_process(const ProcessRef& ref, int sig) noexcept;

}  // namespace fencecheck::faults
