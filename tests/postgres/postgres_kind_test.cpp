// Integration tests of resource kind postgres on a real PostgreSQL: every test starts its own
// embedded server through the kind (Debian's postgresql-15 binaries, as the postgres user when
// run as root) in a fresh run directory, and stops it. Label: integration.
#include <fcntl.h>
#include <libpq-fe.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <latch>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pg_test_util.h"
#include "fencecheck/proto/chunk.h"
#include "fencecheck/resources/postgres.h"
#include "fencecheck/resources/postgres_writer.h"
#include "fencecheck/resources/resource_kind.h"
#include "fencecheck/resources/writer.h"

extern char** environ;

namespace {

using namespace fencecheck::pgtest;  // its namespace aliases and using-declarations (pg_test_util.h)
// ---- the default SQL

TEST(PostgresKind, DefaultSqlKeepsThePerKeyRuleAndReadsBackWhatWasAccepted) {
  const fs::path dir = run_dir("default");
  const auto t0 = std::chrono::steady_clock::now();
  auto pgi = open_pg(nlohmann::json::object(), dir);
  const auto started = std::chrono::steady_clock::now() - t0;
  std::printf("embedded PostgreSQL open (initdb + start + createdb + schema + validation): %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(started).count()));
  EXPECT_TRUE(pgi->healthy());
  const auto ep = pgi->endpoint();
  EXPECT_EQ(ep["kind"], "postgres");
  EXPECT_EQ(ep["write"], nlohmann::json::array({std::string(pg::kDefaultWrite)}));
  EXPECT_EQ(ep["high_water"], pg::kDefaultHighWater);
  EXPECT_NE(pgi->describe().find("(embedded"), std::string::npos) << pgi->describe();

  auto w = fencecheck::make_resource_writer(ep, 5000ms);
  ASSERT_EQ(w->kind(), "postgres");
  struct Step {
    std::string key;
    std::int64_t segment, chunk, token;
    std::string writer;
    WriteOutcome expect;
  };
  const std::vector<Step> steps{
      {"ledger", 0, 0, 5, "w1", WriteOutcome::kAccepted},  // a new key: its first token
      {"ledger", 0, 1, 5, "w1", WriteOutcome::kAccepted},  // the same holder's next chunk, same token
      {"ledger", 0, 0, 7, "w2", WriteOutcome::kAccepted},  // a newer holder
      {"ledger", 0, 1, 6, "w3", WriteOutcome::kRejected},  // below the mark 7: fenced
      {"other", 0, 0, 3, "w4", WriteOutcome::kAccepted},   // another key has its own mark
  };
  for (const auto& s : steps) {
    auto r = put(*w, s.key, s.segment, s.chunk, s.token, s.writer);
    EXPECT_EQ(r.outcome, s.expect) << s.key << "/" << s.chunk << " token " << s.token << ": " << name(r.outcome) << " "
                                   << r.error;
    if (s.expect == WriteOutcome::kRejected) {
      EXPECT_EQ(r.high_water, 7) << "a rejection carries the key's mark";
      EXPECT_NE(r.error.find("0 rows"), std::string::npos) << r.error;
    }
  }
  // Bytes are sent in binary: every byte value survives.
  std::string all(256, '\0');
  for (int i = 0; i < 256; ++i) all[static_cast<std::size_t>(i)] = static_cast<char>(i);
  EXPECT_EQ(w->write("raw", 1, 2, FencingToken(11), "w5", all).outcome, WriteOutcome::kAccepted);

  // Write latency of the default statement on loopback (one connection, 200 sequential writes).
  {
    const auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < 200; ++i) ASSERT_EQ(put(*w, "bench", 0, i, 20, "w6").outcome, WriteOutcome::kAccepted);
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t1).count();
    std::printf("default write: %.0f us per write (200 sequential, fsync on)\n", static_cast<double>(us) / 200.0);
  }

