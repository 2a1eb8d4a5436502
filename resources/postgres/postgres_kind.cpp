// Resource kind "postgres": the user's fencing SQL on a real PostgreSQL, embedded (Debian's server
// binaries, started by the harness: postgres_embedded.h) or the user's own (`dsn:`).
// docs/resource-postgres.md is the user's guide; postgres.h holds the default SQL.
//
// Fields (parse() validates them; the normalized JSON has every default filled in):
//   dsn        optional; absent = embedded. A libpq connection string or URI without a password.
//   schema     DDL run once after the database is created (embedded: default kDefaultSchema) or,
//              external, only when given.
//   write      one statement or a list (postgres_writer.h says how a list runs); named parameters;
//              must use $token. Default kDefaultWrite. Normalized: a string for one, a list for more.
//   read_back  a query returning key, segment, chunk, token, writer, data. Default kDefaultReadBack.
//   accept_log a query returning key, segment, chunk, token, writer of accepted writes, in order
//              (row n is seq n), or "none". Default: kDefaultAcceptLog when write is the default,
//              else none.
//   high_water a query returning key, token, or "none". Default: kDefaultHighWater when write is
//              the default, else none.
//   delete     a statement removing every row of $keys, or "none": what `fencecheck probe` runs at
//              its end on the keys it wrote. Default: kDefaultDelete when write is the default,
//              else none.
// The three queries and delete may take $keys (postgres_sql.h read_parameters(): the run's keys,
// a text[] bound as a parameter); the defaults do. Rows of other keys are never judged: a query
// that does not take $keys returns them and the harness drops them (drop_foreign_rows).
// Both last defaults follow the write: a query over a table that the user's own write does not
// maintain would hand the checkers false evidence (an empty log is "nothing was accepted").
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include <libpq-fe.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "postgres_embedded.h"
#include "postgres_libpq.h"
#include "fencecheck/resources/postgres.h"
#include "fencecheck/resources/postgres_sql.h"
#include "../kinds.h"

namespace fencecheck::resources::detail {
namespace {

namespace pg = fencecheck::postgres;
namespace pq = fencecheck::postgres::detail;
using namespace std::chrono_literals;

constexpr auto kAdminTimeout = 30s;  // schema, validation, read-back: the harness's own statements

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n\f\v");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n\f\v");
  return s.substr(b, e - b + 1);
}

bool is_none(const std::string& q) { return trimmed(q) == pg::kNone; }

std::vector<std::string> write_statements(const nlohmann::json& config) {
  const auto& w = config.at("write");
  if (w.is_string()) return {w.get<std::string>()};
  return w.get<std::vector<std::string>>();
}

/// The scenario field a write statement came from: "write" for one, "write[i]" in a list.
std::string write_field(const nlohmann::json& config, std::size_t i) {
  return config.at("write").is_string() ? std::string("write") : "write[" + std::to_string(i) + "]";
}

bool default_write(const nlohmann::json& config) {
  const auto& w = config.at("write");
  return w.is_string() && w.get<std::string>() == pg::kDefaultWrite;
}

std::optional<std::string> optional_query(const nlohmann::json& config, const char* name) {
  auto it = config.find(name);
  if (it == config.end() || !it->is_string() || is_none(it->get<std::string>())) return std::nullopt;
  return it->get<std::string>();
}

/// "line L, column C" of byte `offset` in `text` (1-based, columns in bytes).
std::string line_col(std::string_view text, std::size_t offset) {
  std::size_t line = 1;
  std::size_t start = 0;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i)
    if (text[i] == '\n') ++line, start = i + 1;
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - start + 1);
}

/// PostgreSQL's error for a statement, located in the user's text where the server said.
std::string refused(const PGresult* res, const pg::CompiledSql& sql, std::string_view source) {
  std::string msg = "PostgreSQL refused the statement: " + pq::result_error(res);
  if (auto at = pq::error_byte_offset(res, sql.text)) msg += " (at " + line_col(source, sql.source_offset(*at)) + ")";
  return msg;
}

