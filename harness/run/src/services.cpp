#include "fencecheck/harness/services.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "fencecheck/faults/command.h"
#include "fencecheck/faults/ledger.h"
#include "fencecheck/faults/relay.h"
#include "fencecheck/faults/worker_group.h"
#include "fencecheck/process/child_process.h"
#include "fencecheck/harness/netns_scope.h"
#include "home_netns.h"

namespace fencecheck::harness {
namespace fs = std::filesystem;

namespace {
constexpr int kLabResourcePort = 7070;  // the resource's port in its own namespace

/// `list` (one endpoint or a comma-separated list) with each member that `rewrites` names replaced.
std::string rewrite_list(const std::string& list, const std::vector<std::pair<std::string, std::string>>& rewrites) {
  std::string out;
  std::size_t from = 0;
  while (true) {
    const auto comma = list.find(',', from);
    std::string member = list.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    for (const auto& [real, relayed] : rewrites)
      if (member == real) {
        member = relayed;
        break;
      }
    out += member;
    if (comma == std::string::npos) return out;
    out += ',';
    from = comma + 1;
  }
}
}  // namespace

struct Services::Impl {
  const Scenario* sc = nullptr;
  const RunDirectory* dir = nullptr;
  std::unique_ptr<faults::SystemCommandRunner> runner;
  std::unique_ptr<faults::NetworkLab> lab;
  std::unique_ptr<NetnsScope> hub;
  /// The lock services, issuer 1 first ("the" lock service); with lock_service.issuers > 1 the
  /// others follow, each with its own data directory and log. Empty once stopped.
  std::vector<std::unique_ptr<locks::LockServiceInstance>> issuers;
  std::unique_ptr<resources::ResourceInstance> resource;
  /// network: namespaces with the user's services: the relays from the lab to them (relay.h), and
  /// each of issuer 1's endpoints as the workers get it (real spelling, relayed spelling).
  std::unique_ptr<faults::TcpRelay> relay;
  std::vector<std::pair<std::string, std::string>> lock_rewrites;

