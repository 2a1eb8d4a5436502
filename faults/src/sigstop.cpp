#include "fencecheck/faults/sigstop.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "healers.h"

namespace fencecheck::faults {
namespace {

// Processes currently stopped by a SigstopFault: a PID (0 = free slot) and, when the kernel gave
// one, a pidfd on it, stored plus one (0 = none). Fixed size and lock-free so that a signal
// handler can read it.
constexpr int kSlots = 1024;
std::array<std::atomic<pid_t>, kSlots> g_pid{};
std::array<std::atomic<int>, kSlots> g_pidfd_plus1{};

int claim_slot(pid_t pid) {
  for (int i = 0; i < kSlots; ++i) {
    pid_t expected = 0;
    if (g_pid[static_cast<std::size_t>(i)].compare_exchange_strong(expected, pid)) return i;
  }
  return -1;
}

void release_slot(int slot) noexcept {
  if (slot < 0) return;
  g_pidfd_plus1[static_cast<std::size_t>(slot)].store(0);
  g_pid[static_cast<std::size_t>(slot)].store(0);
}

int pidfd_signal(int pidfd, int sig) noexcept {
  return ::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) == 0 ? 0 : errno;
}

// True when every thread of the process is stopped ('T', or 't' under a tracer), or the process
// is gone or dead ('Z', 'X'): it can no longer fork.
bool cannot_fork(const ProcessRef& ref) {
  const std::filesystem::path task = "/proc/" + std::to_string(ref.pid) + "/task";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(task, ec), end; !ec && it != end; it.increment(ec)) {
    pid_t tid = 0;
    try {
      tid = static_cast<pid_t>(std::stol(it->path().filename().string()));
    } catch (...) {
      continue;
    }
    auto st = read_stat(ref.pid, "/proc", tid);
    if (st && st->state != 'T' && st->state != 't' && st->state != 'Z' && st->state != 'X') return false;
  }
  return true;  // also when the task directory is gone: the process exited
}

// The state letter of the process ref names ('T' stopped, 't' stopped under a tracer, ...); '-'
// when it is gone or its PID is another process's now.
char stop_state(const ProcessRef& ref) noexcept {
  try {
    const auto st = read_stat(ref.pid);
    return st && st->start_ticks == ref.start_ticks ? st->state : '-';
  } catch (...) {  // a /proc read that threw (std::bad_alloc): no state seen
    return '-';
  }
}

// True when the process is (still) stopped by a stop signal: state 'T'. Read right after a
// SIGCONT that was delivered it is reliable: SIGCONT resumes a stopped process while the signal is
// generated, before kill(2) or pidfd_send_signal(2) returns (signal(7); the kernel's
// prepare_signal() wakes every stopped thread), so 'T' then means it did not resume. 't' (a stop
// under a tracer, ptrace(2)) is not counted: whether it resumes is the tracer's doing, not ours.
bool still_stopped(const ProcessRef& ref) noexcept { return stop_state(ref) == 'T'; }

}  // namespace