bool integer_type(Oid t) {
  return t == pq::kOidInt2 || t == pq::kOidInt4 || t == pq::kOidInt8 || t == pq::kOidNumeric;
}
bool bytes_type(Oid t) { return t == pq::kOidBytea || t == pq::kOidText || t == pq::kOidVarchar || t == pq::kOidBpchar; }

/// One query's expected columns: integer ones, a bytes one (data), the rest any type (read as text).
struct Shape {
  const char* field;
  std::vector<const char*> columns;
};
const Shape kReadBackShape{"read_back", {"key", "segment", "chunk", "token", "writer", "data"}};
const Shape kAcceptLogShape{"accept_log", {"key", "segment", "chunk", "token", "writer"}};
const Shape kHighWaterShape{"high_water", {"key", "token"}};
const Shape kIgnoredShape{"ignored", {"key", "rows"}};
const Shape kDeleteShape{"delete", {}};  // any columns, or none

/// The parameter types of a compiled read-back query or delete: $1 text[] when it takes $keys.
std::vector<Oid> keys_types(const pg::CompiledSql& c) {
  return c.uses("keys") ? std::vector<Oid>{pq::kOidTextArray} : std::vector<Oid>{};
}

bool integer_column(std::string_view c) { return c == "segment" || c == "chunk" || c == "token" || c == "rows"; }

/// Checks a described query's columns against its shape; throws ResourceConfigError at the field.
void check_columns(const PGresult* desc, const Shape& shape) {
  std::vector<std::string> got;
  for (int i = 0; i < PQnfields(desc); ++i) got.emplace_back(PQfname(desc, i));
  std::string missing;
  for (const char* c : shape.columns)
    if (std::find(got.begin(), got.end(), c) == got.end()) missing += (missing.empty() ? "" : ", ") + std::string(c);
  std::string wanted;
  for (const char* c : shape.columns) wanted += (wanted.empty() ? "" : ", ") + std::string(c);
  if (!missing.empty()) {
    std::string returned;
    for (const auto& g : got) returned += (returned.empty() ? "" : ", ") + g;
    throw ResourceConfigError(shape.field, std::string(shape.field) + " returns columns (" + returned +
                                               "); it must return " + wanted + ": missing " + missing);
  }
  for (const char* c : shape.columns) {
    const Oid t = PQftype(desc, PQfnumber(desc, c));
    if (integer_column(c) && !integer_type(t))
      throw ResourceConfigError(shape.field, std::string(shape.field) + ": column " + c +
                                                 " must be an integer (smallint, integer, bigint or numeric); its "
                                                 "type OID is " + std::to_string(t));
    if (std::string_view(c) == "data" && !bytes_type(t))
      throw ResourceConfigError(shape.field, std::string(shape.field) +
                                                 ": column data must be bytea (or text): the chunk's bytes as written; "
                                                 "its type OID is " + std::to_string(t));
  }
}

std::int64_t int_at(const PGresult* r, int row, int col, const char* what) {
  if (PQgetisnull(r, row, col)) throw std::runtime_error(std::string(what) + " is NULL in row " + std::to_string(row + 1));
  const char* v = PQgetvalue(r, row, col);
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || errno != 0)
    throw std::runtime_error(std::string(what) + " '" + v + "' in row " + std::to_string(row + 1) + " is not an integer");
  return x;
}

std::string text_at(const PGresult* r, int row, int col) { return PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col); }

std::string bytes_at(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return {};
  if (PQftype(r, col) != pq::kOidBytea) return std::string(PQgetvalue(r, row, col), static_cast<std::size_t>(PQgetlength(r, row, col)));
  std::size_t n = 0;
  unsigned char* raw = PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, col)), &n);
  if (!raw) throw std::runtime_error("cannot decode bytea in row " + std::to_string(row + 1));
  std::string out(reinterpret_cast<const char*>(raw), n);
  PQfreemem(raw);
  return out;
}

std::string design_of(const nlohmann::json& config) {
  if (default_write(config)) return "per-key (default SQL)";
  const auto n = write_statements(config).size();
  return n == 1 ? "user SQL" : "user SQL, " + std::to_string(n) + " statements";
}