  ReadBack rb = pgi->readback();
  EXPECT_EQ(rb.resource, "postgres");
  EXPECT_EQ(rb.fencing, "per-key (default SQL)");
  ASSERT_EQ(rb.log.size(), 5u + 200u);
  struct Logged {
    std::string key;
    std::int64_t chunk, token;
    std::string writer;
  };
  const std::vector<Logged> want_log{{"ledger", 0, 5, "w1"}, {"ledger", 1, 5, "w1"}, {"ledger", 0, 7, "w2"},
                                     {"other", 0, 3, "w4"}, {"raw", 2, 11, "w5"}};
  for (std::size_t i = 0; i < want_log.size(); ++i) {
    EXPECT_EQ(rb.log[i].seq, static_cast<std::int64_t>(i + 1));
    EXPECT_EQ(rb.log[i].key, want_log[i].key) << i;
    EXPECT_EQ(rb.log[i].chunk, want_log[i].chunk) << i;
    EXPECT_EQ(rb.log[i].token, want_log[i].token) << i;
    EXPECT_EQ(rb.log[i].client, want_log[i].writer) << i;
  }
  std::map<std::string, const fencecheck::StoredChunk*> chunks;
  for (const auto& c : rb.chunks) chunks[c.key + "/" + std::to_string(c.segment) + "/" + std::to_string(c.chunk)] = &c;
  ASSERT_EQ(rb.chunks.size(), 4u + 200u);
  const auto* l0 = chunks.at("ledger/0/0");
  EXPECT_EQ(l0->token, 7);
  EXPECT_EQ(l0->client, "w2");
  EXPECT_EQ(l0->seq, 3);
  EXPECT_EQ(l0->data, chunk_bytes("w2", 7, "ledger", 0, 0));
  const auto* l1 = chunks.at("ledger/0/1");
  EXPECT_EQ(l1->token, 5) << "the rejected token 6 changed nothing";
  EXPECT_EQ(l1->client, "w1");
  EXPECT_EQ(l1->seq, 2);
  auto decoded = fencecheck::decode_chunk(l1->data);
  ASSERT_TRUE(decoded.ok) << decoded.error;
  EXPECT_EQ(decoded.header, (ChunkHeader{"w1", 5, "ledger", 0, 1}));
  EXPECT_EQ(chunks.at("other/0/0")->token, 3);
  EXPECT_EQ(chunks.at("raw/1/2")->data, all);
  EXPECT_EQ(rb.high_water, (std::map<std::string, std::int64_t>{{"bench", 20}, {"ledger", 7}, {"other", 3}, {"raw", 11}}));
  EXPECT_TRUE(rb.rejections.empty()) << "PostgreSQL keeps no record of refused writes";

  const fs::path data = dir / "postgres-data";
  const bool in_run_dir = fs::exists(data / "PG_VERSION");
  const fs::path location = dir / "postgres-data.location";
  EXPECT_NE(in_run_dir, fs::exists(location)) << "the cluster is in the run directory or named by the .location file";
  fs::path own;
  if (!in_run_dir) {
    std::ifstream(location) >> own;
    EXPECT_TRUE(fs::exists(own / "data" / "PG_VERSION")) << own;
  }
  const pid_t pm = postmaster_pid(in_run_dir ? data : own / "data");
  EXPECT_TRUE(process_alive(pm));
  pgi->stop();
  EXPECT_FALSE(process_alive(pm)) << "stop() waits for the postmaster";
  if (!in_run_dir) {
    EXPECT_FALSE(fs::exists(own)) << "a cluster directory of its own is removed at stop()";
  }
  pgi->stop();  // idempotent
}

TEST(PostgresKind, ARunDirectoryThePostgresUserCanReachHoldsTheCluster) {
  const fs::path parent = run_dir("reach");
  ::chmod(parent.c_str(), 0755);
  const fs::path dir = parent / "run";
  fs::create_directories(dir);
  auto pgi = open_pg(nlohmann::json::object(), dir);
  EXPECT_TRUE(fs::exists(dir / "postgres-data" / "PG_VERSION"));
  EXPECT_FALSE(fs::exists(dir / "postgres-data.location"));
  EXPECT_TRUE(fs::exists(dir / "logs" / "postgres.log"));
  EXPECT_TRUE(fs::exists(dir / "logs" / "postgres-initdb.log"));
  pgi->stop();
  EXPECT_TRUE(fs::exists(dir / "postgres-data" / "PG_VERSION")) << "data in the run directory stays with the run";
}

