// ZooKeeperLockClient (zookeeper_lock_client.h) and make_zookeeper_lock_client (kinds.h).
#include "zookeeper_lock_client.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "kinds.h"
#include "zk_handle.h"

namespace fencecheck::locks::zk {
namespace {

using std::chrono::duration_cast;

/// The reply did not come (connection loss, no reply in time): the call's outcome is unknown.
bool lost(int rc) { return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT; }

/// The session is gone for good.
bool gone(const Handle& h, int rc) { return rc == ZSESSIONEXPIRED || rc == ZAUTHFAILED || h.expired(); }

/// A lock name without trailing slashes: lock keys are "<name>/<child>".
std::string trimmed(std::string name) {
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  return name;
}

/// The sequential children of a lock znode in sequence order (others are not lock contenders).
std::vector<std::string> contenders(std::vector<std::string> children) {
  std::vector<std::pair<std::int64_t, std::string>> seq;
  for (auto& c : children)
    if (auto n = sequence_of(c)) seq.emplace_back(*n, std::move(c));
  std::sort(seq.begin(), seq.end());
  std::vector<std::string> out;
  out.reserve(seq.size());
  for (auto& [n, c] : seq) out.push_back(std::move(c));
  return out;
}

/// "fencecheck/x" for the lock key "fencecheck/x/lock-0000000012".
std::string parent_of(const std::string& lock_key) {
  const auto slash = lock_key.rfind('/');
  return slash == std::string::npos || slash == 0 ? lock_key : lock_key.substr(0, slash);
}

std::string path_of(const std::string& name) {
  try {
    return znode_path(name);
  } catch (const std::invalid_argument& e) {
    throw LockServiceError(std::string("zookeeper: ") + e.what());
  }
}

}  // namespace

ZooKeeperLockClient::ZooKeeperLockClient(std::vector<std::string> endpoints, LockClientOptions options)
    : options_(options) {
  if (endpoints.empty()) throw std::invalid_argument("zookeeper lock client: no endpoints");
  for (const auto& e : endpoints) hosts_ += (hosts_.empty() ? "" : ",") + e;
}

ZooKeeperLockClient::~ZooKeeperLockClient() = default;

std::string ZooKeeperLockClient::describe() const { return "zookeeper " + hosts_; }

std::string ZooKeeperLockClient::session_lost_detail() const {
  return "the ZooKeeper client's session state is expired: the server expired the session (its lock znode is "
         "deleted)";
}

std::shared_ptr<Handle> ZooKeeperLockClient::handle(const Session& s) const {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(s.id);
  return it == sessions_.end() ? nullptr : it->second;
}

Session ZooKeeperLockClient::open_session(std::chrono::milliseconds ttl) {
  std::shared_ptr<Handle> h;
  try {
    h = std::make_shared<Handle>(hosts_, ttl, options_.connect_timeout, describe());
  } catch (const std::runtime_error& e) {
    throw LockServiceError(std::string(e.what()) + " (open session)");
  }
  Session s{h->session_id(), h->negotiated()};
  std::lock_guard lock(mu_);
  sessions_[s.id] = std::move(h);
  return s;
}

bool ZooKeeperLockClient::keepalive(const Session& s) {
  const auto h = handle(s);
  if (!h || h->expired()) return false;
  if (h->connected()) return true;
  throw LockServiceError(describe() + " session " + session_hex(s.id) + ": " + state_name(h->state()) +
                         ": whether the server still counts the session is unknown");
}

std::optional<std::chrono::milliseconds> ZooKeeperLockClient::remaining(const Session& s) {
  const auto h = handle(s);
  if (!h || h->expired()) return std::nullopt;
  const auto t0 = Clock::now();
  const StatResult r = h->exists("/", false, options_.request_timeout);
  if (r.rc == ZOK) {
    const auto left = h->negotiated() - duration_cast<Millis>(Clock::now() - t0);
    return std::max(left, Millis(0));
  }
  if (gone(*h, r.rc)) return std::nullopt;
  throw LockServiceError(h->error("exists", "/", r.rc) + " (remaining)");
}

std::optional<Holding> ZooKeeperLockClient::acquire(const std::string& name, const Session& s,
                                                    std::chrono::milliseconds timeout, std::stop_token stop) {
  const auto h = handle(s);
  if (!h) throw LockServiceError(describe() + " acquire " + name + ": session " + session_hex(s.id) + " is not open");
  const auto deadline = Clock::now() + timeout;
  const Millis bound = options_.request_timeout;
  const std::string lock = path_of(name);
  const std::string key_prefix = trimmed(name) + "/";

  // The session expired before the lock was ours: an error saying so (lock_client.h), never a
  // holding whose znode is already gone.
  auto expired = [&] {
    return LockServiceError(describe() + " acquire " + name + ": session " + session_hex(s.id) +
                            " expired while waiting for the lock (the server deleted its znode)");
  };
  int rc = h->ensure_path(lock, bound);
  if (rc != ZOK) {
    if (gone(*h, rc)) throw expired();
    throw LockServiceError(h->error("create", lock, rc) + " (the lock znode)");
  }

  std::string own;  // our child's name, once created
  // Deletes our waiting child (timeout, stop): nothing is left behind that could be granted later.
  auto abandon = [&]() -> std::optional<Holding> {
    if (own.empty() || h->expired()) return std::nullopt;
    const StatResult st = h->exists(lock + "/" + own, false, bound);
    int del = st.rc;
    if (st.rc == ZOK && st.stat.ephemeral_owner == s.id) del = h->remove(lock + "/" + own, st.stat.version, bound);
    if (del == ZOK || del == ZNONODE || gone(*h, del)) return std::nullopt;
    throw LockServiceError(h->error("delete", lock + "/" + own, del) +
                           " (giving up the wait: the waiting znode may still be granted)");
  };
  // After a lost reply: wait for the session to be usable again. False when it is expired or the
  // wait ran out (the loop's head decides which). A waiter without a connection for longer than
  // its session timeout gives up (as Curator's default error policy does): the server has expired
  // it if it ran all along, and a server restarted on empty data refuses it, without saying so,
  // for as long as its zxid is behind the last one this client saw.
  auto reconnect = [&] {
    const auto since = h->disconnected_since();
    const auto limit = since ? std::min(deadline, *since + h->negotiated()) : deadline;
    if (h->wait_connected(limit, stop)) return true;
    if (since && !h->expired() && Clock::now() >= *since + h->negotiated() && Clock::now() < deadline &&
        !stop.stop_requested())
      throw LockServiceError(describe() + " acquire " + name + ": session " + session_hex(s.id) +
                             " has had no connection for " + std::to_string(h->negotiated().count()) +
                             " ms, its whole timeout (" + state_name(h->state()) +
                             "): the server may have expired it, or may refuse it");
    return false;
  };
  // Our child after a create whose reply was lost: the contender owned by this session.
  auto find_own = [&]() -> std::optional<std::string> {
    const ChildrenResult list = h->children(lock, false, bound);
    if (list.rc != ZOK) return std::nullopt;
    for (const auto& c : contenders(list.children)) {
      const StatResult st = h->exists(lock + "/" + c, false, bound);
      if (st.rc == ZOK && st.stat.ephemeral_owner == s.id) return c;
    }
    return std::string();
  };

  for (;;) {
    if (h->expired()) throw expired();
    if (stop.stop_requested() || Clock::now() >= deadline) return abandon();
    if (own.empty()) {
      const CreateResult c = h->create(lock + "/lock-", "", ZOO_EPHEMERAL_SEQUENTIAL, bound);
      if (c.rc == ZOK) {
        own = c.path.substr(lock.size() + 1);
      } else if (lost(c.rc)) {
        // The create may have happened (Recipes, "Recoverable errors and the GUID"): ownership
        // tells our child from the others.
        if (reconnect())
          if (auto found = find_own(); found) own = *found;
      } else if (!gone(*h, c.rc)) {
        throw LockServiceError(h->error("create", lock + "/lock-", c.rc));
      }
      continue;
    }
    const ChildrenResult list = h->children(lock, false, bound);
    if (list.rc != ZOK) {
      if (lost(list.rc)) reconnect();
      else if (!gone(*h, list.rc)) throw LockServiceError(h->error("getChildren", lock, list.rc));
      continue;
    }
    const std::vector<std::string> order = contenders(list.children);
    const auto at = std::find(order.begin(), order.end(), own);
    if (at == order.end()) {
      own.clear();  // deleted while we waited (expired: the loop's head; else someone deleted it)
      continue;
    }
    if (at == order.begin()) {
      // Lowest: held. Read it again: a grant seen after the session expired is no grant.
      const StatResult st = h->exists(lock + "/" + own, false, bound);
      if (st.rc == ZOK && st.stat.ephemeral_owner == s.id)
        return Holding{key_prefix + own, st.stat.czxid, list.stat.pzxid};
      if (st.rc == ZOK || st.rc == ZNONODE) own.clear();
      else if (lost(st.rc)) reconnect();
      else if (!gone(*h, st.rc)) throw LockServiceError(h->error("exists", lock + "/" + own, st.rc));
      continue;
    }
    // Watch only the next lower contender: its deletion is the only change that can make us lowest.
    const std::string pred = lock + "/" + *(at - 1);
    const std::uint64_t gen = h->generation();
    const StatResult w = h->exists(pred, true, bound);
    if (w.rc == ZOK && w.stat.ephemeral_owner == s.id) {
      // This session's own earlier child: a create whose reply was lost (or came after its bound)
      // and that find_own did not see (asked before the create was applied where it asked). It
      // is not this holding; waiting for its delete would wait for ever, and every later
      // contender with it. It goes (version-checked), and the loop looks again.
      const int del = h->remove(pred, w.stat.version, bound);
      if (lost(del)) reconnect();
      else if (del != ZOK && del != ZNONODE && del != ZBADVERSION && !gone(*h, del))
        throw LockServiceError(h->error("delete", pred, del) + " (this session's own earlier contender)");
      continue;
    }
    if (w.rc == ZOK) h->wait_change(gen, deadline, stop);
    else if (lost(w.rc)) reconnect();
    else if (w.rc != ZNONODE && !gone(*h, w.rc)) throw LockServiceError(h->error("exists", pred, w.rc));
  }
}

Released ZooKeeperLockClient::release(const std::string& /*name*/, const Holding& held, const Session& s) {
  Released out{held.lock_key, held.token, std::nullopt, s.id, false, true};
  const auto h = handle(s);
  if (!h || h->expired()) return out;  // the server deletes an expired session's ephemeral znodes
  const std::string path = path_of(held.lock_key);
  const Millis bound = options_.request_timeout;
  const StatResult st = h->exists(path, false, bound);
  if (st.rc == ZNONODE || gone(*h, st.rc)) return out;
  if (st.rc != ZOK) throw LockServiceError(h->error("exists", path, st.rc) + " (release)");
  // Only this holding's znode: this session's, created by the grant's own create.
  if (st.stat.ephemeral_owner != s.id || st.stat.czxid != held.token) return out;
  const DeleteResult del = h->remove_at_zxid(path, st.stat.version, path_of(parent_of(held.lock_key)), bound);
  if (del.rc == ZOK) {
    out.existed = true;
    out.revision = del.zxid;
    return out;
  }
  if (del.rc == ZNONODE || gone(*h, del.rc)) return out;
  throw LockServiceError(h->error("delete", path + " (version " + std::to_string(st.stat.version) + ")", del.rc) +
                         " (release)");
}

std::vector<Released> ZooKeeperLockClient::release_by_name(const std::string& name, const Session& s) {
  const auto h = handle(s);
  if (!h) throw LockServiceError(describe() + " release " + name + ": session " + session_hex(s.id) + " is not open");
  const std::string lock = path_of(name);
  const Millis bound = options_.request_timeout;
  const ChildrenResult list = h->children(lock, false, bound);
  if (list.rc == ZNONODE) return {};
  if (list.rc != ZOK) throw LockServiceError(h->error("getChildren", lock, list.rc) + " (release by name)");
  std::vector<Released> out;
  for (const auto& c : contenders(list.children)) {
    const std::string path = lock + "/" + c;
    const StatResult st = h->exists(path, false, bound);
    if (st.rc == ZNONODE) continue;
    if (st.rc != ZOK) throw LockServiceError(h->error("exists", path, st.rc) + " (release by name)");
    const DeleteResult del = h->remove_at_zxid(path, -1, lock, bound);  // the mistake: whatever znode is there
    if (del.rc == ZNONODE) continue;
    if (del.rc != ZOK) throw LockServiceError(h->error("delete", path, del.rc) + " (release by name)");
    out.push_back(Released{trimmed(name) + "/" + c, st.stat.czxid, del.zxid, st.stat.ephemeral_owner, true,
                           st.stat.ephemeral_owner == s.id});
  }
  return out;
}

bool ZooKeeperLockClient::close_session(const Session& s) {
  std::shared_ptr<Handle> h;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(s.id);
    if (it == sessions_.end()) return false;
    h = std::move(it->second);
    sessions_.erase(it);
  }
  const bool alive = !h->expired();
  h.reset();  // zookeeper_close, once no other thread still uses the handle
  return alive;
}

}  // namespace fencecheck::locks::zk

namespace fencecheck::locks::detail {

std::unique_ptr<LockClient> make_zookeeper_lock_client(const nlohmann::json& endpoint, const LockClientOptions& options) {
  if (!endpoint.contains("endpoints") || !endpoint["endpoints"].is_array() || endpoint["endpoints"].empty())
    throw std::invalid_argument("zookeeper lock service endpoint: expected \"endpoints\": [\"host:port\", ...], got " +
                                endpoint.dump());
  std::vector<std::string> hosts;
  for (const auto& e : endpoint["endpoints"]) {
    if (!e.is_string() || e.get<std::string>().empty())
      throw std::invalid_argument("zookeeper lock service endpoint: each endpoint is a \"host:port\" string, got " +
                                  e.dump());
    hosts.push_back(e.get<std::string>());
  }
  return std::make_unique<zk::ZooKeeperLockClient>(std::move(hosts), options);
}

}  // namespace fencecheck::locks::detail
