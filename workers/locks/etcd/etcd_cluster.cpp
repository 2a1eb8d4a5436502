#include "fencecheck/locks/etcd/etcd_cluster.h"

#include <signal.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include <spdlog/spdlog.h>

#include "fencecheck/http/client.h"
#include "fencecheck/locks/etcd/etcd_client.h"
#include "fencecheck/process/child_process.h"
#include "fencecheck/process/server_support.h"

namespace fencecheck {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr int kNamespaceClientPort = 2379;  // etcd's IANA ports: free in a namespace of the member's own
constexpr int kNamespacePeerPort = 2380;

std::string http_url(const std::string& host, int port) { return "http://" + host + ":" + std::to_string(port); }

}  // namespace

struct EtcdCluster::Member {
  int index = 0;
  std::string name;  // "m<i>"
  Place place;
  int client_port = 0, peer_port = 0;
  std::string client_url, peer_url;
  fs::path data_dir, log;
  std::uint64_t id = 0;
  std::unique_ptr<process::ChildProcess> child;
  std::uintmax_t log_offset = 0;  // where this start's output begins in the log
};

EtcdCluster::EtcdCluster(Options options) : options_(std::move(options)) {}
EtcdCluster::~EtcdCluster() { stop(); }

std::vector<std::string> EtcdCluster::client_urls() const {
  std::vector<std::string> out;
  for (const auto& m : members_) out.push_back(m->client_url);
  return out;
}

const std::string& EtcdCluster::client_url(int index) const { return members_.at(static_cast<std::size_t>(index - 1))->client_url; }

int EtcdCluster::pid(int index) const {
  const auto& m = members_.at(static_cast<std::size_t>(index - 1));
  return m->child ? m->child->pid() : 0;
}

const EtcdCluster::Place& EtcdCluster::place(int index) const { return members_.at(static_cast<std::size_t>(index - 1))->place; }

const fs::path& EtcdCluster::data_dir(int index) const { return members_.at(static_cast<std::size_t>(index - 1))->data_dir; }

std::uint64_t EtcdCluster::member_id(int index) const { return members_.at(static_cast<std::size_t>(index - 1))->id; }

void EtcdCluster::launch(Member& m, bool first_start) {
  std::vector<std::string> args{"--name", m.name,
                                "--data-dir", m.data_dir.string(),
                                "--listen-client-urls", m.client_url,
                                "--advertise-client-urls", m.client_url,
                                "--listen-peer-urls", m.peer_url,
                                "--initial-advertise-peer-urls", m.peer_url,
                                "--initial-cluster", initial_cluster_,
                                "--initial-cluster-state", "new",
                                "--initial-cluster-token", options_.cluster_token,
                                "--heartbeat-interval", std::to_string(options_.heartbeat.count()),
                                "--election-timeout", std::to_string(options_.election.count())};
  (void)first_start;  // a restart passes the same flags: with a WAL in the data dir etcd ignores --initial-*
  process::ChildSpec spec;
  spec.name = "etcd member " + std::to_string(m.index);
  spec.exe = binary_;
  spec.args = std::move(args);
  if (!m.place.netns.empty()) spec.prefix = {"ip", "netns", "exec", m.place.netns};
  spec.output_log = m.log;
  spec.env_drop_prefixes = {"ETCD_"};
  std::error_code ec;
  m.log_offset = fs::file_size(m.log, ec);
  if (ec) m.log_offset = 0;
  try {
    m.child = std::make_unique<process::ChildProcess>(std::move(spec), nullptr);
  } catch (const std::runtime_error& err) {
    throw std::runtime_error(std::string("EtcdCluster: ") + err.what());
  }
  spdlog::debug("etcd member {} pid {} on {} (peer {}{}), log {}", m.index, m.child->pid(), m.client_url, m.peer_url,
                m.place.netns.empty() ? "" : ", netns " + m.place.netns, m.log.string());
}

void EtcdCluster::wait_serving(Member& m, std::chrono::steady_clock::time_point deadline) {
  // The peer listener's GET /members answers once the member's server is built (its client
  // listener serves only once the member has published itself through a quorum: not yet for the
  // first member alone).
  const http::Endpoint peer{m.place.host, m.peer_port};
  http::Request request;
  request.target = "/members";
  while (std::chrono::steady_clock::now() < deadline) {
    if (!m.child->running()) break;
    const http::Reply r = http::exchange(peer, request, http::Timeouts{200ms, 500ms, 500ms});
    if (r.complete() && r.status == 200) return;
    std::this_thread::sleep_for(10ms);
  }
  const bool exited = !m.child->running();
  const std::string log = process::read_text(m.log, m.log_offset);
  const std::string what = "etcd member " + std::to_string(m.index) + " on " + m.client_url +
                           (exited ? " (exit status " + std::to_string(m.child->exit_code().value_or(-1)) + ")" : std::string());
  if (!exited) m.child->terminate(0ms);
  throw std::runtime_error("EtcdCluster: " + process::start_failure(what, exited, {"served", "serve"}, options_.start_timeout,
                                                                     m.log, log));
}