class PostgresInstance final : public ResourceInstance {
 public:
  PostgresInstance(nlohmann::json config, const ResourceRunContext& ctx) : config_(std::move(config)) {
    if (config_.contains("dsn")) {
      dsn_ = config_["dsn"].get<std::string>();
      shown_ = pg::redact_dsn(dsn_);
      // Workers get the DSN as libpq parsed it, without a password even if one came past parse()
      // (which refuses them): libpq finds it where the user keeps it, PGPASSWORD or ~/.pgpass.
      worker_dsn_ = shown_;
      ping_external();
    } else {
      process::EmbeddedOptions o;
      o.run_dir = ctx.run_dir;
      o.log_path = ctx.log_path;
      o.run_id = ctx.run_id;
      o.host = ctx.host;
      o.port = ctx.port;
      o.stop_grace = 10s;  // fast shutdown's bound before SIGQUIT
      server_ = std::make_unique<pq::EmbeddedPostgres>(std::move(o));
      dsn_ = server_->dsn("fencecheck");
      shown_ = pg::redact_dsn(dsn_);
      worker_dsn_ = dsn_;
    }
    session_ = std::make_unique<pq::Session>(dsn_, shown_);
    std::string error;
    if (!session_->ensure_connected(10s, error)) throw ResourceUnavailable(error);
    if (auto schema = config_.find("schema"); schema != config_.end()) {
      auto res = session_->exec(schema->get<std::string>(), kAdminTimeout, error);
      if (!res) throw ResourceUnavailable("running schema on " + shown_ + ": " + error);
      if (!pq::result_ok(res.get()))
        throw ResourceConfigError("schema", "PostgreSQL refused the schema: " + pq::result_error(res.get()));
    }
    validate();
  }
  ~PostgresInstance() override { stop(); }

  nlohmann::json endpoint() const override {
    nlohmann::json e{{"kind", "postgres"}, {"dsn", worker_dsn_}, {"write", write_statements(config_)}};
    if (auto hw = optional_query(config_, "high_water")) e["high_water"] = *hw;
    return e;
  }

  std::string describe() const override {
    if (server_)
      return "postgres " + server_->host() + ":" + std::to_string(server_->port()) + " (embedded, data " +
             server_->data_dir().string() + ")";
    return "postgres " + shown_ + " (external)";
  }

  bool healthy() override {
    if (!session_) return false;
    std::string error;
    if (!session_->ensure_connected(2s, error)) return false;
    auto res = session_->exec("SELECT 1", 2s, error);
    return res && pq::result_ok(res.get());
  }

