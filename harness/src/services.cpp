#include "fencecheck/harness/services.h"

#include <condition_variable>
#include <mutex>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "fencecheck/faults/command.h"
#include "fencecheck/harness/child_process.h"
#include "fencecheck/harness/netns_scope.h"
#include "fencecheck/workers/embedded_etcd.h"
#include "fencecheck/workers/etcd_client.h"

namespace fencecheck::harness {
namespace fs = std::filesystem;

namespace {
constexpr int kLabEtcdClientPort = 2379;  // etcd's IANA ports: free in a namespace of our own
constexpr int kLabEtcdPeerPort = 2380;
constexpr int kLabResourcePort = 7070;  // the resource's port in its own namespace
}  // namespace

struct Services::Impl {
  const Scenario* sc = nullptr;
  const RunDirectory* dir = nullptr;
  std::unique_ptr<faults::SystemCommandRunner> runner;
  std::unique_ptr<faults::NetworkLab> lab;
  std::unique_ptr<NetnsScope> hub;
  std::unique_ptr<EmbeddedEtcd> etcd;
  EmbeddedEtcd::Options etcd_options;
  int etcd_generation = 0;
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
    impl_->etcd_options.host = impl_->lab->service("lock-service").address;
    impl_->etcd_options.client_port = kLabEtcdClientPort;
    impl_->etcd_options.peer_port = kLabEtcdPeerPort;
    rctx.host = impl_->lab->service("resource").address;
    rctx.port = kLabResourcePort;
    spdlog::info("{}: network lab {}: lock service {}, resource {}", sc.name(), impl_->lab->hub_netns(),
                 impl_->lab->service("lock-service").address, impl_->lab->service("resource").address);
  }

  if (ls.embedded()) {
    if (!find_on_path("etcd"))
      throw EnvironmentError("etcd not found on PATH: install Debian's etcd-server (apt-get install etcd-server), "
                             "or give lock_service.endpoints in the scenario");
    start_lock_service(false);
    advance_revisions(ls.prior_revisions);
  } else {
    std::string tried;
    for (const auto& ep : ls.endpoints) {
      if (EtcdClient(ep).health()) {
        etcd_url_ = ep;
        break;
      }
      tried += (tried.empty() ? "" : ", ") + ep;
    }
    if (etcd_url_.empty())
      throw EnvironmentError("no etcd endpoint answered /health: " + tried + " (scenario " + sc.source() + ")");
    spdlog::info("{}: external etcd at {}", sc.name(), etcd_url_);
  }
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
  if (impl_->etcd) {
    impl_->etcd->stop();
    impl_->etcd.reset();
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

int Services::lock_service_pid() const { return impl_->etcd ? impl_->etcd->pid() : 0; }

void Services::stop_lock_service() {
  if (!impl_->sc->lock_service().embedded()) throw std::logic_error("the lock service is external: not stopping it");
  if (impl_->etcd) impl_->etcd->stop();
  impl_->etcd.reset();
}

void Services::advance_revisions(std::int64_t count) {
  if (count <= 0) return;
  // One put is one revision (a txn of many puts would be one revision too). The key is outside
  // every lock prefix ("fencecheck/..."), so no lock watch sees it.
  const EtcdClient etcd(etcd_url_);
  std::int64_t revision = 0;
  for (std::int64_t i = 0; i < count; ++i) revision = etcd.put("fencecheck-prior-revisions", std::to_string(i));
  spdlog::info("{}: lock service history: {} prior revisions (now at revision {})", impl_->sc->name(), count, revision);
}

void Services::start_lock_service(bool fresh_data) {
  if (!impl_->sc->lock_service().embedded()) throw std::logic_error("the lock service is external: not starting it");
  if (impl_->etcd) return;
  if (fresh_data || impl_->etcd_generation == 0) ++impl_->etcd_generation;
  const std::string data = impl_->etcd_generation == 1 ? "etcd-data" : "etcd-data-" + std::to_string(impl_->etcd_generation);
  auto etcd = std::make_unique<EmbeddedEtcd>(impl_->etcd_options);
  etcd->start(impl_->dir->path() / data, impl_->dir->log_path("etcd"));
  etcd_url_ = etcd->client_url();
  // Same URL on a restart: the clients keep the address they were given.
  const auto colon = etcd_url_.rfind(':');
  impl_->etcd_options.client_port = std::stoi(etcd_url_.substr(colon + 1));
  const auto& peer = etcd->peer_url();
  impl_->etcd_options.peer_port = std::stoi(peer.substr(peer.rfind(':') + 1));
  impl_->etcd = std::move(etcd);
  spdlog::info("{}: embedded etcd at {} (data {})", impl_->sc->name(), etcd_url_, data);
}

}  // namespace fencecheck::harness
