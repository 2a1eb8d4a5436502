// fencecheck — the postgres resource kind's public side (docs/resource-postgres.md): its default
// SQL, the DSN redaction every message uses, and the cleanup of an embedded server a killed
// harness left behind.
//
// The kind itself is registered as "postgres" (resource_kind.h; resources/postgres/postgres_kind.cpp);
// its writer is PostgresWriter (postgres_writer.h); named parameters are compiled by
// postgres_sql.h.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "fencecheck/proto/net_address.h"

namespace fencecheck::postgres {

// ---- The default SQL: the correct per-key rule (docs/resource-postgres.md, "The defaults").
//
// A fence row per key holds the key's high-water mark. A write is accepted when its token is at
// least the mark (equal tokens are accepted: a holder writes many chunks under one token, and no
// two holders ever share a token because the issuer hands out strictly increasing ones), and the
// mark, the chunk and the accept log change in the same statement, hence the same transaction.

/// The default `schema:` (run once on an embedded database; on an external one only when given):
///   fencecheck_fence      one row per key: the key's high-water mark (the highest accepted token)
///   fencecheck_chunks     one row per chunk slot: its last accepted content, token and writer
///   fencecheck_accept_log one row per accepted write; `seq` (an identity column) numbers them in
///                         the order their fence rows were written, which for one key is the
///                         commit order (each waits for the previous one's row lock)
inline constexpr std::string_view kDefaultSchema =
    "CREATE TABLE fencecheck_fence (\n"
    "  key   text   PRIMARY KEY,\n"
    "  token bigint NOT NULL\n"
    ");\n"
    "CREATE TABLE fencecheck_chunks (\n"
    "  key     text   NOT NULL,\n"
    "  segment bigint NOT NULL,\n"
    "  chunk   bigint NOT NULL,\n"
    "  token   bigint NOT NULL,\n"
    "  writer  text   NOT NULL,\n"
    "  data    bytea  NOT NULL,\n"
    "  PRIMARY KEY (key, segment, chunk)\n"
    ");\n"
    "CREATE TABLE fencecheck_accept_log (\n"
    "  seq     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,\n"
    "  key     text   NOT NULL,\n"
    "  segment bigint NOT NULL,\n"
    "  chunk   bigint NOT NULL,\n"
    "  token   bigint NOT NULL,\n"
    "  writer  text   NOT NULL\n"
    ");\n";

/// The default `write:`, one statement. Line by line:
///   WITH fenced AS (                             -- 1. the fence, first
///     INSERT INTO fencecheck_fence AS fence (key, token)
///     VALUES ($key, $token)                      --    a new key: its first token is its mark
///     ON CONFLICT (key) DO UPDATE                --    a known key: lock its fence row ...
///     SET token = EXCLUDED.token                 --    ... raise the mark to this token ...
///     WHERE fence.token <= EXCLUDED.token        --    ... only when it is not below the mark
///                                                --    (equal: the holder's next chunk)
///     RETURNING fence.key                        --    one row when the fence passed, none when not
///   ), stored AS (                               -- 2. the chunk, only when the fence passed
///     INSERT INTO fencecheck_chunks (key, segment, chunk, token, writer, data)
///     SELECT $key, $segment, $chunk, $token, $writer, $data FROM fenced
///     ON CONFLICT (key, segment, chunk) DO UPDATE
///     SET token = EXCLUDED.token, writer = EXCLUDED.writer, data = EXCLUDED.data
///   )                                            -- 3. the accept log, only when the fence passed:
///   INSERT INTO fencecheck_accept_log (key, segment, chunk, token, writer)
///   SELECT $key, $segment, $chunk, $token, $writer FROM fenced
///                                                -- its row count (1 or 0) is the outcome
/// Why it is atomic (PostgreSQL 15 docs): INSERT ... ON CONFLICT DO UPDATE "guarantees an atomic
/// INSERT or UPDATE outcome" and, under READ COMMITTED, locks the conflicting row and evaluates the
/// WHERE on its latest committed version (INSERT, "ON CONFLICT Clause"; 13.2.1 "Read Committed
/// Isolation Level"), so two writers of one key queue on the fence row and the second compares
/// against the first's token. Data-modifying WITH sub-statements run exactly once, to completion,
/// in the statement's transaction (7.8.4 "Data-Modifying Statements in WITH"); `stored` and the
/// log read `fenced`'s RETURNING rows, so they write only when the fence row was written.
inline constexpr std::string_view kDefaultWrite =
    "WITH fenced AS (\n"
    "  INSERT INTO fencecheck_fence AS fence (key, token)\n"
    "  VALUES ($key, $token)\n"
    "  ON CONFLICT (key) DO UPDATE\n"
    "  SET token = EXCLUDED.token\n"
    "  WHERE fence.token <= EXCLUDED.token\n"
    "  RETURNING fence.key\n"
    "), stored AS (\n"
    "  INSERT INTO fencecheck_chunks (key, segment, chunk, token, writer, data)\n"
    "  SELECT $key, $segment, $chunk, $token, $writer, $data FROM fenced\n"
    "  ON CONFLICT (key, segment, chunk) DO UPDATE\n"
    "  SET token = EXCLUDED.token, writer = EXCLUDED.writer, data = EXCLUDED.data\n"
    ")\n"
    "INSERT INTO fencecheck_accept_log (key, segment, chunk, token, writer)\n"
    "SELECT $key, $segment, $chunk, $token, $writer FROM fenced\n";

// The read-back queries take `$keys` (docs/resource-postgres.md, "Only the run's rows"): a text[]
// of the keys the run wrote (ResourceInstance::set_read_scope), bound as a parameter, never
// spliced into the SQL. `$keys` is NULL when the read-back is not scoped (a test reading the
// whole table); the defaults then read every row, a user's query does as its SQL says.

/// The default `read_back:`: the current content of every chunk slot of the run's keys.
inline constexpr std::string_view kDefaultReadBack =
    "SELECT key, segment, chunk, token, writer, data FROM fencecheck_chunks\n"
    "WHERE $keys IS NULL OR key = ANY($keys) ORDER BY key, segment, chunk";

/// The default `accept_log:` (only when both schema and write are the defaults: a log another
/// write statement does not fill would be false evidence): accepted writes of the run's keys, in order.
inline constexpr std::string_view kDefaultAcceptLog =
    "SELECT key, segment, chunk, token, writer FROM fencecheck_accept_log\n"
    "WHERE $keys IS NULL OR key = ANY($keys) ORDER BY seq";

/// The default `high_water:` (when schema is the default): the fence row of each of the run's keys.
inline constexpr std::string_view kDefaultHighWater =
    "SELECT key, token FROM fencecheck_fence WHERE $keys IS NULL OR key = ANY($keys) ORDER BY key";

/// What the default queries leave out, counted (ReadBack::ignored): one query per default read-back
/// query, returning `key` and `rows` of the keys outside `$keys`. Run only with the defaults
/// (a user's query that takes $keys leaves rows out that fencecheck cannot count: "not counted").
inline constexpr std::string_view kDefaultIgnoredChunks =
    "SELECT key, count(*) AS rows FROM fencecheck_chunks WHERE NOT (key = ANY($keys)) GROUP BY key";
inline constexpr std::string_view kDefaultIgnoredAcceptLog =
    "SELECT key, count(*) AS rows FROM fencecheck_accept_log WHERE NOT (key = ANY($keys)) GROUP BY key";
inline constexpr std::string_view kDefaultIgnoredHighWater =
    "SELECT key, count(*) AS rows FROM fencecheck_fence WHERE NOT (key = ANY($keys)) GROUP BY key";

/// The default `delete:` (when write is the default): removes every row of `$keys` from the three
/// default tables in one statement (data-modifying WITH, PostgreSQL 15 docs 7.8.4), which
/// `fencecheck probe` runs at its end on the keys it wrote (unless --keep).
inline constexpr std::string_view kDefaultDelete =
    "WITH chunks AS (DELETE FROM fencecheck_chunks WHERE key = ANY($keys) RETURNING 1),\n"
    "     log AS (DELETE FROM fencecheck_accept_log WHERE key = ANY($keys) RETURNING 1),\n"
    "     fence AS (DELETE FROM fencecheck_fence WHERE key = ANY($keys) RETURNING 1)\n"
    "SELECT (SELECT count(*) FROM chunks) + (SELECT count(*) FROM log) + (SELECT count(*) FROM fence) AS rows";

/// The value of `accept_log:` / `high_water:` / `delete:` that says "this resource has none".
inline constexpr std::string_view kNone = "none";

// ---- DSNs

/// `dsn` (a libpq connection string "host=... dbname=..." or URI "postgresql://...") as text fit
/// for messages and logs: parsed by PQconninfoParse (libpq, 34.1.1 "Connection Strings") and
/// written back as key=value pairs of the options it sets, without `password` (and without the
/// password of a URI's user:password@). A DSN libpq cannot parse reads "<a DSN libpq cannot
/// parse>", never its text. Pure; thread-safe.
[[nodiscard]] std::string redact_dsn(std::string_view dsn);

/// True when `dsn` sets a password (password=... or a URI's user:password@). The kind refuses such
/// a DSN: libpq reads the password from PGPASSWORD, ~/.pgpass or a service file (34.15, 34.16,
/// 34.17), so it never has to be in a scenario. False for a DSN libpq cannot parse. Thread-safe.
[[nodiscard]] bool dsn_has_password(std::string_view dsn);

/// For the network lab's relay (docs/architecture.md, "Relays"): the one TCP address a DSN's
/// connections go to: `hostaddr` when set, else `host`, and `port` (libpq's default 5432 when
/// unset). nullopt with *why set when it has none a relay can stand in for: a DSN libpq cannot
/// parse, no host (libpq would use a Unix socket), a Unix-socket directory ("/..." or "@..."), or
/// several hosts or ports (a comma list). Pure; thread-safe.
[[nodiscard]] std::optional<NetAddress> dsn_address(std::string_view dsn, std::string* why);
/// `dsn` with its connections sent to `at`: parsed by PQconninfoParse and written back as
/// key=value pairs with `hostaddr` = at.host and `port` = at.port; every other keyword is kept as
/// written, `host` included, so that ~/.pgpass, TLS name checks (sslmode=verify-full) and Kerberos
/// still see the name the user gave (libpq 34.1.2: hostaddr is used to connect, host for those).
/// Throws std::invalid_argument for a DSN dsn_address() refuses. Thread-safe.
[[nodiscard]] std::string dsn_at(std::string_view dsn, const NetAddress& at);

// ---- Orphans

/// Stops the embedded PostgreSQL server of run directory `run_dir` if one is still running: a
/// harness killed with SIGKILL cannot stop it, and PR_SET_PDEATHSIG alone does not cover it
/// (the kernel clears it when the child changes its uid to the unprivileged postgres user; the
/// kind re-arms it with `setpriv --pdeathsig keep`, but a postmaster killed that way leaves its
/// postmaster.pid and possibly its data directory outside the run directory).
///
/// Finds the cluster at `run_dir/postgres-data`, or where `run_dir/postgres-data.location` says
/// (when the run directory was not traversable by the postgres user, the cluster lives in a
/// directory of its own under the temporary directory); reads its postmaster.pid (PostgreSQL 15
/// docs, 19.3 "Starting the Database Server": the first line is the postmaster's PID); stops that
/// PID only when /proc says it is a `postgres` executable whose working directory is that data
/// directory (the postmaster runs in its data directory), never any other process: SIGINT (fast
/// shutdown, 19.5 "Shutting Down the Server"), then SIGQUIT after 10 s, then SIGKILL after 2 s
/// more. Then removes a cluster directory of its own outside the run directory, and the
/// .location file. Says what it did through spdlog (info). Returns true when no postmaster of the
/// run is left running (none ran, or it is stopped now); false when one survived SIGKILL or the
/// run's files could not be read (then a cluster directory of its own and the .location file are
/// kept, so that the next cleanup retries). Never throws. Not thread-safe with respect to a live
/// instance of the same run (call it for runs whose harness is dead).
[[nodiscard]] bool stop_orphaned_postgres(const std::filesystem::path& run_dir);

/// The PID of run directory `run_dir`'s embedded postmaster while one runs, found and checked as
/// stop_orphaned_postgres finds and checks it (postgres-data, or where postgres-data.location
/// says; a postgres executable whose working directory is that data directory), else nullopt.
/// Stops nothing. Never throws. Thread-safe.
[[nodiscard]] std::optional<int> running_postmaster(const std::filesystem::path& run_dir);

}  // namespace fencecheck::postgres
