// Test helper: a child process the test started (sleep), killed and reaped on scope exit.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

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
