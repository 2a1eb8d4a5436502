// fencecheck bench — what the fence predicate costs on a real PostgreSQL (issue 12's figure): on ONE
// embedded PostgreSQL 15 opened through the postgres resource kind (its default schema and
// durability: fsync on, synchronous_commit on), the kind's default write (a per-key fence row,
// `WHERE fence.token <= EXCLUDED.token`: docs/resource-postgres.md, "The defaults") against the
// same statement with that one line removed (design (a) of the same document: same tables, same
// CTE, same upserts, no comparison), both through the workers' own writer (make_resource_writer:
// prepared statements, one connection per writer, one writer per client thread).
//
// Each case (a number of concurrent clients, each writing its own key or all one shared key) runs
// the two statements in alternating slices, A B B A A B B A ... (as bench_store.cpp), each slice a
// closed loop of FENCECHECK_BENCH_PG_SLICE_MS, after one unmeasured slice of each; both statements
// write the same keys and chunk slots with the same token, so the database's state (table sizes,
// dead tuples, autovacuum) is shared. The goal is judged on the median of the per-pair ratios
// fenced / unfenced (writes per second), which a disk stall in one slice cannot move; the
// quartiles show the noise.
//
// Short slices, many of them, and a control: on this shared machine the disk's fdatasync latency
// switches between ~0.3 ms and ~4 ms for seconds at a time with the neighbours' I/O, and one slow
// fsync in a slice of 0.3 ms writes moves that slice's rate by percents. Pairs of 200 ms slices
// sit inside one such period far more often than pairs of 1 s; trial A/A runs (the same statement
// on both sides) still put the median of 12 pairs of 1 s, and of 24 of 0.5 s, 5-10 % away from 1.
// So each case is followed by an A/A control measured the same way (the fenced statement on two
// sets of connections): a figure no further from 1 than its control is the method's noise, not
// the predicate's cost. FENCECHECK_BENCH_PG_CONTROL=off skips it. And a cross-check with the
// tightest pairing there is: each client alternating the two statements write by write on two
// connections for FENCECHECK_BENCH_PG_INTERLEAVED_MS (default 8000; 0 skips it), each write's
// latency booked to its statement (in a closed loop, throughput is the inverse of mean latency).
//
// Chunks are 4 KiB, built as the worker builds them (fencecheck/proto/chunk.h: a self-describing
// header, then 'x' padding), which PostgreSQL's TOAST compresses (pglz): the stored row is small,
// so the statement's own work is the largest share of a write it can be. FENCECHECK_BENCH_PG_PAYLOAD
// =random pads with incompressible bytes instead.
//
// Usage: bench_postgres [--out FILE.json]. Environment: FENCECHECK_BENCH_PG_SLICES (slices per
// side, default 60), FENCECHECK_BENCH_PG_SLICE_MS (default 200), FENCECHECK_BENCH_PG_CLIENTS
// (default "1,4,16"), FENCECHECK_BENCH_PG_SHARED (clients of the shared-key cases, default "16";
// "" for none), FENCECHECK_BENCH_PG_CONTROL (on / off), FENCECHECK_BENCH_PG_PAYLOAD (worker /
// random), FENCECHECK_BENCH_TMP (the run directory's parent: a real disk). Prints a markdown table
// on stdout (logs on stderr); exit 0 when it measured (whether or not the goal was met), 1 when it
// could not. FENCECHECK_BENCH_PG_NO_DISK=off skips the supplementary case without the disk wait
// (one client, synchronous_commit off in its sessions). About 4.5 minutes with the defaults.
#include <libpq-fe.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "bench_util.h"
#include "fencecheck/proto/chunk.h"
#include "fencecheck/resources/postgres.h"
#include "fencecheck/resources/resource_kind.h"
#include "fencecheck/resources/writer.h"

namespace fb = fencecheck::bench;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kChunkBytes = 4096;
constexpr std::int64_t kToken = 7;        // one holder's token: every write is accepted by both statements
constexpr std::int64_t kSlotsPerClient = 64;  // chunk slots each client cycles through (upserts: warm-up writes each once)
constexpr long kGoalPermille = 970;       // fenced / unfenced >= 0.970, compared in integer per mille
constexpr const char* kPredicate = "  WHERE fence.token <= EXCLUDED.token\n";

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : fallback;
}

