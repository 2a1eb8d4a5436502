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
#include "fencecheck/locks/lock_service_kind.h"

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
/// The members a member target (FaultSpec::member, issue 35) hits at this moment, with the
/// service's other members, and why (locks::resolve_members' sentence).
struct MemberTarget {
  std::vector<faults::MemberRef> members;
  std::vector<faults::MemberRef> other_members;
  std::string why;
};

/// Resolves `selector` against the running cluster: asks `service` for its members and, when the
/// role needs one, its leader now (LockServiceInstance::leader_member). Throws std::runtime_error
/// (no leader now: the message says what the service answered) or std::out_of_range; the
/// orchestrator then records the fault as not injected. Main thread.
[[nodiscard]] MemberTarget resolve_member_target(const locks::MemberSelector& selector, locks::LockServiceInstance& service);

/// With a member target, `members` is what resolve_member_target() found (else empty): the kind's
/// make() gets it in FaultContext::members / other_members / members_why.
[[nodiscard]] std::unique_ptr<faults::Fault> make_fault(const FaultSpec& spec, const std::optional<faults::ProcessRef>& target,
                                                        const std::string& run_id, const faults::NetworkLab* lab,
                                                        faults::LockServiceControl* lock_service,
                                                        const MemberTarget& members = {});

}  // namespace fencecheck::harness