  ReadBack readback() override {
    if (!session_) throw std::runtime_error("postgres " + shown_ + ": read-back after stop()");
    ReadBack rb;
    rb.resource = "postgres";
    rb.fencing = design_of(config_);
    std::map<std::tuple<std::string, std::int64_t, std::int64_t>, std::int64_t> last_seq;
    if (auto q = optional_query(config_, "accept_log")) {
      auto res = query(*q, "accept_log", rb.ignored);
      const int c[] = {PQfnumber(res.get(), "key"), PQfnumber(res.get(), "segment"), PQfnumber(res.get(), "chunk"),
                       PQfnumber(res.get(), "token"), PQfnumber(res.get(), "writer")};
      rows("accept_log", [&] {
        for (int r = 0; r < PQntuples(res.get()); ++r) {
          AcceptedWrite w;
          w.seq = r + 1;
          w.key = text_at(res.get(), r, c[0]);
          w.segment = int_at(res.get(), r, c[1], "segment");
          w.chunk = int_at(res.get(), r, c[2], "chunk");
          w.token = int_at(res.get(), r, c[3], "token");
          w.client = text_at(res.get(), r, c[4]);
          last_seq[{w.key, w.segment, w.chunk}] = w.seq;
          rb.log.push_back(std::move(w));
        }
      });
    }
    {
      auto res = query(config_.at("read_back").get<std::string>(), "read_back", rb.ignored);
      const int c[] = {PQfnumber(res.get(), "key"),   PQfnumber(res.get(), "segment"), PQfnumber(res.get(), "chunk"),
                       PQfnumber(res.get(), "token"), PQfnumber(res.get(), "writer"),  PQfnumber(res.get(), "data")};
      rows("read_back", [&] {
        for (int r = 0; r < PQntuples(res.get()); ++r) {
          StoredChunk s;
          s.key = text_at(res.get(), r, c[0]);
          s.segment = int_at(res.get(), r, c[1], "segment");
          s.chunk = int_at(res.get(), r, c[2], "chunk");
          s.token = int_at(res.get(), r, c[3], "token");
          s.client = text_at(res.get(), r, c[4]);
          s.data = bytes_at(res.get(), r, c[5]);
          auto seq = last_seq.find({s.key, s.segment, s.chunk});
          s.seq = seq == last_seq.end() ? 0 : seq->second;
          rb.chunks.push_back(std::move(s));
        }
      });
      std::sort(rb.chunks.begin(), rb.chunks.end(), [](const StoredChunk& a, const StoredChunk& b) {
        return std::tie(a.key, a.segment, a.chunk) < std::tie(b.key, b.segment, b.chunk);
      });
    }
    if (auto q = optional_query(config_, "high_water")) {
      auto res = query(*q, "high_water", rb.ignored);
      const int key = PQfnumber(res.get(), "key");
      const int token = PQfnumber(res.get(), "token");
      rows("high_water", [&] {
        for (int r = 0; r < PQntuples(res.get()); ++r)
          rb.high_water[text_at(res.get(), r, key)] = int_at(res.get(), r, token, "token");
      });
    }
    return rb;
  }

  Removal remove_keys(const std::vector<std::string>& keys) override {
    Removal out;
    const auto statement = optional_query(config_, "delete");
    if (!statement) {
      out.said = "resource.delete is none (a custom schema without a delete statement): the rows of these keys are "
                 "left in " + shown_ + "; give `delete:` (a statement taking $keys) to have them removed";
      return out;
    }
    if (keys.empty()) {
      out.removed = true;
      out.rows = 0;
      out.said = "no key to remove";
      return out;
    }
    std::string error;
    pq::ResultPtr res;
    if (session_ && session_->ensure_connected(10s, error)) res = run_keyed(*statement, "delete", keys, error);
    if (!res) {
      out.said = "the delete did not run (" + error + "): the rows of these keys are left in " + shown_;
      return out;
    }
    if (!pq::result_ok(res.get())) {
      out.said = "PostgreSQL refused the delete (" + pq::result_error(res.get()) + "): the rows of these keys are left in " + shown_;
      return out;
    }
    out.removed = true;
    // The default's one row says how many rows it removed; a DELETE says it in its command tag.
    if (PQresultStatus(res.get()) == PGRES_TUPLES_OK && PQntuples(res.get()) == 1 && PQnfields(res.get()) == 1 &&
        !PQgetisnull(res.get(), 0, 0))
      out.rows = std::strtoll(PQgetvalue(res.get(), 0, 0), nullptr, 10);
    else if (auto n = pq::row_count(res.get()))
      out.rows = *n;
    out.said = "removed " + (out.rows >= 0 ? std::to_string(out.rows) + " rows" : std::string("the rows")) + " of " +
               std::to_string(keys.size()) + (keys.size() == 1 ? " key" : " keys") + " from " + shown_;
    return out;
  }

  void stop() override {
    session_.reset();
    if (server_) {
      server_->stop();
      server_->remove_own_dir();
    }
  }

  bool restart() override {
    if (!server_) return false;
    if (session_) session_->disconnect();
    server_->stop();
    server_->start();
    return true;
  }

