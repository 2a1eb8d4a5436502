#include "postgres_libpq.h"

#include <dlfcn.h>
#include <poll.h>

#include <algorithm>
#include <type_traits>
#include <cerrno>
#include <charconv>
#include <cstring>

#include <spdlog/spdlog.h>

#include "fencecheck/resources/postgres.h"

namespace fencecheck::postgres::detail {

namespace {

struct Loaded {
  LibPq api;
  std::string error;
  bool ok = false;
};

Loaded load() {
  Loaded out;
  void* h = ::dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);  // never closed: lives as long as the process
  if (!h) {
    const char* e = ::dlerror();
    out.error = std::string("cannot load libpq (") + (e ? e : "libpq.so.5") + "); install Debian's libpq5";
    return out;
  }
  auto resolve = [&](auto& slot, const char* name) {
    void* sym = ::dlsym(h, name);
    if (!sym && out.error.empty()) out.error = std::string("libpq.so.5 lacks ") + name;
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(sym);
  };
  resolve(out.api.PQconnectStartParams, "PQconnectStartParams");
  resolve(out.api.PQstatus, "PQstatus");
  resolve(out.api.PQconnectPoll, "PQconnectPoll");
  resolve(out.api.PQsocket, "PQsocket");
  resolve(out.api.PQsetNoticeProcessor, "PQsetNoticeProcessor");
  resolve(out.api.PQsetnonblocking, "PQsetnonblocking");
  resolve(out.api.PQfinish, "PQfinish");
  resolve(out.api.PQerrorMessage, "PQerrorMessage");
  resolve(out.api.PQsendQuery, "PQsendQuery");
  resolve(out.api.PQsendPrepare, "PQsendPrepare");
  resolve(out.api.PQsendDescribePrepared, "PQsendDescribePrepared");
  resolve(out.api.PQsendQueryPrepared, "PQsendQueryPrepared");
  resolve(out.api.PQflush, "PQflush");
  resolve(out.api.PQconsumeInput, "PQconsumeInput");
  resolve(out.api.PQisBusy, "PQisBusy");
  resolve(out.api.PQgetResult, "PQgetResult");
  resolve(out.api.PQresultStatus, "PQresultStatus");
  resolve(out.api.PQclear, "PQclear");
  resolve(out.api.PQresultErrorField, "PQresultErrorField");
  resolve(out.api.PQresultErrorMessage, "PQresultErrorMessage");
  resolve(out.api.PQcmdTuples, "PQcmdTuples");
  resolve(out.api.PQntuples, "PQntuples");
  resolve(out.api.PQcmdStatus, "PQcmdStatus");
  resolve(out.api.PQgetisnull, "PQgetisnull");
  resolve(out.api.PQgetvalue, "PQgetvalue");
  resolve(out.api.PQbackendPID, "PQbackendPID");
  resolve(out.api.PQconninfoParse, "PQconninfoParse");
  resolve(out.api.PQconninfoFree, "PQconninfoFree");
  resolve(out.api.PQfreemem, "PQfreemem");
  out.ok = out.error.empty();
  return out;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const LibPq* libpq() { return loaded().ok ? &loaded().api : nullptr; }
const std::string& libpq_error() { return loaded().error; }
const LibPq& pq() { return loaded().api; }

void ConnCloser::operator()(PGconn* c) const noexcept { pq().PQfinish(c); }
void ResultFree::operator()(PGresult* r) const noexcept { pq().PQclear(r); }

}  // namespace fencecheck::postgres::detail

namespace fencecheck::postgres {

namespace {

struct OptionsFree {
  void operator()(PQconninfoOption* o) const noexcept { detail::pq().PQconninfoFree(o); }
};

// Parses a DSN; nullptr when libpq cannot.
std::unique_ptr<PQconninfoOption, OptionsFree> parse_dsn(std::string_view dsn) {
  if (!detail::libpq()) return nullptr;
  char* err = nullptr;
  const std::string text(dsn);
  std::unique_ptr<PQconninfoOption, OptionsFree> opts(detail::pq().PQconninfoParse(text.c_str(), &err));
  if (err) detail::pq().PQfreemem(err);
  return opts;
}

// A value in a libpq connection string: bare when it can be, else single-quoted with \ and '
// escaped (34.1.1.1 "Keyword/Value Connection Strings").
std::string quoted(std::string_view v) {
  const bool bare = !v.empty() && std::none_of(v.begin(), v.end(), [](char c) {
    return c == ' ' || c == '\'' || c == '\\' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  });
  if (bare) return std::string(v);
  std::string out = "'";
  for (char c : v) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

}  // namespace

std::string redact_dsn(std::string_view dsn) {
  auto opts = parse_dsn(dsn);
  if (!opts) return "<a DSN libpq cannot parse>";
  std::string out;
  for (const PQconninfoOption* o = opts.get(); o->keyword; ++o) {
    if (!o->val || !*o->val || std::strcmp(o->keyword, "password") == 0) continue;
    if (!out.empty()) out += ' ';
    out += o->keyword;
    out += '=';
    out += quoted(o->val);
  }
  return out.empty() ? "<an empty DSN: libpq's defaults>" : out;
}

bool dsn_has_password(std::string_view dsn) {
  auto opts = parse_dsn(dsn);
  if (!opts) return false;
  for (const PQconninfoOption* o = opts.get(); o->keyword; ++o)
    if (std::strcmp(o->keyword, "password") == 0 && o->val && *o->val) return true;
  return false;
}

std::optional<NetAddress> dsn_address(std::string_view dsn, std::string* why) {
  auto opts = parse_dsn(dsn);
  if (!opts) {
    *why = "libpq cannot parse the DSN";
    return std::nullopt;
  }
  std::string host, hostaddr, port;
  for (const PQconninfoOption* o = opts.get(); o->keyword; ++o) {
    if (!o->val) continue;
    if (std::strcmp(o->keyword, "host") == 0) host = o->val;
    else if (std::strcmp(o->keyword, "hostaddr") == 0) hostaddr = o->val;
    else if (std::strcmp(o->keyword, "port") == 0) port = o->val;
  }
  const std::string& to = hostaddr.empty() ? host : hostaddr;
  if (to.empty()) {
    *why = "the DSN names no host, so libpq connects through a Unix socket, which cannot reach the workers' network "
           "namespaces: name the server's TCP address (host=127.0.0.1) or use network: host";
    return std::nullopt;
  }
  if (to.front() == '/' || to.front() == '@') {
    *why = "host " + to + " is a Unix-socket directory, which cannot reach the workers' network namespaces: name the "
           "server's TCP address (host=127.0.0.1) or use network: host";
    return std::nullopt;
  }
  if (to.find(',') != std::string::npos || port.find(',') != std::string::npos) {
    *why = "the DSN lists several hosts (" + to + "); a run in network: namespaces relays one: name one server";
    return std::nullopt;
  }
  NetAddress a{to, 5432};
  if (!port.empty()) {
    const bool digits = port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
    const long n = digits ? std::stol(port) : 0;
    if (n < 1 || n > 65535) {
      *why = "port " + port + " is not in 1..65535";
      return std::nullopt;
    }
    a.port = static_cast<std::uint16_t>(n);
  }
  return a;
}

std::string dsn_at(std::string_view dsn, const NetAddress& at) {
  std::string why;
  if (!dsn_address(dsn, &why)) throw std::invalid_argument(why);
  auto opts = parse_dsn(dsn);
  std::string out = "hostaddr=" + postgres::quoted(at.host) + " port=" + std::to_string(at.port);
  for (const PQconninfoOption* o = opts.get(); o->keyword; ++o) {
    if (!o->val || !*o->val || std::strcmp(o->keyword, "hostaddr") == 0 || std::strcmp(o->keyword, "port") == 0) continue;
    out += ' ';
    out += o->keyword;
    out += '=';
    out += quoted(o->val);
  }
  return out;
}

}  // namespace fencecheck::postgres

namespace fencecheck::postgres::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (char& c : s)
    if (c == '\n' || c == '\t') c = ' ';
  // libpq indents continuation lines; collapse runs of spaces
  std::string out;
  out.reserve(s.size());
  for (char c : s)
    if (!(c == ' ' && !out.empty() && out.back() == ' ')) out += c;
  return out;
}

void notice_to_log(void*, const char* message) { spdlog::debug("postgres: {}", one_line(message ? message : "")); }

}  // namespace