std::vector<int> int_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(std::stoi(item));
  return out;
}

std::vector<std::string> loadavg() {
  std::ifstream in("/proc/loadavg");
  std::vector<std::string> out(3);
  in >> out[0] >> out[1] >> out[2];
  return out;
}

/// The kind's default statement without its fence predicate (one line); throws if the default no
/// longer has that line, so this benchmark cannot silently compare a statement with itself.
std::string unfenced_write() {
  std::string sql(fencecheck::postgres::kDefaultWrite);
  const auto at = sql.find(kPredicate);
  if (at == std::string::npos || sql.find(kPredicate, at + 1) != std::string::npos)
    throw std::runtime_error("the default write no longer holds exactly one line '" + std::string(kPredicate) + "'");
  sql.erase(at, std::string(kPredicate).size());
  return sql;
}

/// A 4 KiB chunk as the worker writes it, or with incompressible padding after the header.
std::string chunk_bytes(const std::string& writer, const std::string& key, std::int64_t segment, std::int64_t chunk,
                        bool random_payload) {
  std::string bytes = fencecheck::encode_chunk(fencecheck::ChunkHeader{writer, kToken, key, segment, chunk}, kChunkBytes);
  if (random_payload) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(segment * 1000003 + chunk));
    const auto header_end = bytes.find('x');
    for (std::size_t i = header_end == std::string::npos ? bytes.size() : header_end; i < bytes.size(); ++i)
      bytes[i] = static_cast<char>('!' + rng() % 90);  // printable, so the bytes stay valid text as well
  }
  return bytes;
}

/// The server's durability settings, as it reports them (SHOW), and its version.
nlohmann::json server_settings(const std::string& dsn) {
  nlohmann::json out = nlohmann::json::object();
  PGconn* c = PQconnectdb(dsn.c_str());
  if (PQstatus(c) == CONNECTION_OK) {
    for (const char* name : {"server_version", "fsync", "synchronous_commit", "wal_sync_method", "full_page_writes",
                             "commit_delay", "shared_buffers", "max_connections"}) {
      PGresult* r = PQexec(c, (std::string("SHOW ") + name).c_str());
      if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) out[name] = PQgetvalue(r, 0, 0);
      PQclear(r);
    }
  }
  PQfinish(c);
  return out;
}

const char* outcome_name(fencecheck::WriteOutcome o) {
  switch (o) {
    case fencecheck::WriteOutcome::kAccepted: return "accepted";
    case fencecheck::WriteOutcome::kRejected: return "rejected";
    case fencecheck::WriteOutcome::kUnknown: return "unknown";
    case fencecheck::WriteOutcome::kInvalid: return "invalid";
  }
  return "?";
}

/// `resource: {kind: postgres}` with no field of its own: what the scenario loader hands the kind's
/// parse() for that mapping. parse() only asks has() of each field; anything else is a bug here.
class NoFields final : public fencecheck::KindFields {
 public:
  std::string file() const override { return "bench_postgres"; }
  bool has(std::string_view) const override { return false; }
  std::string string(std::string_view name) const override { fail(name, "absent"); }
  std::vector<std::string> string_list(std::string_view name) const override { fail(name, "absent"); }
  std::int64_t integer(std::string_view name, std::int64_t, std::int64_t) const override { fail(name, "absent"); }
  std::chrono::nanoseconds duration(std::string_view name) const override { fail(name, "absent"); }
  bool boolean(std::string_view name) const override { fail(name, "absent"); }
  std::chrono::nanoseconds duration_or_zero(std::string_view name) const override { fail(name, "absent"); }
  double percentage(std::string_view name, double, double, std::string_view) const override { fail(name, "absent"); }
  std::vector<std::pair<std::string, std::string>> env_map(std::string_view name) const override { fail(name, "absent"); }
  std::filesystem::path base_dir() const override { return "."; }
  std::size_t choice(std::string_view name, const std::vector<std::string_view>&, std::string_view) const override {
    fail(name, "absent");
  }
  [[noreturn]] void fail(std::string_view name, const std::string& message,
                         std::optional<std::size_t> = std::nullopt) const override {
    throw std::logic_error("resource." + std::string(name) + ": " + message);
  }
};