// ---- outcomes the database cannot decide

TEST(PostgresKind, SqlErrorsConnectionFailuresAndTimeoutsAreUnknownNeverRejected) {
  const fs::path dir = run_dir("unknown");
  // A broken schema: the chunk table refuses tokens of 7 and more (a CHECK the write runs into).
  std::string schema(pg::kDefaultSchema);
  schema.replace(schema.find("  token   bigint NOT NULL,\n  writer  text   NOT NULL,\n  data"),
                 std::string("  token   bigint NOT NULL,").size(), "  token   bigint NOT NULL CHECK (token < 7),");
  auto pgi = open_pg({{"schema", schema}}, dir);
  auto w = fencecheck::make_resource_writer(pgi->endpoint(), 3000ms);
  EXPECT_EQ(put(*w, "k", 0, 0, 5, "w1").outcome, WriteOutcome::kAccepted);
  auto r = put(*w, "k", 0, 0, 8, "w2");
  EXPECT_EQ(r.outcome, WriteOutcome::kUnknown) << name(r.outcome);
  EXPECT_NE(r.error.find("violates check constraint"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("SQLSTATE 23514"), std::string::npos) << r.error;
  EXPECT_EQ(pgi->readback().high_water.at("k"), 5) << "the failed statement changed nothing";

  // A table the write needs disappears: every write is unknown, with the server's words.
  Conn admin(pgi->endpoint()["dsn"].get<std::string>());
  admin.value("DROP TABLE fencecheck_accept_log");
  r = put(*w, "k", 0, 1, 6, "w1");
  EXPECT_EQ(r.outcome, WriteOutcome::kUnknown) << name(r.outcome);
  EXPECT_NE(r.error.find("does not exist"), std::string::npos) << r.error;
  admin.value("CREATE TABLE fencecheck_accept_log (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, key text "
              "NOT NULL, segment bigint NOT NULL, chunk bigint NOT NULL, token bigint NOT NULL, writer text NOT NULL)");

  // The server goes away: unknown; when it is back the writer connects again by itself.
  ASSERT_TRUE(pgi->restart());
  r = put(*w, "k", 0, 1, 6, "w1");
  EXPECT_EQ(r.outcome, WriteOutcome::kUnknown) << name(r.outcome) << ": the connection the restart broke";
  std::printf("write on the connection a restart broke: %s\n", r.error.c_str());
  r = put(*w, "k", 0, 1, 6, "w1");
  EXPECT_EQ(r.outcome, WriteOutcome::kAccepted) << name(r.outcome) << " " << r.error;
  pgi->stop();
  r = put(*w, "k", 0, 2, 6, "w1");
  EXPECT_EQ(r.outcome, WriteOutcome::kUnknown) << name(r.outcome);
  r = put(*w, "k", 0, 2, 6, "w1");
  EXPECT_EQ(r.outcome, WriteOutcome::kUnknown) << name(r.outcome);
  EXPECT_NE(r.error.find("connect to"), std::string::npos) << r.error;
}

TEST(PostgresKind, AStatementPastTheTimeoutIsUnknown) {
  const fs::path dir = run_dir("timeout");
  auto pgi = open_pg({{"write", nlohmann::json::array({"SELECT pg_sleep(CASE WHEN $token = 9 THEN 5 ELSE 0 END)",
                                                       std::string(pg::kDefaultWrite)})},
                      {"accept_log", pg::kDefaultAcceptLog},
                      {"high_water", pg::kDefaultHighWater}},
                     dir);
  auto w = fencecheck::make_resource_writer(pgi->endpoint(), 400ms);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = put(*w, "k", 0, 0, 9, "w1");
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.outcome, WriteOutcome::kUnknown) << name(r.outcome);
  EXPECT_NE(r.error.find("statement timeout"), std::string::npos) << r.error;
  EXPECT_LT(took, 2s) << "bounded by the timeout, not by the 5 s sleep";
  auto rb = pgi->readback();
  EXPECT_TRUE(rb.log.empty());
  EXPECT_EQ(put(*w, "k", 0, 0, 10, "w1").outcome, WriteOutcome::kAccepted) << "the session goes on";
}

