// The built-in fault kinds (fault_kind.h), one file each in this folder (faults/lib.cmake compiles
// every .cpp here). Each kind is one row in FC_FAULT_KINDS below, in the order messages and docs
// list them: the row declares the kind's accessor, defined in its own file, and puts it in
// registry.cpp's table. Internal to fencecheck_faults.
#pragma once

#include "fencecheck/faults/fault_kind.h"

namespace fencecheck::faults::detail {

#define FC_FAULT_KINDS(ROW) \
  ROW(sigstop)              \
  ROW(cpu_throttle)         \
  ROW(freeze)               \
  ROW(partition)            \
  ROW(netem)                \
  ROW(lock_service_restart) \
  ROW(clock_jump)           \
  ROW(self_stop)

#define FC_FAULT_KIND_DECLARE(kind) const FaultKind& kind##_kind();
FC_FAULT_KINDS(FC_FAULT_KIND_DECLARE)
#undef FC_FAULT_KIND_DECLARE

/// "<what> needs root (it writes to /sys/fs/cgroup)" when not root: the cgroup kinds' first need.
std::vector<std::string> cgroup_root_need(const std::string& what);

}  // namespace fencecheck::faults::detail
