// fencecheck — internal to the postgres kind and writer: one libpq connection whose every
// operation is bounded by a deadline the client keeps itself (libpq's asynchronous API,
// PostgreSQL 15 docs 34.4 "Asynchronous Command Processing" and 34.1 PQconnectStartParams /
// PQconnectPoll), so a peer that stops answering (a partition dropping packets) cannot block a
// caller past its bound. Not thread-safe: one owner.
//
// libpq is loaded at run time (dlopen "libpq.so.5", Debian's libpq5), not linked: every worker
// links this library, and libpq brings libssl, libcrypto, Kerberos, LDAP and GnuTLS with it
// (about 5.4 MiB of resident memory per process, measured) that a worker writing to any other
// kind never needs. Only a process that writes to PostgreSQL maps it.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fencecheck::postgres::detail {

/// The libpq functions this code calls, resolved from the loaded library.
struct LibPq {
  decltype(&::PQconnectStartParams) PQconnectStartParams = nullptr;
  decltype(&::PQstatus) PQstatus = nullptr;
  decltype(&::PQconnectPoll) PQconnectPoll = nullptr;
  decltype(&::PQsocket) PQsocket = nullptr;
  decltype(&::PQsetNoticeProcessor) PQsetNoticeProcessor = nullptr;
  decltype(&::PQsetnonblocking) PQsetnonblocking = nullptr;
  decltype(&::PQfinish) PQfinish = nullptr;
  decltype(&::PQerrorMessage) PQerrorMessage = nullptr;
  decltype(&::PQsendQuery) PQsendQuery = nullptr;
  decltype(&::PQsendPrepare) PQsendPrepare = nullptr;
  decltype(&::PQsendDescribePrepared) PQsendDescribePrepared = nullptr;
  decltype(&::PQsendQueryPrepared) PQsendQueryPrepared = nullptr;
  decltype(&::PQflush) PQflush = nullptr;
  decltype(&::PQconsumeInput) PQconsumeInput = nullptr;
  decltype(&::PQisBusy) PQisBusy = nullptr;
  decltype(&::PQgetResult) PQgetResult = nullptr;
  decltype(&::PQresultStatus) PQresultStatus = nullptr;
  decltype(&::PQclear) PQclear = nullptr;
  decltype(&::PQresultErrorField) PQresultErrorField = nullptr;
  decltype(&::PQresultErrorMessage) PQresultErrorMessage = nullptr;
  decltype(&::PQcmdTuples) PQcmdTuples = nullptr;
  decltype(&::PQntuples) PQntuples = nullptr;
  decltype(&::PQcmdStatus) PQcmdStatus = nullptr;
  decltype(&::PQgetisnull) PQgetisnull = nullptr;
  decltype(&::PQgetvalue) PQgetvalue = nullptr;
  decltype(&::PQbackendPID) PQbackendPID = nullptr;
  decltype(&::PQconninfoParse) PQconninfoParse = nullptr;
  decltype(&::PQconninfoFree) PQconninfoFree = nullptr;
  decltype(&::PQfreemem) PQfreemem = nullptr;
};

/// libpq, loaded once per process at the first call (thread-safe: a function-local static).
/// nullptr when it cannot be loaded; libpq_error() then says why ("libpq.so.5: cannot open shared
/// object file ...; install Debian's libpq5").
[[nodiscard]] const LibPq* libpq();
[[nodiscard]] const std::string& libpq_error();
/// The loaded library. Only after libpq() returned non-null (a PGconn or PGresult exists only then).
[[nodiscard]] const LibPq& pq();

struct ConnCloser {
  void operator()(PGconn* c) const noexcept;
};
struct ResultFree {
  void operator()(PGresult* r) const noexcept;
};
using ConnPtr = std::unique_ptr<PGconn, ConnCloser>;
using ResultPtr = std::unique_ptr<PGresult, ResultFree>;

