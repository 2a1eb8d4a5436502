// zk::Handle (zk_handle.h): bounded calls on the C client's asynchronous API.
#include "zk_handle.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>

#include <spdlog/spdlog.h>

namespace fencecheck::locks::zk {
namespace {

/// One call in flight: the completion fills `r` and sets `done`. Shared by the caller (who may
/// stop waiting) and the completion (which may run after the caller gave up).
template <class R>
struct Call {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  R r;
};
template <class R>
using CallPtr = std::shared_ptr<Call<R>>;

/// The completion side: takes ownership of the heap holder the caller passed as `data`.
template <class R, class Fill>
void complete(const void* data, Fill&& fill) {
  auto* holder = static_cast<CallPtr<R>*>(const_cast<void*>(data));
  CallPtr<R> call = std::move(*holder);
  delete holder;
  {
    std::lock_guard lock(call->mu);
    fill(call->r);
    call->done = true;
  }
  call->cv.notify_all();
}

/// Issues one asynchronous call (`issue` gets the completion's data pointer) and waits for its
/// completion at most `bound`. ZBADARGUMENTS and ZINVALIDSTATE are returned before the C client
/// registers the completion (zookeeper.c, Request_path_init), so the holder is freed here; after
/// ZMARSHALLINGERROR the completion may be registered, so the holder is left to it (a leak at
/// worst, never a use after free).
template <class R, class Issue>
R run(Issue&& issue, Millis bound) {
  auto call = std::make_shared<Call<R>>();
  auto* holder = new CallPtr<R>(call);
  const int rc = issue(static_cast<const void*>(holder));
  if (rc != ZOK) {
    if (rc == ZBADARGUMENTS || rc == ZINVALIDSTATE) delete holder;
    R r;
    r.rc = rc;
    return r;
  }
  std::unique_lock lock(call->mu);
  if (!call->cv.wait_for(lock, bound, [&] { return call->done; })) {
    R r;
    r.rc = ZOPERATIONTIMEOUT;
    return r;
  }
  return call->r;
}

struct RcResult {
  int rc = ZOK;
};

NodeStat to_stat(const Stat* s) {
  NodeStat out;
  if (!s) return out;
  out.czxid = s->czxid;
  out.mzxid = s->mzxid;
  out.ctime_ms = s->ctime;
  out.pzxid = s->pzxid;
  out.version = s->version;
  out.cversion = s->cversion;
  out.ephemeral_owner = s->ephemeralOwner;
  out.num_children = s->numChildren;
  return out;
}

void void_done(int rc, const void* data) {
  complete<RcResult>(data, [&](RcResult& r) { r.rc = rc; });
}
void string_done(int rc, const char* /*value*/, const void* data) {
  complete<RcResult>(data, [&](RcResult& r) { r.rc = rc; });
}
void stat_done(int rc, const Stat* stat, const void* data) {
  complete<StatResult>(data, [&](StatResult& r) {
    r.rc = rc;
    if (rc == ZOK) r.stat = to_stat(stat);
  });
}
void create_done(int rc, const char* path, const Stat* stat, const void* data) {
  complete<CreateResult>(data, [&](CreateResult& r) {
    r.rc = rc;
    if (rc == ZOK) {
      if (path) r.path = path;
      r.stat = to_stat(stat);
    }
  });
}
void data_done(int rc, const char* value, int len, const Stat* stat, const void* data) {
  complete<DataResult>(data, [&](DataResult& r) {
    r.rc = rc;
    if (rc != ZOK) return;
    if (value && len > 0) r.data.assign(value, static_cast<std::size_t>(len));
    r.stat = to_stat(stat);
  });
}
/// A multi() in flight: the ops and their results live here until its completion (the C client
/// writes the results before it calls the completion).
struct MultiDelete {
  int rc = ZOK;
  std::int64_t zxid = 0;
  std::string path;
  std::string marker;
  zoo_op_t ops[2]{};
  zoo_op_result_t results[2]{};
  Stat stat{};
};
void multi_done(int rc, const void* data) {
  complete<MultiDelete>(data, [&](MultiDelete& m) {
    m.rc = rc;
    if (rc == ZOK) m.zxid = m.stat.mzxid;
  });
}

void children_done(int rc, const String_vector* names, const Stat* stat, const void* data) {
  complete<ChildrenResult>(data, [&](ChildrenResult& r) {
    r.rc = rc;
    if (rc != ZOK) return;
    if (names)
      for (int i = 0; i < names->count; ++i) r.children.emplace_back(names->data[i]);
    r.stat = to_stat(stat);
  });
}

/// The C client logs to stderr by itself; at its default level (INFO) a line per connection, and
/// while a server is down an error per reconnection attempt (every 1/60 of the session timeout).
/// Its warnings and errors go to spdlog's debug level instead: what they tell (a connection lost,
/// a session expired) reaches the history through the kind's own events.
void quiet_client_log() {
  static std::once_flag once;
  std::call_once(once, [] { zoo_set_debug_level(ZOO_LOG_LEVEL_WARN); });
}
void client_log(const char* message) { spdlog::debug("zookeeper client: {}", message ? message : ""); }

}  // namespace

std::string state_name(int state) {
  if (state == ZOO_CONNECTED_STATE) return "connected";
  if (state == ZOO_CONNECTING_STATE) return "connecting";
  if (state == ZOO_ASSOCIATING_STATE) return "associating";
  if (state == ZOO_EXPIRED_SESSION_STATE) return "expired";
  if (state == ZOO_AUTH_FAILED_STATE) return "auth failed";
  if (state == ZOO_READONLY_STATE) return "read-only";
  if (state == ZOO_NOTCONNECTED_STATE) return "not connected";
  if (state == 0) return "disconnected";  // between two connection attempts
  return "state " + std::to_string(state);
}

std::string session_hex(std::int64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(id));
  return buf;
}