  /// Starts the relays for the user's lock service and resource (none when both are embedded) and
  /// says what the workers get instead of their addresses. Throws EnvironmentError.
  void start_relays(const Scenario& sc, const locks::LockServiceKind& lock_kind, const resources::ResourceKind& res_kind,
                    nlohmann::json& resource_endpoint);
};

void Services::Impl::start_relays(const Scenario& sc, const locks::LockServiceKind& lock_kind,
                                  const resources::ResourceKind& res_kind, nlohmann::json& resource_endpoint) {
  const std::string lock_at = lab->service("lock-service").address, resource_at = lab->service("resource").address;
  std::vector<faults::RelayRequest> requests;
  std::vector<std::pair<std::string, NetAddress>> lock_targets;
  std::string why;
  if (!sc.lock_service().embedded() && sc.lock_service().kind != kNoLockService) {
    const nlohmann::json e = issuers.front()->endpoint();
    for (const auto& v : e.value("endpoints", nlohmann::json::array())) {
      if (!v.is_string()) continue;
      auto target = lock_kind.endpoint_address(v.get<std::string>(), &why);
      if (!target) throw EnvironmentError("lock service endpoint " + v.get<std::string>() + " cannot be relayed into the network lab: " + why);
      lock_targets.emplace_back(v.get<std::string>(), *target);
      requests.push_back({"lock service " + v.get<std::string>(), lock_at, *target});
    }
  }
  std::optional<NetAddress> resource_target;
  if (!res_kind.embedded(sc.resource().config)) {
    resource_target = res_kind.endpoint_address(resource_endpoint, &why);
    if (!resource_target) throw EnvironmentError("resource " + sc.resource().kind + " cannot be relayed into the network lab: " + why);
    requests.push_back({"resource " + sc.resource().kind, resource_at, *resource_target});
  }
  if (requests.empty()) return;
  auto plan = faults::plan_relays(requests);
  try {
    relay = std::make_unique<faults::TcpRelay>(plan, hub->original_fd());
  } catch (const std::exception& err) {
    throw EnvironmentError(std::string("network: namespaces: ") + err.what());
  }
  for (const auto& [real, target] : lock_targets)
    lock_rewrites.emplace_back(real, lock_kind.endpoint_at(real, faults::find_relay(plan, lock_at, target)->listen));
  if (resource_target)
    resource_endpoint = res_kind.endpoint_at(resource_endpoint, faults::find_relay(plan, resource_at, *resource_target)->listen);
  for (const auto& r : plan)
    spdlog::info("{}: relay {} -> {} ({}; from the harness's own network namespace)", sc.name(), r.listen.text(),
                 r.target.text(), r.name);
}

Services::Services(const Scenario& sc, const RunDirectory& dir, const RunOptions& opt, faults::FaultLedger& ledger)
    : impl_(std::make_unique<Impl>()) {
  impl_->sc = &sc;
  impl_->dir = &dir;
  const auto& ls = sc.lock_service();
  resources::ResourceRunContext rctx;
  rctx.run_dir = dir.path();
  rctx.log_path = [&dir](const std::string& name) { return dir.log_path(name); };
  rctx.bin_dir = opt.bin_dir.empty() ? process::self_bin_dir() : opt.bin_dir;
  rctx.run_id = dir.run_id();
  // How the resource guards side effects is its design, fixed when it starts (issue 14): the
  // scenario's job.effect configures it; the workers cannot choose it per request.
  if (sc.job().kind == JobKind::kSideEffect) rctx.effect_mode = sc.job().effect;
  // A service the resource kind starts itself (http's start) is held in the ledger like a command
  // worker's process group: `fencecheck cleanup` ends it after a kill -9 of the harness.
  rctx.hold_process_group = [&ledger](pid_t leader, const std::string& name) -> std::function<void()> {
    const auto ref = faults::ProcessRef::of(leader);
    if (!ref) return [] {};
    auto group = std::make_shared<faults::WorkerGroup>(*ref, name);
    group->inject();
    const std::int64_t id = ledger.record_inject(*group);
    return [group, id, &ledger] {
      if (!ledger.heal(*group, id))  // stays outstanding in the ledger: `fencecheck cleanup` ends it
        spdlog::error("{}; it stays outstanding in {}", group->heal_failure(), ledger.path().string());
    };
  };
  locks::LockServiceRunContext lctx;
  lctx.run_dir = dir.path();
  lctx.log_path = rctx.log_path;
  lctx.run_id = dir.run_id();
  lctx.lock = ls.lock;  // the run's lock name (Scenario::for_run applied run_suffix)
  lctx.members = ls.members;
  for (const auto& f : sc.faults()) lctx.member_clock_faults |= f.kind == "clock-jump";
  if (sc.schedule())
    for (const auto& k : sc.schedule()->faults) lctx.member_clock_faults |= k.fault.kind == "clock-jump";

  if (sc.network() == NetworkMode::kNamespaces) {
    faults::NetworkLabOptions lo;
    lo.run_id = dir.run_id();
    for (const auto& w : sc.workers()) lo.hosts.push_back(w.id);
    // An embedded cluster (issue 35): each member a host of the lab, so member partitions are real.
    const bool member_hosts = ls.members > 1 && ls.embedded();
    if (member_hosts)
      for (int i = 1; i <= ls.members; ++i) lo.hosts.push_back(member_host(i));
    impl_->runner = std::make_unique<faults::SystemCommandRunner>();
    impl_->lab = std::make_unique<faults::NetworkLab>(lo, *impl_->runner, &ledger);
    try {
      impl_->lab->setup();
    } catch (const faults::FaultUnavailable& err) {
      impl_->lab.reset();
      throw EnvironmentError(std::string("network: namespaces needs network namespaces (root, iproute2): ") + err.what());
    }
    impl_->hub = std::make_unique<NetnsScope>(impl_->lab->hub_netns());  // original_fd(): the harness's own
    lctx.host = impl_->lab->service("lock-service").address;
    lctx.lab = true;
    if (member_hosts)
      for (int i = 1; i <= ls.members; ++i) {
        const faults::LabHost& h = impl_->lab->host(member_host(i));
        lctx.member_places.push_back({h.address, h.netns});
      }
    rctx.host = impl_->lab->service("resource").address;
    rctx.port = kLabResourcePort;
    spdlog::info("{}: network lab {}: lock service {}, resource {}", sc.name(), impl_->lab->hub_netns(),
                 impl_->lab->service("lock-service").address, impl_->lab->service("resource").address);
  }

  const auto* lock_kind = locks::find_lock_service_kind(ls.kind);
  if (!lock_kind) throw std::logic_error("lock service kind " + ls.kind + " is not registered");
  // With lock_service.issuers > 1, the "two issuers" mistake: more lock services of the same kind
  // beside the first, each empty (a redeploy beside the old one), each in a directory and log of
  // its own.
  for (int k = 1; k <= ls.issuers; ++k) {
    locks::LockServiceRunContext ctx = lctx;
    if (k > 1) {
      ctx.run_dir = dir.path() / ("issuer-" + std::to_string(k));
      fs::create_directories(ctx.run_dir);
      ctx.log_path = [&dir, k](const std::string& name) { return dir.log_path(name + "-issuer-" + std::to_string(k)); };
    }
    try {
      if (impl_->hub && !ls.embedded()) {
        // The user's lock service is outside the lab: the harness talks to it from its own
        // namespace (home_netns.h), the workers through a relay (start_relays).
        std::unique_ptr<locks::LockServiceInstance> opened;
        {
          NetnsScope home(impl_->hub->original_fd(), "the harness's own");
          opened = lock_kind->open(ls.endpoints, ls.config, ctx);
        }
        impl_->issuers.push_back(std::make_unique<detail::HomeLockService>(std::move(opened), impl_->hub->original_fd()));
      } else {
        impl_->issuers.push_back(lock_kind->open(ls.endpoints, ls.config, ctx));
      }
    } catch (const locks::LockServiceUnavailable& err) {
      const std::string where = k > 1             ? " (issuer " + std::to_string(k) + ")"
                                : ls.embedded() ? ""
                                                : " (scenario " + sc.source() + ")";
      throw EnvironmentError(std::string(err.what()) + where);
    }
    auto& opened = *impl_->issuers.back();
    if (k == 1 && ls.embedded()) opened.advance(ls.prior_revisions);
    if (k == 1) spdlog::info("{}: lock service {}", sc.name(), opened.describe());
    else spdlog::info("{}: issuer {}: lock service {}", sc.name(), k, opened.describe());
  }
  const auto* kind = resources::find_resource_kind(sc.resource().kind);
  if (!kind) throw std::logic_error("resource kind " + sc.resource().kind + " is not registered");
  try {
    if (impl_->hub && !kind->embedded(sc.resource().config)) {
      std::unique_ptr<resources::ResourceInstance> opened;
      {
        NetnsScope home(impl_->hub->original_fd(), "the harness's own");
        opened = kind->open(sc.resource().config, rctx);
      }
      impl_->resource = std::make_unique<detail::HomeResource>(std::move(opened), impl_->hub->original_fd());
    } else {
      impl_->resource = kind->open(sc.resource().config, rctx);
    }
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
  if (impl_->lab) impl_->start_relays(sc, *lock_kind, *kind, resource_endpoint_);
}

Services::~Services() { stop(); }

void Services::stop() {
  if (impl_->relay) {  // the workers' connections to the user's services end with the run
    impl_->relay->stop();
    impl_->relay.reset();
  }
  if (impl_->resource) {
    impl_->resource->stop();
    impl_->resource.reset();
  }
  // The later issuers first, issuer 1 last (the order they were opened in, reversed).
  while (!impl_->issuers.empty()) {
    impl_->issuers.back()->stop();
    impl_->issuers.pop_back();
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
  if (impl_->issuers.empty()) throw std::logic_error("the lock service is stopped");
  return *impl_->issuers.front();
}

locks::LockServiceInstance& Services::issuer(int index) const {
  if (index == 0) return lock_service();
  if (index < 0 || static_cast<std::size_t>(index) >= impl_->issuers.size())
    throw std::out_of_range("no issuer " + std::to_string(index + 1) + " in this run");
  return *impl_->issuers[static_cast<std::size_t>(index)];
}

nlohmann::json Services::worker_lock_endpoint(int index) const {
  nlohmann::json e = issuer(index).endpoint();
  if (index != 0 || impl_->lock_rewrites.empty()) return e;
  if (auto it = e.find("endpoints"); it != e.end() && it->is_array())
    for (auto& v : *it)
      if (v.is_string()) v = rewrite_list(v.get<std::string>(), impl_->lock_rewrites);
  return e;
}

std::string Services::worker_lock_endpoints_text(int index) const {
  const std::string text = issuer(index).endpoints_text();
  return index == 0 ? rewrite_list(text, impl_->lock_rewrites) : text;
}

std::map<std::string, std::string> Services::worker_lock_env(int index) const {
  auto env = issuer(index).worker_env();
  if (index == 0)
    for (auto& [name, value] : env) value = rewrite_list(value, impl_->lock_rewrites);
  return env;
}

int Services::issuer_count() const { return std::max(1, static_cast<int>(impl_->issuers.size())); }

int Services::lock_service_pid() const { return impl_->issuers.empty() ? 0 : impl_->issuers.front()->pid(); }

void Services::stop_lock_service() { lock_service().stop_server(); }

void Services::start_lock_service(bool fresh_data) { lock_service().start_server(fresh_data); }

}  // namespace fencecheck::harness