/// The two statements do differ where they should: on a key of its own, the fenced write refuses a
/// lower token after a higher one, the unfenced one accepts it.
nlohmann::json sanity(const nlohmann::json& fenced_ep, const nlohmann::json& unfenced_ep) {
  auto f = fencecheck::make_resource_writer(fenced_ep, 10s);
  auto u = fencecheck::make_resource_writer(unfenced_ep, 10s);
  auto put = [](fencecheck::ResourceWriter& w, std::int64_t token, std::int64_t chunk) {
    const std::string key = "bench-sanity";
    return w.write(key, 0, chunk, fencecheck::FencingToken(token), "sanity",
                   fencecheck::encode_chunk(fencecheck::ChunkHeader{"sanity", token, key, 0, chunk}, kChunkBytes));
  };
  nlohmann::json out;
  out["fenced_token_5"] = outcome_name(put(*f, 5, 0).outcome);
  out["fenced_token_4_after_5"] = outcome_name(put(*f, 4, 1).outcome);
  out["unfenced_token_3_after_5"] = outcome_name(put(*u, 3, 2).outcome);
  out["ok"] = out["fenced_token_5"] == "accepted" && out["fenced_token_4_after_5"] == "rejected" &&
              out["unfenced_token_3_after_5"] == "accepted";
  return out;
}

struct Side {
  std::vector<std::unique_ptr<fencecheck::ResourceWriter>> writers;  // one per client thread
  fb::LoadResult total;
  std::vector<double> slice_rate;
  std::vector<std::string> errors;  // the first few failed writes' messages
};

struct Case {
  int clients = 1;
  bool shared_key = false;
};