std::string znode_path(const std::string& name) {
  std::string p = name;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (p.empty() || p == "/") throw std::invalid_argument("lock name \"" + name + "\": empty");
  if (p.front() != '/') p.insert(p.begin(), '/');
  if (p.find("//") != std::string::npos)
    throw std::invalid_argument("lock name \"" + name + "\": an empty path component (ZooKeeper paths have none)");
  return p;
}

std::optional<std::int64_t> sequence_of(const std::string& child) {
  if (child.size() < 10) return std::nullopt;
  std::int64_t n = 0;
  for (std::size_t i = child.size() - 10; i < child.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(child[i]))) return std::nullopt;
    n = n * 10 + (child[i] - '0');
  }
  return n;
}

Handle::Handle(std::string hosts, Millis session_timeout, Millis connect_timeout, std::string what, EventFn on_event)
    : what_(std::move(what)), on_event_(std::move(on_event)) {
  quiet_client_log();
  zh_ = zookeeper_init2(hosts.c_str(), &Handle::watcher, static_cast<int>(session_timeout.count()), nullptr, this, 0,
                        client_log);
  if (!zh_)
    throw std::runtime_error(what_ + ": cannot create a client for \"" + hosts + "\": " + std::strerror(errno));
  const auto deadline = Clock::now() + connect_timeout;
  if (!wait_connected(deadline)) {
    const int st = zoo_state(zh_);
    zookeeper_close(zh_);
    zh_ = nullptr;
    if (st == ZOO_EXPIRED_SESSION_STATE || st == ZOO_AUTH_FAILED_STATE)
      throw std::runtime_error(what_ + ": the server refused the session (" + state_name(st) + ")");
    throw std::runtime_error(what_ + ": no connection within " + std::to_string(connect_timeout.count()) +
                             " ms (" + state_name(st) + ")");
  }
  session_id_ = zoo_client_id(zh_)->client_id;
  negotiated_ = Millis(zoo_recv_timeout(zh_));
}

Handle::~Handle() {
  if (zh_) zookeeper_close(zh_);
}

void Handle::watcher(zhandle_t* /*zh*/, int type, int state, const char* path, void* ctx) {
  auto* self = static_cast<Handle*>(ctx);
  if (!self) return;
  {
    std::lock_guard lock(self->mu_);
    ++self->generation_;
    if (type == ZOO_SESSION_EVENT) {
      if (state == ZOO_CONNECTED_STATE || state == ZOO_READONLY_STATE) self->disconnected_since_.reset();
      else if (!self->disconnected_since_) self->disconnected_since_ = Clock::now();
    }
  }
  self->cv_.notify_all();
  if (self->on_event_) self->on_event_(type, state, path ? std::string(path) : std::string());
}

