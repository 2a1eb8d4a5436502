// fencecheck — sweeping leftovers: the network namespaces and cgroups a dead harness left behind
// that heal_outstanding() (ledger.h) did not remove (e.g. an entry whose heal was recorded but
// whose rmdir failed, or a ledger line lost in a crash after the object was created).
//
// Safety (docs/architecture.md, "Safety rules the harness keeps"): it only considers objects whose names this harness uses ("fc-<prefix>..."
// namespaces, "fencecheck-<prefix>..." cgroups directly under a hierarchy's root), and removes one
// only when a ledger names it EXACTLY (a "netns-lab" entry's namespace, a cgroup entry's
// cgroup_dir) and every harness that wrote that ledger is dead (FaultLedger::writer_alive).
// Anything else is reported and left alone. Meant for `fencecheck cleanup`, after heal_outstanding().
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "fencecheck/faults/cgroup.h"
#include "fencecheck/faults/command.h"

namespace fencecheck::faults {

struct SweepOptions {
  /// The ledgers that may name leftovers (each run directory's faults.ledger).
  std::vector<std::filesystem::path> ledgers;
  CgroupFs fs{};
  /// Runs `ip netns list` / `ip netns del`; nullptr = a SystemCommandRunner.
  CommandRunner* runner = nullptr;
  /// Report what would be removed, remove nothing.
  bool dry_run = false;
};

/// Finds the leftovers whose run id starts with run_id_prefix ("" = any run) and removes those
/// the rules above allow: a namespace with `ip netns del`; a cgroup by thawing it, moving what is
/// still inside back to the original cgroup its ledger entry recorded, and removing it.
/// Returns one sentence per object found ("removed netns fc-r1-hub (harness pid 12 is dead)",
/// "left netns fc-r2-w1 alone: no ledger names it"). Never throws (an unreadable ledger or a
/// failed removal is a sentence).
std::vector<std::string> sweep_leftovers(std::string_view run_id_prefix, const SweepOptions& options = {});

}  // namespace fencecheck::faults
