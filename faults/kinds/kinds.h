// The built-in fault kinds (fault_kind.h), one file each in this folder; registry.cpp lists them.
// Internal to fencecheck_faults.
#pragma once

#include "fencecheck/faults/fault_kind.h"

namespace fencecheck::faults::detail {

const FaultKind& sigstop_kind();
const FaultKind& self_stop_kind();
const FaultKind& cpu_throttle_kind();
const FaultKind& freeze_kind();
const FaultKind& partition_kind();
const FaultKind& netem_kind();
const FaultKind& lock_service_restart_kind();

/// "<what> needs root (it writes to /sys/fs/cgroup)" when not root: the cgroup kinds' first need.
std::vector<std::string> cgroup_root_need(const std::string& what);

}  // namespace fencecheck::faults::detail
