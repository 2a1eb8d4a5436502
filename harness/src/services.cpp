#include "fencecheck/harness/services.h"

#include <condition_variable>
#include <mutex>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "fencecheck/harness/child_process.h"
#include "fencecheck/workers/embedded_etcd.h"
#include "fencecheck/workers/etcd_client.h"

namespace fencecheck::harness {
namespace fs = std::filesystem;

struct Services::Impl {
  std::unique_ptr<EmbeddedEtcd> etcd;
  std::unique_ptr<ChildProcess> store;
};

namespace {

std::string start_store(const Scenario& sc, const RunDirectory& dir, const RunOptions& opt,
                        std::unique_ptr<ChildProcess>& out) {
  ChildSpec spec;
  spec.name = "store";
  spec.exe = (opt.bin_dir.empty() ? self_bin_dir() : opt.bin_dir) / "fencecheck-store";
  spec.stderr_log = dir.log_path("store");
  spec.args = {"--listen", "127.0.0.1:0", "--data-dir", (dir.path() / "store-data").string(), "--fencing",
               std::string(to_string(sc.resource().fencing))};
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

Services::Services(const Scenario& sc, const RunDirectory& dir, const RunOptions& opt) : impl_(std::make_unique<Impl>()) {
  const auto& ls = sc.lock_service();
  if (ls.embedded()) {
    if (!find_on_path("etcd"))
      throw EnvironmentError("etcd not found on PATH: install Debian's etcd-server (apt-get install etcd-server), "
                             "or give lock_service.endpoints in the scenario");
    impl_->etcd = std::make_unique<EmbeddedEtcd>();
    impl_->etcd->start(dir.path() / "etcd-data", dir.log_path("etcd"));
    etcd_url_ = impl_->etcd->client_url();
    spdlog::info("{}: embedded etcd at {}", sc.name(), etcd_url_);
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
  store_url_ = start_store(sc, dir, opt, impl_->store);
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
}

}  // namespace fencecheck::harness
