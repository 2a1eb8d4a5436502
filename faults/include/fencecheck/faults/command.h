// fencecheck — running `ip` and `tc`: the seam between the network faults and the system.
//
// The network faults (netns.h, partition.h, netem.h) never build shell strings: every command is
// an argv vector run without a shell, so no name or address is ever interpreted by one. A
// CommandRunner runs them; SystemCommandRunner does it for real, RecordingCommandRunner records
// the argv for unit tests (docs/architecture.md, "Faults": faults against the system get a seam
// so that unit tests assert the exact effect without root).
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace fencecheck::faults {

/// A command could not be started, was killed, timed out, or exited non-zero. what() holds the
/// command line (shell-quoted, for reading only) and the command's stderr.
class CommandError : public std::runtime_error {
 public:
  /// exit_status: the exit code; -1 when it could not start, was killed by a signal or timed out.
  CommandError(std::vector<std::string> argv, int exit_status, std::string stderr_text, const std::string& cause = "");
  [[nodiscard]] const std::vector<std::string>& argv() const { return argv_; }
  [[nodiscard]] int exit_status() const { return exit_status_; }
  /// What the command wrote on stderr (trailing newline removed).
  [[nodiscard]] const std::string& stderr_text() const { return stderr_; }

 private:
  std::vector<std::string> argv_;
  int exit_status_;
  std::string stderr_;
};

/// Runs one command to completion. Implementations say whether they are thread-safe.
class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  /// Runs argv (argv[0] looked up in PATH, no shell), waits for it and returns its stdout.
  /// Throws CommandError when it cannot start, exits non-zero, is killed, or times out;
  /// std::invalid_argument when argv is empty.
  virtual std::string run(const std::vector<std::string>& argv) = 0;
};

/// The real runner: posix_spawnp(3), stdin from /dev/null, stdout and stderr captured through
/// pipes, LC_ALL=C in the child's environment (so that `ip`/`tc` messages are not translated).
/// A command still running at the timeout is killed (SIGKILL) and reported as a CommandError.
/// Stateless: thread-safe. Meant for short commands (`ip`, `tc`); long-running programs inside a
/// namespace are launched by the orchestrator from NetworkLab::exec_argv().
class SystemCommandRunner final : public CommandRunner {
 public:
  explicit SystemCommandRunner(std::chrono::milliseconds timeout = std::chrono::seconds(30)) : timeout_(timeout) {}
  std::string run(const std::vector<std::string>& argv) override;

 private:
  std::chrono::milliseconds timeout_;
};

/// The test double: records every argv (in order), then answers through the responder, which may
/// return stdout or throw CommandError to simulate a failure. Without a responder every command
/// succeeds with empty output. Thread-safe (calls are recorded under a mutex; the responder is
/// called outside it).
class RecordingCommandRunner final : public CommandRunner {
 public:
  using Responder = std::function<std::string(const std::vector<std::string>& argv)>;
  explicit RecordingCommandRunner(Responder responder = {}) : responder_(std::move(responder)) {}
  std::string run(const std::vector<std::string>& argv) override;
  /// Every argv run so far, oldest first.
  [[nodiscard]] std::vector<std::vector<std::string>> calls() const;
  void clear();

 private:
  Responder responder_;
  mutable std::mutex mu_;
  std::vector<std::vector<std::string>> calls_;
};

/// The argv as one line for messages and logs: words joined by spaces, a word with characters
/// other than [A-Za-z0-9_./:%=@,+-] single-quoted. For reading only; never executed.
[[nodiscard]] std::string format_command(const std::vector<std::string>& argv);

}  // namespace fencecheck::faults