std::string detail::heal_sigstop_record(const nlohmann::json& entry) {
  const pid_t pid = entry.value("pid", 0);
  const std::uint64_t ticks = entry.value("start_ticks", std::uint64_t{0});
  const std::string who = entry.value("target", std::string("?"));
  ProcessRef root{pid, ticks};
  if (pid <= 0) return "sigstop entry without a pid: nothing to do";
  // Walked while the root is still stopped: a stopped tree cannot change, so the walk is final.
  const auto tree = walk_tree(root);
  if (tree.empty()) return "sigstop " + who + ": pid " + std::to_string(pid) + " already gone";
  // Deepest first, the root last: the order SigstopFault::heal() uses.
  std::vector<std::string> continued, failed;
  int root_err = 0;
  for (auto it = tree.rbegin(); it != tree.rend(); ++it) {
    const bool is_root = it->depth == 0;
    if (!is_root && !still_stopped(it->ref)) continue;  // only what is stopped
    int err = signal_process(it->ref, SIGCONT);
    if (is_root) root_err = err;
    if (err == ESRCH) continue;  // exited meanwhile: healed
    if (err == 0 && still_stopped(it->ref))
      failed.push_back("pid " + std::to_string(it->ref.pid) + ": still stopped after SIGCONT (state " +
                       std::string(1, stop_state(it->ref)) + ")");
    else if (err != 0) failed.push_back("pid " + std::to_string(it->ref.pid) + ": kill(SIGCONT) failed: " + std::strerror(err));
    else if (!is_root) continued.push_back(std::to_string(it->ref.pid));
  }
  // Not healed: the entry stays outstanding (heal_outstanding records no heal for a throw), so a
  // later `fencecheck cleanup` tries again.
  if (!failed.empty()) {
    std::string said = "sigstop " + who + ": not healed:";
    for (const auto& f : failed) said += " " + f + ";";
    said.pop_back();
    throw std::runtime_error(said);
  }
  std::string said = "sigstop " + who + ": ";
  said += root_err == ESRCH ? "pid " + std::to_string(pid) + " already gone" : "continued pid " + std::to_string(pid);
  if (!continued.empty()) {
    std::reverse(continued.begin(), continued.end());
    said += " and " + std::to_string(continued.size()) + " stopped descendant(s) (pid";
    for (const auto& c : continued) said += " " + c;
    said += ")";
  }
  return said;
}

SigstopFault::SigstopFault(ProcessRef target, std::string target_name, SignalFilter filter)
    : ref_(target), name_(std::move(target_name)), filter_(std::move(filter)) {}

int SigstopFault::send(const ProcessRef& ref, int pidfd, int sig) const noexcept {
  if (filter_) {
    try {
      if (const int e = filter_(ref, sig); e != 0) return e;
    } catch (...) {
      return EINVAL;
    }
  }
  return pidfd >= 0 ? pidfd_signal(pidfd, sig) : signal_process(ref, sig);
}

// A heal that failed leaves the entry outstanding in the ledger (for `fencecheck cleanup`); the
// emergency slots and pidfds go with this object.
SigstopFault::~SigstopFault() {
  (void)heal();
  release_all();
}

std::string SigstopFault::target() const { return name_ + " (pid " + std::to_string(ref_.pid) + ")"; }

bool SigstopFault::stop(const TreeMember& m) {
  for (const auto& s : stopped_)
    if (s.ref == m.ref) return false;  // stopped in an earlier walk
  const bool root = m.depth == 0;
  const auto gone = [&] {
    return FaultError("sigstop " + target() + ": the process is gone or its PID was reused; not signalling it");
  };
  Stopped s{m.ref, -1, claim_slot(m.ref.pid)};
  if (s.slot < 0)
    throw FaultError("sigstop " + target() + ": more than " + std::to_string(kSlots) + " processes stopped at once");
  // The slot holds the PID before the signal is sent, so that the emergency path never misses it.
  s.pidfd = open_pidfd(m.ref);
  int err = 0;
  if (s.pidfd >= 0) {
    g_pidfd_plus1[static_cast<std::size_t>(s.slot)].store(s.pidfd + 1);
    err = send(m.ref, s.pidfd, SIGSTOP);
  } else if (s.pidfd == -ESRCH) {
    err = ESRCH;
  } else {
    err = send(m.ref, -1, SIGSTOP);  // no pidfd: a checked kill(2)
  }
  if (err != 0) {
    release_slot(s.slot);
    if (s.pidfd >= 0) ::close(s.pidfd);
    if (err != ESRCH)
      throw FaultError("sigstop " + target() + ": kill(SIGSTOP) to pid " + std::to_string(m.ref.pid) +
                       " failed: " + std::strerror(err));
    if (root) throw gone();
    return false;  // a descendant that exited meanwhile
  }
  stopped_.push_back(s);
  return true;
}

