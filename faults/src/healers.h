// Internal: the ledger healers of the built-in fault kinds (called by their kinds, faults/kinds/)
// and of the two ledger entries that are no fault (a worker group, the network lab; ledger.cpp).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "fencecheck/faults/cgroup.h"
#include "fencecheck/faults/command.h"

namespace fencecheck::faults::detail {

std::string heal_sigstop_record(const nlohmann::json& entry);
/// A command worker's process group (worker_group.cpp): ends what is left of it.
std::string heal_worker_group_record(const nlohmann::json& entry);
/// A command worker's own directory (worker_group.cpp): moved into the run directory.
std::string heal_worker_dir_record(const nlohmann::json& entry);

// cgroup kinds (cgroup.cpp); fs: where the cgroup fs and /proc are (tests pass a fake tree).
std::string heal_cpu_throttle_record(const nlohmann::json& entry, const CgroupFs& fs = CgroupFs{});
std::string heal_freeze_record(const nlohmann::json& entry, const CgroupFs& fs = CgroupFs{});

// network kinds (netns.cpp, partition.cpp, netem.cpp); they run `ip` / `tc` through runner.
// Each throws std::runtime_error when something named in the record exists but cannot be
// removed (the entry then stays outstanding); a namespace, link or filter already gone is healed.
std::string heal_netns_lab_record(const nlohmann::json& entry, CommandRunner& runner);
std::string heal_partition_record(const nlohmann::json& entry, CommandRunner& runner);
std::string heal_netem_record(const nlohmann::json& entry, CommandRunner& runner);

/// The runner the network kinds' healers use (a SystemCommandRunner).
CommandRunner& healer_runner();

}  // namespace fencecheck::faults::detail
