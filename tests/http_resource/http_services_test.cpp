// Integration: kind http against real processes on 127.0.0.1:0.
//  - fencecheck-store (the contract's reference implementation) with the kind's defaults: the
//    fence through HttpResourceClient, and the kind's read-back equal to StoreClient's.
//  - tests/http_resource/broken_service.py (check-then-write without a lock): two concurrent
//    writers with interleaved tokens leave a lower token accepted after a higher one in its log;
//    the same service with --correct never does (seeded rounds), and rejects instead.
// Synchronisation is on events: each process's first stdout line, the service's "checked" trace
// line, a barrier between the writers. Every process is stopped by its ChildProcess (SIGTERM,
// then SIGKILL) and dies with the test program (PR_SET_PDEATHSIG) if the test is killed.
#include <signal.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../support/temp_dir.h"
#include "fencecheck/process/child_process.h"
#include "fencecheck/resources/http_resource.h"
#include "fencecheck/resources/resource_kind.h"
#include "fencecheck/resources/store_client.h"
#include "service_process.h"
#include "support.h"

namespace fencecheck {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::FakeFields;
using testing::Process;
using testing::TempDir;
using testing::thrown_by_open;

std::unique_ptr<Process> start_store(const std::filesystem::path& data_dir) {
  return std::make_unique<Process>("store", FENCECHECK_STORE_BIN,
                                   std::vector<std::string>{"--data-dir", data_dir.string(), "--fencing", "per-key"});
}

std::unique_ptr<Process> start_service(bool correct, int window_ms) {
  std::vector<std::string> args{BROKEN_SERVICE, "--trace", "--window-ms", std::to_string(window_ms)};
  if (correct) args.emplace_back("--correct");
  return std::make_unique<Process>(correct ? "correct-service" : "broken-service", "/usr/bin/python3", args);
}

const resources::ResourceKind& kind() { return *resources::find_resource_kind("http"); }

std::unique_ptr<resources::ResourceInstance> open_http(const std::string& url, const std::string& health = "none") {
  const json cfg = kind().parse(FakeFields{{"url", url}, {"health", health}});
  return kind().open(cfg, resources::ResourceRunContext{});
}

// --- resource.start: a service the kind starts for the run -----------------------------------

/// Whether `pid` names a live process (a zombie is not one).
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const auto close = text.rfind(')');
  return close != std::string::npos && text.size() > close + 2 && text[close + 2] != 'Z';
}

/// A run context whose hold_process_group records what it was given and when it was released.
struct HeldGroups {
  std::vector<std::pair<pid_t, std::string>> held;
  int released = 0;
  resources::ResourceRunContext context(const std::filesystem::path& run_dir) {
    resources::ResourceRunContext ctx;
    ctx.run_dir = run_dir;
    ctx.bin_dir = std::filesystem::path(FENCECHECK_STORE_BIN).parent_path();
    ctx.log_path = [run_dir](const std::string& name) { return run_dir / (name + ".log"); };
    ctx.hold_process_group = [this](pid_t pid, const std::string& name) -> std::function<void()> {
      held.emplace_back(pid, name);
      return [this] { ++released; };
    };
    return ctx;
  }
};

json started(std::vector<std::string> argv, const std::string& timeout = "10s") {
  return kind().parse(FakeFields{{"start", argv}, {"start_timeout", timeout}, {"health", "/healthz"}});
}