Session::Session(std::string conninfo, std::string shown) : conninfo_(std::move(conninfo)), shown_(std::move(shown)) {}
Session::~Session() = default;

bool Session::connected() const { return conn_ && pq().PQstatus(conn_.get()) == CONNECTION_OK; }
void Session::disconnect() { conn_.reset(); }

bool Session::wait(short events, Clock::time_point deadline) {
  const int fd = pq().PQsocket(conn_.get());
  if (fd < 0) return false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000 * 60)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

std::string connect_hint(std::string_view error) {
  // libpq asks ~/.pgpass (or PGPASSFILE) for a password only when the server wants one, and an
  // entry matches on host:port:database:user (PostgreSQL 15 docs 34.16 "The Password File"): with
  // a database name the file does not name, no password is found, and libpq says only this.
  if (error.find("no password supplied") != std::string_view::npos)
    return "; hint: ~/.pgpass entries match host:port:database:user (PGPASSFILE when set), so an entry for "
           "another database supplies no password here: check the database name (dbname) in the DSN against the "
           "server's databases and your .pgpass, or set PGPASSWORD";
  return {};
}

bool Session::ensure_connected(std::chrono::milliseconds timeout, std::string& error) {
  if (connected()) return true;
  conn_.reset();
  if (!libpq()) {
    error = "connect to " + shown_ + ": " + libpq_error();
    return false;
  }
  const auto deadline = Clock::now() + timeout;
  // libpq's own bound too, in whole seconds (it treats 1 as 2: 34.1.2 connect_timeout). Keywords
  // after "dbname" override what the expanded connection string says.
  const std::string seconds = std::to_string(std::max<long long>(2, (timeout.count() + 999) / 1000));
  const char* keywords[] = {"dbname", "connect_timeout", "fallback_application_name", nullptr};
  const char* values[] = {conninfo_.c_str(), seconds.c_str(), "fencecheck", nullptr};
  ConnPtr conn(pq().PQconnectStartParams(keywords, values, /*expand_dbname=*/1));
  if (!conn) {
    error = "connect to " + shown_ + ": out of memory";
    return false;
  }
  if (pq().PQstatus(conn.get()) == CONNECTION_BAD) {
    error = "connect to " + shown_ + ": " + conn_error(conn.get());
    return false;
  }
  conn_ = std::move(conn);
  PostgresPollingStatusType st = PGRES_POLLING_WRITING;  // 34.1: act as if the last poll said writing
  for (;;) {
    if (st == PGRES_POLLING_OK) break;
    if (st == PGRES_POLLING_FAILED) {
      error = "connect to " + shown_ + ": " + conn_error(conn_.get());
      error += connect_hint(error);
      conn_.reset();
      return false;
    }
    if (!wait(st == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline)) {
      error = "connect to " + shown_ + ": no answer within " + std::to_string(timeout.count()) + " ms";
      conn_.reset();
      return false;
    }
    st = pq().PQconnectPoll(conn_.get());
  }
  pq().PQsetNoticeProcessor(conn_.get(), &notice_to_log, nullptr);
  if (pq().PQsetnonblocking(conn_.get(), 1) != 0) {
    error = "connect to " + shown_ + ": cannot make the connection non-blocking: " + conn_error(conn_.get());
    conn_.reset();
    return false;
  }
  return true;
}

