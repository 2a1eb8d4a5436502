// Issue 34, item 2 ("Your real rows are judged") and "Smaller", against a real PostgreSQL: a
// team's table already holds rows of a key no worker touches (shard us-2: a chunk that is not a
// chunk, a fence mark far above any token of the run). `fencecheck run` and `fencecheck probe`
// point at it as the team's own database (resource.dsn); the rows of us-2 must never be judged,
// only counted as ignored, and the probe must leave nothing of its own behind unless --keep.
// The connection errors of a DSN (a refused port, a .pgpass entry for another database) say what
// happened. Each test starts its own embedded PostgreSQL (pg_test_util.h) and stands it in for
// the team's: the harness sees only a DSN.
#include <stdlib.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pg_test_util.h"
#include "../integration/run_util.h"

namespace {

using namespace fencecheck::pgtest;

/// The team's own rows of shard us-2, which no worker of the run writes: a chunk whose bytes are
/// not a fencecheck chunk (corrupt-chunk if judged), a fence mark above every token the run's
/// etcd hands out (token-regression if judged) and two accept-log rows whose tokens go down.
void seed_foreign_rows(Conn& db) {
  db.value("INSERT INTO fencecheck_fence (key, token) VALUES ('us-2', 900000)");
  db.value("INSERT INTO fencecheck_chunks (key, segment, chunk, token, writer, data) VALUES "
           "('us-2', 0, 0, 900000, 'shipper', convert_to('{\"shipment\": 17}', 'UTF8'))");
  db.value("INSERT INTO fencecheck_accept_log (key, segment, chunk, token, writer) VALUES "
           "('us-2', 0, 0, 900000, 'shipper'), ('us-2', 0, 0, 5, 'shipper')");
}

/// The team's database: an embedded PostgreSQL with the default tables, reached by its DSN only,
/// holding shard us-2's rows when `seeded`.
struct TeamDb {
  explicit TeamDb(const std::string& tag, bool seeded = true)
      : instance(open_pg(nlohmann::json::object(), run_dir(tag))), dsn(instance->endpoint()["dsn"]), db(dsn) {
    if (seeded) seed_foreign_rows(db);
  }
  std::unique_ptr<ResourceInstance> instance;
  std::string dsn;
  Conn db;
};

/// A scenario writing key `ledger` through the team's DSN; `queries` adds resource fields.
fs::path scenario(const fs::path& work, const std::string& dsn, const std::string& queries = "") {
  const fs::path file = work / "scoped.yaml";
  std::ofstream(file) << "name: pg-scoped\n"
                         "lease_ttl: 2s\n"
                         "timeout: 60s\n"
                         "resource:\n"
                         "  kind: postgres\n"
                         "  dsn: \"" << dsn << "\"\n"
                      << queries
                      << "job: {key: ledger, segments: 2, chunks: 2, chunk_interval: 20ms}\n"
                         "workers: [{id: w1}, {id: w2, start_after: {worker: w1, event: job.done}}]\n"
                         "expect: {outcome: safe}\n";
  return file;
}

struct RunOutcome {
  fctest::Result r;
  nlohmann::json verdict;
  nlohmann::json readback;
  std::string html;  ///< report.html
};

RunOutcome run(const fs::path& file, const fs::path& work) {
  RunOutcome o;
  const fs::path root = work / "runs";
  o.r = fctest::run_fencecheck({"run", "--run-root", root.string(), file.string()}, work);
  const fs::path dir = fctest::only_run_dir(root);
  if (dir.empty()) return o;
  o.verdict = nlohmann::json::parse(fctest::slurp(dir / "verdict.json"));
  o.readback = nlohmann::json::parse(fctest::slurp(dir / "readback.json"));
  o.html = fctest::slurp(dir / "report.html");
  return o;
}

std::set<std::string> anomalies(const nlohmann::json& verdict) {
  std::set<std::string> out;
  for (const auto& c : verdict.at("checkers"))
    for (const auto& a : c.at("anomalies")) out.insert(a.at("name").get<std::string>() + " " + a.value("key", ""));
  return out;
}

void expect_us2_ignored_and_run_met(const RunOutcome& o, const nlohmann::json& counts) {
  ASSERT_FALSE(o.verdict.is_null()) << "no run directory; exit " << o.r.code << ": " << o.r.err;
  EXPECT_EQ(o.r.code, 0) << o.r.out << o.r.err;
  EXPECT_EQ(o.verdict.at("verdict"), "valid") << ::testing::PrintToString(anomalies(o.verdict));
  EXPECT_TRUE(o.verdict.at("expectation").at("met")) << o.verdict.at("expectation").dump();
  EXPECT_TRUE(anomalies(o.verdict).empty()) << ::testing::PrintToString(anomalies(o.verdict));
  // Counted and reported, never judged: verdict.json, readback.json and the text summary.
  ASSERT_TRUE(o.verdict.contains("ignored")) << o.verdict.dump(2);
  EXPECT_EQ(o.verdict["ignored"]["keys"], (nlohmann::json{{"us-2", counts}}));
  std::int64_t rows = 0;
  for (const auto& [part, n] : counts.items()) rows += n.get<std::int64_t>();
  EXPECT_EQ(o.verdict["ignored"]["rows"], rows);
  const std::string summary = "ignored " + std::to_string(rows) + " rows of 1 key the run did not write: us-2";
  EXPECT_EQ(o.verdict["ignored"]["summary"], summary);
  EXPECT_NE(o.r.out.find(summary), std::string::npos) << o.r.out;
  EXPECT_NE(o.html.find("Not judged: " + summary), std::string::npos) << "report.html says it too";
  EXPECT_EQ(o.readback.at("ignored").at("keys"), o.verdict["ignored"]["keys"]);
  for (const auto& c : o.readback.at("chunks")) EXPECT_EQ(c.at("key"), "ledger") << c.dump();
  for (const auto& l : o.readback.at("log")) EXPECT_EQ(l.at("key"), "ledger") << l.dump();
  EXPECT_FALSE(o.readback.at("high_water").contains("us-2"));
  EXPECT_TRUE(o.readback.at("high_water").contains("ledger"));
}

TEST(PostgresScoped, TheDefaultQueriesReadOnlyTheRunsKeysAndCountTheTeamsRowsAsIgnored) {
  TeamDb team("scoped-default");
  const std::string& dsn = team.dsn;
  Conn& db = team.db;
  const fs::path work = fctest::fresh_dir("pg-scoped-default");
  const RunOutcome o = run(scenario(work, dsn), work);
  // The defaults take $keys: us-2's rows are not read, and counted by the kind's count queries.
  expect_us2_ignored_and_run_met(o, {{"read_back", 1}, {"accept_log", 2}, {"high_water", 1}});
  EXPECT_EQ(db.value("SELECT count(*) FROM fencecheck_chunks WHERE key = 'us-2'"), "1") << "the team's rows are untouched";
}

TEST(PostgresScoped, UserQueriesWithoutKeysReturnEveryRowAndTheHarnessDropsTheOthers) {
  TeamDb team("scoped-user");
  const std::string& dsn = team.dsn;
  const fs::path work = fctest::fresh_dir("pg-scoped-user");
  const RunOutcome o =
      run(scenario(work, dsn,
                   "  read_back: SELECT key, segment, chunk, token, writer, data FROM fencecheck_chunks\n"
                   "  accept_log: SELECT key, segment, chunk, token, writer FROM fencecheck_accept_log ORDER BY seq\n"
                   "  high_water: SELECT key, token FROM fencecheck_fence\n"),
          work);
  expect_us2_ignored_and_run_met(o, {{"read_back", 1}, {"accept_log", 2}, {"high_water", 1}});
  EXPECT_FALSE(o.verdict["ignored"].contains("not_counted") && !o.verdict["ignored"]["not_counted"].empty());
}

TEST(PostgresScoped, AUserQueryThatTakesKeysLeavesTheOthersUnreadAndSaysTheyWereNotCounted) {
  TeamDb team("scoped-user-keys");
  const std::string& dsn = team.dsn;
  const fs::path work = fctest::fresh_dir("pg-scoped-user-keys");
  const RunOutcome o = run(scenario(work, dsn,
                                    "  read_back: SELECT key, segment, chunk, token, writer, data FROM fencecheck_chunks "
                                    "WHERE key = ANY($keys)\n"),
                           work);
  ASSERT_FALSE(o.verdict.is_null()) << o.r.err;
  EXPECT_EQ(o.r.code, 0) << o.r.out << o.r.err;
  EXPECT_TRUE(anomalies(o.verdict).empty()) << ::testing::PrintToString(anomalies(o.verdict));
  // The default accept_log and high_water counted theirs; the user's read_back could not be.
  EXPECT_EQ(o.verdict["ignored"]["keys"], (nlohmann::json{{"us-2", {{"accept_log", 2}, {"high_water", 1}}}}));
  EXPECT_EQ(o.verdict["ignored"]["not_counted"], nlohmann::json::array({"read_back"}));
  EXPECT_NE(o.r.out.find("rows of other keys not read (not counted) in read_back"), std::string::npos) << o.r.out;
}

// ---- fencecheck probe against the team's database

nlohmann::json probe(const fs::path& work, const std::string& dsn, const std::string& queries,
                     const std::vector<std::string>& extra, fctest::Result& r) {
  const fs::path file = work / "resource.yaml";
  std::ofstream(file) << "resource:\n  kind: postgres\n  dsn: \"" << dsn << "\"\n" << queries;
  std::vector<std::string> args{"probe", "--run-root", (work / "runs").string(), "--rounds", "5", "--json", "-",
                                file.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  r = fctest::run_fencecheck(args, work);
  return nlohmann::json::parse(r.out, nullptr, false);
}

std::string rule_verdict(const nlohmann::json& report, const std::string& rule) {
  for (const auto& r : report.at("rules"))
    if (r.at("rule") == rule) return r.at("verdict").get<std::string>() + ": " + r.at("evidence").get<std::string>();
  return "(no rule " + rule + ")";
}

std::string rows_with_prefix(Conn& db, const std::string& table, const std::string& prefix) {
  return db.value("SELECT count(*) FROM " + table + " WHERE key LIKE '" + prefix + "-%'");
}

TEST(PostgresScoped, TheProbeRemovesEveryRowItWroteAndLeavesTheTeamsRows) {
  TeamDb team("probe-cleanup");
  const std::string& dsn = team.dsn;
  Conn& db = team.db;
  const fs::path work = fctest::fresh_dir("pg-probe-cleanup");
  fctest::Result r;
  const nlohmann::json report = probe(work, dsn, "", {}, r);
  ASSERT_TRUE(report.is_object()) << r.out << r.err;
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const std::string prefix = report.at("key_prefix");
  EXPECT_EQ(prefix.rfind("fencecheck-probe-", 0), 0u) << prefix;
  EXPECT_EQ(report.at("cleanup").at("outcome"), "removed") << report.at("cleanup").dump();
  for (const char* table : {"fencecheck_chunks", "fencecheck_accept_log", "fencecheck_fence"})
    EXPECT_EQ(rows_with_prefix(db, table, prefix), "0") << table;
  EXPECT_EQ(db.value("SELECT count(*) FROM fencecheck_accept_log WHERE key = 'us-2'"), "2") << "the team's rows stay";
  EXPECT_EQ(db.value("SELECT count(*) FROM fencecheck_fence WHERE key = 'us-2'"), "1");
  EXPECT_EQ(rule_verdict(report, "rejection-changes-nothing").rfind("holds", 0), 0u)
      << rule_verdict(report, "rejection-changes-nothing");

  // --keep leaves them, and says so.
  const nlohmann::json kept = probe(work, dsn, "", {"--keep"}, r);
  ASSERT_TRUE(kept.is_object()) << r.out << r.err;
  EXPECT_EQ(kept.at("cleanup").at("outcome"), "kept");
  EXPECT_NE(rows_with_prefix(db, "fencecheck_chunks", kept.at("key_prefix")), "0");
  EXPECT_NE(rows_with_prefix(db, "fencecheck_fence", kept.at("key_prefix")), "0");
}

TEST(PostgresScoped, AProbeOfACustomSchemaWithoutADeleteSaysWhatItLeft) {
  TeamDb team("probe-left", /*seeded=*/false);
  const std::string& dsn = team.dsn;
  Conn& db = team.db;
  // The default tables under the team's own write statement (the default's text with a comment
  // of theirs): no default delete follows a write that is not the default.
  const std::string write = "-- the team's copy\n" + std::string(pg::kDefaultWrite);
  std::string indented;
  for (char c : write) indented += c == '\n' ? std::string("\n    ") : std::string(1, c);
  const fs::path work = fctest::fresh_dir("pg-probe-left");
  fctest::Result r;
  const nlohmann::json report = probe(work, dsn, "  write: |\n    " + indented + "\n", {}, r);
  ASSERT_TRUE(report.is_object()) << r.out << r.err;
  EXPECT_EQ(report.at("cleanup").at("outcome"), "left") << report.at("cleanup").dump();
  EXPECT_NE(report.at("cleanup").at("said").get<std::string>().find("delete"), std::string::npos)
      << report.at("cleanup").dump();
  EXPECT_NE(rows_with_prefix(db, "fencecheck_chunks", report.at("key_prefix")), "0");
}

TEST(PostgresScoped, ARejectionThatChangesNothingOnZeroChunksIsUnknownNotHolds) {
  TeamDb team("probe-zero", /*seeded=*/false);
  const std::string& dsn = team.dsn;
  const fs::path work = fctest::fresh_dir("pg-probe-zero");
  fctest::Result r;
  // A read_back that returns none of the probe's rows (scoped to the team's shards only).
  const nlohmann::json report =
      probe(work, dsn,
            "  read_back: SELECT key, segment, chunk, token, writer, data FROM fencecheck_chunks WHERE key LIKE 'us-%'\n",
            {}, r);
  ASSERT_TRUE(report.is_object()) << r.out << r.err;
  const std::string v = rule_verdict(report, "rejection-changes-nothing");
  EXPECT_EQ(v.rfind("unknown", 0), 0u) << v;
  EXPECT_NE(v.find("no chunk of key"), std::string::npos) << v;
  EXPECT_EQ(r.code, 1) << "an unknown rule is never counted as safe";
}

// ---- connection errors

TEST(PostgresScoped, APortThatRefusesSaysConnectionRefusedAtOnce) {
  int port = 0;
  {
    auto pgi = open_pg(nlohmann::json::object(), run_dir("refused-port"));
    const std::string shown = pg::redact_dsn(pgi->endpoint()["dsn"].get<std::string>());
    port = std::stoi(shown.substr(shown.find("port=") + 5));
  }  // stopped: nothing listens on its port now
  const auto t0 = std::chrono::steady_clock::now();
  try {
    (void)open_pg({{"dsn", "host=127.0.0.1 port=" + std::to_string(port) + " dbname=app"}}, run_dir("refused"));
    FAIL() << "no error";
  } catch (const ResourceUnavailable& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("connection refused"), std::string::npos) << what;
    EXPECT_EQ(what.find("no response within 10 s"), std::string::npos) << what;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(PostgresScoped, APgpassEntryForAnotherDatabaseGetsTheHint) {
  TeamDb server("pgpass", /*seeded=*/false);
  const fs::path dir = run_dir("pgpass-file");
  const std::string shown = pg::redact_dsn(server.dsn);
  const std::string port = shown.substr(shown.find("port=") + 5, shown.find(' ', shown.find("port=")) - shown.find("port=") - 5);
  Conn& db = server.db;
  // A least-privilege role with a password, and the server asking for it over TCP (first match).
  db.value("CREATE ROLE fc_app LOGIN PASSWORD 'app-secret'");
  db.value("CREATE DATABASE orders OWNER fc_app");
  const std::string hba = db.value("SHOW hba_file");
  {
    std::ifstream in(hba);
    std::stringstream rest;
    rest << in.rdbuf();
    std::ofstream(hba, std::ios::trunc) << "host all fc_app 127.0.0.1/32 scram-sha-256\n" << rest.str();
  }
  db.value("SELECT pg_reload_conf()");
  // The team's .pgpass names their database, `orders`; the scenario names `order` (a typo).
  const fs::path pgpass = dir / "pgpass";
  std::ofstream(pgpass) << "127.0.0.1:" << port << ":orders:fc_app:app-secret\n";
  fs::permissions(pgpass, fs::perms::owner_read | fs::perms::owner_write);
  ASSERT_EQ(::setenv("PGPASSFILE", pgpass.c_str(), 1), 0);
  // The server asks fc_app for a password now (the reload took effect), and the right database
  // name finds it in the file.
  const std::string right = "host=127.0.0.1 port=" + port + " dbname=orders user=fc_app sslmode=disable";
  EXPECT_TRUE(eventually([&] {
    PGconn* c = PQconnectdb((right + " passfile=/dev/null").c_str());
    const bool asks = PQstatus(c) != CONNECTION_OK;
    PQfinish(c);
    return asks;
  })) << "the server never asked fc_app for a password";
  {
    PGconn* c = PQconnectdb(right.c_str());
    EXPECT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
    PQfinish(c);
  }
  try {
    (void)open_pg({{"dsn", "host=127.0.0.1 port=" + port + " dbname=order user=fc_app sslmode=disable"}},
                  run_dir("pgpass-wrong"));
    ADD_FAILURE() << "no error";
  } catch (const ResourceUnavailable& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no password supplied"), std::string::npos) << what;
    EXPECT_NE(what.find("~/.pgpass entries match host:port:database:user"), std::string::npos) << what;
    EXPECT_NE(what.find("check the database name"), std::string::npos) << what;
  }
  ::unsetenv("PGPASSFILE");
}

}  // namespace