int Handle::state() const { return zh_ ? zoo_state(zh_) : 0; }
std::string Handle::current_server() const {
  const char* s = zh_ ? zoo_get_current_server(zh_) : nullptr;
  return s ? std::string(s) : std::string();
}
bool Handle::expired() const {
  const int st = state();
  return st == ZOO_EXPIRED_SESSION_STATE || st == ZOO_AUTH_FAILED_STATE;
}
bool Handle::connected() const {
  const int st = state();
  return st == ZOO_CONNECTED_STATE || st == ZOO_READONLY_STATE;
}

std::optional<Clock::time_point> Handle::disconnected_since() const {
  std::lock_guard lock(mu_);
  return disconnected_since_;
}

std::uint64_t Handle::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

bool Handle::wait_change(std::uint64_t seen, Clock::time_point deadline, const std::stop_token& stop) {
  std::unique_lock lock(mu_);
  std::stop_callback wake(stop, [this] {
    std::lock_guard l(mu_);
    cv_.notify_all();
  });
  cv_.wait_until(lock, deadline, [&] { return generation_ != seen || stop.stop_requested(); });
  return generation_ != seen;
}

bool Handle::wait_connected(Clock::time_point deadline, const std::stop_token& stop) {
  for (;;) {
    const std::uint64_t gen = generation();
    if (connected()) return true;
    if (expired() || stop.stop_requested() || Clock::now() >= deadline) return false;
    // The state may change without an event reaching us first; look again at least every 50 ms.
    wait_change(gen, std::min(deadline, Clock::now() + Millis(50)), stop);
  }
}

CreateResult Handle::create(const std::string& path, const std::string& data, int flags, Millis bound) {
  return run<CreateResult>(
      [&](const void* d) {
        return zoo_acreate2(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), &ZOO_OPEN_ACL_UNSAFE, flags,
                            create_done, d);
      },
      bound);
}

int Handle::remove(const std::string& path, int version, Millis bound) {
  return run<RcResult>([&](const void* d) { return zoo_adelete(zh_, path.c_str(), version, void_done, d); }, bound).rc;
}

DeleteResult Handle::remove_at_zxid(const std::string& path, int version, const std::string& marker, Millis bound) {
  const MultiDelete m = run<MultiDelete>(
      [&](const void* d) {
        MultiDelete& in = (*static_cast<CallPtr<MultiDelete>*>(const_cast<void*>(d)))->r;
        in.path = path;
        in.marker = marker;
        zoo_delete_op_init(&in.ops[0], in.path.c_str(), version);
        zoo_set_op_init(&in.ops[1], in.marker.c_str(), "", 0, -1, &in.stat);
        return zoo_amulti(zh_, 2, in.ops, in.results, multi_done, d);
      },
      bound);
  return DeleteResult{m.rc, m.zxid};
}

StatResult Handle::exists(const std::string& path, bool watch, Millis bound) {
  return run<StatResult>([&](const void* d) { return zoo_aexists(zh_, path.c_str(), watch ? 1 : 0, stat_done, d); },
                         bound);
}

ChildrenResult Handle::children(const std::string& path, bool watch, Millis bound) {
  return run<ChildrenResult>(
      [&](const void* d) { return zoo_aget_children2(zh_, path.c_str(), watch ? 1 : 0, children_done, d); }, bound);
}

DataResult Handle::get(const std::string& path, Millis bound) {
  return run<DataResult>([&](const void* d) { return zoo_aget(zh_, path.c_str(), 0, data_done, d); }, bound);
}

StatResult Handle::set(const std::string& path, const std::string& data, int version, Millis bound) {
  return run<StatResult>(
      [&](const void* d) {
        return zoo_aset(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), version, stat_done, d);
      },
      bound);
}

int Handle::sync(const std::string& path, Millis bound) {
  return run<RcResult>([&](const void* d) { return zoo_async(zh_, path.c_str(), string_done, d); }, bound).rc;
}