void SigstopFault::settle() const {
  const auto deadline = std::chrono::steady_clock::now() + kSigstopSettleTimeout;
  auto pause = std::chrono::microseconds(50);
  std::size_t confirmed = 0;  // stopped_[0, confirmed) were seen stopped: a stopped process stays stopped
  for (;;) {
    while (confirmed < stopped_.size() && cannot_fork(stopped_[confirmed].ref)) ++confirmed;
    if (confirmed == stopped_.size() || std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
}

void SigstopFault::inject() {
  if (active_) return;
  if (!ref_.same_process_alive())
    throw FaultError("sigstop " + target() + ": the process is gone or its PID was reused; not signalling it");
  stopped_.clear();
  std::string failure;
  try {
    walk_ = converge_tree(
        ref_, [this](const TreeMember& m) { return stop(m); }, [this] { settle(); });
  } catch (const FaultError& err) {
    failure = err.what();
  } catch (const std::exception& err) {
    failure = "sigstop " + target() + ": " + err.what();
  }
  active_ = true;  // stopped_ holds what it stopped: heal() continues exactly those
  if (!failure.empty()) throw FaultError(undo_failed_inject(failure));
}

std::string SigstopFault::continue_all() noexcept {
  std::string failed;
  std::vector<Stopped> kept;  // still stopped: a later heal() retries them
  for (auto it = stopped_.rbegin(); it != stopped_.rend(); ++it) {
    int err = send(it->ref, it->pidfd, SIGCONT);
    if (err == 0 && still_stopped(it->ref)) err = -1;
    if (err != 0 && err != ESRCH) {  // ESRCH: gone, healed
      try {
        failed += (failed.empty() ? "" : "; ") + std::string("pid ") + std::to_string(it->ref.pid) + ": " +
                  (err < 0 ? "still stopped after SIGCONT (state " + std::string(1, stop_state(it->ref)) + ")"
                           : "kill(SIGCONT) failed: " + std::string(std::strerror(err)));
        kept.insert(kept.begin(), *it);
        continue;
      } catch (...) {  // std::bad_alloc: cannot keep it for a retry; its slot is released below
        if (failed.empty()) failed = "out of memory";
      }
    }
    release_slot(it->slot);
    if (it->pidfd >= 0) ::close(it->pidfd);
  }
  stopped_ = std::move(kept);
  return failed;
}

bool SigstopFault::heal() noexcept {
  if (!active_) return healed();
  const std::string failed = continue_all();
  if (!failed.empty()) return not_healed("sigstop " + target() + ": " + failed);
  active_ = false;
  return healed();
}

void SigstopFault::release_all() noexcept {
  for (auto& s : stopped_) {
    release_slot(s.slot);
    if (s.pidfd >= 0) ::close(s.pidfd);
  }
  stopped_.clear();
}

std::vector<ProcessRef> SigstopFault::stopped() const {
  std::vector<ProcessRef> out;
  for (const auto& s : stopped_) out.push_back(s.ref);
  return out;
}

nlohmann::json SigstopFault::ledger_record() const {
  return {{"pid", ref_.pid}, {"start_ticks", ref_.start_ticks}, {"target", name_}};
}

void emergency_continue_all() noexcept {
  const int saved = errno;
  for (int i = 0; i < kSlots; ++i) {
    const int fd = g_pidfd_plus1[static_cast<std::size_t>(i)].load(std::memory_order_relaxed) - 1;
    const pid_t pid = g_pid[static_cast<std::size_t>(i)].load(std::memory_order_relaxed);
    if (fd >= 0) (void)::syscall(SYS_pidfd_send_signal, fd, SIGCONT, nullptr, 0);
    else if (pid > 0) (void)::kill(pid, SIGCONT);
  }
  errno = saved;
}

}  // namespace fencecheck::faults
