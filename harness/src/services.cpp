#include "fencecheck/harness/services.h"

#include <condition_variable>
#include <mutex>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "fencecheck/faults/command.h"
#include "fencecheck/harness/child_process.h"
#include "fencecheck/harness/netns_scope.h"

namespace fencecheck::harness {
namespace fs = std::filesystem;

namespace {
constexpr int kLabResourcePort = 7070;  // the resource's port in its own namespace
}  // namespace

struct Services::Impl {
  const Scenario* sc = nullptr;
  const RunDirectory* dir = nullptr;
  std::unique_ptr<faults::SystemCommandRunner> runner;
  std::unique_ptr<faults::NetworkLab> lab;
  std::unique_ptr<NetnsScope> hub;
  std::unique_ptr<locks::LockServiceInstance> lock_service;
  std::unique_ptr<resources::ResourceInstance> resource;
};

Services::Services(const Scenario& sc, const RunDirectory& dir, const RunOptions& opt, faults::FaultLedger& ledger)
    : impl_(std::make_unique<Impl>()) {
  impl_->sc = &sc;
  impl_->dir = &dir;
  const auto& ls = sc.lock_service();
  resources::ResourceRunContext rctx;
  rctx.run_dir = dir.path();
  rctx.log_path = [&dir](const std::string& name) { return dir.log_path(name); };
  rctx.bin_dir = opt.bin_dir.empty() ? self_bin_dir() : opt.bin_dir;
  rctx.run_id = dir.run_id();
  locks::LockServiceRunContext lctx;
  lctx.run_dir = dir.path();
  lctx.log_path = rctx.log_path;
  lctx.run_id = dir.run_id();

  if (sc.network() == NetworkMode::kNamespaces) {
    faults::NetworkLabOptions lo;
    lo.run_id = dir.run_id();
    for (const auto& w : sc.workers()) lo.hosts.push_back(w.id);
    impl_->runner = std::make_unique<faults::SystemCommandRunner>();
    impl_->lab = std::make_unique<faults::NetworkLab>(lo, *impl_->runner, &ledger);
    try {
      impl_->lab->setup();
    } catch (const faults::FaultUnavailable& err) {
      impl_->lab.reset();
      throw EnvironmentError(std::string("network: namespaces needs network namespaces (root, iproute2): ") + err.what());
    }
    impl_->hub = std::make_unique<NetnsScope>(impl_->lab->hub_netns());
    lctx.host = impl_->lab->service("lock-service").address;
    lctx.lab = true;
    rctx.host = impl_->lab->service("resource").address;
    rctx.port = kLabResourcePort;
    spdlog::info("{}: network lab {}: lock service {}, resource {}", sc.name(), impl_->lab->hub_netns(),
                 impl_->lab->service("lock-service").address, impl_->lab->service("resource").address);
  }

  const auto* lock_kind = locks::find_lock_service_kind(ls.kind);
  if (!lock_kind) throw std::logic_error("lock service kind " + ls.kind + " is not registered");
  try {
    impl_->lock_service = lock_kind->open(ls.endpoints, ls.config, lctx);
  } catch (const locks::LockServiceUnavailable& err) {
    throw EnvironmentError(std::string(err.what()) + (ls.embedded() ? "" : " (scenario " + sc.source() + ")"));
  }
  if (ls.embedded()) impl_->lock_service->advance(ls.prior_revisions);
  spdlog::info("{}: lock service {}", sc.name(), impl_->lock_service->describe());
  const auto* kind = resources::find_resource_kind(sc.resource().kind);
  if (!kind) throw std::logic_error("resource kind " + sc.resource().kind + " is not registered");
  try {
    impl_->resource = kind->open(sc.resource().config, rctx);
  } catch (const resources::ResourceUnavailable& err) {
    throw EnvironmentError(std::string("resource ") + sc.resource().kind + ": " + err.what());
  } catch (const resources::ResourceConfigError& err) {
    // Bad input only the resource could see (an SQL statement it refuses): exit 2 at the field.
    const auto& pos = sc.resource().positions;
    auto at = pos.find(err.field());
    if (at == pos.end()) at = pos.find("");
    const auto [line, col] = at == pos.end() ? std::pair<int, int>{0, 0} : at->second;
    throw ScenarioError(sc.source(), line, col,
                        "resource" + (err.field().empty() ? std::string() : "." + err.field()) + ": " + err.what());
  }
  resource_endpoint_ = impl_->resource->endpoint();
  spdlog::info("{}: resource {}", sc.name(), impl_->resource->describe());
}

Services::~Services() { stop(); }

void Services::stop() {
  if (impl_->resource) {
    impl_->resource->stop();
    impl_->resource.reset();
  }
  if (impl_->lock_service) {
    impl_->lock_service->stop();
    impl_->lock_service.reset();
  }
  impl_->hub.reset();
  if (impl_->lab) {
    impl_->lab->teardown();
    impl_->lab.reset();
  }
}

std::vector<std::string> Services::worker_prefix(const std::string& worker) const {
  if (!impl_->lab) return {};
  return {"ip", "netns", "exec", impl_->lab->host(worker).netns};
}

const faults::NetworkLab* Services::lab() const { return impl_->lab.get(); }

resources::ResourceInstance& Services::resource() const {
  if (!impl_->resource) throw std::logic_error("the resource is stopped");
  return *impl_->resource;
}

locks::LockServiceInstance& Services::lock_service() const {
  if (!impl_->lock_service) throw std::logic_error("the lock service is stopped");
  return *impl_->lock_service;
}

int Services::lock_service_pid() const { return impl_->lock_service ? impl_->lock_service->pid() : 0; }

void Services::stop_lock_service() { lock_service().stop_server(); }

void Services::start_lock_service(bool fresh_data) { lock_service().start_server(fresh_data); }

}  // namespace fencecheck::harness
