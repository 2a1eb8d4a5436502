// PostgresWriter (postgres_writer.h): the worker's side of resource kind postgres.
#include "fencecheck/resources/postgres_writer.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "../kinds.h"
#include "fencecheck/resources/postgres.h"
#include "fencecheck/resources/postgres_sql.h"
#include "postgres_libpq.h"

namespace fencecheck {

namespace pq = postgres::detail;

struct PostgresWriter::Impl {
  std::string shown;                             // the DSN for messages (redacted)
  std::vector<postgres::CompiledSql> statements;  // `write`, compiled
  std::string high_water;                        // per-key lookup built from the endpoint's query, or ""
  std::chrono::milliseconds timeout{};
  std::chrono::milliseconds wait{};              // the client's own bound on each reply
  pq::Session session;
  bool prepared = false;  // this connection has the statements prepared

  Impl(std::string dsn, std::string shown_dsn) : shown(std::move(shown_dsn)), session(std::move(dsn), shown) {}

  /// Connects, sets the session's bounds and prepares the statements. False with `error`.
  bool ready(std::string& error) {
    if (!session.connected()) prepared = false;
    if (prepared) return true;
    if (!session.ensure_connected(timeout, error)) return false;
    // 20.11 "Client Connection Defaults": statement_timeout bounds every statement (lock waits
    // included) on the server; idle_in_transaction_session_timeout ends a transaction whose client
    // vanished between two statements, so its row locks do not stall every other writer.
    const std::string set = "SET statement_timeout = " + std::to_string(timeout.count()) +
                            "; SET idle_in_transaction_session_timeout = " + std::to_string(2 * timeout.count());
    auto res = session.exec(set, wait, error);
    if (!res) return false;
    if (!pq::result_ok(res.get())) {
      error = "setting the session's timeouts: " + pq::result_error(res.get());
      return false;
    }
    static const std::vector<Oid> kTypes{pq::kOidText, pq::kOidInt8, pq::kOidInt8,
                                         pq::kOidInt8, pq::kOidText, pq::kOidBytea};
    for (std::size_t i = 0; i < statements.size(); ++i) {
      res = session.prepare("fencecheck_w" + std::to_string(i), statements[i].text, kTypes, wait, error);
      if (!res) return false;
      if (!pq::result_ok(res.get())) {
        error = "preparing write statement " + std::to_string(i + 1) + ": " + pq::result_error(res.get());
        std::string ignored;
        session.exec("DEALLOCATE ALL", wait, ignored);
        return false;
      }
    }
    if (!high_water.empty()) {
      res = session.prepare("fencecheck_hw", high_water, {pq::kOidTextArray}, wait, error);
      if (!res) return false;
      if (!pq::result_ok(res.get())) high_water.clear();  // the mark is a courtesy: go on without it
    }
    prepared = true;
    return true;
  }

  /// A statement of the session's own (BEGIN, COMMIT, ROLLBACK): true when it succeeded.
  bool command(const std::string& sql, std::string& error) {
    auto res = session.exec(sql, wait, error);
    if (!res) return false;
    if (!pq::result_ok(res.get())) {
      error = sql + ": " + pq::result_error(res.get());
      return false;
    }
    return true;
  }

  void rollback() {
    std::string ignored;
    if (session.connected() && !command("ROLLBACK", ignored)) session.disconnect();
  }