ResultPtr Session::run(const std::function<int(PGconn*)>& send, std::chrono::milliseconds timeout, std::string& error) {
  if (!conn_) {
    error = "not connected to " + shown_;
    return nullptr;
  }
  const auto deadline = Clock::now() + timeout;
  auto fail = [&](std::string why) -> ResultPtr {
    error = std::move(why);
    conn_.reset();
    return nullptr;
  };
  if (send(conn_.get()) != 1) return fail("sending to " + shown_ + ": " + conn_error(conn_.get()));
  // Flush what libpq buffered (non-blocking mode: PQflush returns 1 while data remains).
  for (;;) {
    const int f = pq().PQflush(conn_.get());
    if (f == 0) break;
    if (f < 0) return fail("sending to " + shown_ + ": " + conn_error(conn_.get()));
    if (!wait(POLLIN | POLLOUT, deadline))
      return fail("sending to " + shown_ + ": not sent within " + std::to_string(timeout.count()) + " ms");
    if (pq().PQconsumeInput(conn_.get()) == 0) return fail("sending to " + shown_ + ": " + conn_error(conn_.get()));
  }
  ResultPtr first_error;
  ResultPtr last;
  for (;;) {
    while (pq().PQisBusy(conn_.get())) {
      if (!wait(POLLIN, deadline))
        return fail("no reply from " + shown_ + " within " + std::to_string(timeout.count()) + " ms");
      if (pq().PQconsumeInput(conn_.get()) == 0) return fail("reading from " + shown_ + ": " + conn_error(conn_.get()));
    }
    ResultPtr res(pq().PQgetResult(conn_.get()));
    if (!res) break;
    const ExecStatusType st = pq().PQresultStatus(res.get());
    if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH)
      return fail("COPY is not supported in fencecheck's statements");
    if (!first_error && (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE || st == PGRES_NONFATAL_ERROR)) {
      first_error = std::move(res);
    } else {
      last = std::move(res);
    }
  }
  if (pq().PQstatus(conn_.get()) != CONNECTION_OK) {
    std::string why = first_error ? result_error(first_error.get()) : conn_error(conn_.get());
    conn_.reset();
    if (first_error) return first_error;  // the caller reads the error from it; the connection is gone
    error = "connection to " + shown_ + " broke: " + why;
    return nullptr;
  }
  if (first_error) return first_error;
  if (!last) {
    error = "no result from " + shown_;
    return nullptr;
  }
  return last;
}

