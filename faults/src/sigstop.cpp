#include "fencecheck/faults/sigstop.h"

#include <signal.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "healers.h"

namespace fencecheck::faults {
namespace {

// PIDs currently stopped by a SigstopFault. Fixed size and lock-free so that a signal handler
// can read it. 0 = free slot.
constexpr int kSlots = 1024;
std::array<std::atomic<pid_t>, kSlots> g_stopped{};

int claim_slot(pid_t pid) {
  for (int i = 0; i < kSlots; ++i) {
    pid_t expected = 0;
    if (g_stopped[static_cast<std::size_t>(i)].compare_exchange_strong(expected, pid)) return i;
  }
  return -1;
}

}  // namespace

std::string detail::heal_sigstop_record(const nlohmann::json& entry) {
  const pid_t pid = entry.value("pid", 0);
  const std::uint64_t ticks = entry.value("start_ticks", std::uint64_t{0});
  const std::string who = entry.value("target", std::string("?"));
  ProcessRef ref{pid, ticks};
  if (pid <= 0) return "sigstop entry without a pid: nothing to do";
  if (!ref.same_process_alive()) return "sigstop " + who + ": pid " + std::to_string(pid) + " already gone";
  if (::kill(pid, SIGCONT) != 0)
    return "sigstop " + who + ": SIGCONT to pid " + std::to_string(pid) + " failed: " + std::strerror(errno);
  return "sigstop " + who + ": continued pid " + std::to_string(pid);
}


SigstopFault::SigstopFault(ProcessRef target, std::string target_name) : ref_(target), name_(std::move(target_name)) {}

SigstopFault::~SigstopFault() { heal(); }

std::string SigstopFault::target() const { return name_ + " (pid " + std::to_string(ref_.pid) + ")"; }

void SigstopFault::inject() {
  if (active_) return;
  if (!ref_.same_process_alive())
    throw FaultError("sigstop " + target() + ": the process is gone or its PID was reused; not signalling it");
  slot_ = claim_slot(ref_.pid);
  if (slot_ < 0) throw FaultError("sigstop " + target() + ": more than 1024 processes stopped at once");
  if (::kill(ref_.pid, SIGSTOP) != 0) {
    int err = errno;
    g_stopped[static_cast<std::size_t>(slot_)].store(0);
    slot_ = -1;
    throw FaultError("sigstop " + target() + ": kill(SIGSTOP) failed: " + std::strerror(err));
  }
  active_ = true;
}

void SigstopFault::heal() noexcept {
  if (!active_) return;
  if (ref_.same_process_alive()) ::kill(ref_.pid, SIGCONT);
  if (slot_ >= 0) g_stopped[static_cast<std::size_t>(slot_)].store(0);
  slot_ = -1;
  active_ = false;
}

nlohmann::json SigstopFault::ledger_record() const {
  return {{"pid", ref_.pid}, {"start_ticks", ref_.start_ticks}, {"target", name_}};
}

void emergency_continue_all() noexcept {
  for (auto& slot : g_stopped) {
    pid_t pid = slot.load(std::memory_order_relaxed);
    if (pid > 0) ::kill(pid, SIGCONT);
  }
}

}  // namespace fencecheck::faults
