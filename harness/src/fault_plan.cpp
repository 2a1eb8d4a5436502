#include "fencecheck/harness/fault_plan.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <chrono>

#include <spdlog/spdlog.h>

#include "fencecheck/faults/cgroup.h"
#include "fencecheck/faults/cpu_throttle.h"
#include "fencecheck/faults/freeze.h"
#include "fencecheck/faults/ledger.h"
#include "fencecheck/faults/netem.h"
#include "fencecheck/faults/partition.h"
#include "fencecheck/faults/sigstop.h"
#include "fencecheck/harness/child_process.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/workers/worker.h"

namespace fencecheck::harness {
namespace {

constexpr const char* kFaketimeLib = kFaketimeLibrary;  // worker.h

template <typename D>
std::chrono::microseconds micros(D d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d);
}

}  // namespace

namespace {

/// True only when this kernel's module lists are readable and name neither a loadable nor a
/// built-in `name` (and it is not loaded). Without /lib/modules (a container, say) it cannot
/// tell, says false, and the injection itself reports a missing module.
bool kernel_lacks_module(const std::string& name) {
  struct utsname u {};
  if (::uname(&u) != 0) return false;
  const std::filesystem::path dir = std::filesystem::path("/lib/modules") / u.release;
  std::error_code ec;
  if (std::filesystem::exists("/sys/module/" + name, ec)) return false;
  if (!std::filesystem::exists(dir / "modules.dep", ec) || !std::filesystem::exists(dir / "modules.builtin", ec)) return false;
  for (const char* list : {"modules.dep", "modules.builtin"}) {
    std::ifstream in(dir / list);
    for (std::string line; std::getline(in, line);)
      if (line.find("/" + name + ".ko") != std::string::npos) return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> missing_prerequisites(const Scenario& sc) {
  std::vector<std::string> missing;
  const bool root = ::geteuid() == 0;
  if (sc.network() == NetworkMode::kNamespaces) {
    if (!root) missing.push_back("network: namespaces needs root (ip netns add, veth, tc)");
    if (!find_on_path("ip")) missing.push_back("network: namespaces needs iproute2's `ip` (apt-get install iproute2)");
    if (!find_on_path("tc")) missing.push_back("network: namespaces needs iproute2's `tc` (apt-get install iproute2)");
  }
  const auto cg = faults::detect_cgroups();
  // The fixed faults, and every kind the schedule may draw (its targets are chosen when it fires).
  std::vector<FaultSpec> planned = sc.faults();
  if (sc.schedule())
    for (const auto& k : sc.schedule()->faults) {
      planned.push_back(k.fault);
      if (targets_worker(k.fault.kind)) planned.back().target = "the schedule's " + std::string(to_string(k.target));
    }
  for (const auto& f : planned) {
    const std::string what = std::string(to_string(f.kind)) + " on " + f.target;
    if (f.kind == FaultKind::kCpuThrottle) {
      if (!root) missing.push_back(what + " needs root (it writes to /sys/fs/cgroup)");
      if (!cg.cpu) missing.push_back(what + " needs the cgroup cpu controller: " + cg.cpu_missing);
    }
    if (f.kind == FaultKind::kNetem && kernel_lacks_module("sch_netem"))
      missing.push_back(what + " needs the kernel's netem qdisc (sch_netem, CONFIG_NET_SCH_NETEM): this kernel's "
                               "modules.dep and modules.builtin do not list it");
    if (f.kind == FaultKind::kFreeze) {
      if (!root) missing.push_back(what + " needs root (it writes to /sys/fs/cgroup)");
      if (!cg.freezer) missing.push_back(what + " needs the cgroup freezer: " + cg.freezer_missing);
    }
  }
  // A scenario of its own kind cannot ask for this (the loader refuses it); one moved to another
  // kind by --lock-service can: the kind cannot give what the scenario's story rests on.
  const locks::LockServiceKind* lk = locks::find_lock_service_kind(sc.lock_service().kind);
  const std::string inline_problem = lk != nullptr ? lk->inline_keepalive_problem() : std::string();
  for (const auto& w : sc.workers())
    if (w.design.keepalive == KeepaliveMode::kInline && !inline_problem.empty())
      missing.push_back("worker " + w.id + "'s keepalive: inline cannot be had with lock service " +
                        sc.lock_service().kind + ": " + inline_problem);
  for (const auto& w : sc.workers())
    if (w.design.clock_offset && ::access(kFaketimeLib, R_OK) != 0)
      missing.push_back("worker " + w.id + "'s clock_offset needs libfaketime (" + std::string(kFaketimeLib) +
                        "): apt-get install faketime");
  return missing;
}

std::unique_ptr<faults::Fault> make_fault(const FaultSpec& spec, const std::optional<faults::ProcessRef>& target,
                                          const std::string& run_id, Services& services) {
  auto need_target = [&]() -> const faults::ProcessRef& {
    if (!target) throw faults::FaultError(std::string(to_string(spec.kind)) + " on " + spec.target + ": no such process");
    return *target;
  };
  auto need_lab = [&]() -> const faults::NetworkLab& {
    if (!services.lab()) throw std::invalid_argument(std::string(to_string(spec.kind)) + " needs network: namespaces");
    return *services.lab();
  };
  switch (spec.kind) {
    case FaultKind::kSigstop:
    case FaultKind::kSelfStop:
      return std::make_unique<faults::SigstopFault>(need_target(), spec.target);
    case FaultKind::kCpuThrottle:
      return std::make_unique<faults::CpuThrottleFault>(need_target(), spec.target, run_id,
                                                        faults::ThrottleSpec::cpu_fraction(spec.quota, micros(spec.period)));
    case FaultKind::kFreeze:
      return std::make_unique<faults::FreezeFault>(need_target(), spec.target, run_id);
    case FaultKind::kPartition: {
      const auto from = spec.from.value_or(PartitionFrom::kFull);
      using Direction = faults::PartitionSpec::Direction;
      const Direction direction = spec.direction == PartitionDirection::kRequests  ? Direction::kRequests
                                  : spec.direction == PartitionDirection::kReplies ? Direction::kReplies
                                                                                   : Direction::kBoth;
      auto ps = from == PartitionFrom::kFull ? faults::PartitionSpec::full(direction)
                                             : faults::PartitionSpec::from(std::string(to_string(from)), direction);
      return std::make_unique<faults::PartitionFault>(need_lab(), spec.target, ps);
    }
    case FaultKind::kNetem: {
      faults::NetemSpec ns;
      ns.delay = micros(spec.delay);
      ns.jitter = micros(spec.jitter);
      ns.loss_percent = spec.loss * 100.0;
      return std::make_unique<faults::NetemFault>(need_lab(), spec.target, ns);
    }
    case FaultKind::kLockServiceRestart:
      return std::make_unique<LockServiceRestartFault>(services, spec.fresh_data);
  }
  throw std::invalid_argument("unknown fault kind");
}

void LockServiceRestartFault::inject() {
  if (active_) return;
  try {
    services_.stop_lock_service();
  } catch (const std::exception& err) {
    throw faults::FaultError(std::string("lock-service-restart: ") + err.what());
  }
  active_ = true;
}

bool LockServiceRestartFault::heal() noexcept {
  if (!active_) return healed();
  try {
    services_.start_lock_service(fresh_);
  } catch (const std::exception& err) {
    spdlog::error("lock-service-restart: the lock service did not come back: {}", err.what());
    return not_healed(std::string("lock-service-restart: the lock service did not come back: ") + err.what());
  }
  active_ = false;
  return healed();
}

void register_harness_ledger_healers() {
  faults::register_ledger_healer("lock-service-restart", [](const nlohmann::json&) {
    return std::string("lock-service-restart: the embedded lock service ended with its harness; nothing to restart");
  });
}

}  // namespace fencecheck::harness