/// One comparison: side A (endpoint_a) against side B (endpoint_b), each with its own writers (one
/// per client), in alternating slices; ratio = B / A. Returns {"a": {...}, "b": {...}, ratio_*}.
nlohmann::json compare(const Case& c, const nlohmann::json& endpoint_a, const nlohmann::json& endpoint_b, int slices,
                       std::chrono::milliseconds slice, bool random_payload) {
  Side side[2];
  const nlohmann::json* ep[2] = {&endpoint_a, &endpoint_b};
  auto key_of = [&](int client) {
    return c.shared_key ? std::string("shared") : fb::numbered(fb::numbered("d", c.clients) + "-k", client);
  };
  auto segment_of = [&](int client) { return c.shared_key ? static_cast<std::int64_t>(client) : std::int64_t{0}; };
  // Payloads built once per client and slot (outside the timed loop), shared by both sides.
  std::vector<std::vector<std::string>> payload(static_cast<std::size_t>(c.clients));
  for (int i = 0; i < c.clients; ++i)
    for (std::int64_t s = 0; s < kSlotsPerClient; ++s)
      payload[static_cast<std::size_t>(i)].push_back(
          chunk_bytes(fb::numbered("c", i), key_of(i), segment_of(i), s, random_payload));
  std::mutex err_mu;
  for (int which = 0; which < 2; ++which) {
    for (int i = 0; i < c.clients; ++i) {
      side[which].writers.push_back(fencecheck::make_resource_writer(*ep[which], 10s));
      // Connect, prepare, and write every slot once (the upserts of the timed slices then find
      // their rows): outside the measurement.
      for (std::int64_t s = 0; s < kSlotsPerClient; s += which == 0 ? 1 : kSlotsPerClient) {
        const auto r = side[which].writers.back()->write(key_of(i), segment_of(i), s, fencecheck::FencingToken(kToken),
                                                         fb::numbered("c", i), payload[static_cast<std::size_t>(i)][static_cast<std::size_t>(s)]);
        if (r.outcome != fencecheck::WriteOutcome::kAccepted)
          throw std::runtime_error(std::string("warm-up write ") + outcome_name(r.outcome) + ": " + r.error);
      }
    }
    side[which].slice_rate.assign(static_cast<std::size_t>(slices), 0.0);
  }
  auto run = [&](int which, int i) {
    Side& sd = side[which];
    const auto r = fb::run_closed_loop(c.clients, slice, [&](int client, std::int64_t n) {
      const auto s = n % kSlotsPerClient;
      const auto reply = sd.writers[static_cast<std::size_t>(client)]->write(
          key_of(client), segment_of(client), s, fencecheck::FencingToken(kToken), fb::numbered("c", client),
          payload[static_cast<std::size_t>(client)][static_cast<std::size_t>(s)]);
      if (reply.outcome == fencecheck::WriteOutcome::kAccepted) return true;
      const std::lock_guard lock(err_mu);
      if (sd.errors.size() < 5) sd.errors.push_back(std::string(outcome_name(reply.outcome)) + ": " + reply.error);
      return false;
    });
    if (i < 0) return;  // a warm-up slice: not counted
    sd.slice_rate[static_cast<std::size_t>(i)] = r.seconds > 0 ? static_cast<double>(r.calls) / r.seconds : 0.0;
    sd.total.merge(r);
  };
  // One unmeasured slice of each first: the connections' first executions of the prepared
  // statement, the client threads' first run, and (in the first case) the new server's own start-up
  // I/O, which slowed the first seconds 5-10x in trial runs.
  run(0, -1);
  run(1, -1);
  for (int i = 0; i < slices; ++i) {
    const bool a_first = (i % 4 == 0) || (i % 4 == 3);  // A B, B A, B A, A B, ...
    run(a_first ? 0 : 1, i);
    run(a_first ? 1 : 0, i);
  }
  std::vector<double> paired;
  for (int i = 0; i < slices; ++i)
    if (side[0].slice_rate[static_cast<std::size_t>(i)] > 0)
      paired.push_back(side[1].slice_rate[static_cast<std::size_t>(i)] / side[0].slice_rate[static_cast<std::size_t>(i)]);
  const double median = fb::quantile(paired, 0.50);
  nlohmann::json out;
  for (int which = 0; which < 2; ++which) {
    const auto& t = side[which].total;
    nlohmann::json s;
    s["writes"] = t.calls;
    s["failures"] = t.failures;
    s["seconds"] = t.seconds;
    s["writes_per_s"] = t.seconds > 0 ? static_cast<double>(t.calls) / t.seconds : 0.0;
    s["p50_ms"] = fb::quantile(t.latencies_us, 0.50) / 1000.0;
    s["p99_ms"] = fb::quantile(t.latencies_us, 0.99) / 1000.0;
    s["slice_writes_per_s"] = side[which].slice_rate;
    s["errors"] = side[which].errors;
    out[which == 0 ? "a" : "b"] = s;
  }
  const double a = out["a"]["writes_per_s"], b = out["b"]["writes_per_s"];
  out["ratio_pooled"] = a > 0 ? b / a : 0.0;
  const double a50 = out["a"]["p50_ms"], b50 = out["b"]["p50_ms"];
  out["p50_ratio"] = b50 > 0 ? a50 / b50 : 0.0;  // as a rate: A's median latency over B's
  out["ratio_paired"] = paired;
  out["ratio_median"] = median;
  out["ratio_q1"] = fb::quantile(paired, 0.25);
  out["ratio_q3"] = fb::quantile(paired, 0.75);
  out["ratio_min"] = paired.empty() ? 0.0 : *std::min_element(paired.begin(), paired.end());
  out["ratio_max"] = paired.empty() ? 0.0 : *std::max_element(paired.begin(), paired.end());
  out["clean"] = side[0].total.failures == 0 && side[1].total.failures == 0 && !paired.empty();
  return out;
}