TEST(HttpKindStart, StartsTheStoreOnAFreePortWaitsForItAndStopsItAtTheEnd) {
  TempDir dir("http-start");
  HeldGroups groups;
  const json cfg = started({"{bin_dir}/fencecheck-store", "--listen", "{host}:{port}", "--data-dir",
                            "{run_dir}/service-data", "--fencing", "per-key"});
  EXPECT_TRUE(kind().embedded(cfg));
  auto inst = kind().open(cfg, groups.context(dir.path()));
  // It answered before open() returned: a write goes through at once, with the fence.
  ASSERT_TRUE(inst->healthy());
  auto writer = make_resource_writer(inst->endpoint(), 5000ms);
  EXPECT_EQ(writer->write("ledger", 0, 0, FencingToken(5), "w1", "x").outcome, WriteOutcome::kAccepted);
  EXPECT_EQ(writer->write("ledger", 0, 0, FencingToken(4), "w2", "y").outcome, WriteOutcome::kRejected);
  const std::string url = inst->endpoint().at("url").get<std::string>();
  EXPECT_EQ(url.rfind("http://127.0.0.1:", 0), 0u) << url;
  EXPECT_NE(url, "http://127.0.0.1:{port}");
  EXPECT_TRUE(std::filesystem::is_directory(dir.path() / "service-data"));  // {run_dir} was substituted
  ASSERT_EQ(groups.held.size(), 1u);
  const pid_t pid = groups.held[0].first;
  EXPECT_EQ(groups.held[0].second, "http service");
  EXPECT_TRUE(alive(pid));
  EXPECT_NE(inst->describe().find("started by the scenario: " + std::string(FENCECHECK_STORE_BIN) + ", pid " +
                                  std::to_string(pid)),
            std::string::npos)
      << inst->describe();
  inst->stop();
  EXPECT_FALSE(alive(pid));
  EXPECT_EQ(groups.released, 1);
  // Its stdout is kept in the run directory (complete once stopped: the store's first line says
  // where it listened, the url the workers were given).
  std::ifstream out(dir.path() / "http-service.stdout.log");
  std::string line;
  ASSERT_TRUE(std::getline(out, line));
  EXPECT_NE(line.find("\"listening\":\"" + url.substr(7) + "\""), std::string::npos) << line;
}

TEST(HttpKindStart, AServiceThatExitsBeforeItAnswersIsNamedWithItsStderr) {
  TempDir dir("http-start-exit");
  HeldGroups groups;
  const std::string what = thrown_by_open<resources::ResourceUnavailable>(
      started({"/bin/sh", "-c", "echo cannot bind {host}:{port} >&2; exit 3"}), nullptr, groups.context(dir.path()));
  EXPECT_NE(what.find("the http service that resource.start runs did not come up: /bin/sh exited with code 3 before it "
                      "answered; its stderr ends: cannot bind 127.0.0.1:"),
            std::string::npos)
      << what;
  EXPECT_EQ(groups.released, 1);  // the ledger hears that it ended
}

TEST(HttpKindStart, AServiceThatNeverAnswersIsStoppedAfterItsTimeout) {
  TempDir dir("http-start-silent");
  HeldGroups groups;
  const std::string what = thrown_by_open<resources::ResourceUnavailable>(started({"/bin/sleep", "60"}, "300ms"),
                                                                          nullptr, groups.context(dir.path()));
  EXPECT_NE(what.find("/bin/sleep did not answer within 300 ms: GET http://127.0.0.1:"), std::string::npos) << what;
  ASSERT_EQ(groups.held.size(), 1u);
  EXPECT_FALSE(alive(groups.held[0].first));  // stopped, not left running
  EXPECT_EQ(groups.released, 1);
}

TEST(HttpKindStart, AWrongHealthPathIsTheScenariosErrorAtHealthAtOnce) {
  TempDir dir("http-start-health");
  HeldGroups groups;
  const json cfg = kind().parse(FakeFields{{"start", json::array({"{bin_dir}/fencecheck-store", "--listen", "{host}:{port}",
                                                                  "--data-dir", "{run_dir}/service-data"})},
                                           {"health", "/nothere"},
                                           {"start_timeout", "60s"}});
  const auto began = std::chrono::steady_clock::now();
  std::string field;
  const std::string what = thrown_by_open<resources::ResourceConfigError>(cfg, &field, groups.context(dir.path()));
  EXPECT_EQ(field, "health");
  EXPECT_NE(what.find("/nothere: HTTP 404"), std::string::npos) << what;
  EXPECT_LT(std::chrono::steady_clock::now() - began, 30s);  // not the 60 s start_timeout
  ASSERT_EQ(groups.held.size(), 1u);
  EXPECT_FALSE(alive(groups.held[0].first));
  EXPECT_EQ(groups.released, 1);
}