/// Parameter type OIDs (src/include/catalog/pg_type.dat).
inline constexpr Oid kOidBool = 16;
inline constexpr Oid kOidBytea = 17;
inline constexpr Oid kOidInt8 = 20;
inline constexpr Oid kOidInt2 = 21;
inline constexpr Oid kOidInt4 = 23;
inline constexpr Oid kOidText = 25;
inline constexpr Oid kOidVarchar = 1043;
inline constexpr Oid kOidBpchar = 1042;
inline constexpr Oid kOidName = 19;
inline constexpr Oid kOidNumeric = 1700;
inline constexpr Oid kOidTextArray = 1009;

/// One connection. Every call that talks to the server takes a timeout; when no complete reply
/// comes within it the connection is closed (its state is unknown) and the call fails with
/// "no reply within N ms".
class Session {
 public:
  /// `conninfo`: what libpq connects with; `shown`: how messages name it (redact_dsn).
  Session(std::string conninfo, std::string shown);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Connects unless connected. False with `error` ("connect to <shown>: ...") on failure.
  bool ensure_connected(std::chrono::milliseconds timeout, std::string& error);
  [[nodiscard]] bool connected() const;
  /// Closes the connection (the next ensure_connected makes a new one).
  void disconnect();
  [[nodiscard]] PGconn* raw() const { return conn_.get(); }

  /// Sends a command with `send` (a PQsend* call returning 1 on success) and collects its results
  /// until libpq has none left or `timeout` passes. Returns the first error result, else the last
  /// result; nullptr with `error` when the command could not be sent or no complete reply came
  /// (then the connection is closed). A result with an error status leaves the connection usable
  /// unless PQstatus says it broke (then it is closed too).
  ResultPtr run(const std::function<int(PGconn*)>& send, std::chrono::milliseconds timeout, std::string& error);

  /// The simple query protocol (PQsendQuery: several statements allowed, no parameters).
  ResultPtr exec(const std::string& sql, std::chrono::milliseconds timeout, std::string& error);
  /// PQsendPrepare.
  ResultPtr prepare(const std::string& name, const std::string& sql, const std::vector<Oid>& types,
                    std::chrono::milliseconds timeout, std::string& error);
  /// PQsendDescribePrepared.
  ResultPtr describe(const std::string& name, std::chrono::milliseconds timeout, std::string& error);
  /// PQsendQueryPrepared with text results.
  ResultPtr exec_prepared(const std::string& name, int n, const char* const* values, const int* lengths,
                          const int* formats, std::chrono::milliseconds timeout, std::string& error);

 private:
  bool wait(short events, std::chrono::steady_clock::time_point deadline);
  std::string conninfo_;
  std::string shown_;
  ConnPtr conn_;
};

/// What to add to a connection error (libpq's text) that libpq's own words leave unexplained:
/// "fe_sendauth: no password supplied" gets the .pgpass hint (an entry matches on
/// host:port:database:user, so a wrong database name finds no password); "" otherwise. Pure.
[[nodiscard]] std::string connect_hint(std::string_view error);

/// A result's error as one line: "ERROR: <message> (SQLSTATE <code>)[; DETAIL: ...][; HINT: ...]".
[[nodiscard]] std::string result_error(const PGresult* res);
/// PQerrorMessage as one line.
[[nodiscard]] std::string conn_error(const PGconn* conn);
/// True for PGRES_COMMAND_OK and PGRES_TUPLES_OK.
[[nodiscard]] bool result_ok(const PGresult* res);
/// The statement's row count: PQntuples for a query, PQcmdTuples for a command; nullopt for a
/// command that reports none (LOCK, SET, BEGIN).
[[nodiscard]] std::optional<std::int64_t> row_count(const PGresult* res);
/// PG_DIAG_STATEMENT_POSITION (1-based, in characters) as a 0-based byte offset into `sql`;
/// nullopt when the error has none.
[[nodiscard]] std::optional<std::size_t> error_byte_offset(const PGresult* res, std::string_view sql);

}  // namespace fencecheck::postgres::detail