  std::int64_t mark_of(const std::string& key) {
    if (high_water.empty() || !session.connected()) return 0;
    std::string error;
    const std::string keys = postgres::text_array_literal({key});  // $keys of the user's query, and the filter
    const char* values[] = {keys.c_str()};
    auto res = session.exec_prepared("fencecheck_hw", 1, values, nullptr, nullptr, wait, error);
    if (!res || pq::pq().PQresultStatus(res.get()) != PGRES_TUPLES_OK || pq::pq().PQntuples(res.get()) < 1 ||
        pq::pq().PQgetisnull(res.get(), 0, 0))
      return 0;
    try {
      return std::stoll(pq::pq().PQgetvalue(res.get(), 0, 0));
    } catch (const std::exception&) {
      return 0;
    }
  }
};

namespace {

std::vector<std::string> statements_of(const nlohmann::json& write) {
  std::vector<std::string> out;
  if (write.is_string()) {
    out.push_back(write.get<std::string>());
  } else if (write.is_array() && !write.empty()) {
    for (const auto& s : write) {
      if (!s.is_string()) throw std::invalid_argument("a postgres endpoint's \"write\" holds a non-string");
      out.push_back(s.get<std::string>());
    }
  } else {
    throw std::invalid_argument("a postgres endpoint needs \"write\": a statement or a non-empty list of them");
  }
  return out;
}

}  // namespace

PostgresWriter::PostgresWriter(const nlohmann::json& endpoint, std::chrono::milliseconds timeout) {
  if (!endpoint.is_object()) throw std::invalid_argument("a postgres endpoint is a JSON object");
  auto dsn = endpoint.find("dsn");
  if (dsn == endpoint.end() || !dsn->is_string())
    throw std::invalid_argument("a postgres endpoint needs \"dsn\" (a libpq connection string)");
  auto write = endpoint.find("write");
  if (write == endpoint.end()) throw std::invalid_argument("a postgres endpoint needs \"write\" (its statements)");
  if (timeout.count() <= 0) throw std::invalid_argument("postgres writer timeout must be positive");
  const std::string d = dsn->get<std::string>();
  impl_ = std::make_unique<Impl>(d, postgres::redact_dsn(d));
  try {
    impl_->statements = postgres::compile_write_sql(statements_of(*write));
  } catch (const postgres::SqlCompileError& e) {
    throw std::invalid_argument("postgres endpoint \"write\" statement " + std::to_string(e.statement() + 1) +
                                ", byte " + std::to_string(e.offset()) + ": " + e.what());
  }
  if (auto hw = endpoint.find("high_water"); hw != endpoint.end() && !hw->is_null()) {
    if (!hw->is_string()) throw std::invalid_argument("a postgres endpoint's \"high_water\" is a query (a string)");
    std::string q = hw->get<std::string>();
    if (q != postgres::kNone) {
      try {
        const auto compiled = postgres::compile_sql(q, postgres::read_parameters(), "high_water");
        q = compiled.text.substr(0, compiled.statement_end);  // without a trailing ';' or comment
      } catch (const postgres::SqlCompileError& e) {
        throw std::invalid_argument("postgres endpoint \"high_water\": " + std::string(e.what()));
      }
      // The user's query returns the marks of $keys (or of every key); the writer asks for one key:
      // $1 (the query's $keys, when it takes them) is the one-element array of that key.
      impl_->high_water = "SELECT token FROM (" + q + "\n) AS fencecheck_high_water WHERE key = ANY($1)";
    }
  }
  impl_->timeout = timeout;
  impl_->wait = timeout + std::max(std::chrono::milliseconds(250), timeout / 4);
}

PostgresWriter::~PostgresWriter() = default;

bool PostgresWriter::connected() const { return impl_->session.connected(); }
int PostgresWriter::backend_pid() const { return connected() ? pq::pq().PQbackendPID(impl_->session.raw()) : 0; }

WriteReply PostgresWriter::write(std::string_view key, std::int64_t segment, std::int64_t chunk, FencingToken token,
                                 std::string_view client, std::string_view bytes) {
  WriteReply reply;
  reply.outcome = WriteOutcome::kUnknown;
  Impl& im = *impl_;
  std::string error;
  if (!im.ready(error)) {
    reply.error = error;
    return reply;
  }
  const std::string k(key);
  const std::string seg = std::to_string(segment);
  const std::string chk = std::to_string(chunk);
  const std::string tok = token.str();
  const std::string who(client);
  // Text parameters are NUL-terminated C strings; $data is binary with its length (34.3.1
  // PQexecParams: paramFormats 1 = binary, bytea's binary form is the bytes themselves).
  const char* values[] = {k.c_str(), seg.c_str(), chk.c_str(), tok.c_str(), who.c_str(), bytes.data()};
  const int lengths[] = {0, 0, 0, 0, 0, static_cast<int>(bytes.size())};
  const int formats[] = {0, 0, 0, 0, 0, 1};
  static const char kEmpty[] = "";
  if (bytes.empty()) values[5] = kEmpty;

  const bool transaction = im.statements.size() > 1;
  if (transaction && !im.command("BEGIN ISOLATION LEVEL READ COMMITTED", error)) {
    reply.error = error;
    return reply;
  }
  for (std::size_t i = 0; i < im.statements.size(); ++i) {
    auto res = im.session.exec_prepared("fencecheck_w" + std::to_string(i), 6, values, lengths, formats, im.wait, error);
    const std::string which = transaction ? "write statement " + std::to_string(i + 1) + " of " +
                                                std::to_string(im.statements.size())
                                          : "write statement";
    if (!res) {
      reply.error = which + ": " + error;
      if (transaction) im.rollback();
      return reply;
    }
    if (!pq::result_ok(res.get())) {
      reply.error = which + ": " + pq::result_error(res.get());
      if (transaction) im.rollback();
      return reply;
    }
    const auto rows = pq::row_count(res.get());
    if (!rows && !transaction) {
      reply.error = which + " reports no row count (" + std::string(pq::pq().PQcmdStatus(res.get())) +
                    "): it cannot say accepted or rejected";
      return reply;
    }
    if (rows && *rows == 0) {
      if (transaction) im.rollback();
      reply.outcome = WriteOutcome::kRejected;
      reply.error = "rejected: " + which + " matched 0 rows (fenced)" + (transaction ? "; rolled back" : "");
      reply.high_water = im.mark_of(k);
      return reply;
    }
  }
  if (transaction) {
    auto res = im.session.exec("COMMIT", im.wait, error);
    if (!res) {
      reply.error = "COMMIT: " + error;
      return reply;
    }
    // A COMMIT of a transaction that failed reports ROLLBACK (the SQL command COMMIT).
    if (!pq::result_ok(res.get()) || std::string_view(pq::pq().PQcmdStatus(res.get())) != "COMMIT") {
      reply.error = "COMMIT: " + (pq::result_ok(res.get()) ? std::string("the transaction was rolled back")
                                                           : pq::result_error(res.get()));
      return reply;
    }
  }
  reply.outcome = WriteOutcome::kAccepted;
  return reply;
}

}  // namespace fencecheck

namespace fencecheck::detail {

std::unique_ptr<ResourceWriter> make_postgres_writer(const nlohmann::json& endpoint, std::chrono::milliseconds timeout) {
  return std::make_unique<PostgresWriter>(endpoint, timeout);
}

}  // namespace fencecheck::detail