int Handle::ensure_path(const std::string& path, Millis bound) {
  // A read first: a create that fails (the znode exists) is still a transaction, with a zxid.
  if (exists(path, false, bound).rc == ZOK) return ZOK;
  for (std::size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = slash == std::string::npos ? path : path.substr(0, slash);
    const int rc = create(prefix, "", ZOO_PERSISTENT, bound).rc;
    if (rc != ZOK && rc != ZNODEEXISTS) return rc;
    if (slash == std::string::npos) return ZOK;
  }
}

std::string Handle::error(const std::string& call, const std::string& path, int rc) const {
  std::string text = rc == ZOPERATIONTIMEOUT ? "no reply in time" : zerror(rc);
  if (rc == ZINVALIDSTATE) text += " (the session is " + state_name(state()) + ")";
  return what_ + " " + call + (path.empty() ? "" : " " + path) + ": " + text;
}

int Handle::advance_zxid(const std::string& path, std::int64_t count, Millis bound, int window) {
  // Counts outstanding calls; the completions run on the C client's thread.
  struct Batch {
    std::mutex mu;
    std::condition_variable cv;
    std::int64_t outstanding = 0;
    int first_error = ZOK;
  };
  auto batch = std::make_shared<Batch>();
  auto done = [](int rc, const Stat*, const void* data) {
    auto* holder = static_cast<std::shared_ptr<Batch>*>(const_cast<void*>(data));
    std::shared_ptr<Batch> b = std::move(*holder);
    delete holder;
    {
      std::lock_guard lock(b->mu);
      --b->outstanding;
      if (rc != ZOK && b->first_error == ZOK) b->first_error = rc;
    }
    b->cv.notify_all();
  };
  const auto deadline = Clock::now() + bound;
  for (std::int64_t i = 0; i < count; ++i) {
    {
      std::unique_lock lock(batch->mu);
      if (!batch->cv.wait_until(lock, deadline, [&] { return batch->outstanding < window; })) return ZOPERATIONTIMEOUT;
      if (batch->first_error != ZOK) return batch->first_error;
      ++batch->outstanding;
    }
    auto* holder = new std::shared_ptr<Batch>(batch);
    const int rc = zoo_aset(zh_, path.c_str(), "", 0, -1, done, holder);
    if (rc != ZOK) {
      if (rc == ZBADARGUMENTS || rc == ZINVALIDSTATE) delete holder;
      std::lock_guard lock(batch->mu);
      --batch->outstanding;
      return rc;
    }
  }
  std::unique_lock lock(batch->mu);
  if (!batch->cv.wait_until(lock, deadline, [&] { return batch->outstanding == 0; })) return ZOPERATIONTIMEOUT;
  return batch->first_error;
}

std::optional<std::string> four_letter_word(const std::string& endpoint, const std::string& word, Millis bound) {
  const std::size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon + 1 >= endpoint.size()) return std::nullopt;
  std::string host = endpoint.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    port = std::stoi(endpoint.substr(colon + 1));
  } catch (const std::logic_error&) {
    return std::nullopt;
  }
  return four_letter_word(host, port, word, bound);
}

std::optional<std::string> four_letter_word(const std::string& host, int port, const std::string& word, Millis bound) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) return std::nullopt;
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, &::freeaddrinfo);
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return std::nullopt;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  const auto deadline = Clock::now() + bound;
  auto wait_for = [&](short events) {
    for (;;) {
      const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd, events, 0};
      const int n = ::poll(&p, 1, static_cast<int>(left));
      if (n > 0) return true;
      if (n < 0 && errno != EINTR) return false;
    }
  };
  if (::connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    if (errno != EINPROGRESS || !wait_for(POLLOUT)) return std::nullopt;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return std::nullopt;
  }
  if (::send(fd, word.data(), word.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(word.size())) return std::nullopt;
  std::string reply;
  char buf[4096];
  for (;;) {
    if (!wait_for(POLLIN)) return std::nullopt;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) return reply;  // the server closes the connection after its answer
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return reply.empty() ? std::nullopt : std::optional<std::string>(reply);
    }
    reply.append(buf, static_cast<std::size_t>(n));
  }
}

}  // namespace fencecheck::locks::zk