TEST(HttpKindStart, AServiceThatDiesDuringTheRunIsNamedWhenTheReadBackFails) {
  TempDir dir("http-start-dies");
  HeldGroups groups;
  auto inst = kind().open(started({"{bin_dir}/fencecheck-store", "--listen", "{host}:{port}", "--data-dir",
                                   "{run_dir}/service-data"}),
                          groups.context(dir.path()));
  ASSERT_EQ(groups.held.size(), 1u);
  ASSERT_EQ(::kill(groups.held[0].first, SIGKILL), 0);
  // Dead (a zombie until its parent reaps it: not alive) within 10 s.
  const auto limit = std::chrono::steady_clock::now() + 10s;
  while (alive(groups.held[0].first) && std::chrono::steady_clock::now() < limit) std::this_thread::sleep_for(10ms);
  ASSERT_FALSE(alive(groups.held[0].first));
  try {
    (void)inst->readback();
    ADD_FAILURE() << "the read-back of a dead service succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("the http service that resource.start ran is gone: " +
                                         std::string(FENCECHECK_STORE_BIN) + " exited with code 137"),
              std::string::npos)
        << e.what();
  }
}

TEST(HttpKindStart, AProgramThatIsNotThereIsTheScenariosErrorAtStart) {
  TempDir dir("http-start-missing");
  HeldGroups groups;
  std::string field;
  const std::string what = thrown_by_open<resources::ResourceConfigError>(
      started({"./no-such-service", "--port", "{port}"}), &field, groups.context(dir.path()));
  EXPECT_EQ(field, "start");
  EXPECT_NE(what.find("the http service's program ./no-such-service (relative to "), std::string::npos) << what;
  EXPECT_TRUE(groups.held.empty());
}

// --- fencecheck-store: the reference implementation, with the kind's defaults ---------------

TEST(HttpKindOnTheStore, TheDefaultsSpeakTheStoresContract) {
  TempDir data("http-store");
  auto store = start_store(data.path());
  auto inst = open_http(store->url(), "/healthz");
  EXPECT_TRUE(inst->healthy());
  auto writer = make_resource_writer(inst->endpoint(), 5000ms);
  ASSERT_EQ(writer->kind(), "http");

  const WriteReply five = writer->write("ledger", 0, 0, FencingToken(5), "w2", "chunk by w2");
  EXPECT_EQ(five.outcome, WriteOutcome::kAccepted) << five.error;
  EXPECT_EQ(five.http_status, 200);
  EXPECT_EQ(five.high_water, 5);
  EXPECT_EQ(five.seq, 1);

  const WriteReply four = writer->write("ledger", 0, 1, FencingToken(4), "w1", "chunk by w1");
  EXPECT_EQ(four.outcome, WriteOutcome::kRejected) << four.error;
  EXPECT_EQ(four.http_status, 409);
  EXPECT_EQ(four.high_water, 5);
  EXPECT_FALSE(four.error.empty()) << "the store's own words";

  const WriteReply bad = writer->write("bad key!", 0, 0, FencingToken(6), "w1", "x");
  EXPECT_EQ(bad.outcome, WriteOutcome::kInvalid) << "the store's 400 for a key outside [A-Za-z0-9_.-]";
  EXPECT_EQ(bad.http_status, 400);

  const ReadBack via_kind = inst->readback();
  const ReadBack via_store = StoreClient(store->url()).readback();
  EXPECT_EQ(to_json(via_kind), to_json(via_store));
  EXPECT_EQ(via_kind.resource, "store");
  ASSERT_EQ(via_kind.log.size(), 1u);
  EXPECT_EQ(via_kind.log[0].token, 5);
  ASSERT_EQ(via_kind.rejections.size(), 1u);
  EXPECT_EQ(via_kind.rejections[0].token, 4);
  EXPECT_EQ(via_kind.rejections[0].high_water, 5);
  EXPECT_EQ(via_kind.high_water.at("ledger"), 5);
  ASSERT_EQ(via_kind.chunks.size(), 1u);
  EXPECT_EQ(via_kind.chunks[0].data, "chunk by w2");
}

// --- helpers ---------------------------------------------------------------------------------

