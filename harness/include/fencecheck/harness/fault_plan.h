// fencecheck — turning a scenario's fault into a Fault on a live target, and checking beforehand
// that this machine can inject it.
//
// The orchestrator chooses targets and times (docs/architecture.md, "Faults"); this file only maps a FaultSpec to the
// faults/ library's kinds: sigstop and self-stop -> SigstopFault; cpu-throttle -> CpuThrottleFault;
// freeze -> FreezeFault; partition -> PartitionFault and netem -> NetemFault (on the run's
// NetworkLab); lock-service-restart -> LockServiceRestartFault (below: it acts on the harness's
// own embedded lock service).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fencecheck/faults/fault.h"
#include "fencecheck/faults/process.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/harness/services.h"

namespace fencecheck::harness {

/// What this machine lacks for the scenario's faults, network mode and worker designs: one
/// sentence per missing piece naming it and the fix ("cpu-throttle on w1 needs the cgroup cpu
/// controller: ..."). Empty when everything is there. Reads /sys/fs/cgroup, PATH, euid; changes
/// nothing.
[[nodiscard]] std::vector<std::string> missing_prerequisites(const Scenario& scenario);

/// The Fault for spec. `target` is the target worker's process (for process faults); services
/// gives the lab and the lock service. Throws faults::FaultUnavailable / std::invalid_argument.
[[nodiscard]] std::unique_ptr<faults::Fault> make_fault(const FaultSpec& spec, const std::optional<faults::ProcessRef>& target,
                                                        const std::string& run_id, Services& services);

/// A lock-service outage: inject stops the embedded lock service (Services::lock_service(), the
/// kind's instance), heal starts it again at the same address — on an empty data directory with
/// fresh_data (what that does to the token counter is the kind's restart_effect(); etcd's revision
/// counter resets, catalogue item 7). The orchestrator tells the issuer watch (restarted_fresh()).
class LockServiceRestartFault final : public faults::Fault {
 public:
  LockServiceRestartFault(Services& services, bool fresh_data) : services_(services), fresh_(fresh_data) {}
  ~LockServiceRestartFault() override { (void)heal(); }  // a last try; the ledger keeps it outstanding
  [[nodiscard]] std::string_view kind() const override { return "lock-service-restart"; }
  [[nodiscard]] std::string target() const override { return fresh_ ? "lock-service (fresh data)" : "lock-service"; }
  void inject() override;
  /// Starts the lock service again. A failure to start is logged and returns false (active()
  /// stays true; a later heal() tries again): the run then sees the outage continue.
  [[nodiscard]] bool heal() noexcept override;
  [[nodiscard]] bool active() const override { return active_; }
  [[nodiscard]] nlohmann::json ledger_record() const override { return {{"target", "lock-service"}, {"fresh_data", fresh_}}; }

 private:
  Services& services_;
  bool fresh_;
  bool active_ = false;
};

/// Registers the ledger healer for lock-service-restart: after a crash the embedded lock service died with
/// the harness (PR_SET_PDEATHSIG), so there is nothing to restart; the healer says so.
void register_harness_ledger_healers();

}  // namespace fencecheck::harness
