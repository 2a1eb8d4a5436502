// Test helper: a child process the test started (sleep), killed and reaped on scope exit.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fencecheck/faults/process.h"

namespace fctest {

class SleepChild {
 public:
  SleepChild() {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execlp("sleep", "sleep", "60", static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~SleepChild() { reap(); }
  void reap() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

/// A process tree the test started: argv (e.g. {"/bin/sh", "-c", "sleep 1000 & wait"}, or the same
/// behind "ip netns exec <ns>"), run in a process group of its own so that the whole tree is
/// killed (SIGKILL, which also ends stopped processes) and the root reaped on scope exit.
class TreeChild {
 public:
  explicit TreeChild(std::vector<std::string> argv) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    if (pid_ > 0) ::setpgid(pid_, pid_);  // also here: no race with the first kill
  }
  /// /bin/sh -c script.
  static std::vector<std::string> sh(const std::string& script) { return {"/bin/sh", "-c", script}; }
  ~TreeChild() { reap(); }
  TreeChild(const TreeChild&) = delete;
  TreeChild& operator=(const TreeChild&) = delete;
  void reap() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

/// Three levels: sh -> {sleep, sh -> sleep}. The root and three descendants, one at depth 2.
inline const char* kThreeLevels = "sleep 1000 & sh -c 'sleep 1000 & wait' & wait";

/// Polls pred (every 2 ms) until it holds or timeout passes. For state the kernel changes
/// asynchronously (cgroup files, /proc): we wait on the observable event, bounded.
template <typename Pred>
bool wait_until(Pred pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

/// Waits (bounded) until the process's state satisfies pred: the kernel applies a signal
/// asynchronously, so we wait on the observable event, not a fixed sleep.
template <typename Pred>
bool wait_state(pid_t pid, Pred pred) {
  for (int i = 0; i < 2000; ++i) {
    auto st = fencecheck::faults::process_state(pid);
    if (st && pred(*st)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

}  // namespace fctest