 private:
  void ping_external() {
    const std::string& dsn = dsn_;
    const char* keywords[] = {"dbname", "connect_timeout", nullptr};
    const char* values[] = {dsn.c_str(), "10", nullptr};
    const auto t0 = std::chrono::steady_clock::now();
    const PGPing ping = PQpingParams(keywords, values, /*expand_dbname=*/1);
    const auto took = std::chrono::steady_clock::now() - t0;
    switch (ping) {
      case PQPING_OK:
        return;
      case PQPING_REJECT:
        throw ResourceUnavailable("PostgreSQL at " + shown_ +
                                  " refuses connections (starting up, shutting down or in recovery: PQping)");
      case PQPING_NO_RESPONSE: {
        // PQping says only "no response", whether the port refused at once (or the host name did
        // not resolve) or nothing answered for 10 s. When it came back early, a connection
        // attempt's own error says which, in libpq's words (errno's "Connection refused").
        std::string why;
        if (took < 9s) {
          pq::Session attempt(dsn, shown_);
          if (attempt.ensure_connected(10s, why)) why.clear();
        }
        if (why.find("Connection refused") != std::string::npos)
          throw ResourceUnavailable("PostgreSQL at " + shown_ +
                                    " refused the connection (connection refused: nothing listens at that address and "
                                    "port): " + why + "; start it or fix resource.dsn");
        throw ResourceUnavailable("PostgreSQL at " + shown_ + " does not answer (" +
                                  (why.empty() ? std::string("PQping: no response within 10 s") : why) +
                                  "); start it or fix resource.dsn");
      }
      case PQPING_NO_ATTEMPT:
        throw ResourceConfigError("dsn", "libpq cannot use the dsn " + shown_ + " (PQping: no attempt made)");
    }
  }

  /// Prepares and describes every statement on the harness's connection before any worker
  /// starts, so that a statement the database refuses is bad input located at its field.
  void validate() {
    std::string error;
    auto must = [&](pq::ResultPtr res) {
      if (!res) throw ResourceUnavailable("validating the statements on " + shown_ + ": " + error);
      return res;
    };
    static const std::vector<Oid> kTypes{pq::kOidText, pq::kOidInt8, pq::kOidInt8,
                                         pq::kOidInt8, pq::kOidText, pq::kOidBytea};
    const auto statements = write_statements(config_);
    std::vector<pg::CompiledSql> compiled;
    try {  // parse() compiled them already; a configuration that did not come through it may not
      compiled = pg::compile_write_sql(statements);
    } catch (const pg::SqlCompileError& e) {
      throw ResourceConfigError(write_field(config_, e.statement()), e.what());
    }
    for (std::size_t i = 0; i < compiled.size(); ++i) {
      const std::string name = "fencecheck_check_w" + std::to_string(i);
      auto res = must(session_->prepare(name, compiled[i].text, kTypes, kAdminTimeout, error));
      if (!pq::result_ok(res.get()))
        throw ResourceConfigError(write_field(config_, i), refused(res.get(), compiled[i], statements[i]));
      res = must(session_->describe(name, kAdminTimeout, error));
      if (!pq::result_ok(res.get()))
        throw ResourceConfigError(write_field(config_, i), refused(res.get(), compiled[i], statements[i]));
    }
    auto check = [&](const std::string& sql, const Shape& shape) {
      pg::CompiledSql compiled_q;
      try {
        compiled_q = pg::compile_sql(sql, pg::read_parameters(), shape.field);
      } catch (const pg::SqlCompileError& e) {
        throw ResourceConfigError(shape.field, e.what());
      }
      const std::string name = std::string("fencecheck_check_") + shape.field;
      auto res = must(session_->prepare(name, compiled_q.text, keys_types(compiled_q), kAdminTimeout, error));
      if (!pq::result_ok(res.get())) throw ResourceConfigError(shape.field, refused(res.get(), compiled_q, sql));
      res = must(session_->describe(name, kAdminTimeout, error));
      if (!pq::result_ok(res.get())) throw ResourceConfigError(shape.field, refused(res.get(), compiled_q, sql));
      if (!shape.columns.empty()) check_columns(res.get(), shape);
    };
    check(config_.at("read_back").get<std::string>(), kReadBackShape);
    if (auto q = optional_query(config_, "accept_log")) check(*q, kAcceptLogShape);
    if (auto q = optional_query(config_, "high_water")) check(*q, kHighWaterShape);
    if (auto q = optional_query(config_, "delete")) check(*q, kDeleteShape);
    must(session_->exec("DEALLOCATE ALL", kAdminTimeout, error));
  }

