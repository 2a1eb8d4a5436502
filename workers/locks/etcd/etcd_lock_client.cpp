#include "fencecheck/locks/etcd/etcd_lock_client.h"

#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "kinds.h"

namespace fencecheck::locks {
namespace {

using std::chrono::milliseconds;

/// Runs an EtcdClient call, rethrowing its EtcdError as LockServiceError (same what()).
template <typename F>
auto etcd_call(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const EtcdError& err) {
    throw LockServiceError(err.what());
  }
}

}  // namespace

EtcdLockClient::EtcdLockClient(std::string endpoint, const LockClientOptions& options)
    : etcd_(std::move(endpoint), EtcdClient::Options{options.connect_timeout, options.request_timeout}) {}

Session EtcdLockClient::open_session(milliseconds ttl) {
  // etcd lease TTLs are whole seconds (LeaseGrantRequest.TTL is int64 seconds): round up.
  const auto seconds = std::chrono::ceil<std::chrono::seconds>(ttl);
  const LeaseGrant grant = etcd_call([&] { return etcd_.lease_grant(seconds.count() < 1 ? std::chrono::seconds(1) : seconds); });
  return Session{grant.id, std::chrono::duration_cast<milliseconds>(grant.ttl)};
}

bool EtcdLockClient::keepalive(const Session& s) {
  return etcd_call([&] { return etcd_.lease_keepalive(s.id).has_value(); });
}

std::optional<milliseconds> EtcdLockClient::remaining(const Session& s) {
  const LeaseTimeToLive ttl = etcd_call([&] { return etcd_.lease_time_to_live(s.id); });
  if (!ttl.exists()) return std::nullopt;
  return std::chrono::duration_cast<milliseconds>(ttl.ttl);
}

std::optional<Holding> EtcdLockClient::acquire(const std::string& name, const Session& s, milliseconds timeout,
                                               std::stop_token stop) {
  return etcd_call([&]() -> std::optional<Holding> {
    std::optional<LockResult> locked = etcd_.lock(name, s.id, timeout, std::move(stop));
    if (!locked) return std::nullopt;
    // Lock returns a key even when the lease expired while it waited (etcd_client.h): check it.
    std::optional<KeyValue> kv = etcd_.range(locked->key);
    if (!kv || kv->lease != s.id)
      throw LockServiceError("Lock returned key '" + locked->key + "' but it no longer exists with lease " +
                             std::to_string(s.id) + " (the lease expired while waiting)");
    return Holding{locked->key, kv->create_revision, locked->header_revision};
  });
}

Released EtcdLockClient::release(const std::string& /*name*/, const Holding& h, const Session& s) {
  const DeleteResult del = etcd_call([&] { return etcd_.delete_key(h.lock_key); });
  Released r;
  r.lock_key = h.lock_key;
  r.token = h.token;
  r.lease_id = s.id;
  r.existed = del.deleted > 0;
  if (r.existed) r.revision = del.revision;
  return r;
}

std::vector<Released> EtcdLockClient::release_by_name(const std::string& name, const Session& s) {
  const DeletePrefixResult del = etcd_call([&] { return etcd_.delete_prefix(name + "/"); });
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
  return etcd_call([&] { return etcd_.lease_revoke(s.id); });
}

namespace detail {

std::unique_ptr<LockClient> make_etcd_lock_client(const nlohmann::json& endpoint, const LockClientOptions& options) {
  const auto it = endpoint.find("endpoints");
  if (it == endpoint.end() || !it->is_array() || it->empty() || !(*it)[0].is_string())
    throw std::invalid_argument("etcd endpoint: expected \"endpoints\": [\"http://host:port\", ...], got " + endpoint.dump());
  // The first endpoint: the harness gives a worker the one that answered its health check.
  return std::make_unique<EtcdLockClient>((*it)[0].get<std::string>(), options);
}

}  // namespace detail
}  // namespace fencecheck::locks
