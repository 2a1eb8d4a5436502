// fencecheck tests/postgres — what the postgres integration tests share: a run directory per test,
// opening the kind from scenario-like fields, writing self-describing chunks, a plain libpq
// connection for looking at the server, and the two-writer race with a pause (used by
// postgres_kind_test.cpp and postgres_designs_test.cpp). Not thread-safe unless a function says so.
#pragma once

#include <libpq-fe.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../support/remove_at_end.h"
#include "../support/fake_resource_fields.h"
#include "fencecheck/proto/chunk.h"
#include "fencecheck/resources/postgres.h"
#include "fencecheck/resources/resource_kind.h"
#include "fencecheck/resources/writer.h"

namespace fencecheck::pgtest {
namespace fs = std::filesystem;
namespace pg = fencecheck::postgres;
using namespace std::chrono_literals;
using fencecheck::ChunkHeader;
using fencecheck::FencingToken;
using fencecheck::ReadBack;
using fencecheck::ResourceWriter;
using fencecheck::WriteOutcome;
using fencecheck::WriteReply;
using fencecheck::resources::ResourceConfigError;
using fencecheck::resources::ResourceInstance;
using fencecheck::resources::ResourceRunContext;
using fencecheck::resources::ResourceUnavailable;
using fencecheck::testing::FakeFields;

inline const fencecheck::resources::ResourceKind& kind() { return *fencecheck::resources::find_resource_kind("postgres"); }

inline ResourceRunContext context(const fs::path& run_dir) {
  ResourceRunContext ctx;
  ctx.run_dir = run_dir;
  ctx.run_id = "pgtest";
  ctx.log_path = [run_dir](const std::string& name) {
    fs::create_directories(run_dir / "logs");
    return run_dir / "logs" / (name + ".log");
  };
  return ctx;
}

/// A run directory for one test: kept when a test failed (remove_at_end), else removed.
inline fs::path run_dir(const std::string& tag) {
  std::string tmpl = (fs::temp_directory_path() / ("fencecheck-pgtest-" + tag + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return fencecheck::testing::remove_at_end(tmpl);
}

inline std::unique_ptr<ResourceInstance> open_pg(const nlohmann::json& fields, const fs::path& dir) {
  return kind().open(kind().parse(FakeFields(fields)), context(dir));
}

inline std::string chunk_bytes(const std::string& worker, std::int64_t token, const std::string& key, std::int64_t segment,
                        std::int64_t chunk) {
  return fencecheck::encode_chunk(ChunkHeader{worker, token, key, segment, chunk}, 96);
}

inline WriteReply put(ResourceWriter& w, const std::string& key, std::int64_t segment, std::int64_t chunk, std::int64_t token,
               const std::string& writer) {
  return w.write(key, segment, chunk, FencingToken(token), writer, chunk_bytes(writer, token, key, segment, chunk));
}

inline const char* name(WriteOutcome o) {
  switch (o) {
    case WriteOutcome::kAccepted: return "accepted";
    case WriteOutcome::kRejected: return "rejected";
    case WriteOutcome::kUnknown: return "unknown";
    case WriteOutcome::kInvalid: return "invalid";
  }
  return "?";
}

/// A plain libpq connection for the test's own looks at the server (pg_stat_activity, DDL).
struct Conn {
  explicit Conn(const std::string& dsn) : c(PQconnectdb(dsn.c_str())) {
    if (PQstatus(c) != CONNECTION_OK) throw std::runtime_error(std::string("test connect: ") + PQerrorMessage(c));
  }
  ~Conn() { PQfinish(c); }
  /// Runs `sql`; returns the first column of the first row ("" when none). Throws on error.
  std::string value(const std::string& sql) {
    PGresult* r = PQexec(c, sql.c_str());
    const auto st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
      std::string e = PQresultErrorMessage(r);
      PQclear(r);
      throw std::runtime_error("test query '" + sql + "': " + e);
    }
    std::string out = st == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    return out;
  }
  PGconn* c;
};

/// Waits until `pred` holds, checking every 5 ms, up to `bound`: waiting for an event the test
/// cannot be called back for (a server's state), not a guess at how long something takes.
template <typename P>
inline bool eventually(P pred, std::chrono::milliseconds bound = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

inline bool process_alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  auto close = line.rfind(')');
  return !(close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z');
}

inline pid_t postmaster_pid(const fs::path& data_dir) {
  std::ifstream in(data_dir / "postmaster.pid");
  long pid = 0;
  in >> pid;
  return static_cast<pid_t>(pid);
}


/// The paused holder w1's statements sleep `pause` seconds at the point the design's comment
/// names; everyone else's do not. The test holds w1 there until w2 has written, by watching the
/// server (pg_stat_activity's wait_event 'PgSleep'), not by guessing at times.
inline constexpr const char* kPause = "SELECT pg_sleep(CASE WHEN $writer = 'w1' THEN 3 ELSE 0 END)";

struct RaceResult {
  WriteReply w1, w2;
  ReadBack rb;
  bool w1_still_paused_after_w2 = false;
};

inline RaceResult race(ResourceInstance& pgi) {
  RaceResult out;
  const std::string dsn = pgi.endpoint()["dsn"];
  Conn watch(dsn);
  auto w1 = fencecheck::make_resource_writer(pgi.endpoint(), 10000ms);
  auto w2 = fencecheck::make_resource_writer(pgi.endpoint(), 10000ms);
  const std::string paused = "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'";
  std::thread t([&] { out.w1 = put(*w1, "ledger", 0, 0, 6, "w1"); });  // the stale holder: token 6
  const bool w1_paused = eventually([&] { return watch.value(paused) == "1"; });
  if (w1_paused) out.w2 = put(*w2, "ledger", 0, 0, 7, "w2");  // the new holder: token 7
  out.w1_still_paused_after_w2 = watch.value(paused) == "1";
  t.join();
  EXPECT_TRUE(w1_paused) << "w1 never reached its pause";
  out.rb = pgi.readback();
  return out;
}

}  // namespace fencecheck::pgtest
