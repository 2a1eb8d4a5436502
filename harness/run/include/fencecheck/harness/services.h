// fencecheck — the services one scenario run needs: the lock service and the fenced resource.
//
// Lock service: the scenario's lock-service kind (workers/locks/: fencecheck/locks/lock_service_kind.h):
// by default an embedded server (etcd: Debian's etcd-server) the kind starts itself on free loopback
// ports with a fresh data dir under the run directory; with `lock_service.endpoints` in the
// scenario, the user's service, checked for health first.
// Resource: the scenario's resource kind (resources/<kind>/): fencecheck-store by default, started
// as a child on 127.0.0.1 with a free port; an embedded PostgreSQL; or the user's database or HTTP
// service.
//
// With `network: namespaces` the run gets a NetworkLab (faults/netns.h): a hub namespace holding
// the lock service's and the store's addresses, and one namespace per worker host linked to it.
// The calling (main) thread enters the hub for the life of the Services, so the lock service and
// the store start there (the lock service on the lab's lock-service address and its kind's own
// well-known port) and every harness-side connection (health, watch, read-back) is made from there;
// workers are launched through `ip netns exec <their namespace>` (worker_prefix()). The user's
// services (lock_service.endpoints, a resource's DSN or URL) stay outside the lab: the harness
// reaches them from its own namespace (each call made from there), the workers through a relay per
// endpoint on the lab's service address (fencecheck/faults/relay.h), which partitions and netem cut.
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "fencecheck/faults/ledger.h"
#include "fencecheck/faults/netns.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/resources/resource_kind.h"

#include "fencecheck/harness/orchestrator.h"
#include "fencecheck/harness/run_dir.h"
#include "fencecheck/harness/scenario.h"

namespace fencecheck::harness {

/// The environment lacks something a scenario needs (etcd not installed, an endpoint that does
/// not answer, a missing fault prerequisite; a lock service's locks::LockServiceUnavailable): exit code 3. what() names it and the fix.
class EnvironmentError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Starts both services in the constructor (main thread only: see child_process.h) and stops
/// them in stop() / the destructor. The resource is the scenario's resource kind
/// (fencecheck/resources/resource_kind.h), embedded or the user's. Throws EnvironmentError (exit
/// 3: a binary or endpoint missing), ScenarioError (exit 2: a resource field the resource itself
/// refused, located at the field) or std::runtime_error.
class Services {
 public:
  /// ledger: the run's fault ledger (the network lab is recorded there before it exists).
  Services(const Scenario& scenario, const RunDirectory& dir, const RunOptions& options, faults::FaultLedger& ledger);
  ~Services();
  Services(const Services&) = delete;
  Services& operator=(const Services&) = delete;

  /// The run's lock service (endpoint JSON, endpoints_text, worker_env, pid, watch,
  /// stop_server/start_server for lock-service-restart). Throws std::logic_error after stop().
  [[nodiscard]] locks::LockServiceInstance& lock_service() const;
  /// Issuer `index` (0-based; 0 is lock_service()) of a scenario with lock_service.issuers > 1.
  /// Throws std::out_of_range for an index the run does not have, std::logic_error after stop().
  [[nodiscard]] locks::LockServiceInstance& issuer(int index) const;
  /// How many lock services the run has (lock_service.issuers; 1 after stop()).
  [[nodiscard]] int issuer_count() const;
  /// What workers are told about issuer `index`'s lock service (0-based): its endpoint JSON,
  /// FENCECHECK_LOCK_ENDPOINTS and its kind's variables (ETCDCTL_ENDPOINTS...). The instance's own
  /// with `network: namespaces` and the user's lock service, each endpoint spelled at its relay in
  /// the lab (docs/architecture.md, "Relays"); the harness itself uses the real ones. Throws as
  /// issuer().
  [[nodiscard]] nlohmann::json worker_lock_endpoint(int index) const;
  [[nodiscard]] std::string worker_lock_endpoints_text(int index) const;
  [[nodiscard]] std::map<std::string, std::string> worker_lock_env(int index) const;
  /// What workers are told about the resource (fencecheck/resources/writer.h's endpoint JSON);
  /// with `network: namespaces` and the user's resource, its address is the relay's in the lab
  /// (a DSN's hostaddr/port, an HTTP base URL's host/port).
  [[nodiscard]] const nlohmann::json& resource_endpoint() const { return resource_endpoint_; }
  /// The run's resource (read-back, health). Throws std::logic_error after stop().
  [[nodiscard]] resources::ResourceInstance& resource() const;
  /// Stops the resource and the embedded lock service (not the user's), leaves the hub namespace
  /// and tears the network lab down. Idempotent.
  void stop();

  /// The wrapper argv a worker process needs (empty on the host network).
  [[nodiscard]] std::vector<std::string> worker_prefix(const std::string& worker) const;
  /// The network lab, or nullptr on the host network.
  [[nodiscard]] const faults::NetworkLab* lab() const;

  /// The embedded lock service's process, for faults that act on it; 0 when external.
  [[nodiscard]] int lock_service_pid() const;
  /// Stops the embedded lock service (SIGTERM) — a lock-service outage. Throws std::logic_error
  /// when the lock service is external.
  void stop_lock_service();
  /// Starts the embedded lock service again at the same address; with fresh_data on an empty data
  /// directory (what that does to the token counter is the kind's restart_effect(): etcd's revision
  /// counter starts over, the "redeployed with empty state" mistake).
  void start_lock_service(bool fresh_data);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  nlohmann::json resource_endpoint_;
};

}  // namespace fencecheck::harness