void EtcdCluster::start(const fs::path& data_root, const std::function<fs::path(int)>& log_path) {
  if (!members_.empty()) throw std::logic_error("EtcdCluster::start: already started");
  binary_ = options_.binary;
  if (binary_.empty()) binary_ = process::find_on_path("etcd").value_or(fs::path());
  if (binary_.empty() || !fs::exists(binary_))
    throw std::runtime_error("etcd not found: install Debian's etcd-server (apt-get install etcd-server)");
  const int n = options_.members;
  if (n < 1) throw std::invalid_argument("EtcdCluster: members must be at least 1");
  if (!options_.places.empty() && static_cast<int>(options_.places.size()) != n)
    throw std::invalid_argument("EtcdCluster: one place per member");

  std::string last_failure;
  for (int attempt = 1; attempt <= std::max(1, options_.port_attempts); ++attempt) {
    members_.clear();
    initial_cluster_.clear();
    for (int i = 1; i <= n; ++i) {
      auto m = std::make_unique<Member>();
      m->index = i;
      m->name = "m" + std::to_string(i);
      if (!options_.places.empty()) m->place = options_.places[static_cast<std::size_t>(i - 1)];
      if (!m->place.netns.empty()) {
        m->client_port = kNamespaceClientPort;
        m->peer_port = kNamespacePeerPort;
      } else {
        m->client_port = process::free_tcp_port(m->place.host);
        do m->peer_port = process::free_tcp_port(m->place.host);
        while (m->peer_port == m->client_port);
      }
      m->client_url = http_url(m->place.host, m->client_port);
      m->peer_url = http_url(m->place.host, m->peer_port);
      m->data_dir = data_root / ("etcd-data-" + std::to_string(i));
      m->log = log_path(i);
      std::error_code ec;
      fs::remove_all(m->data_dir, ec);  // a new cluster: a member dir of an earlier attempt would rejoin it
      fs::create_directories(m->data_dir);
      if (m->log.has_parent_path()) fs::create_directories(m->log.parent_path());
      initial_cluster_ += (initial_cluster_.empty() ? "" : ",") + m->name + "=" + m->peer_url;
      members_.push_back(std::move(m));
    }
    const auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
    try {
      // One after another (the header says why): each once the one before serves.
      for (auto& m : members_) {
        launch(*m, true);
        wait_serving(*m, deadline);
      }
      // Each member's raft id, from its own status (served once the cluster has a quorum).
      for (auto& m : members_) {
        const EtcdClient probe(m->client_url, EtcdClient::Options{200ms, 500ms});
        while (m->id == 0) {
          try {
            m->id = probe.status().member_id;
          } catch (const EtcdError& err) {
            if (std::chrono::steady_clock::now() >= deadline)
              throw std::runtime_error("EtcdCluster: member " + std::to_string(m->index) + " on " + m->client_url +
                                       " did not answer its status within " + std::to_string(options_.start_timeout.count()) +
                                       " ms: " + err.what());
            std::this_thread::sleep_for(10ms);
          }
        }
      }
      // Member 1 leads at the start of every run (MoveLeader, asked of the leader): the same
      // cluster each time, whichever member's election timer fired first.
      std::string why;
      std::optional<int> lead;
      while (!(lead = leader(why)) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
      if (!lead) throw std::runtime_error("EtcdCluster: no leader within " + std::to_string(options_.start_timeout.count()) +
                                          " ms (" + why + ")");
      if (*lead != 1 && n > 1) {
        EtcdClient(client_url(*lead), EtcdClient::Options{500ms, 5000ms}).move_leader(members_.front()->id);
      }
      for (auto& m : members_) {
        const EtcdClient probe(m->client_url, EtcdClient::Options{200ms, 1000ms});
        while (!probe.health()) {
          if (std::chrono::steady_clock::now() >= deadline)
            throw std::runtime_error("EtcdCluster: member " + std::to_string(m->index) + " on " + m->client_url +
                                     " not healthy within " + std::to_string(options_.start_timeout.count()) + " ms");
          std::this_thread::sleep_for(10ms);
        }
      }
      return;
    } catch (const std::exception& err) {
      last_failure = err.what();
      bool taken = false;
      for (auto& m : members_) taken = taken || process::port_was_taken(process::read_text(m->log, m->log_offset));
      stop();
      if (!taken || (!options_.places.empty() && !options_.places.front().netns.empty())) throw;
      spdlog::warn("embedded etcd cluster: a port was taken; retrying with new ports (attempt {})", attempt);
    }
  }
  throw std::runtime_error("EtcdCluster: no free ports after " + std::to_string(options_.port_attempts) +
                           " attempts; last: " + last_failure);
}

void EtcdCluster::stop() noexcept {
  // SIGTERM to all first (a leader alone would wait to hand its leadership on), then reap each.
  for (auto& m : members_)
    if (m->child && m->child->running()) ::kill(m->child->pid(), SIGCONT), ::kill(m->child->pid(), SIGTERM);
  // Members told to end together cannot hand the leadership on: the last leader waits for a
  // transfer that never comes (etcd 3.4 waits up to its request timeout), so the grace here is
  // short; the cluster's data is the run's and is removed with it (or kept as it is on disk).
  const auto grace = std::min(options_.stop_grace, std::chrono::milliseconds(500));
  for (auto& m : members_) {
    try {
      if (m->child) m->child->terminate(grace);
    } catch (const std::exception& err) {
      spdlog::warn("etcd member {}: stopping it failed: {} (it ends with the harness: PR_SET_PDEATHSIG)", m->index, err.what());
    }
    m->child.reset();
  }
}

void EtcdCluster::stop_member(int index, bool kill9) {
  Member& m = *members_.at(static_cast<std::size_t>(index - 1));
  if (!m.child) return;
  if (kill9) {
    ::kill(m.child->pid(), SIGKILL);  // the child's own pid: reaped below, so it cannot have been reused
    m.child->terminate(0ms);
  } else {
    m.child->terminate(options_.stop_grace);
  }
  if (m.child->running()) throw std::runtime_error("etcd member " + std::to_string(index) + " did not end");
  m.child.reset();
}

void EtcdCluster::start_member(int index) {
  Member& m = *members_.at(static_cast<std::size_t>(index - 1));
  if (m.child && m.child->running()) return;
  m.child.reset();
  launch(m, false);
  const auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  wait_serving(m, deadline);
  const EtcdClient probe(m.client_url, EtcdClient::Options{200ms, 1000ms});
  while (!probe.health()) {
    if (!m.child->running() || std::chrono::steady_clock::now() >= deadline) {
      const std::string log = process::read_text(m.log, m.log_offset);
      if (m.child->running()) m.child->terminate(0ms);
      m.child.reset();
      throw std::runtime_error("etcd member " + std::to_string(index) + " on " + m.client_url + " did not rejoin within " +
                               std::to_string(options_.start_timeout.count()) + " ms: " + process::tail_text(log));
    }
    std::this_thread::sleep_for(10ms);
  }
}

void EtcdCluster::start_all() {
  std::vector<Member*> started;
  for (auto& m : members_)
    if (!m->child || !m->child->running()) {
      m->child.reset();
      launch(*m, false);
      started.push_back(m.get());
    }
  const auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  for (Member* m : started) {
    const EtcdClient probe(m->client_url, EtcdClient::Options{200ms, 1000ms});
    while (!probe.health()) {
      if (!m->child->running() || std::chrono::steady_clock::now() >= deadline)
        throw std::runtime_error("etcd member " + std::to_string(m->index) + " on " + m->client_url +
                                 " not healthy again within " + std::to_string(options_.start_timeout.count()) +
                                 " ms: " + process::tail_text(process::read_text(m->log, m->log_offset)));
      std::this_thread::sleep_for(10ms);
    }
  }
}

std::optional<int> EtcdCluster::leader(std::string& why) const {
  std::optional<int> best;
  std::uint64_t best_term = 0;
  std::string said;
  for (const auto& m : members_) {
    if (!m->child) {
      said += (said.empty() ? "" : "; ") + ("member " + std::to_string(m->index) + " is down");
      continue;
    }
    try {
      const MemberStatus st = EtcdClient(m->client_url, EtcdClient::Options{200ms, 500ms}).status();
      int leader_index = 0;
      bool leader_down = false;
      for (const auto& o : members_)
        if (o->id != 0 && o->id == st.leader) {
          leader_index = o->index;
          leader_down = !o->child;  // a member the harness ended: the others have not noticed yet
        }
      said += (said.empty() ? "" : "; ") + ("member " + std::to_string(m->index) + "'s status: " +
                                            (leader_index ? "leader member " + std::to_string(leader_index) +
                                                                (leader_down ? " (which is down)" : "")
                                                          : std::string("no leader")) +
                                            ", term " + std::to_string(st.raft_term));
      if (leader_index && !leader_down && (!best || st.raft_term > best_term)) {
        best = leader_index;
        best_term = st.raft_term;
      }
    } catch (const std::exception& err) {
      said += (said.empty() ? "" : "; ") + ("member " + std::to_string(m->index) + " did not answer");
    }
  }
  why = said;
  return best;
}

}  // namespace fencecheck