/// The tightest pairing there is, as a cross-check of the slices: every client thread holds a
/// writer of each statement and alternates them write by write (A B B A ...), for `duration`; each
/// write's latency is booked to its statement. In a closed loop a statement's throughput is the
/// inverse of its mean latency, so fenced / unfenced = mean unfenced latency / mean fenced latency;
/// a disk period or a neighbour's burst hits both within milliseconds, and with several clients
/// the two statements share the same commits' fsyncs.
nlohmann::json interleaved(const Case& c, const nlohmann::json& fenced, const nlohmann::json& unfenced,
                           std::chrono::milliseconds duration, bool random_payload) {
  const nlohmann::json* ep[2] = {&unfenced, &fenced};
  auto key_of = [&](int client) {
    return c.shared_key ? std::string("shared") : fb::numbered(fb::numbered("d", c.clients) + "-k", client);
  };
  auto segment_of = [&](int client) { return c.shared_key ? static_cast<std::int64_t>(client) : std::int64_t{0}; };
  std::vector<std::vector<std::string>> payload(static_cast<std::size_t>(c.clients));
  std::vector<std::unique_ptr<fencecheck::ResourceWriter>> writers[2];
  for (int i = 0; i < c.clients; ++i) {
    for (std::int64_t s = 0; s < kSlotsPerClient; ++s)
      payload[static_cast<std::size_t>(i)].push_back(chunk_bytes(fb::numbered("c", i), key_of(i), segment_of(i), s, random_payload));
    for (int which = 0; which < 2; ++which) {
      writers[which].push_back(fencecheck::make_resource_writer(*ep[which], 10s));
      const auto r = writers[which].back()->write(key_of(i), segment_of(i), 0, fencecheck::FencingToken(kToken),
                                                  fb::numbered("c", i), payload[static_cast<std::size_t>(i)][0]);
      if (r.outcome != fencecheck::WriteOutcome::kAccepted)
        throw std::runtime_error(std::string("warm-up write ") + outcome_name(r.outcome) + ": " + r.error);
    }
  }
  // lat[which][client]: each thread appends only to its own vectors.
  std::vector<std::vector<double>> lat[2];
  for (auto& l : lat) l.resize(static_cast<std::size_t>(c.clients));
  const auto r = fb::run_closed_loop(c.clients, duration, [&](int client, std::int64_t n) {
    const int which = (n % 4 == 0 || n % 4 == 3) ? 0 : 1;
    const auto s = (n / 2) % kSlotsPerClient;
    const auto t0 = std::chrono::steady_clock::now();
    const auto reply = writers[which][static_cast<std::size_t>(client)]->write(
        key_of(client), segment_of(client), s, fencecheck::FencingToken(kToken), fb::numbered("c", client),
        payload[static_cast<std::size_t>(client)][static_cast<std::size_t>(s)]);
    const auto t1 = std::chrono::steady_clock::now();
    if (reply.outcome != fencecheck::WriteOutcome::kAccepted) return false;
    lat[which][static_cast<std::size_t>(client)].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    return true;
  });
  nlohmann::json out;
  double mean[2] = {0, 0};
  double p50[2] = {0, 0};
  for (int which = 0; which < 2; ++which) {
    std::vector<double> all;
    for (const auto& l : lat[which]) all.insert(all.end(), l.begin(), l.end());
    double sum = 0;
    for (double v : all) sum += v;
    mean[which] = all.empty() ? 0.0 : sum / static_cast<double>(all.size());
    p50[which] = fb::quantile(all, 0.50);
    nlohmann::json side;
    side["writes"] = all.size();
    side["mean_ms"] = mean[which] / 1000.0;
    side["p50_ms"] = p50[which] / 1000.0;
    side["p99_ms"] = fb::quantile(all, 0.99) / 1000.0;
    out[which == 0 ? "unfenced" : "fenced"] = side;
  }
  out["seconds"] = r.seconds;
  out["failures"] = r.failures;
  out["writes_per_s"] = r.seconds > 0 ? static_cast<double>(r.calls) / r.seconds : 0.0;
  out["ratio_mean_latency"] = mean[1] > 0 ? mean[0] / mean[1] : 0.0;  // fenced / unfenced as a rate
  out["ratio_p50_latency"] = p50[1] > 0 ? p50[0] / p50[1] : 0.0;
  return out;
}

/// A case: unfenced (A) against fenced (B), the figure; then, unless `control` is false, fenced
/// against fenced on two sets of connections (an A/A control: the method's own noise and bias,
/// measured the same way right after).
nlohmann::json run_case(const Case& c, const nlohmann::json& fenced, const nlohmann::json& unfenced, int slices,
                        std::chrono::milliseconds slice, bool random_payload, bool control,
                        std::chrono::milliseconds interleave) {
  nlohmann::json out = compare(c, unfenced, fenced, slices, slice, random_payload);
  out["clients"] = c.clients;
  out["keys"] = c.shared_key ? "shared" : "distinct";
  out["unfenced"] = out["a"];
  out["fenced"] = out["b"];
  out.erase("a");
  out.erase("b");
  out["met"] = out["clean"].get<bool>() && std::lround(out["ratio_median"].get<double>() * 1000) >= kGoalPermille;
  if (control) out["control"] = compare(c, fenced, fenced, slices, slice, random_payload);
  if (interleave.count() > 0) out["interleaved"] = interleaved(c, fenced, unfenced, interleave, random_payload);
  return out;
}

