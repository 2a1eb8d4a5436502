// fencecheck — turning a scenario's fault into a Fault on a live target, and checking beforehand
// that this machine can inject it.
//
// The orchestrator chooses targets and times (docs/architecture.md, "Faults"); each fault kind
// (faults/kinds/, fencecheck/faults/fault_kind.h) says what it needs and builds its Fault: this
// file only asks the kinds, with what the run has (the target's process, the network lab, the
// lock service).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fencecheck/faults/fault.h"
#include "fencecheck/faults/fault_kind.h"
#include "fencecheck/faults/process.h"
#include "fencecheck/harness/scenario.h"

namespace fencecheck::harness {

/// What this machine lacks for the scenario's faults, network mode and worker designs: one
/// sentence per missing piece naming it and the fix ("cpu-throttle on w1 needs the cgroup cpu
/// controller: ..."). Empty when everything is there. Reads /sys/fs/cgroup, PATH, euid; changes
/// nothing.
[[nodiscard]] std::vector<std::string> missing_prerequisites(const Scenario& scenario);

/// The Fault for spec, built by its kind (fencecheck/faults/fault_kind.h). `target` is the target
/// worker's process (for kinds that act on a worker); `lab` the run's network lab (null on the host
/// network); `lock_service` the embedded lock service (null without one). Throws what the kind's
/// make() throws (faults::FaultError, faults::FaultUnavailable, std::invalid_argument), and
/// std::invalid_argument for a kind no longer registered.
[[nodiscard]] std::unique_ptr<faults::Fault> make_fault(const FaultSpec& spec, const std::optional<faults::ProcessRef>& target,
                                                        const std::string& run_id, const faults::NetworkLab* lab,
                                                        faults::LockServiceControl* lock_service);

}  // namespace fencecheck::harness
