// fencecheck — a child process the harness started: a worker, the store, an embedded server
// (etcd, ZooKeeper, Redis, PostgreSQL), a user's http service. The one way fencecheck starts a
// program (fencecheck_process, workers/process/: below both axes and the harness, which all use it).
//
// Launched with Boost.Process (v1). Its stdout is read line by line on a reader thread and each
// line handed to a callback with the orchestrator's receive time (CLOCK_MONOTONIC ns); its stderr
// goes to a log file in the run directory (or stdout and stderr are both appended to one log:
// ChildSpec::output_log, an embedded server's). The child gets PR_SET_PDEATHSIG=SIGKILL (prctl(2)),
// and exits 127 at once when its parent died before that took effect, so a harness that is kill
// -9'ed takes its children with it. Note prctl's rule: the signal fires when the *thread* that
// forked the child exits, so every ChildProcess must be created by the orchestrator's main
// thread, which outlives them all.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fencecheck::process {

/// What to start and where its output goes. Plain data.
struct ChildSpec {
  std::string name;                      ///< "etcd", "store", "w1": for messages
  std::filesystem::path exe;             ///< absolute path of the program
  std::vector<std::string> args;         ///< argv[1..]
  std::filesystem::path stderr_log;      ///< stderr goes here (created / truncated)
  std::vector<std::string> prefix;       ///< optional wrapper argv, e.g. {"ip","netns","exec","fc-x"}
  /// Variables added to (or replacing in) the harness's environment, e.g. {"FAKETIME","-30s"}.
  std::vector<std::pair<std::string, std::string>> env;
  /// Variables of the harness's environment whose names start with one of these are not passed on
  /// (before `env` is applied), e.g. {"ETCD_"}: etcd reads ETCD_* variables as flags.
  std::vector<std::string> env_drop_prefixes;
  /// Non-empty: stdout and stderr both go to this file, opened O_APPEND and created when missing
  /// (a restarted server adds to its log), and no lines are read: the LineHandler is never called
  /// and may be empty; `stderr_log`, `events_fd` and `stdout_log` are ignored. An embedded
  /// server's form.
  std::filesystem::path output_log;
  /// > 2: the lines handed to the LineHandler come from a pipe the child has open as this file
  /// descriptor (the worker protocol's event channel, docs/worker-protocol.md), and stdout goes to
  /// `stdout_log`. 0: the lines are the child's stdout (the store, a user's http service).
  int events_fd = 0;
  /// With events_fd: where stdout goes (created / truncated). Ignored otherwise.
  std::filesystem::path stdout_log;
  /// The child's working directory; empty: the harness's.
  std::filesystem::path cwd;
  /// The child leads a process group of its own (setpgid(0, 0)), and terminate() signals the whole
  /// group: a user's program that forks (a shell script, etcdctl running a command) is ended with
  /// every process it started that stayed in its group.
  bool own_process_group = false;
  /// Set (uid, gid): the child's stdout, stderr and event channel are handed to this account
  /// (fchown(2) in the child, before exec) because the program runs as it (a command worker under
  /// setpriv, `prefix`): a program that reopens them by name (/dev/fd/3, /dev/stderr; both go
  /// through /proc/self/fd and check the file's owner) would otherwise get EACCES.
  std::optional<std::pair<uid_t, gid_t>> owner;
};

/// Called on the reader thread for every stdout line (without the newline), with the receive
/// time; then once with eof=true when stdout closes. Must be thread-safe w.r.t. the caller. On the
/// event pipe (ChildSpec::events_fd) a line longer than 1 MiB is handed on cut to 1 MiB and the
/// rest of it dropped, and reading stops when the ChildProcess is destroyed even if some process
/// that escaped the child's group still holds the pipe open.
using LineHandler = std::function<void(std::string_view line, std::int64_t recv_ns, bool eof)>;

/// Finds a program as a shell would run it: a name without '/' on PATH (each directory in turn;
/// /usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin without PATH), else a path, relative to `cwd` when
/// relative. nullopt when that is not an executable regular file. The rule of a command worker's
/// program and of kind http's start (docs/scenario-format.md). Thread-safe (reads PATH).
[[nodiscard]] std::optional<std::filesystem::path> find_program(const std::string& program, const std::filesystem::path& cwd);

/// Why find_program(program, cwd) found nothing, as the end of a sentence naming the program: "is
/// not on PATH", "does not exist or is not executable" (an absolute path), "(relative to <cwd>)
/// does not exist or is not executable". Pure.
[[nodiscard]] std::string program_not_found(const std::string& program, const std::filesystem::path& cwd);

/// One running child. Not copyable. Methods are not thread-safe except pid() and running().
class ChildProcess {
 public:
  /// Starts the program. Throws std::runtime_error naming the program when it cannot be started
  /// (missing executable, a log that cannot be opened, exec failure).
  ChildProcess(ChildSpec spec, LineHandler on_line);
  /// Stops it (terminate()) if still running and joins the reader thread.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  [[nodiscard]] pid_t pid() const;
  [[nodiscard]] const std::string& name() const;
  [[nodiscard]] bool running();
  /// Waits up to `timeout` for exit; returns the exit code (128+signal for a signal death).
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  /// SIGCONT (a stopped process cannot act on SIGTERM), SIGTERM, then SIGKILL after `grace`.
  /// Returns the exit code. Idempotent.
  int terminate(std::chrono::milliseconds grace = std::chrono::milliseconds(3000));
  /// The exit code once it has exited.
  [[nodiscard]] std::optional<int> exit_code() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Directory of the running fencecheck executable (/proc/self/exe), where fencecheck-worker and
/// fencecheck-store are installed beside it. FENCECHECK_BIN_DIR overrides it.
[[nodiscard]] std::filesystem::path self_bin_dir();

/// Finds a program as find_program() does, relative to the working directory; nullopt when absent.
[[nodiscard]] std::optional<std::filesystem::path> find_on_path(std::string_view program);

}  // namespace fencecheck::process
