// fencecheck — the services one scenario run needs: the lock service and the fenced resource.
//
// Lock service: by default an embedded etcd (Debian's etcd-server) the harness starts itself on
// free loopback ports with a fresh data dir under the run directory; with
// `lock_service.endpoints` in the scenario, an existing cluster, checked for health first.
// Resource: the scenario's resource kind (resources/kinds/): fencecheck-store by default, started
// as a child on 127.0.0.1 with a free port; an embedded PostgreSQL; or the user's database or HTTP
// service.
//
// With `network: namespaces` the run gets a NetworkLab (faults/netns.h): a hub namespace holding
// the lock service's and the store's addresses, and one namespace per worker host linked to it.
// The calling (main) thread enters the hub for the life of the Services, so etcd and the store
// start there and every harness-side connection (health, watch, read-back) is made from there;
// workers are launched through `ip netns exec <their namespace>` (worker_prefix()).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "fencecheck/faults/ledger.h"
#include "fencecheck/faults/netns.h"
#include "fencecheck/resources/resource_kind.h"

#include "fencecheck/harness/orchestrator.h"
#include "fencecheck/harness/run_dir.h"
#include "fencecheck/harness/scenario.h"

namespace fencecheck::harness {

/// The environment lacks something a scenario needs (etcd not installed, an endpoint that does
/// not answer, a missing fault prerequisite): exit code 3. what() names it and the fix.
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

  [[nodiscard]] const std::string& etcd_url() const { return etcd_url_; }
  /// What workers are told about the resource (fencecheck/resources/writer.h's endpoint JSON).
  [[nodiscard]] const nlohmann::json& resource_endpoint() const { return resource_endpoint_; }
  /// The run's resource (read-back, health). Throws std::logic_error after stop().
  [[nodiscard]] resources::ResourceInstance& resource() const;
  /// Stops the resource and the embedded etcd (not an external cluster), leaves the hub namespace
  /// and tears the network lab down. Idempotent.
  void stop();

  /// The wrapper argv a worker process needs (empty on the host network).
  [[nodiscard]] std::vector<std::string> worker_prefix(const std::string& worker) const;
  /// The network lab, or nullptr on the host network.
  [[nodiscard]] const faults::NetworkLab* lab() const;

  /// The embedded lock service's process, for faults that act on it; 0 when external.
  [[nodiscard]] int lock_service_pid() const;
  /// Stops the embedded etcd (SIGTERM) — a lock-service outage. Throws std::logic_error when the
  /// lock service is external.
  void stop_lock_service();
  /// Starts the embedded etcd again at the same URL; with fresh_data on an empty data directory
  /// (the issuer's revision counter starts over: the "redeployed with empty state" mistake).
  void start_lock_service(bool fresh_data);

 private:
  /// Advances the embedded etcd's revision counter by `count` puts to "fencecheck-prior-revisions"
  /// (lock_service.prior_revisions), so tokens start above it. Throws EtcdError.
  void advance_revisions(std::int64_t count);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string etcd_url_;
  nlohmann::json resource_endpoint_;
};

}  // namespace fencecheck::harness
