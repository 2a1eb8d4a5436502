// The redis kind's connection, endpoint spelling and value layout (redis_connection.h).
#include "redis_connection.h"

#include <poll.h>
#include <sys/time.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include <hiredis/hiredis.h>

#include "fencecheck/locks/lock_client.h"

namespace fencecheck::locks::redis_detail {
namespace {

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

/// hiredis's argv form of a command: pointers and lengths (binary-safe, no format string).
struct Argv {
  explicit Argv(const std::vector<std::string>& argv) {
    for (const auto& a : argv) {
      args.push_back(a.data());
      lens.push_back(a.size());
    }
  }
  [[nodiscard]] int count() const { return static_cast<int>(args.size()); }
  std::vector<const char*> args;
  std::vector<std::size_t> lens;
};

std::optional<std::int64_t> to_int(std::string_view s) {
  std::int64_t v = 0;
  if (s.empty()) return std::nullopt;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string Endpoint::url() const { return "redis://" + text(); }
std::string Endpoint::text() const { return host + ":" + std::to_string(port); }

std::optional<Endpoint> parse_endpoint(std::string_view url, std::string* error) {
  auto bad = [&](const std::string& why) -> std::optional<Endpoint> {
    if (error)
      *error = "expected redis://host:port (database 0, no user or password), got \"" + std::string(url) + "\": " + why;
    return std::nullopt;
  };
  constexpr std::string_view scheme = "redis://";
  if (url.substr(0, scheme.size()) != scheme) return bad("it does not start with redis://");
  std::string_view rest = url.substr(scheme.size());
  if (rest.find_first_of("@/?#") != std::string_view::npos)
    return bad("a user, password, database or query is not supported");
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos) return bad("the port is missing");
  const std::string_view host = rest.substr(0, colon);
  if (host.empty()) return bad("the host is empty");
  const auto port = to_int(rest.substr(colon + 1));
  if (!port || *port < 1 || *port > 65535) return bad("the port must be 1..65535");
  return Endpoint{std::string(host), static_cast<int>(*port)};
}

void ReplyDeleter::operator()(redisReply* r) const {
  if (r) freeReplyObject(r);
}

std::string describe(const redisReply* r) {
  if (!r) return "no reply";
  switch (r->type) {
    case REDIS_REPLY_INTEGER: return "integer " + std::to_string(r->integer);
    case REDIS_REPLY_NIL: return "nil";
    case REDIS_REPLY_STRING: return "string \"" + std::string(r->str, r->len) + "\"";
    case REDIS_REPLY_STATUS: return "status " + std::string(r->str, r->len);
    case REDIS_REPLY_ERROR: return "error " + std::string(r->str, r->len);
    case REDIS_REPLY_ARRAY: return "array of " + std::to_string(r->elements);
    default: return "reply type " + std::to_string(r->type);
  }
}

Connection::Connection(Endpoint endpoint, std::chrono::milliseconds connect_timeout, std::chrono::milliseconds io_timeout)
    : endpoint_(std::move(endpoint)) {
  ctx_ = redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, to_timeval(connect_timeout));
  if (!ctx_) throw LockServiceError("redis " + endpoint_.text() + " connect: out of memory");
  if (ctx_->err) {
    const std::string why = ctx_->errstr;
    redisFree(ctx_);
    ctx_ = nullptr;
    throw LockServiceError("redis " + endpoint_.text() + " connect: " + why);
  }
  // redisConnectWithTimeout leaves the connect timeout on the socket; set the call bound (or none).
  if (redisSetTimeout(ctx_, to_timeval(io_timeout)) != REDIS_OK) {
    const std::string why = ctx_->errstr;
    redisFree(ctx_);
    ctx_ = nullptr;
    throw LockServiceError("redis " + endpoint_.text() + " setting the socket timeout: " + why);
  }
}

Connection::~Connection() {
  if (ctx_) redisFree(ctx_);
}

void Connection::fail(std::string_view what, const std::string& why) {
  broken_ = true;
  throw LockServiceError("redis " + endpoint_.text() + " " + std::string(what) + ": " + why);
}

Reply Connection::command(const std::vector<std::string>& argv, std::string_view what) {
  if (broken_) fail(what, "the connection broke earlier");
  Argv a(argv);
  Reply r(static_cast<redisReply*>(redisCommandArgv(ctx_, a.count(), a.args.data(), a.lens.data())));
  if (!r) {
    // EAGAIN from a socket timeout: hiredis says "Resource temporarily unavailable".
    fail(what, ctx_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)
                   ? "no reply within the timeout"
                   : std::string(ctx_->errstr));
  }
  if (r->type == REDIS_REPLY_ERROR)
    throw LockServiceError("redis " + endpoint_.text() + " " + std::string(what) + ": " + std::string(r->str, r->len));
  return r;
}

void Connection::send(const std::vector<std::string>& argv, std::string_view what) {
  if (broken_) fail(what, "the connection broke earlier");
  Argv a(argv);
  if (redisAppendCommandArgv(ctx_, a.count(), a.args.data(), a.lens.data()) != REDIS_OK)
    fail(what, ctx_->errstr);
  int done = 0;
  while (!done)
    if (redisBufferWrite(ctx_, &done) != REDIS_OK) fail(what, ctx_->errstr);
}

Reply Connection::next_reply(std::chrono::milliseconds wait) {
  if (broken_) fail("read", "the connection broke earlier");
  void* raw = nullptr;
  if (redisGetReplyFromReader(ctx_, &raw) != REDIS_OK) fail("read", ctx_->errstr);
  if (raw) return Reply(static_cast<redisReply*>(raw));
  pollfd p{ctx_->fd, POLLIN, 0};
  const int ready = ::poll(&p, 1, static_cast<int>(wait.count()));
  if (ready < 0 && errno != EINTR) fail("read", std::strerror(errno));
  if (ready <= 0) return nullptr;
  if (redisBufferRead(ctx_) != REDIS_OK) fail("read", ctx_->errstr);
  if (redisGetReplyFromReader(ctx_, &raw) != REDIS_OK) fail("read", ctx_->errstr);
  return Reply(static_cast<redisReply*>(raw));
}

bool Connection::stale() const {
  if (broken_) return true;
  pollfd p{ctx_->fd, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}

LockValue parse_lock_value(std::string_view value) {
  LockValue out;
  const auto colon = value.rfind(':');
  if (colon == std::string_view::npos) {
    out.owner = to_int(value);
  } else {
    out.owner = to_int(value.substr(0, colon));
    out.token = to_int(value.substr(colon + 1));
  }
  if (out.owner && *out.owner == 0) out.owner.reset();
  return out;
}

std::string fence_key(const std::string& name) { return name + ":fence"; }
std::string grants_channel(const std::string& name) { return name + ":grants"; }

}  // namespace fencecheck::locks::redis_detail
