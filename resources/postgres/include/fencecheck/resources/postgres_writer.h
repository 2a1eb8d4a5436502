// fencecheck — the worker's writer for resource kind postgres: the user's fencing SQL on libpq.
//
// Endpoint (what the harness hands each worker: ResourceInstance::endpoint(), writer.h):
//   {"kind": "postgres",
//    "dsn": "<libpq connection string or URI>",   never a password: libpq reads it from PGPASSWORD,
//                                                  ~/.pgpass or a service file (PostgreSQL 15 docs
//                                                  34.15-34.17)
//    "write": ["<statement>", ...],                one statement, or several (a single string is
//                                                  accepted as a list of one); named parameters
//                                                  $key $segment $chunk $token $writer $data
//                                                  (postgres_sql.h); at least one uses $token
//    "high_water": "<query>"}                      optional: returns key, token for every key; when
//                                                  present a rejected write carries the key's mark
//                                                  as read right after the rejection
//
// The rule (docs/resource-postgres.md, "The write path"):
//  - one statement: its row count decides: >= 1 accepted, 0 rejected (fenced). The row count is
//    the command's affected-row count (PQcmdTuples: INSERT/UPDATE/DELETE/MERGE) or, for a query,
//    the rows it returned (PQntuples). The statement runs in its own implicit transaction
//    (autocommit) under the database's default isolation.
//  - several statements (check-then-write designs: a SELECT that checks the fence, then the write):
//    BEGIN ISOLATION LEVEL READ COMMITTED, each in order; the first with 0 rows -> ROLLBACK,
//    rejected; all >= 1 -> COMMIT, accepted. A statement without a row count (LOCK, SET) neither
//    accepts nor rejects. (PostgreSQL 15 docs 13.2.1: each statement of a READ COMMITTED
//    transaction sees what was committed before it began, so a check in one statement does not
//    hold for the next: that is the race such designs have.)
//  - an SQL error, a failed connection, a statement timeout, a COMMIT that fails, or no reply
//    within the bound: kUnknown (Jepsen's info: the write may or may not have happened) with the
//    error text; never kRejected.
//
// Bounds: `timeout` is the session's statement_timeout (server side, 20.11 "Client Connection
// Defaults") and idle_in_transaction_session_timeout (twice it), the connect bound (polled with
// PQconnectPoll; libpq's connect_timeout is set to it as well, in whole seconds, at least 2: 34.1.2),
// and, with a margin of max(250 ms, timeout/4), the client's own wait for each reply, so a
// partition that drops every packet still ends the write (kUnknown; the connection is dropped and
// made again by the next write).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "fencecheck/resources/writer.h"

namespace fencecheck {

/// Writes chunks through the user's SQL on one PostgreSQL connection, made at the first write and
/// made again after it broke. libpq (Debian's libpq5, libpq.so.5) is loaded at the first write,
/// not linked, so a worker of another kind never maps it; when it cannot be loaded every write is
/// kUnknown saying so. Statements are prepared once per connection (PQprepare, parameter
/// types text, int8, int8, int8, text, bytea; $data is sent in binary format) and run with
/// PQexecPrepared: parameters are never pasted into SQL text.
///
/// Thread-safety: not thread-safe; one writer per thread (ResourceWriter's rule). Never throws for
/// a database failure (kUnknown with the error; the DSN in messages is redact_dsn's).
class PostgresWriter final : public ResourceWriter {
 public:
  /// Reads the endpoint above. Throws std::invalid_argument naming the field that is missing or
  /// wrong ("dsn", "write": a statement the compiler refuses, with its message), or when `timeout`
  /// is not positive. Does not connect.
  PostgresWriter(const nlohmann::json& endpoint, std::chrono::milliseconds timeout);
  ~PostgresWriter() override;
  PostgresWriter(const PostgresWriter&) = delete;
  PostgresWriter& operator=(const PostgresWriter&) = delete;

  [[nodiscard]] std::string_view kind() const override { return "postgres"; }

  WriteReply write(std::string_view key, std::int64_t segment, std::int64_t chunk, FencingToken token,
                   std::string_view client, std::string_view bytes) override;

  /// True while the writer holds an open connection (for tests and diagnostics).
  [[nodiscard]] bool connected() const;
  /// The server process ID of the writer's connection (PQbackendPID), 0 when not connected: lets a
  /// test find this writer's backend in pg_stat_activity.
  [[nodiscard]] int backend_pid() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fencecheck