  /// Runs `sql` (a read-back query or delete, compiled with read_parameters()) with $keys bound
  /// to `keys` (NULL when nullopt) as a real parameter (the extended protocol's unnamed statement).
  /// nullptr with `error` when it could not run.
  pq::ResultPtr run_keyed(const std::string& sql, const char* field, const std::optional<std::vector<std::string>>& keys,
                          std::string& error) {
    const pg::CompiledSql compiled = pg::compile_sql(sql, pg::read_parameters(), field);
    if (!compiled.uses("keys")) return session_->exec(sql, kAdminTimeout, error);
    auto res = session_->prepare("", compiled.text, keys_types(compiled), kAdminTimeout, error);
    if (!res || !pq::result_ok(res.get())) return res;
    const std::string literal = keys ? pg::text_array_literal(*keys) : std::string();
    const char* values[] = {keys ? literal.c_str() : nullptr};
    return session_->exec_prepared("", 1, values, nullptr, nullptr, kAdminTimeout, error);
  }

  /// The read scope as $keys' value; nullopt when readback() is not scoped.
  std::optional<std::vector<std::string>> scope_keys() const {
    if (!read_scope_) return std::nullopt;
    return std::vector<std::string>(read_scope_->begin(), read_scope_->end());
  }

  /// Counts the rows of keys outside the scope that a default query leaves out into `ignored`
  /// (pg::kDefaultIgnored*); a user's query that takes $keys leaves rows out uncounted.
  void count_left_out(const std::string& sql, const char* field, IgnoredRows& ignored) {
    if (!read_scope_) return;
    const pg::CompiledSql compiled = pg::compile_sql(sql, pg::read_parameters(), field);
    if (!compiled.uses("keys")) return;  // it returns every row: the caller drops and counts them
    std::string_view count;
    if (sql == pg::kDefaultReadBack) count = pg::kDefaultIgnoredChunks;
    else if (sql == pg::kDefaultAcceptLog) count = pg::kDefaultIgnoredAcceptLog;
    else if (sql == pg::kDefaultHighWater) count = pg::kDefaultIgnoredHighWater;
    if (count.empty()) {
      ignored.add_not_counted(field);
      return;
    }
    std::string error;
    auto res = run_keyed(std::string(count), field, scope_keys(), error);
    if (!res || PQresultStatus(res.get()) != PGRES_TUPLES_OK) {
      spdlog::warn("postgres {}: could not count the rows of other keys: {}", field,
                   res ? pq::result_error(res.get()) : error);
      ignored.add_not_counted(field);
      return;
    }
    const int key = PQfnumber(res.get(), "key"), rows = PQfnumber(res.get(), "rows");
    for (int r = 0; r < PQntuples(res.get()); ++r)
      ignored.add(text_at(res.get(), r, key), field, int_at(res.get(), r, rows, "rows"));
  }

  /// Runs one read-back query, scoped by $keys when it takes them, and counts what the scope left
  /// out into `ignored`; throws std::runtime_error naming the resource and the field.
  pq::ResultPtr query(const std::string& sql, const char* field, IgnoredRows& ignored) {
    std::string error;
    if (!session_->ensure_connected(10s, error))
      throw std::runtime_error("postgres read-back (" + std::string(field) + "): " + error);
    auto res = run_keyed(sql, field, scope_keys(), error);
    if (!res) throw std::runtime_error("postgres read-back (" + std::string(field) + ") from " + shown_ + ": " + error);
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
      throw std::runtime_error("postgres read-back (" + std::string(field) + ") from " + shown_ + ": " +
                               (pq::result_ok(res.get()) ? "the query returned no rows set" : pq::result_error(res.get())));
    count_left_out(sql, field, ignored);
    return res;
  }

