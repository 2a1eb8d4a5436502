// fencecheck — a run's claim on the lock service it may share with other runs (issue 34 item 3;
// docs/scenario-format.md, "Runs that share a lock service"). The lock-service kinds store it
// (LockServiceInstance::claim, fencecheck/locks/lock_service_kind.h); this is the harness's side:
// what the run claims, the refusal, and what the run directory says about it (claim.json).
#pragma once

#include <ctime>
#include <memory>
#include <string>

#include "fencecheck/harness/run_dir.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/harness/services.h"  // EnvironmentError
#include "fencecheck/locks/lock_service_kind.h"

namespace fencecheck::harness {

/// Another run holds this run's lock or a key (locks::ClaimRefused): exit 3 like any environment
/// error, but never skipped by --skip-unavailable (a night that did not run because a CI run held
/// its lock must count against the night, not pass it).
class RunRefused : public EnvironmentError {
 public:
  using EnvironmentError::EnvironmentError;
};

/// What run `run_id` of `sc` (the plan as the run carries it out: Scenario::for_run) claims: its
/// lock name; and, when the resource is the user's (not embedded: ResourceKind::embedded), every
/// resource key a worker writes (Scenario::key_of), scoped by the resource kind. host, pid and
/// started are this process's and `started` (UTC). Pure but for gethostname and getpid.
[[nodiscard]] locks::RunClaim make_run_claim(const Scenario& sc, const std::string& run_id, std::time_t started);

/// Claims the run's lock and keys in `service` (LockServiceInstance::claim) before any worker
/// starts, and writes <run dir>/claim.json: {"claimed": true, "held": describe(), "claim":
/// RunClaim, "names": [...], "ttl_s"} or {"claimed": false, "why": "..."} (an embedded service,
/// kind none). Logs one line either way: a run that could not claim says that another run on the
/// same lock or keys would not be detected. Returns the held claim (nullptr when none was taken).
/// Throws RunRefused (exit 3, never skipped) when another run holds a name (the message names its
/// run id and host and how to isolate this run); EnvironmentError (exit 3) when the service does
/// not answer the claim.
[[nodiscard]] std::unique_ptr<locks::HeldClaim> claim_run(const Scenario& sc, const RunDirectory& dir,
                                                          locks::LockServiceInstance& service);

}  // namespace fencecheck::harness