TEST(PostgresKind, AServerThatStopsAnsweringEndsTheWriteAtTheClientsOwnBound) {
  // A partition that drops packets, played by SIGSTOP on the writer's own backend: the server's
  // statement_timeout cannot fire in a stopped process, so only the client's bound ends the write.
  auto pgi = open_pg(nlohmann::json::object(), run_dir("stalled"));
  auto w = fencecheck::make_resource_writer(pgi->endpoint(), 500ms);
  ASSERT_EQ(put(*w, "k", 0, 0, 5, "w1").outcome, WriteOutcome::kAccepted);
  const int backend = dynamic_cast<fencecheck::PostgresWriter&>(*w).backend_pid();
  ASSERT_GT(backend, 0);
  ASSERT_EQ(::kill(backend, SIGSTOP), 0);
  struct Resume {
    int pid;
    ~Resume() { ::kill(pid, SIGCONT); }
  } resume{backend};
  const auto t0 = std::chrono::steady_clock::now();
  auto r = put(*w, "k", 0, 1, 5, "w1");
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.outcome, WriteOutcome::kUnknown) << name(r.outcome);
  EXPECT_NE(r.error.find("no reply from"), std::string::npos) << r.error;
  EXPECT_GE(took, 500ms);
  EXPECT_LT(took, 1500ms) << "timeout + max(250 ms, timeout/4)";
  EXPECT_FALSE(dynamic_cast<fencecheck::PostgresWriter&>(*w).connected()) << "a connection in an unknown state is dropped";
  ::kill(backend, SIGCONT);
  // The write the client gave up on was in the server's socket buffer: the resumed backend runs
  // it. Unknown was the right answer: it did happen.
  EXPECT_TRUE(eventually([&] { return pgi->readback().log.size() == 2; }))
      << "the abandoned write committed after the backend resumed";
  EXPECT_EQ(put(*w, "other", 0, 0, 6, "w1").outcome, WriteOutcome::kAccepted) << "a new connection";
}

// ---- bad input the database finds