/// The log's tokens of `key` in acceptance order.
std::vector<std::int64_t> log_tokens(const ReadBack& rb, const std::string& key) {
  std::vector<std::int64_t> out;
  for (const auto& w : rb.log)
    if (w.key == key) out.push_back(w.token);
  return out;
}

/// True when some accepted token of `key` is below one accepted before it.
bool lower_after_higher(const std::vector<std::int64_t>& tokens) {
  std::int64_t highest = 0;
  for (auto t : tokens) {
    if (t < highest) return true;
    highest = std::max(highest, t);
  }
  return false;
}

// --- the example service of docs/resource-http.md, run as printed ---------------------------

/// The Python block after "<!-- example-service -->" in docs/resource-http.md.
std::string doc_example() {
  std::ifstream in(FENCECHECK_HTTP_DOC);
  const std::string doc{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const auto marker = doc.find("<!-- example-service -->");
  const auto open = marker == std::string::npos ? marker : doc.find("```python\n", marker);
  const auto close = open == std::string::npos ? open : doc.find("```", open + 10);
  if (close == std::string::npos) throw std::runtime_error(std::string("no example service in ") + FENCECHECK_HTTP_DOC);
  return doc.substr(open + 10, close - open - 10);
}

TEST(DocExampleService, KeepsTheRuleAndReadsBackThroughTheKind) {
  TempDir dir("http-doc");
  const auto script = dir.path() / "example.py";
  std::ofstream(script) << doc_example();
  Process svc("doc-example", "/usr/bin/python3", {script.string(), "0"});
  auto inst = open_http(svc.url());  // the defaults; open() checks the read-back's shape
  auto writer = make_resource_writer(inst->endpoint(), 5000ms);

  const WriteReply five = writer->write("ledger", 0, 0, FencingToken(5), "w2", "by w2");
  EXPECT_EQ(five.outcome, WriteOutcome::kAccepted) << five.error;
  EXPECT_EQ(five.high_water, 5);
  EXPECT_EQ(five.seq, 1);
  const WriteReply four = writer->write("ledger", 0, 1, FencingToken(4), "w1", "by w1");
  EXPECT_EQ(four.outcome, WriteOutcome::kRejected) << four.error;
  EXPECT_EQ(four.high_water, 5);
  EXPECT_EQ(four.error, "fenced");
  const WriteReply again = writer->write("ledger", 0, 1, FencingToken(5), "w2", "w2 again");
  EXPECT_EQ(again.outcome, WriteOutcome::kAccepted) << "an equal token is the holder's own: " << again.error;
  const WriteReply other = writer->write("other key", 0, 0, FencingToken(3), "w1", "elsewhere");
  EXPECT_EQ(other.outcome, WriteOutcome::kAccepted) << "per key: " << other.error;

  const ReadBack rb = inst->readback();
  EXPECT_EQ(rb.resource, "http");
  EXPECT_EQ(log_tokens(rb, "ledger"), (std::vector<std::int64_t>{5, 5}));
  EXPECT_EQ(log_tokens(rb, "other key"), (std::vector<std::int64_t>{3}));
  ASSERT_EQ(rb.rejections.size(), 1u);
  EXPECT_EQ(rb.rejections[0].token, 4);
  EXPECT_EQ(rb.rejections[0].high_water, 5);
  EXPECT_EQ(rb.high_water, (std::map<std::string, std::int64_t>{{"ledger", 5}, {"other key", 3}}));
  ASSERT_EQ(rb.chunks.size(), 3u);
  EXPECT_EQ(rb.chunks[0].key, "ledger");
  EXPECT_EQ(rb.chunks[1].data, "w2 again");
  EXPECT_EQ(rb.chunks[2].key, "other key");
}

// --- the broken service and its fix ----------------------------------------------------------

/// H (token 5) passes its check and announces it; only then L (token 4) is sent, while H sleeps in
/// the window. The window (1 s) is the service's design, not the test's synchronisation: the test
/// waits for H's "checked" line, and (broken only) for L's.
struct Race {
  WriteReply high, low;
  ReadBack rb;
};

Race race(Process& svc, bool expect_low_checked) {
  auto inst = open_http(svc.url(), "/healthz");
  const json endpoint = inst->endpoint();
  Race r;
  std::thread h([&] { r.high = make_resource_writer(endpoint, 10000ms)->write("k", 0, 0, FencingToken(5), "h", "H"); });
  const json h_checked = svc.next_line();
  EXPECT_EQ(h_checked, (json{{"checked", {{"key", "k"}, {"token", 5}, {"mark", 0}}}}));
  std::thread l([&] { r.low = make_resource_writer(endpoint, 10000ms)->write("k", 0, 0, FencingToken(4), "l", "L"); });
  if (expect_low_checked) {
    // L passed its check against the mark H has not yet moved: the race is open.
    EXPECT_EQ(svc.next_line(), (json{{"checked", {{"key", "k"}, {"token", 4}, {"mark", 0}}}}));
  }
  h.join();
  l.join();
  r.rb = inst->readback();
  return r;
}

TEST(BrokenHttpService, ALowerTokenLandsAfterAHigherOneAndTheMarkGoesBack) {
  auto svc = start_service(/*correct=*/false, 1000);
  EXPECT_EQ(svc->hello().at("fencing"), "check-then-write");
  const Race r = race(*svc, /*expect_low_checked=*/true);
  EXPECT_EQ(r.high.outcome, WriteOutcome::kAccepted) << r.high.error;
  EXPECT_EQ(r.low.outcome, WriteOutcome::kAccepted) << "the stale write is accepted: " << r.low.error;
  EXPECT_EQ(r.high.seq, 1);
  EXPECT_EQ(r.low.seq, 2);
  EXPECT_EQ(r.low.high_water, 4) << "the mark went backwards";
  EXPECT_EQ(log_tokens(r.rb, "k"), (std::vector<std::int64_t>{5, 4}));
  EXPECT_TRUE(lower_after_higher(log_tokens(r.rb, "k")));
  EXPECT_EQ(r.rb.high_water.at("k"), 4);
  ASSERT_EQ(r.rb.chunks.size(), 1u);
  EXPECT_EQ(r.rb.chunks[0].token, 4);
  EXPECT_EQ(r.rb.chunks[0].data, "L") << "the stale writer's bytes stand";
  EXPECT_TRUE(r.rb.rejections.empty());
}

TEST(BrokenHttpService, FixedWithAPerKeyLockTheLowerTokenIsRejectedAgainstTheHigher) {
  auto svc = start_service(/*correct=*/true, 1000);
  EXPECT_EQ(svc->hello().at("fencing"), "per-key");
  const Race r = race(*svc, /*expect_low_checked=*/false);
  EXPECT_EQ(r.high.outcome, WriteOutcome::kAccepted) << r.high.error;
  EXPECT_EQ(r.low.outcome, WriteOutcome::kRejected) << r.low.error;
  EXPECT_EQ(r.low.http_status, 409);
  EXPECT_EQ(r.low.high_water, 5);
  EXPECT_EQ(r.low.error, "token 4 below high-water 5");
  EXPECT_EQ(log_tokens(r.rb, "k"), (std::vector<std::int64_t>{5}));
  ASSERT_EQ(r.rb.rejections.size(), 1u);
  EXPECT_EQ(r.rb.rejections[0].token, 4);
  EXPECT_EQ(r.rb.rejections[0].high_water, 5);
  EXPECT_EQ(r.rb.high_water.at("k"), 5);
  ASSERT_EQ(r.rb.chunks.size(), 1u);
  EXPECT_EQ(r.rb.chunks[0].data, "H");
}

/// Seeded rounds: in each, tokens 1..2n of a fresh key are dealt at random between two writers;
/// each writer sends its own in increasing order (as a holder does over its re-acquisitions), both
/// released together by a barrier. Checks every reply, and the read-back's counts against them.
struct Rounds {
  std::vector<std::string> keys;    ///< one per round, "s<seed>-r<round>"
  std::vector<std::string> broken;  ///< the keys whose log has a lower token after a higher one
  ReadBack rb;                      ///< the read-back after the last round
};

Rounds seeded_rounds(Process& svc, std::uint32_t seed, int rounds, int tokens_per_writer) {
  auto inst = open_http(svc.url(), "/healthz");
  const json endpoint = inst->endpoint();
  std::mt19937 rng(seed);
  Rounds out;
  int accepted = 0;
  int rejected = 0;
  for (int round = 0; round < rounds; ++round) {
    const std::string key = "s" + std::to_string(seed) + "-r" + std::to_string(round);
    out.keys.push_back(key);
    std::vector<std::int64_t> all;
    for (int t = 1; t <= 2 * tokens_per_writer; ++t) all.push_back(t);
    std::shuffle(all.begin(), all.end(), rng);
    std::vector<std::vector<std::int64_t>> mine(2);
    for (std::size_t i = 0; i < all.size(); ++i) mine[i % 2].push_back(all[i]);
    for (auto& m : mine) std::sort(m.begin(), m.end());
    std::barrier start(2);
    std::vector<std::vector<WriteReply>> replies(2);
    std::vector<std::thread> writers;
    for (int w = 0; w < 2; ++w) {
      writers.emplace_back([&, w] {
        auto writer = make_resource_writer(endpoint, 10000ms);
        start.arrive_and_wait();
        for (std::size_t i = 0; i < mine[w].size(); ++i)
          replies[w].push_back(writer->write(key, 0, static_cast<std::int64_t>(i), FencingToken(mine[w][i]),
                                             "w" + std::to_string(w), "x"));
      });
    }
    for (auto& t : writers) t.join();
    for (int w = 0; w < 2; ++w) {
      for (std::size_t i = 0; i < replies[w].size(); ++i) {
        const WriteReply& r = replies[w][i];
        SCOPED_TRACE("seed " + std::to_string(seed) + " round " + std::to_string(round) + " token " +
                     std::to_string(mine[w][i]));
        EXPECT_TRUE(r.outcome == WriteOutcome::kAccepted || r.outcome == WriteOutcome::kRejected) << r.error;
        if (r.outcome == WriteOutcome::kRejected) {
          EXPECT_GT(r.high_water, mine[w][i]) << "rejected only below the mark";
          ++rejected;
        } else {
          ++accepted;
        }
      }
    }
  }
  out.rb = inst->readback();
  const std::set<std::string> ours(out.keys.begin(), out.keys.end());
  EXPECT_EQ(std::count_if(out.rb.log.begin(), out.rb.log.end(), [&](const auto& w) { return ours.count(w.key) > 0; }),
            accepted);
  EXPECT_EQ(std::count_if(out.rb.rejections.begin(), out.rb.rejections.end(),
                          [&](const auto& r) { return ours.count(r.key) > 0; }),
            rejected);
  for (const auto& key : out.keys)
    if (lower_after_higher(log_tokens(out.rb, key))) out.broken.push_back(key);
  return out;
}

constexpr std::uint32_t kSeed = 20261201;
constexpr int kRounds = 25;

TEST(BrokenHttpService, SeededRoundsTheCorrectVariantNeverAcceptsALowerTokenAfterAHigher) {
  auto svc = start_service(/*correct=*/true, 5);
  for (std::uint32_t seed : {kSeed, kSeed + 1}) {
    const Rounds r = seeded_rounds(*svc, seed, kRounds, 3);
    EXPECT_TRUE(r.broken.empty()) << "seed " << seed << ": " << r.broken.size() << " key(s), first " << r.broken.front();
    for (const auto& key : r.keys) EXPECT_EQ(r.rb.high_water.at(key), 6) << key << ": the highest token always lands";
  }
}

TEST(BrokenHttpService, SeededRoundsTheBrokenVariantDoes) {
  auto svc = start_service(/*correct=*/false, 30);
  const Rounds r = seeded_rounds(*svc, kSeed, kRounds, 3);
  // Each round's writers start together and each write sleeps 30 ms between its check and its
  // write, so the two writers' windows overlap in nearly every round; a round shows the anomaly
  // when the lower token of an overlapping pair checked later.
  EXPECT_GE(r.broken.size(), 1u) << "no round of " << kRounds << " (seed " << kSeed << ") showed the race";
  std::cout << "[ broken   ] " << r.broken.size() << " of " << kRounds
            << " rounds accepted a lower token after a higher one\n";
}

}  // namespace
}  // namespace fencecheck