std::string num(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) out_path = argv[++i];
    else {
      std::cerr << "usage: bench_postgres [--out FILE.json]\n";
      return 2;
    }
  }
  // The kind's log lines (the embedded server's start) go to stderr: stdout is the table.
  spdlog::set_default_logger(spdlog::stderr_color_mt("bench_postgres"));
  const int slices = std::max(2, std::stoi(env_or("FENCECHECK_BENCH_PG_SLICES", "60")));
  const auto slice = std::chrono::milliseconds(std::max(50, std::stoi(env_or("FENCECHECK_BENCH_PG_SLICE_MS", "200"))));
  const bool random_payload = env_or("FENCECHECK_BENCH_PG_PAYLOAD", "worker") == "random";
  const bool control = env_or("FENCECHECK_BENCH_PG_CONTROL", "on") != "off";
  const bool no_disk = env_or("FENCECHECK_BENCH_PG_NO_DISK", "on") != "off";
  const auto interleave = std::chrono::milliseconds(std::max(0, std::stoi(env_or("FENCECHECK_BENCH_PG_INTERLEAVED_MS", "8000"))));
  std::vector<Case> cases;
  for (int n : int_list(env_or("FENCECHECK_BENCH_PG_CLIENTS", "1,4,16"))) cases.push_back({n, false});
  for (int n : int_list(env_or("FENCECHECK_BENCH_PG_SHARED", "16"))) cases.push_back({n, true});

  nlohmann::json result;
  result["bench"] = "bench_postgres";
  result["goal"] = "fenced / unfenced writes per second >= 0.97 (median of paired slices; integer per mille >= 970)";
  result["chunk_bytes"] = kChunkBytes;
  result["payload"] = random_payload ? "random (incompressible padding)" : "worker (fencecheck/proto/chunk.h: header + 'x' padding)";
  result["slices_per_side"] = slices;
  result["slice_ms"] = slice.count();
  result["interleaved_ms"] = interleave.count();
  result["control"] = control ? "each case is followed by an A/A control: the fenced statement on both sides, two sets of connections"
                              : "off";
  result["load_start"] = loadavg();
  const auto t0 = std::chrono::steady_clock::now();
  int rc = 0;
  std::unique_ptr<fencecheck::resources::ResourceInstance> pg;
  try {
    fb::TempDir dir("bench-postgres");
    const auto& kind = *fencecheck::resources::find_resource_kind("postgres");
    const auto config = kind.parse(NoFields());  // resource: {kind: postgres}
    fencecheck::resources::ResourceRunContext ctx;
    ctx.run_dir = dir.path();
    ctx.run_id = "bench";
    ctx.log_path = [d = dir.path()](const std::string& name) {
      fs::create_directories(d / "logs");
      return d / "logs" / (name + ".log");
    };
    const auto open0 = std::chrono::steady_clock::now();
    pg = kind.open(config, ctx);
    result["open_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - open0).count();
    result["instance"] = pg->describe();
    const nlohmann::json fenced = pg->endpoint();
    nlohmann::json unfenced = fenced;  // the same DSN and endpoint, our own write list
    unfenced["write"] = nlohmann::json::array({unfenced_write()});
    if (fenced["write"] != nlohmann::json::array({std::string(fencecheck::postgres::kDefaultWrite)}))
      throw std::runtime_error("the kind's endpoint does not carry the default write statement");
    result["statement_fenced"] = std::string(fencecheck::postgres::kDefaultWrite);
    result["statement_unfenced"] = unfenced_write();
    result["server"] = server_settings(fenced.at("dsn").get<std::string>());
    result["sanity"] = sanity(fenced, unfenced);
    if (!result["sanity"]["ok"].get<bool>()) throw std::runtime_error("sanity check failed: " + result["sanity"].dump());
    for (const auto& c : cases) {
      std::cerr << "== bench_postgres: " << c.clients << " client(s), " << (c.shared_key ? "one shared key" : "a key each")
                << ", " << slices << " slices per side of " << slice.count() << " ms\n";
      result["cases"].push_back(run_case(c, fenced, unfenced, slices, slice, random_payload, control, interleave));
      const auto& r = result["cases"].back();
      std::cerr << "   unfenced " << num(r["unfenced"]["writes_per_s"], 0) << "/s, fenced " << num(r["fenced"]["writes_per_s"], 0)
                << "/s, paired median " << num(r["ratio_median"], 3);
      if (control) std::cerr << "; A/A control's paired median " << num(r["control"]["ratio_median"], 3);
      if (r.contains("interleaved"))
        std::cerr << "; interleaved write by write: mean latency ratio " << num(r["interleaved"]["ratio_mean_latency"], 3);
      std::cerr << "\n";
    }
    // Without waiting for the disk: the same comparison, one client, in sessions whose commits do
    // not wait for their WAL flush (synchronous_commit=off for these connections only, through the
    // DSN's options; the server and its fsync unchanged). What is left of a write is CPU, the
    // predicate's largest possible share, and the disk's noise is gone: bench_store's "decision
    // without the disk" for PostgreSQL. Not part of the goal (which is at the default durability).
    if (no_disk) {
      nlohmann::json f2 = fenced, u2 = unfenced;
      const std::string opt = " options='-c synchronous_commit=off'";
      f2["dsn"] = f2["dsn"].get<std::string>() + opt;
      u2["dsn"] = u2["dsn"].get<std::string>() + opt;
      std::cerr << "== bench_postgres: 1 client, a key each, synchronous_commit off (no wait for the disk)\n";
      auto r = run_case({1, false}, f2, u2, slices, slice, random_payload, control, interleave);
      r["synchronous_commit"] = server_settings(f2["dsn"].get<std::string>()).value("synchronous_commit", "?");
      std::cerr << "   unfenced " << num(r["unfenced"]["writes_per_s"], 0) << "/s, fenced " << num(r["fenced"]["writes_per_s"], 0)
                << "/s, paired median " << num(r["ratio_median"], 3) << " (synchronous_commit " << r["synchronous_commit"].get<std::string>() << ")\n";
      result["no_disk"] = r;
    }
  } catch (const std::exception& e) {
    std::cerr << "bench_postgres: " << e.what() << "\n";
    result["error"] = e.what();
    rc = 1;
  }
  if (pg) pg->stop();
  pg.reset();
  result["load_end"] = loadavg();
  result["elapsed_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bool all_met = result.contains("cases") && rc == 0;
  if (result.contains("cases"))
    for (const auto& c : result["cases"]) all_met = all_met && c["met"].get<bool>();
  result["met"] = all_met;

  // The table (markdown).
  if (result.contains("cases")) {
    auto q = [](const nlohmann::json& r) {
      return num(r["ratio_median"], 3) + " (" + num(r["ratio_q1"], 3) + "-" + num(r["ratio_q3"], 3) + ")";
    };
    std::cout << "| clients | keys | unfenced writes/s | fenced writes/s | fenced / unfenced, pooled | fenced / unfenced, "
                 "paired slices: median (q1-q3) | goal >= 0.97 (median) | A/A control (fenced / fenced), paired: median "
                 "(q1-q3) | interleaved write by write: fenced / unfenced (mean latency) | unfenced p50 / p99 ms | fenced p50 / p99 ms |\n"
                 "|---|---|---|---|---|---|---|---|---|---|---|\n";
    std::vector<nlohmann::json> rows(result["cases"].begin(), result["cases"].end());
    if (result.contains("no_disk")) {
      rows.push_back(result["no_disk"]);
      rows.back()["keys"] = "distinct; synchronous_commit " + result["no_disk"]["synchronous_commit"].get<std::string>() +
                            " (no wait for the disk; not part of the goal)";
    }
    for (const auto& c : rows) {
      std::cout << "| " << c["clients"].get<int>() << " | " << c["keys"].get<std::string>() << " | "
                << num(c["unfenced"]["writes_per_s"], 0) << " | " << num(c["fenced"]["writes_per_s"], 0) << " | "
                << num(c["ratio_pooled"], 3) << " | " << q(c) << " | " << (c["met"].get<bool>() ? "met" : "**missed**") << " | "
                << (c.contains("control") ? q(c["control"]) : std::string("-")) << " | "
                << (c.contains("interleaved") ? num(c["interleaved"]["ratio_mean_latency"], 3) : std::string("-")) << " | "
                << num(c["unfenced"]["p50_ms"], 2) << " / " << num(c["unfenced"]["p99_ms"], 2) << " | "
                << num(c["fenced"]["p50_ms"], 2) << " / " << num(c["fenced"]["p99_ms"], 2) << " |\n";
    }
  }
  if (!out_path.empty()) std::ofstream(out_path) << result.dump(2) << "\n";
  return rc;
}