TEST(PostgresKind, StatementsTheDatabaseRefusesAreConfigErrorsAtTheirField) {
  const fs::path dir = run_dir("config");
  try {
    (void)open_pg({{"read_back", "SELECT key, segment, chunk, writer, data FROM fencecheck_chunks"}}, dir);
    FAIL() << "no error";
  } catch (const ResourceConfigError& e) {
    EXPECT_EQ(e.field(), "read_back");
    EXPECT_NE(std::string(e.what()).find("missing token"), std::string::npos) << e.what();
  }
  try {
    (void)open_pg({{"write", nlohmann::json::array({"SELECT 1 WHERE $token > 0",
                                                    "UPDATE fencecheck_chunk\n   SET data = $data WHERE key = $key"})}},
                  dir);
    FAIL() << "no error";
  } catch (const ResourceConfigError& e) {
    EXPECT_EQ(e.field(), "write[1]");
    EXPECT_NE(std::string(e.what()).find("relation \"fencecheck_chunk\" does not exist"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(at line 1, column 8)"), std::string::npos) << e.what();
  }
  try {
    (void)open_pg({{"high_water", "SELECT key, token::text AS token FROM fencecheck_fence"}}, dir);
    FAIL() << "no error";
  } catch (const ResourceConfigError& e) {
    EXPECT_EQ(e.field(), "high_water");
    EXPECT_NE(std::string(e.what()).find("token must be an integer"), std::string::npos) << e.what();
  }
  try {
    (void)open_pg({{"schema", "CREATE TABLE t (x int;"}}, dir);
    FAIL() << "no error";
  } catch (const ResourceConfigError& e) {
    EXPECT_EQ(e.field(), "schema");
    EXPECT_NE(std::string(e.what()).find("syntax error"), std::string::npos) << e.what();
  }
}

TEST(PostgresKind, AnUnreachableDsnIsUnavailableAndNeverShowsThePassword) {
  // A port nothing listens on (bound, then released).
  int port = 0;
  {
    const fs::path dir = run_dir("port");
    auto pgi = open_pg(nlohmann::json::object(), dir);
    const std::string shown = pg::redact_dsn(pgi->endpoint()["dsn"].get<std::string>());
    port = std::stoi(shown.substr(shown.find("port=") + 5));
  }  // stopped: its port is free now
  const std::string dsn = "postgresql://fc:hunter2-secret@127.0.0.1:" + std::to_string(port) + "/app";
  nlohmann::json config{{"dsn", dsn},
                        {"write", std::string(pg::kDefaultWrite)},
                        {"read_back", std::string(pg::kDefaultReadBack)},
                        {"accept_log", "none"},
                        {"high_water", "none"}};  // past parse(), which refuses passwords
  const auto t0 = std::chrono::steady_clock::now();
  try {
    (void)kind().open(config, context(run_dir("unreachable")));
    FAIL() << "no error";
  } catch (const ResourceUnavailable& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find("hunter2"), std::string::npos) << what;
    EXPECT_NE(what.find("host=127.0.0.1"), std::string::npos) << what;
    EXPECT_NE(what.find("port=" + std::to_string(port)), std::string::npos) << what;
    EXPECT_NE(what.find("connection refused"), std::string::npos) << what;  // a closed port refuses at once
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(PostgresKind, AnExternalDsnIsUsedAsGivenWithoutRunningTheSchema) {
  const fs::path dir = run_dir("external");
  auto embedded = open_pg(nlohmann::json::object(), dir);
  const std::string dsn = embedded->endpoint()["dsn"];
  // The default tables exist already; a high_water query with a trailing comment and ';' still
  // serves the writer's per-key lookup.
  auto ext = open_pg({{"dsn", dsn}, {"high_water", "SELECT key, token FROM fencecheck_fence -- the marks\n;"}},
                     run_dir("external-run"));
  EXPECT_NE(ext->describe().find("(external)"), std::string::npos) << ext->describe();
  EXPECT_EQ(ext->endpoint()["dsn"], pg::redact_dsn(dsn)) << "the DSN as libpq parsed it";
  EXPECT_FALSE(ext->restart()) << "the harness does not own an external database";
  auto w = fencecheck::make_resource_writer(ext->endpoint(), 3000ms);
  EXPECT_EQ(put(*w, "x", 0, 0, 4, "w1").outcome, WriteOutcome::kAccepted);
  auto r = put(*w, "x", 0, 1, 3, "w2");
  EXPECT_EQ(r.outcome, WriteOutcome::kRejected) << r.error;
  EXPECT_EQ(r.high_water, 4);
  EXPECT_EQ(ext->readback().high_water.at("x"), 4);
  ext->stop();
  EXPECT_TRUE(embedded->healthy()) << "stopping an external resource leaves the database alone";
}

// ---- restart

TEST(PostgresKind, TheHighWaterMarkSurvivesARestart) {
  const fs::path dir = run_dir("restart");
  auto pgi = open_pg(nlohmann::json::object(), dir);
  const std::string before = pgi->endpoint()["dsn"];
  {
    auto w = fencecheck::make_resource_writer(pgi->endpoint(), 3000ms);
    ASSERT_EQ(put(*w, "k", 0, 0, 9, "w1").outcome, WriteOutcome::kAccepted);
  }
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(pgi->restart());
  std::printf("embedded PostgreSQL restart: %lld ms\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()));
  EXPECT_EQ(pgi->endpoint()["dsn"], before) << "same address after a restart";
  auto w = fencecheck::make_resource_writer(pgi->endpoint(), 3000ms);
  auto r = put(*w, "k", 0, 1, 8, "w2");
  EXPECT_EQ(r.outcome, WriteOutcome::kRejected) << name(r.outcome) << " " << r.error;
  EXPECT_EQ(r.high_water, 9);
  EXPECT_EQ(put(*w, "k", 0, 1, 9, "w1").outcome, WriteOutcome::kAccepted);
  auto rb = pgi->readback();
  EXPECT_EQ(rb.high_water.at("k"), 9);
  ASSERT_EQ(rb.log.size(), 2u);
  EXPECT_EQ(rb.log[0].token, 9);
  EXPECT_EQ(rb.log[1].token, 9);
}

// ---- the check-then-write race on a real database
TEST(PostgresKind, CheckThenWriteLetsALowerTokenLandAfterAHigherOne) {
  const std::string check =
      "SELECT 1 WHERE COALESCE((SELECT token FROM fencecheck_fence WHERE key = $key), 0) <= $token";
  const std::string write =
      "WITH fence AS (INSERT INTO fencecheck_fence (key, token) VALUES ($key, $token)\n"
      "               ON CONFLICT (key) DO UPDATE SET token = EXCLUDED.token RETURNING key),\n"
      "     stored AS (INSERT INTO fencecheck_chunks (key, segment, chunk, token, writer, data)\n"
      "                SELECT $key, $segment, $chunk, $token, $writer, $data FROM fence\n"
      "                ON CONFLICT (key, segment, chunk) DO UPDATE\n"
      "                SET token = EXCLUDED.token, writer = EXCLUDED.writer, data = EXCLUDED.data)\n"
      "INSERT INTO fencecheck_accept_log (key, segment, chunk, token, writer)\n"
      "SELECT $key, $segment, $chunk, $token, $writer FROM fence";
  auto pgi = open_pg({{"write", nlohmann::json::array({check, kPause, write})},
                      {"accept_log", pg::kDefaultAcceptLog},
                      {"high_water", pg::kDefaultHighWater}},
                     run_dir("race-broken"));
  auto r = race(*pgi);
  ASSERT_TRUE(r.w1_still_paused_after_w2) << "w2's write must land inside w1's pause for this test to mean anything";
  EXPECT_EQ(r.w2.outcome, WriteOutcome::kAccepted) << r.w2.error;
  EXPECT_EQ(r.w1.outcome, WriteOutcome::kAccepted) << "the stale holder's check passed before w2 wrote: " << r.w1.error;
  ASSERT_EQ(r.rb.log.size(), 2u);
  EXPECT_EQ(r.rb.log[0].token, 7);
  EXPECT_EQ(r.rb.log[1].token, 6) << "a lower token accepted after a higher one: the race is real";
  EXPECT_EQ(r.rb.high_water.at("ledger"), 6) << "and the mark went backwards";
  ASSERT_EQ(r.rb.chunks.size(), 1u);
  EXPECT_EQ(r.rb.chunks[0].client, "w1");
  EXPECT_EQ(r.rb.chunks[0].token, 6);
}

TEST(PostgresKind, TheDefaultStatementRejectsTheStaleHolderUnderTheSamePause) {
  auto pgi = open_pg({{"write", nlohmann::json::array({kPause, std::string(pg::kDefaultWrite)})},
                      {"accept_log", pg::kDefaultAcceptLog},
                      {"high_water", pg::kDefaultHighWater}},
                     run_dir("race-default"));
  auto r = race(*pgi);
  ASSERT_TRUE(r.w1_still_paused_after_w2);
  EXPECT_EQ(r.w2.outcome, WriteOutcome::kAccepted) << r.w2.error;
  EXPECT_EQ(r.w1.outcome, WriteOutcome::kRejected) << name(r.w1.outcome) << " " << r.w1.error;
  EXPECT_EQ(r.w1.high_water, 7);
  ASSERT_EQ(r.rb.log.size(), 1u);
  EXPECT_EQ(r.rb.log[0].token, 7);
  EXPECT_EQ(r.rb.high_water.at("ledger"), 7);
  ASSERT_EQ(r.rb.chunks.size(), 1u);
  EXPECT_EQ(r.rb.chunks[0].client, "w2");
}

TEST(PostgresKind, TheDefaultStatementNeverAcceptsALowerTokenAfterAHigherOneUnderConcurrency) {
  auto pgi = open_pg(nlohmann::json::object(), run_dir("concurrent"));
  auto a = fencecheck::make_resource_writer(pgi->endpoint(), 5000ms);
  auto b = fencecheck::make_resource_writer(pgi->endpoint(), 5000ms);
  std::mt19937 rng(20261201);
  constexpr int kRounds = 100;
  int rejected = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string key = "k" + std::to_string(round);
    const bool a_high = (rng() & 1) != 0;
    const std::int64_t ta = a_high ? 2 * round + 2 : 2 * round + 1;
    const std::int64_t tb = a_high ? 2 * round + 1 : 2 * round + 2;
    std::latch go(2);
    WriteReply ra, rb;
    std::thread t([&] {
      go.arrive_and_wait();
      rb = put(*b, key, 0, 0, tb, "wb");
    });
    go.arrive_and_wait();
    ra = put(*a, key, 0, 0, ta, "wa");
    t.join();
    const auto& low = ta < tb ? ra : rb;
    const auto& high = ta < tb ? rb : ra;
    ASSERT_EQ(high.outcome, WriteOutcome::kAccepted) << key << ": " << high.error;
    ASSERT_NE(low.outcome, WriteOutcome::kUnknown) << key << ": " << low.error;
    if (low.outcome == WriteOutcome::kRejected) ++rejected;
  }
  auto rb = pgi->readback();
  std::map<std::string, std::int64_t> last;
  for (const auto& w : rb.log) {
    auto [it, fresh] = last.emplace(w.key, w.token);
    EXPECT_TRUE(fresh || it->second <= w.token) << w.key << ": token " << w.token << " accepted after " << it->second;
    it->second = w.token;
  }
  for (int round = 0; round < kRounds; ++round) {
    const std::string key = "k" + std::to_string(round);
    EXPECT_EQ(rb.high_water.at(key), 2 * round + 2);
  }
  for (const auto& c : rb.chunks) EXPECT_EQ(c.token, rb.high_water.at(c.key)) << c.key;
  std::printf("concurrent rounds: %d, lower token rejected (it came second) in %d, accepted first in %d\n", kRounds,
              rejected, kRounds - rejected);
}

// ---- orphans

TEST(PostgresKind, StopOrphanedPostgresStopsOnlyThatRunsPostmaster) {
  // A postmaster.pid naming a process that is not postgres (this test) is left alone.
  const fs::path fake = run_dir("not-postgres");
  fs::create_directories(fake / "postgres-data");
  std::ofstream(fake / "postgres-data" / "postmaster.pid") << ::getpid() << "\n" << (fake / "postgres-data").string() << "\n";
  EXPECT_TRUE(pg::stop_orphaned_postgres(fake)) << "another process's pid file: no postmaster of the run left running";
  EXPECT_FALSE(pg::running_postmaster(fake).has_value()) << "a pid file naming another process is no postmaster";
  EXPECT_TRUE(process_alive(::getpid()));
  EXPECT_TRUE(pg::stop_orphaned_postgres(run_dir("empty")));  // nothing there: nothing happens

#ifdef FENCECHECK_POSTGRES_HOLDER
  // A harness killed with SIGKILL while its embedded server runs.
  const fs::path dir = run_dir("orphan");
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  std::string exe = FENCECHECK_POSTGRES_HOLDER;
  std::string arg = dir.string();
  char* argv[] = {exe.data(), arg.data(), nullptr};
  pid_t holder = 0;
  ASSERT_EQ(::posix_spawn(&holder, exe.c_str(), &fa, nullptr, argv, environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  struct Reap {
    pid_t pid;
    ~Reap() {
      if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  } reap{holder};
  FILE* in = ::fdopen(out[0], "r");
  char line[4096] = {};
  bool ready = false;
  while (!ready && std::fgets(line, sizeof line, in) != nullptr)  // blocks until the holder reports
    ready = std::string_view(line).substr(0, 6) == "ready ";         // (its log lines come first)
  std::fclose(in);
  ASSERT_TRUE(ready) << "the holder did not report";
  long pm_long = 0;
  char data_dir[4000] = {};
  ASSERT_EQ(std::sscanf(line, "ready %ld %3999s", &pm_long, data_dir), 2) << line;
  const auto pm = static_cast<pid_t>(pm_long);
  ASSERT_TRUE(process_alive(pm));
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  reap.pid = 0;
  // setpriv --pdeathsig keep re-armed PR_SET_PDEATHSIG after the uid change: the postmaster dies
  // with the harness.
  EXPECT_TRUE(eventually([&] { return !process_alive(pm); })) << "the postmaster outlived its harness";
  EXPECT_TRUE(fs::exists(fs::path(data_dir) / "postmaster.pid")) << "a SIGKILLed postmaster leaves its lock file";

  // A postmaster that nothing ties to a harness (started as a daemon would be): cleanup stops it.
  // The server refuses to start while the PID in the stale lock file exists, and a zombie exists
  // until its new parent reaps it (this machine's init can take a minute): the test plays the
  // admin who removes a lock file of a dead postmaster.
  if (!eventually([&] { return ::kill(pm, 0) != 0; }, 5s)) fs::remove(fs::path(data_dir) / "postmaster.pid");
  {
    std::string setpriv = "/usr/bin/setpriv";
    std::vector<std::string> args;
    if (::geteuid() == 0) args = {setpriv, "--reuid=postgres", "--regid=postgres", "--init-groups", "--"};
    std::ifstream pidf(fs::path(data_dir) / "postmaster.pid");
    std::string l1, l2, l3, port, sock;
    std::getline(pidf, l1);
    std::getline(pidf, l2);
    std::getline(pidf, l3);
    std::getline(pidf, port);
    std::getline(pidf, sock);
    args.insert(args.end(), {"/usr/lib/postgresql/15/bin/postgres", "-D", data_dir, "-p", port, "-k", sock, "-c",
                             "listen_addresses=127.0.0.1"});
    std::vector<char*> av;
    for (auto& s : args) av.push_back(s.data());
    av.push_back(nullptr);
    const std::string log = (dir / "daemon.log").string();
    posix_spawn_file_actions_t dfa;
    posix_spawn_file_actions_init(&dfa);
    posix_spawn_file_actions_addopen(&dfa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&dfa, STDOUT_FILENO, STDERR_FILENO);
    pid_t daemon = 0;
    ASSERT_EQ(::posix_spawn(&daemon, av[0], &dfa, nullptr, av.data(), environ), 0);
    posix_spawn_file_actions_destroy(&dfa);
    const std::string ping = "host=127.0.0.1 port=" + port + " dbname=postgres user=postgres connect_timeout=2";
    ASSERT_TRUE(eventually([&] { return PQping(ping.c_str()) == PQPING_OK; }, 30s)) << "the daemon did not start";
    ASSERT_EQ(postmaster_pid(data_dir), daemon);
    EXPECT_EQ(pg::running_postmaster(dir), std::optional<int>(daemon)) << "what `fencecheck cleanup` asks first";
    EXPECT_TRUE(pg::stop_orphaned_postgres(dir));
    EXPECT_FALSE(process_alive(daemon)) << "stop_orphaned_postgres returns after the postmaster is gone";
    EXPECT_FALSE(pg::running_postmaster(dir).has_value());
    ::waitpid(daemon, nullptr, 0);
  }
  if (fs::exists(dir / "postgres-data.location")) ADD_FAILURE() << "the .location file is removed";
  if (fs::path(data_dir).parent_path() != dir) {
    EXPECT_FALSE(fs::exists(fs::path(data_dir).parent_path())) << "the cluster's own directory is removed";
  }
#endif
}

}  // namespace
