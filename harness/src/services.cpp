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
constexpr int kLabStorePort = 7070;
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
  std::unique_ptr<ChildProcess> store;
};

namespace {

std::string start_store(const Scenario& sc, const RunDirectory& dir, const RunOptions& opt, const std::string& listen,
                        std::unique_ptr<ChildProcess>& out) {
  ChildSpec spec;
  spec.name = "store";
  spec.exe = (opt.bin_dir.empty() ? self_bin_dir() : opt.bin_dir) / "fencecheck-store";
  spec.stderr_log = dir.log_path("store");
  spec.args = {"--listen", listen, "--data-dir", (dir.path() / "store-data").string(), "--fencing",
               std::string(to_string(sc.resource().fencing))};
  if (sc.resource().check_window)
    spec.args.insert(spec.args.end(),
                     {"--check-window-ms",
                      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(*sc.resource().check_window).count())});
  std::mutex mu;
  std::condition_variable cv;
  std::string address;
  bool closed = false;
  out = std::make_unique<ChildProcess>(spec, [&, first = true](std::string_view line, std::int64_t, bool eof) mutable {
    if (!first) return;  // after the first line the store says nothing on stdout that we need
    std::lock_guard lock(mu);
    if (eof) {
      closed = true;
    } else {
      first = false;
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.contains("listening")) address = j["listening"].get<std::string>();
      else closed = true;
    }
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  if (!cv.wait_for(lock, std::chrono::seconds(15), [&] { return !address.empty() || closed; }) || address.empty()) {
    lock.unlock();
    out.reset();  // joins the reader before the locals its callback uses go away
    throw std::runtime_error("fencecheck-store did not report its address; see " + spec.stderr_log.string());
  }
  return "http://" + address;
}

}  // namespace

Services::Services(const Scenario& sc, const RunDirectory& dir, const RunOptions& opt, faults::FaultLedger& ledger)
    : impl_(std::make_unique<Impl>()) {
  impl_->sc = &sc;
  impl_->dir = &dir;
  const auto& ls = sc.lock_service();
  std::string store_listen = "127.0.0.1:0";

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
    store_listen = impl_->lab->service("resource").address + ":" + std::to_string(kLabStorePort);
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
  store_url_ = start_store(sc, dir, opt, store_listen, impl_->store);
  spdlog::info("{}: fencecheck-store ({}) at {}", sc.name(), to_string(sc.resource().fencing), store_url_);
}

Services::~Services() { stop(); }

void Services::stop() {
  if (impl_->store) {
    impl_->store->terminate();
    impl_->store.reset();
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