ResultPtr Session::exec(const std::string& sql, std::chrono::milliseconds timeout, std::string& error) {
  return run([&](PGconn* c) { return pq().PQsendQuery(c, sql.c_str()); }, timeout, error);
}

ResultPtr Session::prepare(const std::string& name, const std::string& sql, const std::vector<Oid>& types,
                           std::chrono::milliseconds timeout, std::string& error) {
  return run(
      [&](PGconn* c) {
        return pq().PQsendPrepare(c, name.c_str(), sql.c_str(), static_cast<int>(types.size()),
                             types.empty() ? nullptr : types.data());
      },
      timeout, error);
}

ResultPtr Session::describe(const std::string& name, std::chrono::milliseconds timeout, std::string& error) {
  return run([&](PGconn* c) { return pq().PQsendDescribePrepared(c, name.c_str()); }, timeout, error);
}

ResultPtr Session::exec_prepared(const std::string& name, int n, const char* const* values, const int* lengths,
                                 const int* formats, std::chrono::milliseconds timeout, std::string& error) {
  return run([&](PGconn* c) { return pq().PQsendQueryPrepared(c, name.c_str(), n, values, lengths, formats, 0); },
             timeout, error);
}

std::string result_error(const PGresult* res) {
  if (!res) return "no result";
  auto field = [&](int code) {
    const char* v = pq().PQresultErrorField(res, code);
    return std::string(v ? v : "");
  };
  std::string primary = field(PG_DIAG_MESSAGE_PRIMARY);
  if (primary.empty()) return one_line(pq().PQresultErrorMessage(res));
  std::string severity = field(PG_DIAG_SEVERITY);
  std::string out = (severity.empty() ? "ERROR" : severity) + ": " + primary;
  if (auto code = field(PG_DIAG_SQLSTATE); !code.empty()) out += " (SQLSTATE " + code + ")";
  if (auto detail = field(PG_DIAG_MESSAGE_DETAIL); !detail.empty()) out += "; DETAIL: " + one_line(detail);
  if (auto hint = field(PG_DIAG_MESSAGE_HINT); !hint.empty()) out += "; HINT: " + one_line(hint);
  return out;
}

std::string conn_error(const PGconn* conn) { return one_line(conn ? pq().PQerrorMessage(conn) : "no connection"); }

bool result_ok(const PGresult* res) {
  if (!res) return false;
  const ExecStatusType st = pq().PQresultStatus(res);
  return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

std::optional<std::int64_t> row_count(const PGresult* res) {
  if (!res) return std::nullopt;
  if (pq().PQresultStatus(res) == PGRES_TUPLES_OK) return pq().PQntuples(res);
  // PQcmdTuples takes a non-const PGresult in libpq's declaration; it does not modify it.
  const char* n = pq().PQcmdTuples(const_cast<PGresult*>(res));
  if (!n || !*n) return std::nullopt;
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(n, n + std::strlen(n), v);
  if (ec != std::errc() || *end != '\0') return std::nullopt;
  return v;
}

std::optional<std::size_t> error_byte_offset(const PGresult* res, std::string_view sql) {
  const char* pos = res ? pq().PQresultErrorField(res, PG_DIAG_STATEMENT_POSITION) : nullptr;
  if (!pos) return std::nullopt;
  long chars = 0;
  auto [end, ec] = std::from_chars(pos, pos + std::strlen(pos), chars);
  if (ec != std::errc() || chars < 1) return std::nullopt;
  // Characters (the server's encoding: UTF-8 here) to bytes.
  std::size_t i = 0;
  for (long c = 1; c < chars && i < sql.size(); ++c) {
    ++i;
    while (i < sql.size() && (static_cast<unsigned char>(sql[i]) & 0xC0) == 0x80) ++i;
  }
  return std::min(i, sql.size());
}

}  // namespace fencecheck::postgres::detail