  template <typename F>
  void rows(const char* field, F&& f) {
    try {
      f();
    } catch (const std::runtime_error& e) {
      throw std::runtime_error("postgres read-back (" + std::string(field) + ") from " + shown_ + ": " + e.what());
    }
  }

  nlohmann::json config_;
  std::unique_ptr<pq::EmbeddedPostgres> server_;
  std::string dsn_;         // what the harness connects with
  std::string shown_;       // the DSN in messages: redact_dsn
  std::string worker_dsn_;  // what workers are told: never a password
  std::unique_ptr<pq::Session> session_;
};

class PostgresKind final : public ResourceKind {
 public:
  std::string_view name() const override { return "postgres"; }
  std::vector<std::string_view> fields() const override {
    return {"dsn", "schema", "write", "read_back", "accept_log", "high_water", "delete"};
  }

  nlohmann::json parse(const KindFields& f) const override {
    nlohmann::json out = nlohmann::json::object();
    const bool embedded = !f.has("dsn");
    if (!embedded) {
      const std::string dsn = f.string("dsn");
      if (trimmed(dsn).empty()) f.fail("dsn", "dsn is empty: give a libpq connection string or URI, or leave dsn out for an embedded PostgreSQL");
      if (pg::redact_dsn(dsn) == "<a DSN libpq cannot parse>")
        f.fail("dsn", "not a libpq connection string (\"host=... dbname=...\") or URI (\"postgresql://host/db\")");
      if (pg::dsn_has_password(dsn))
        f.fail("dsn", "holds a password; never put one in a scenario: libpq reads it from PGPASSWORD, ~/.pgpass or a "
                      "service file (PostgreSQL docs 34.15-34.17)");
      out["dsn"] = dsn;
    }
    if (f.has("schema")) {
      const std::string schema = f.string("schema");
      if (trimmed(schema).empty()) f.fail("schema", "schema is empty: leave it out, or give the DDL to run");
      out["schema"] = schema;
    } else if (embedded) {
      out["schema"] = std::string(pg::kDefaultSchema);
    }

    std::vector<std::string> write = f.has("write") ? f.string_list("write") : std::vector<std::string>{std::string(pg::kDefaultWrite)};
    try {
      (void)pg::compile_write_sql(write);
    } catch (const pg::SqlCompileError& e) {
      f.fail("write[" + std::to_string(e.statement()) + "]", e.what(), e.offset());
    }
    out["write"] = write.size() == 1 ? nlohmann::json(write.front()) : nlohmann::json(write);
    const bool write_is_default = write.size() == 1 && write.front() == pg::kDefaultWrite;

    auto query = [&](const char* field, std::string_view fallback) {
      if (!f.has(field)) {
        out[field] = std::string(fallback);
        return;
      }
      const std::string q = f.string(field);
      if (std::string_view(field) != "read_back" && is_none(q)) {
        out[field] = std::string(pg::kNone);
        return;
      }
      pg::CompiledSql compiled;
      try {
        compiled = pg::compile_sql(q, pg::read_parameters(), field);
      } catch (const pg::SqlCompileError& e) {
        f.fail(field, e.what(), e.offset());
      }
      if (std::string_view(field) == "delete" && !compiled.uses("keys"))
        f.fail(field, "delete must use $keys (the keys to remove, a text[]: DELETE FROM t WHERE key = ANY($keys)): "
                      "a delete without it would remove rows fencecheck did not write");
      out[field] = q;
    };
    query("read_back", pg::kDefaultReadBack);
    query("accept_log", write_is_default ? pg::kDefaultAcceptLog : pg::kNone);
    query("high_water", write_is_default ? pg::kDefaultHighWater : pg::kNone);
    query("delete", write_is_default ? pg::kDefaultDelete : pg::kNone);
    return out;
  }

  bool embedded(const nlohmann::json& config) const override { return !config.contains("dsn"); }

  Evidence evidence(const nlohmann::json& config) const override {
    Evidence e;
    e.chunks = true;
    e.accept_log = optional_query(config, "accept_log").has_value();
    e.rejections = false;  // PostgreSQL keeps no record of a write it refused
    e.high_water = optional_query(config, "high_water").has_value();
    e.effects = false;
    return e;
  }

