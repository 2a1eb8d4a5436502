// fencecheck — the services one scenario run needs: the lock service and the fenced resource.
//
// Lock service: by default an embedded etcd (Debian's etcd-server) the harness starts itself on
// free loopback ports with a fresh data dir under the run directory; with
// `lock_service.endpoints` in the scenario, an existing cluster, checked for health first.
// Resource: fencecheck-store, started as a child on 127.0.0.1 with a free port (it prints
// {"listening":"127.0.0.1:PORT",...} on stdout) and the scenario's fencing mode.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

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
/// them in stop() / the destructor. Throws EnvironmentError or std::runtime_error.
class Services {
 public:
  Services(const Scenario& scenario, const RunDirectory& dir, const RunOptions& options);
  ~Services();
  Services(const Services&) = delete;
  Services& operator=(const Services&) = delete;

  [[nodiscard]] const std::string& etcd_url() const { return etcd_url_; }
  [[nodiscard]] const std::string& store_url() const { return store_url_; }
  /// Stops the store and the embedded etcd (not an external cluster). Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string etcd_url_;
  std::string store_url_;
};

}  // namespace fencecheck::harness
