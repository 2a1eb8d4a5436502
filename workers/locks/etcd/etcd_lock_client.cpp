#include "fencecheck/locks/etcd/etcd_lock_client.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "kinds.h"

namespace fencecheck::locks {
namespace {

using std::chrono::milliseconds;

/// The member did not answer, or answered that it cannot reach a leader (gRPC 14, Unavailable):
/// another member may (etcd_lock_client.h, "Failover").
bool etcd_member_unavailable(const EtcdError& err) { return err.transport() || err.grpc_code() == 14; }

std::vector<EtcdClient> etcd_members_of(std::vector<std::string> endpoints, const LockClientOptions& options) {
  if (endpoints.empty()) throw std::invalid_argument("etcd lock client: no endpoint");
  std::vector<EtcdClient> out;
  out.reserve(endpoints.size());
  for (auto& e : endpoints)
    out.emplace_back(std::move(e), EtcdClient::Options{options.connect_timeout, options.request_timeout});
  return out;
}

}  // namespace

EtcdLockClient::EtcdLockClient(std::vector<std::string> endpoints, const LockClientOptions& options)
    : members_(etcd_members_of(std::move(endpoints), options)), on_failover_(options.on_failover) {}

EtcdLockClient::EtcdLockClient(std::string endpoint, const LockClientOptions& options)
    : EtcdLockClient(std::vector<std::string>{std::move(endpoint)}, options) {}

void EtcdLockClient::move_from(std::size_t from, const std::string& why) {
  std::size_t expected = from;
  const std::size_t to = (from + 1) % members_.size();
  // Another call that failed on the same member moved already: one move, not two.
  if (!current_.compare_exchange_strong(expected, to)) return;
  if (on_failover_)
    on_failover_("etcd member " + members_[from].endpoint() + " did not answer (" + why + "); the client moves to " +
                 members_[to].endpoint());
}

template <typename F>
auto EtcdLockClient::on_member(Retry retry, F&& f) -> decltype(f(std::declval<const EtcdClient&>())) {
  const std::size_t first = current_.load();
  std::string failures;  // each member's failure, when none answers
  for (std::size_t tried = 0; tried < members_.size(); ++tried) {
    const std::size_t i = (first + tried) % members_.size();
    try {
      return f(members_[i]);
    } catch (const EtcdError& err) {
      if (members_.size() == 1 || !etcd_member_unavailable(err)) throw LockServiceError(err.what());
      move_from(i, err.what());
      // Sent and unanswered: what a write did is unknown, so it is not sent again (only the
      // transport moves); a renewal or a read may be.
      if (retry == Retry::kOnlyUnsent && !err.unsent()) throw LockServiceError(err.what());
      failures += (failures.empty() ? "" : "; ") + std::string(err.what());
    }
  }
  throw LockServiceError("etcd: no member answered (" + std::to_string(members_.size()) + " tried): " + failures);
}

Session EtcdLockClient::open_session(milliseconds ttl) {
  // etcd lease TTLs are whole seconds (LeaseGrantRequest.TTL is int64 seconds): round up.
  const auto seconds = std::chrono::ceil<std::chrono::seconds>(ttl);
  const LeaseGrant grant = on_member(Retry::kOnlyUnsent, [&](const EtcdClient& etcd) {
    return etcd.lease_grant(seconds.count() < 1 ? std::chrono::seconds(1) : seconds);
  });
  return Session{grant.id, std::chrono::duration_cast<milliseconds>(grant.ttl)};
}

bool EtcdLockClient::keepalive(const Session& s) {
  return on_member(Retry::kRepeatable, [&](const EtcdClient& etcd) { return etcd.lease_keepalive(s.id).has_value(); });
}

std::optional<milliseconds> EtcdLockClient::remaining(const Session& s) {
  const LeaseTimeToLive ttl = on_member(Retry::kRepeatable, [&](const EtcdClient& etcd) { return etcd.lease_time_to_live(s.id); });
  if (!ttl.exists()) return std::nullopt;
  return std::chrono::duration_cast<milliseconds>(ttl.ttl);
}

std::optional<Holding> EtcdLockClient::acquire(const std::string& name, const Session& s, milliseconds timeout,
                                               std::stop_token stop) {
  std::optional<LockResult> locked =
      on_member(Retry::kOnlyUnsent, [&](const EtcdClient& etcd) { return etcd.lock(name, s.id, timeout, stop); });
  if (!locked) return std::nullopt;
  // Lock returns a key even when the lease expired while it waited (etcd_client.h): check it.
  std::optional<KeyValue> kv = on_member(Retry::kRepeatable, [&](const EtcdClient& etcd) { return etcd.range(locked->key); });
  if (!kv || kv->lease != s.id)
    throw LockServiceError("Lock returned key '" + locked->key + "' but it no longer exists with lease " +
                           std::to_string(s.id) + " (the lease expired while waiting)");
  return Holding{locked->key, kv->create_revision, locked->header_revision};
}

Released EtcdLockClient::release(const std::string& /*name*/, const Holding& h, const Session& s) {
  const DeleteResult del = on_member(Retry::kOnlyUnsent, [&](const EtcdClient& etcd) { return etcd.delete_key(h.lock_key); });
  Released r;
  r.lock_key = h.lock_key;
  r.token = h.token;
  r.lease_id = s.id;
  r.existed = del.deleted > 0;
  if (r.existed) r.revision = del.revision;
  return r;
}

std::vector<Released> EtcdLockClient::release_by_name(const std::string& name, const Session& s) {
  const DeletePrefixResult del =
      on_member(Retry::kOnlyUnsent, [&](const EtcdClient& etcd) { return etcd.delete_prefix(name + "/"); });
  std::vector<Released> out;
  for (const KeyValue& kv : del.deleted) {
    Released r;
    r.lock_key = kv.key;
    r.token = kv.create_revision;
    r.revision = del.revision;
    r.lease_id = kv.lease;
    r.own = kv.lease == s.id;
    out.push_back(std::move(r));
  }
  return out;
}

bool EtcdLockClient::close_session(const Session& s) {
  return on_member(Retry::kOnlyUnsent, [&](const EtcdClient& etcd) { return etcd.lease_revoke(s.id); });
}

namespace detail {

std::unique_ptr<LockClient> make_etcd_lock_client(const nlohmann::json& endpoint, const LockClientOptions& options) {
  const auto it = endpoint.find("endpoints");
  const bool strings = it != endpoint.end() && it->is_array() && !it->empty() &&
                       std::all_of(it->begin(), it->end(), [](const nlohmann::json& e) { return e.is_string(); });
  if (!strings)
    throw std::invalid_argument("etcd endpoint: expected \"endpoints\": [\"http://host:port\", ...], got " + endpoint.dump());
  // Every member, the worker's own first (the harness's order): the client fails over along them.
  return std::make_unique<EtcdLockClient>(it->get<std::vector<std::string>>(), options);
}

}  // namespace detail
}  // namespace fencecheck::locks