  std::string design(const nlohmann::json& config) const override { return design_of(config); }

  std::unique_ptr<ResourceInstance> open(const nlohmann::json& config, const ResourceRunContext& ctx) const override {
    return std::make_unique<PostgresInstance>(config, ctx);
  }

  std::vector<std::pair<std::string, std::string>> worker_env(const nlohmann::json& endpoint) const override {
    std::vector<std::pair<std::string, std::string>> env{{"FENCECHECK_RESOURCE_DSN", endpoint.value("dsn", "")}};
    // The scenario's own write statement(s), so a command worker runs the very SQL the probe and
    // fencecheck-worker run (issue 34, item 4; docs/resource-postgres.md, "Your worker writes
    // through the scenario's statement").
    if (auto w = endpoint.find("write"); w != endpoint.end() && (w->is_string() || w->is_array()))
      for (auto& kv : pg::write_statement_env(w->is_string() ? std::vector<std::string>{w->get<std::string>()}
                                                             : w->get<std::vector<std::string>>()))
        env.push_back(std::move(kv));
    return env;
  }

  std::optional<NetAddress> endpoint_address(const nlohmann::json& endpoint, std::string* why) const override {
    return postgres::dsn_address(endpoint.value("dsn", ""), why);
  }
  nlohmann::json endpoint_at(const nlohmann::json& endpoint, const NetAddress& at) const override {
    nlohmann::json e = endpoint;
    e["dsn"] = postgres::dsn_at(endpoint.value("dsn", ""), at);
    return e;
  }
  std::optional<std::pair<std::string, std::string>> relay_problem(const nlohmann::json& config) const override {
    if (!config.contains("dsn")) return std::nullopt;  // embedded: it runs in the lab
    std::string why;
    if (postgres::dsn_address(config["dsn"].get<std::string>(), &why)) return std::nullopt;
    return std::pair<std::string, std::string>{"dsn", "network: namespaces relays the DSN's TCP address to the workers; " + why};
  }

  std::unique_ptr<ResourceWriter> make_writer(const nlohmann::json& endpoint, std::chrono::milliseconds timeout) const override {
    return fencecheck::detail::make_postgres_writer(endpoint, timeout);
  }

  // An embedded PostgreSQL a dead harness left running (the kind re-arms PDEATHSIG after dropping
  // to the postgres user, so this is rare: a postmaster whose harness died between fork and exec,
  // or one detached by hand). A postmaster whose harness is alive is that run's, not an orphan.
  OrphanReport stop_orphans(const std::filesystem::path& run_dir, bool force) const override {
    OrphanReport out;
    const auto parent = postmaster_parent(run_dir);
    if (parent && *parent > 1 && !force) {
      out.said.push_back("its PostgreSQL belongs to a live harness (pid " + std::to_string(*parent) +
                         "); left alone (--force stops it)");
      return out;
    }
    if (!pg::stop_orphaned_postgres(run_dir)) {
      out.said.push_back("its PostgreSQL" + (parent ? " (pid " + std::to_string(*parent) + ")" : std::string()) +
                         " could not be stopped (see the log above); the next cleanup retries");
      ++out.not_stopped;
    } else if (parent) {
      out.said.push_back("stopped its orphaned PostgreSQL (its parent was pid " + std::to_string(*parent) + ")");
    }
    return out;
  }

 private:
  /// The parent pid of run_dir's running postmaster (1 or a subreaper once its harness died), or
  /// nullopt when none runs.
  static std::optional<int> postmaster_parent(const std::filesystem::path& run_dir) {
    const auto pid = pg::running_postmaster(run_dir);
    if (!pid) return std::nullopt;
    std::ifstream status("/proc/" + std::to_string(*pid) + "/status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("PPid:", 0) == 0) return std::stoi(line.substr(5));
    return std::nullopt;
  }
};

}  // namespace

const ResourceKind& postgres_kind() {
  static const PostgresKind kind;
  return kind;
}

}  // namespace fencecheck::resources::detail
