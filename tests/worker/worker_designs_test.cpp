// The failure catalogue's worker designs and job kinds (docs/catalogue-plan.md), each run as the
// real fencecheck-worker binary against a real etcd and either the in-test fake store (to force a
// rejection deterministically) or the real FencedStore behind its HTTP server. Every test
// synchronises on the worker's events, the store's hold points or etcd's watch — never on sleeps.
#include "worker_process_support.h"

#include <time.h>

#include "fencecheck/resources/store.h"
#include "fencecheck/resources/store_client.h"
#include "fencecheck/resources/store_server.h"
#include "fencecheck/workers/worker.h"

namespace fencecheck {
namespace {

using namespace std::chrono_literals;

/// The real store, in-process on 127.0.0.1:0, per-key fencing, effects guarded per `effects`, in a
/// temp dir.
struct RealStore {
  explicit RealStore(EffectMode effects = EffectMode::kFenced) : dir("designs-store") {
    store = FencedStore::open(dir.path() / "data", FencingMode::kPerKey);
    StoreServerOptions options;
    options.effect_mode = effects;
    server = std::make_unique<StoreServer>(*store, options);
    server->start();
  }
  [[nodiscard]] std::string url() const { return server->base_url(); }
  test::TempDir dir;
  std::unique_ptr<FencedStore> store;
  std::unique_ptr<StoreServer> server;
};

/// Only the protocol events (no log, no pause).
std::vector<Event> protocol(const std::vector<Event>& events) {
  std::vector<Event> out;
  std::copy_if(events.begin(), events.end(), std::back_inserter(out),
               [](const Event& e) { return e.kind != EventKind::kLog && e.kind != EventKind::kPause; });
  return out;
}

std::vector<Event> logs_starting(const std::vector<Event>& events, const std::string& prefix) {
  std::vector<Event> out;
  for (const auto& e : events)
    if (e.kind == EventKind::kLog && e.detail.rfind(prefix, 0) == 0) out.push_back(e);
  return out;
}

std::size_t index_of(const std::vector<Event>& events, const std::function<bool(const Event&)>& pred,
                     std::size_t from = 0) {
  for (std::size_t i = from; i < events.size(); ++i)
    if (pred(events[i])) return i;
  return events.size();
}

char proc_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = all.rfind(')');  // the command name may hold spaces and parentheses
  return close == std::string::npos || close + 2 >= all.size() ? '?' : all[close + 2];
}

std::int64_t realtime_now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

class WorkerDesignsTest : public WorkerProcessTest {};

// ---------------------------------------------------------------------------------------------
// --retry-same-token

TEST_F(WorkerDesignsTest, RetrySameTokenSendsTheRejectedTokenSixTimesThenReacquires) {
  test::FakeStore store;
  store.fence_out_first_token();
  const std::string lock = "retry-same";
  auto run = run_worker_process(args("w1", lock, store.url(),
                                     {"--segments", "1", "--chunks", "2", "--chunk-interval-ms", "5", "--retry-same-token"}),
                                dir_->path() / "retry.err");
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;
  auto acquired = of_kind(run.events, EventKind::kAcquireOk);
  ASSERT_EQ(acquired.size(), 2u) << dump(run.events);
  const std::int64_t t1 = *acquired[0].token;
  const std::int64_t t2 = *acquired[1].token;
  EXPECT_GT(t2, t1);

  // 1 + 5 sends of chunk (0,0) with t1, each a write.invoke and a write.fail; then re-acquire.
  auto p = protocol(run.events);
  std::size_t at = index_of(p, [](const Event& e) { return e.kind == EventKind::kWriteInvoke; });
  for (int send = 0; send < 1 + kSameTokenRetries; ++send) {
    SCOPED_TRACE("send " + std::to_string(send));
    ASSERT_LT(at + 1, p.size()) << dump(run.events);
    EXPECT_EQ(p[at].kind, EventKind::kWriteInvoke);
    EXPECT_EQ(p[at].token, t1);
    EXPECT_EQ(p[at].segment, 0);
    EXPECT_EQ(p[at].chunk, 0);
    EXPECT_EQ(p[at].detail, send == 0 ? "" : "retry " + std::to_string(send) + "/5 with the same token");
    EXPECT_EQ(p[at + 1].kind, EventKind::kWriteFail);
    EXPECT_EQ(p[at + 1].token, t1);
    EXPECT_EQ(p[at + 1].high_water, t1 + 1);
    at += 2;
  }
  ASSERT_LT(at + 3, p.size());
  EXPECT_EQ(p[at].kind, EventKind::kReleaseInvoke);
  EXPECT_EQ(p[at + 2].kind, EventKind::kAcquireInvoke);
  EXPECT_EQ(p[at + 3].kind, EventKind::kAcquireOk);

  // The store saw the same stale token 6 times — the rejection storm the checker names.
  auto reqs = store.requests();
  EXPECT_EQ(std::count_if(reqs.begin(), reqs.end(), [&](const test::StoreRequest& r) { return r.token == t1; }), 6);
  EXPECT_EQ(std::count_if(reqs.begin(), reqs.end(), [&](const test::StoreRequest& r) { return r.status == 409; }), 6);
  EXPECT_EQ(std::count_if(reqs.begin(), reqs.end(), [&](const test::StoreRequest& r) { return r.token == t2; }), 2);
}

TEST_F(WorkerDesignsTest, TheCorrectWorkerSendsARejectedTokenOnlyOnce) {
  test::FakeStore store;
  store.fence_out_first_token();
  auto run = run_worker_process(args("w1", "retry-once", store.url(), {"--segments", "1", "--chunks", "2", "--chunk-interval-ms", "5"}),
                                dir_->path() / "once.err");
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;
  const std::int64_t t1 = *of_kind(run.events, EventKind::kAcquireOk).at(0).token;
  auto fails = of_kind(run.events, EventKind::kWriteFail);
  ASSERT_EQ(fails.size(), 1u) << dump(run.events);
  EXPECT_EQ(fails[0].token, t1);
  auto reqs = store.requests();
  EXPECT_EQ(std::count_if(reqs.begin(), reqs.end(), [&](const test::StoreRequest& r) { return r.token == t1; }), 1);
}

// ---------------------------------------------------------------------------------------------
// --release-by-name

TEST_F(WorkerDesignsTest, ReleaseByNameDeletesAnotherHoldersKey) {
  test::FakeStore store;
  store.hold_once(0, 0);  // w1 holds the lock, parked in its first write, until the waiter is queued
  const std::string lock = "by-name";
  LockWatch watch(etcd_->client_url(), lock + "/");
  EtcdClient etcd(etcd_->client_url());
  const LeaseGrant waiter_lease = etcd.lease_grant(60s);
  std::string own_key;
  std::string waiter_key;
  std::thread waiter;
  std::optional<LockResult> waiter_lock;
  auto run = run_worker_process(
      args("w1", lock, store.url(),
           {"--segments", "1", "--chunks", "1", "--store-timeout-ms", "30000", "--release-by-name"}),
      dir_->path() / "by-name.err", [&](const Event& e, pid_t) {
        if (e.kind != EventKind::kAcquireOk) return;
        own_key = e.lock_key;
        ASSERT_TRUE(store.wait_until_held());
        // A second holder queues behind w1: its key exists under the lock prefix.
        waiter = std::thread([&] { waiter_lock = EtcdClient(etcd_->client_url()).lock(lock, waiter_lease.id, 30s); });
        ASSERT_TRUE(watch.events.wait_until([&](const std::vector<WatchEvent>& h) {
          for (const auto& w : h)
            if (w.type == WatchEvent::Type::kPut && w.kv.key != own_key) {
              waiter_key = w.kv.key;
              return true;
            }
          return false;
        }));
        store.release_held();
      });
  if (waiter.joinable()) waiter.join();
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;
  ASSERT_FALSE(waiter_key.empty());

  auto released = of_kind(run.events, EventKind::kReleaseOk);
  ASSERT_EQ(released.size(), 2u) << dump(run.events);
  const auto own = std::find_if(released.begin(), released.end(), [&](const Event& e) { return e.lock_key == own_key; });
  const auto foreign = std::find_if(released.begin(), released.end(), [&](const Event& e) { return e.lock_key == waiter_key; });
  ASSERT_NE(own, released.end());
  ASSERT_NE(foreign, released.end());
  ASSERT_TRUE(own->revision && foreign->revision);
  EXPECT_EQ(*own->revision, *foreign->revision) << "one DeleteRange deletes both";
  EXPECT_EQ(foreign->lease_id, waiter_lease.id);
  EXPECT_NE(foreign->detail.find("did not create"), std::string::npos) << foreign->detail;
  EXPECT_TRUE(own->detail.empty()) << own->detail;
  EXPECT_EQ(own->token, of_kind(run.events, EventKind::kAcquireOk).at(0).token);

  // etcd's own history: the waiter's key was deleted at w1's release revision — not by its holder.
  ASSERT_TRUE(watch.events.wait_until([&](const std::vector<WatchEvent>& h) {
    return std::any_of(h.begin(), h.end(), [&](const WatchEvent& w) {
      return w.type == WatchEvent::Type::kDelete && w.kv.key == waiter_key;
    });
  }));
  for (const auto& w : watch.events.snapshot()) {
    if (w.type == WatchEvent::Type::kDelete && w.kv.key == waiter_key) {
      EXPECT_EQ(w.revision(), *foreign->revision);
      ASSERT_TRUE(w.prev_kv);
      EXPECT_EQ(foreign->token, w.prev_kv->create_revision);
      EXPECT_EQ(w.prev_kv->lease, waiter_lease.id);
    }
  }
  // The waiter's Lock returned, but the key it "holds" is gone: a third holder could now start.
  ASSERT_TRUE(waiter_lock);
  EXPECT_EQ(waiter_lock->key, waiter_key);
  EXPECT_FALSE(etcd.range(waiter_key));
  etcd.lease_revoke(waiter_lease.id);
}

// ---------------------------------------------------------------------------------------------
// --check-lease-before-write and --self-stop-at check

TEST_F(WorkerDesignsTest, CheckLeaseBeforeWriteLogsTheTtlBeforeEveryWrite) {
  test::FakeStore store;
  auto run = run_worker_process(
      args("w1", "lease-check", store.url(),
           {"--ttl-s", "5", "--segments", "2", "--chunks", "2", "--chunk-interval-ms", "5", "--check-lease-before-write"}),
      dir_->path() / "lease-check.err");
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;
  const std::int64_t lease = *of_kind(run.events, EventKind::kAcquireOk).at(0).lease_id;
  int writes = 0;
  for (std::size_t i = 0; i < run.events.size(); ++i) {
    if (run.events[i].kind != EventKind::kWriteInvoke) continue;
    ++writes;
    // The event before each write.invoke (pause events aside) is its lease check.
    std::size_t j = i;
    do --j; while (j > 0 && run.events[j].kind == EventKind::kPause);
    const Event& check = run.events[j];
    ASSERT_EQ(check.kind, EventKind::kLog) << to_json_line(check);
    ASSERT_EQ(check.detail.rfind("lease-check ok ttl=", 0), 0u) << check.detail;
    EXPECT_GT(std::stoll(check.detail.substr(19)), 0);
    EXPECT_EQ(check.lease_id, lease);
  }
  EXPECT_EQ(writes, 4);
  EXPECT_EQ(logs_starting(run.events, "lease-check ok ttl=").size(), 4u);
}

TEST_F(WorkerDesignsTest, CheckLeaseBeforeWriteReacquiresWhenTheLeaseIsGone) {
  test::FakeStore store;
  store.hold_once(0, 1);
  std::int64_t lease = 0;
  bool revoked = false;
  auto run = run_worker_process(
      args("w1", "lease-gone", store.url(),
           {"--ttl-s", "5", "--segments", "1", "--chunks", "3", "--chunk-interval-ms", "5", "--store-timeout-ms", "30000",
            "--check-lease-before-write"}),
      dir_->path() / "lease-gone.err", [&](const Event& e, pid_t) {
        if (e.kind == EventKind::kAcquireOk && lease == 0) lease = *e.lease_id;
        if (e.kind != EventKind::kWriteInvoke || e.chunk != 1 || revoked) return;
        revoked = true;
        ASSERT_TRUE(store.wait_until_held());
        // Behind the holder's back its lease ends, as an expiry would end it; then (0,1) lands.
        ASSERT_TRUE(EtcdClient(etcd_->client_url()).lease_revoke(lease));
        store.release_held();
      });
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;
  ASSERT_TRUE(revoked);
  auto acquired = of_kind(run.events, EventKind::kAcquireOk);
  ASSERT_EQ(acquired.size(), 2u) << dump(run.events);
  const std::int64_t t1 = *acquired[0].token;
  const std::int64_t t2 = *acquired[1].token;

  auto lost = logs_starting(run.events, "lease-check lost ttl=");
  ASSERT_EQ(lost.size(), 1u) << dump(run.events);
  EXPECT_EQ(lost[0].detail.rfind("lease-check lost ttl=-1", 0), 0u) << lost[0].detail;
  EXPECT_EQ(lost[0].token, t1);
  EXPECT_EQ(lost[0].lease_id, lease);

  // The check caught it before (0,2): release (nothing left to delete), re-acquire, redo segment 0.
  const auto at = index_of(run.events, [](const Event& e) { return e.detail.rfind("lease-check lost", 0) == 0; });
  auto after = protocol(std::vector<Event>(run.events.begin() + static_cast<std::ptrdiff_t>(at) + 1, run.events.end()));
  ASSERT_GE(after.size(), 4u) << dump(after);
  EXPECT_EQ(after[0].kind, EventKind::kReleaseInvoke);
  EXPECT_EQ(after[1].kind, EventKind::kReleaseOk);
  EXPECT_FALSE(after[1].revision) << "the revoke deleted the key; this release deleted nothing";
  EXPECT_EQ(after[3].kind, EventKind::kAcquireOk);
  std::vector<std::pair<std::int64_t, std::int64_t>> written;
  for (const auto& e : after)
    if (e.kind == EventKind::kWriteInvoke) {
      EXPECT_EQ(e.token, t2);
      written.emplace_back(*e.segment, *e.chunk);
    }
  EXPECT_EQ(written, (std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 0}, {0, 1}, {0, 2}}));
  auto reqs = store.requests();
  EXPECT_EQ(std::count_if(reqs.begin(), reqs.end(), [&](const test::StoreRequest& r) { return r.token == t1; }), 2)
      << "(0,0) and (0,1) went out under t1; (0,2) never did";
}

TEST_F(WorkerDesignsTest, SelfStopAtCheckStopsBetweenTheCheckAndTheWrite) {
  test::FakeStore store;
  std::vector<Event> seen;
  bool stopped = false;
  std::size_t events_before_stop = 0;
  auto run = run_worker_process(
      args("w1", "self-stop", store.url(),
           {"--ttl-s", "5", "--segments", "1", "--chunks", "2", "--chunk-interval-ms", "5", "--check-lease-before-write",
            "--self-stop-at", "check"}),
      dir_->path() / "self-stop.err", [&](const Event& e, pid_t pid) {
        seen.push_back(e);
        if (e.kind != EventKind::kLog || e.detail != "self-stop at check") return;
        ASSERT_FALSE(stopped) << "the worker stops itself once";
        stopped = true;
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, WUNTRACED), pid);  // returns once the stop has happened
        ASSERT_TRUE(WIFSTOPPED(status));
        EXPECT_EQ(WSTOPSIG(status), SIGSTOP);
        EXPECT_EQ(proc_state(pid), 'T');
        events_before_stop = seen.size();
        EXPECT_TRUE(store.requests().empty()) << "stopped after the check, before the write";
        ASSERT_EQ(::kill(pid, SIGCONT), 0);
      });
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;
  ASSERT_TRUE(stopped);
  EXPECT_EQ(logs_starting(run.events, "self-stop at check").size(), 1u);
  const auto at = index_of(run.events, [](const Event& e) { return e.detail == "self-stop at check"; });
  ASSERT_GT(at, 0u);
  EXPECT_EQ(run.events[at - 1].detail.rfind("lease-check ok ttl=", 0), 0u) << "the check came right before";
  EXPECT_EQ(of_kind(std::vector<Event>(run.events.begin(), run.events.begin() + static_cast<std::ptrdiff_t>(at)),
                    EventKind::kWriteInvoke)
                .size(),
            0u);
  auto next = protocol(std::vector<Event>(run.events.begin() + static_cast<std::ptrdiff_t>(at) + 1, run.events.end()));
  ASSERT_FALSE(next.empty());
  EXPECT_EQ(next[0].kind, EventKind::kWriteInvoke) << "continued, it writes without checking again";
  EXPECT_EQ(next[0].chunk, 0);
  EXPECT_GE(run.events.size(), events_before_stop);
  // The second write is checked again, and does not stop.
  EXPECT_EQ(logs_starting(run.events, "lease-check ok").size(), 2u);
}

TEST_F(WorkerDesignsTest, SelfStopNeedsTheLeaseCheck) {
  auto run = run_worker_process(args("w1", "x", "http://127.0.0.1:1", {"--self-stop-at", "check"}), dir_->path() / "ss.err");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.stderr_text.find("--self-stop-at check needs --check-lease-before-write"), std::string::npos)
      << run.stderr_text;
}

// ---------------------------------------------------------------------------------------------
// --abort-on-pause-ms

TEST_F(WorkerDesignsTest, AbortOnPauseDropsTheHoldingBeforeTheNextWrite) {
  test::FakeStore store;
  bool paused = false;
  auto run = run_worker_process(
      args("w1", "abort-pause", store.url(),
           {"--ttl-s", "5", "--segments", "1", "--chunks", "3", "--chunk-interval-ms", "200", "--abort-on-pause-ms", "150"}),
      dir_->path() / "abort.err", [&](const Event& e, pid_t pid) {
        if (e.kind != EventKind::kWriteOk || paused) return;
        paused = true;
        ASSERT_EQ(::kill(pid, SIGSTOP), 0);
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, WUNTRACED), pid);
        ASSERT_TRUE(WIFSTOPPED(status));
        std::this_thread::sleep_for(400ms);  // the fault itself (a pause longer than 150 ms), not a synchronisation
        ASSERT_EQ(::kill(pid, SIGCONT), 0);
      });
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;
  auto aborts = logs_starting(run.events, "abort-on-pause ");
  ASSERT_EQ(aborts.size(), 1u) << dump(run.events);
  auto acquired = of_kind(run.events, EventKind::kAcquireOk);
  ASSERT_EQ(acquired.size(), 2u);
  const std::int64_t t1 = *acquired[0].token;
  const std::int64_t t2 = *acquired[1].token;
  EXPECT_EQ(aborts[0].token, t1);
  EXPECT_GE(std::stoll(aborts[0].detail.substr(15)), 150) << aborts[0].detail;
  ASSERT_TRUE(aborts[0].duration_ns);
  EXPECT_GE(*aborts[0].duration_ns, 150'000'000);
  // After the abort: release, re-acquire, and segment 0 again from chunk 0; t1 never sent again.
  const auto at = index_of(run.events, [](const Event& e) { return e.detail.rfind("abort-on-pause ", 0) == 0; });
  auto after = protocol(std::vector<Event>(run.events.begin() + static_cast<std::ptrdiff_t>(at) + 1, run.events.end()));
  ASSERT_GE(after.size(), 5u);
  EXPECT_EQ(after[0].kind, EventKind::kReleaseInvoke);
  EXPECT_EQ(after[0].token, t1);
  EXPECT_EQ(after[1].kind, EventKind::kReleaseOk);
  EXPECT_EQ(after[3].kind, EventKind::kAcquireOk);
  EXPECT_EQ(after[4].kind, EventKind::kWriteInvoke);
  EXPECT_EQ(after[4].chunk, 0);
  for (const auto& e : after)
    if (e.kind == EventKind::kWriteInvoke) {
      EXPECT_EQ(e.token, t2);
    }
  EXPECT_EQ(of_kind(run.events, EventKind::kWriteFail).size(), 0u) << "it dropped the holding itself";
}

// ---------------------------------------------------------------------------------------------
// --token-source timestamp (and libfaketime)

constexpr const char* kFaketimeLib = kFaketimeLibrary;

std::map<std::string, std::string> faketime_env(std::chrono::milliseconds offset, bool fake_monotonic = false) {
  std::map<std::string, std::string> env;
  for (auto& [k, v] : faketime_environment(offset, std::getenv("ASAN_OPTIONS"), fake_monotonic)) env[k] = v;
  return env;
}

TEST(FaketimeEnvironment, SpellsTheOffsetAsLibfaketimeReadsItAndKeepsTheCallersAsanOptions) {
  auto env = [](std::chrono::milliseconds ms, const char* asan, bool mono) {
    std::map<std::string, std::string> m;
    for (auto& [k, v] : faketime_environment(ms, asan, mono)) m[k] = v;
    return m;
  };
  auto a = env(-30s, nullptr, false);
  EXPECT_EQ(a.at("FAKETIME"), "-30s");
  EXPECT_EQ(a.at("LD_PRELOAD"), kFaketimeLibrary);
  EXPECT_EQ(a.at("FAKETIME_DONT_FAKE_MONOTONIC"), "1");
  EXPECT_EQ(a.at("ASAN_OPTIONS"), "verify_asan_link_order=0:allocator_release_to_os_interval_ms=-1");
  EXPECT_EQ(env(1500ms, "", false).at("FAKETIME"), "+1.5s");
  EXPECT_EQ(env(-250ms, "", false).at("FAKETIME"), "-0.25s");
  EXPECT_EQ(env(3007ms, "", false).at("FAKETIME"), "+3.007s");
  auto b = env(1s, "abort_on_error=1:detect_leaks=1", true);
  EXPECT_EQ(b.count("FAKETIME_DONT_FAKE_MONOTONIC"), 0u);
  EXPECT_EQ(b.at("ASAN_OPTIONS"),
            "abort_on_error=1:detect_leaks=1:verify_asan_link_order=0:allocator_release_to_os_interval_ms=-1");
}

// The CI failure of 2026-12-02: a sanitizer build of the worker under libfaketime hung before
// main() (clang's ASan allocator read the clock through libfaketime, which allocated). Which
// allocation comes first depends on the environment, and `--help` is the path that hung here on
// every try; a build without the fix hangs and this test times out.
TEST_F(WorkerDesignsTest, UnderLibfaketimeTheWorkerStartsAndAnswers) {
  if (!std::filesystem::exists(kFaketimeLib)) GTEST_SKIP() << kFaketimeLib << " missing (apt-get install faketime)";
  for (bool mono : {false, true}) {
    bp::environment env = boost::this_process::environment();
    for (const auto& [name, value] : faketime_env(-30s, mono)) env[name] = value;
    bp::ipstream out;
    bp::child child(bp::exe = FENCECHECK_WORKER_BIN, bp::args = std::vector<std::string>{"--help"}, bp::std_out > out,
                    bp::std_err > bp::null, bp::std_in < bp::null, env);
    std::string text((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
    child.wait();
    EXPECT_EQ(child.exit_code(), 0) << "fake_monotonic " << mono;
    EXPECT_NE(text.find("Usage: fencecheck-worker"), std::string::npos) << text;
  }
}

TEST_F(WorkerDesignsTest, TimestampTokensFollowTheWallClockAndASkewedClockGivesLowerOnes) {
  if (!std::filesystem::exists(kFaketimeLib)) GTEST_SKIP() << kFaketimeLib << " missing (apt-get install faketime)";
  test::FakeStore store;
  const std::string lock = "timestamps";
  const std::int64_t before = realtime_now_ns();
  auto normal = run_worker_process(
      args("w1", lock, store.url(), {"--segments", "1", "--chunks", "2", "--chunk-interval-ms", "5", "--token-source", "timestamp"}),
      dir_->path() / "ts-normal.err");
  const std::int64_t after = realtime_now_ns();
  ASSERT_EQ(normal.exit_code, 0) << dump(normal.events) << normal.stderr_text;
  const Event a = of_kind(normal.events, EventKind::kAcquireOk).at(0);
  EXPECT_EQ(a.detail, "token-source timestamp");
  ASSERT_TRUE(a.token);
  EXPECT_GE(*a.token, before);
  EXPECT_LE(*a.token, after);
  EXPECT_NE(*a.token, *a.revision) << "not the etcd revision";
  for (const auto& w : of_kind(normal.events, EventKind::kWriteOk)) EXPECT_EQ(w.token, a.token);

  // The same design, started later, on a clock 30 s behind: a LOWER token than the earlier holder.
  // The fenced store rejects it every time: the skewed holder is fenced out (exit 1 after its
  // acquisition attempts).
  // FAKETIME_DONT_FAKE_MONOTONIC=1: the skew is the wall clock's only (libfaketime 0.9.10 would
  // otherwise also shift CLOCK_MONOTONIC and turn every timed condition-variable wait into a hang).
  const std::map<std::string, std::string> env = faketime_env(-30s);
  auto skewed = run_worker_process(args("w2", lock, store.url(),
                                        {"--segments", "1", "--chunks", "2", "--chunk-interval-ms", "5", "--token-source",
                                         "timestamp", "--max-acquires", "2"}),
                                   dir_->path() / "ts-skewed.err", {}, env);
  EXPECT_EQ(skewed.exit_code, 1) << dump(skewed.events) << skewed.stderr_text;
  auto skewed_acquires = of_kind(skewed.events, EventKind::kAcquireOk);
  ASSERT_EQ(skewed_acquires.size(), 2u) << dump(skewed.events) << skewed.stderr_text;
  for (const auto& b : skewed_acquires) {
    EXPECT_EQ(b.detail, "token-source timestamp");
    EXPECT_LT(*b.token, *a.token) << "a later acquisition, a lower token";
    EXPECT_LT(*b.token, after - 20'000'000'000LL) << "about 30 s behind";
  }
  auto fails = of_kind(skewed.events, EventKind::kWriteFail);
  ASSERT_EQ(fails.size(), 2u);
  for (const auto& f : fails) EXPECT_EQ(f.high_water, a.token);
  EXPECT_TRUE(of_kind(skewed.events, EventKind::kWriteOk).empty());
}

TEST_F(WorkerDesignsTest, FaketimeWithAFakedMonotonicClockIsRefusedNotAHang) {
  if (!std::filesystem::exists(kFaketimeLib)) GTEST_SKIP() << kFaketimeLib << " missing (apt-get install faketime)";
  auto run = run_worker_process(args("w1", "faked-mono", "http://127.0.0.1:1", {"--token-source", "timestamp"}),
                                dir_->path() / "faked-mono.err", {},
                                faketime_env(-30s, /*fake_monotonic=*/true));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(run.events.empty());
  EXPECT_NE(run.stderr_text.find("FAKETIME_DONT_FAKE_MONOTONIC=1"), std::string::npos) << run.stderr_text;
}

// ---------------------------------------------------------------------------------------------
// --job counter

TEST_F(WorkerDesignsTest, CounterJobIncrementsReadModifyWriteUnderItsToken) {
  RealStore store;
  auto run = run_worker_process(
      args("w1", "counter", store.url(), {"--job", "counter", "--increments", "5", "--chunk-interval-ms", "5"}),
      dir_->path() / "counter.err");
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;
  const std::int64_t t1 = *of_kind(run.events, EventKind::kAcquireOk).at(0).token;
  auto invokes = of_kind(run.events, EventKind::kWriteInvoke);
  auto oks = of_kind(run.events, EventKind::kWriteOk);
  ASSERT_EQ(oks.size(), 5u) << dump(run.events);
  ASSERT_EQ(invokes.size(), 5u);
  for (std::size_t i = 0; i < oks.size(); ++i) {
    const std::string what = "counter " + std::to_string(i) + " -> " + std::to_string(i + 1);
    EXPECT_EQ(invokes[i].detail, what);
    EXPECT_EQ(oks[i].detail, what);
    EXPECT_EQ(oks[i].key, "ledger");
    EXPECT_EQ(oks[i].token, t1);
    EXPECT_EQ(oks[i].high_water, t1);
    EXPECT_FALSE(oks[i].segment);
    EXPECT_FALSE(oks[i].chunk);
  }
  EXPECT_EQ(of_kind(run.events, EventKind::kJobDone).size(), 1u);
  const StoreSnapshot snap = store.store->snapshot();
  EXPECT_EQ(snap.counters.at("ledger"), 5);
  ASSERT_EQ(snap.readback.log.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(snap.readback.log[i].kind, WriteKind::kCounter);
    EXPECT_EQ(snap.readback.log[i].value, static_cast<std::int64_t>(i) + 1);
    EXPECT_EQ(snap.readback.log[i].client, "w1");
  }
}

TEST_F(WorkerDesignsTest, CounterJobReacquiresAfterARejectedIncrementAndRedoesIt) {
  test::FakeStore store;
  store.fence_out_first_token();
  auto run = run_worker_process(
      args("w1", "counter-fenced", store.url(), {"--job", "counter", "--increments", "3", "--chunk-interval-ms", "5"}),
      dir_->path() / "counter-fenced.err");
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;
  auto acquired = of_kind(run.events, EventKind::kAcquireOk);
  ASSERT_EQ(acquired.size(), 2u);
  auto fails = of_kind(run.events, EventKind::kWriteFail);
  ASSERT_EQ(fails.size(), 1u) << dump(run.events);
  EXPECT_EQ(fails[0].token, acquired[0].token);
  EXPECT_EQ(fails[0].detail.rfind("counter 0 -> 1: ", 0), 0u) << fails[0].detail;
  EXPECT_EQ(fails[0].high_water, *acquired[0].token + 1);
  auto oks = of_kind(run.events, EventKind::kWriteOk);
  ASSERT_EQ(oks.size(), 3u);
  EXPECT_EQ(oks[0].detail, "counter 0 -> 1");  // the same increment again, under the new token
  for (const auto& ok : oks) EXPECT_EQ(ok.token, acquired[1].token);
  EXPECT_EQ(store.counter("ledger"), 3);
}

// ---------------------------------------------------------------------------------------------
// --job side-effect

TEST_F(WorkerDesignsTest, SideEffectJobPostsOneEffectAfterEachSegment) {
  RealStore store(EffectMode::kIdempotent);
  auto run = run_worker_process(args("w1", "effects", store.url(),
                                     {"--job", "side-effect", "--segments", "2", "--chunks", "2",
                                      "--chunk-interval-ms", "5"}),
                                dir_->path() / "effects.err");
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;
  const std::int64_t t1 = *of_kind(run.events, EventKind::kAcquireOk).at(0).token;
  // (0,0) (0,1) effect0 (1,0) (1,1) effect1
  std::vector<std::string> order;
  for (const auto& e : of_kind(run.events, EventKind::kWriteOk))
    order.push_back(e.key + (e.chunk ? "/" + std::to_string(*e.segment) + "/" + std::to_string(*e.chunk)
                                     : "/" + std::to_string(*e.segment) + " " + e.detail));
  // The guard in the detail is the one the store reports it applied (its configuration).
  EXPECT_EQ(order, (std::vector<std::string>{"ledger/0/0", "ledger/0/1", "ledger.effect/0 effect seg0 applied (idempotent)",
                                             "ledger/1/0", "ledger/1/1", "ledger.effect/1 effect seg1 applied (idempotent)"}));
  auto invokes = of_kind(run.events, EventKind::kWriteInvoke);
  auto effect_invoke = std::find_if(invokes.begin(), invokes.end(), [](const Event& e) { return e.key == "ledger.effect"; });
  ASSERT_NE(effect_invoke, invokes.end());
  EXPECT_EQ(effect_invoke->detail, "effect seg0");
  EXPECT_FALSE(effect_invoke->chunk);

  const StoreSnapshot snap = store.store->snapshot();
  ASSERT_EQ(snap.effects.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(snap.effects[i].key, "ledger");
    EXPECT_EQ(snap.effects[i].id, "seg" + std::to_string(i));  // the job's identity, not the holder's
    EXPECT_EQ(snap.effects[i].token, t1);
    EXPECT_EQ(snap.effects[i].client, "w1");
    EXPECT_TRUE(snap.effects[i].applied);
    EXPECT_EQ(snap.effects[i].mode, EffectMode::kIdempotent);
  }
}

TEST_F(WorkerDesignsTest, ARejectedEffectRedoesTheSegmentAndPostsTheSameEffectAgain) {
  test::FakeStore store;
  store.reject_effect_once();
  auto run = run_worker_process(args("w1", "effect-fenced", store.url(),
                                     {"--job", "side-effect", "--segments", "2", "--chunks", "2", "--chunk-interval-ms", "5"}),
                                dir_->path() / "effect-fenced.err");
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;
  auto acquired = of_kind(run.events, EventKind::kAcquireOk);
  ASSERT_EQ(acquired.size(), 2u) << dump(run.events);
  const std::int64_t t1 = *acquired[0].token;
  const std::int64_t t2 = *acquired[1].token;
  auto fails = of_kind(run.events, EventKind::kWriteFail);
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_EQ(fails[0].key, "ledger.effect");
  EXPECT_EQ(fails[0].segment, 0);
  EXPECT_EQ(fails[0].token, t1);
  std::vector<std::string> effects;
  std::vector<std::string> chunks;
  for (const auto& r : store.requests()) {
    if (r.kind == "effect") {
      EXPECT_EQ(r.key, "ledger");
      EXPECT_EQ(r.effect, "");  // the worker does not choose the guard: no Fencecheck-Effect header
      effects.push_back(r.body + "@" + (r.token == t1 ? "t1" : "t2") + "=" + std::to_string(r.status));
    } else {
      chunks.push_back(std::to_string(r.segment) + "/" + std::to_string(r.chunk) + "@" + (r.token == t1 ? "t1" : "t2"));
    }
  }
  EXPECT_EQ(effects, (std::vector<std::string>{"seg0@t1=409", "seg0@t2=200", "seg1@t2=200"}));
  EXPECT_EQ(chunks, (std::vector<std::string>{"0/0@t1", "0/1@t1", "0/0@t2", "0/1@t2", "1/0@t2", "1/1@t2"}));
  EXPECT_GT(t2, t1);
}


// ---------------------------------------------------------------------------------------------
// --keepalive inline and --cpu-per-write-ms

TEST_F(WorkerDesignsTest, InlineKeepaliveRenewsTheLeaseOnTheJobThread) {
  test::FakeStore store;
  std::int64_t lease = 0;
  std::int64_t ttl_left_s = -2;
  // A job of ~3 s against a 2 s TTL: without renewals the lease would be gone by chunk 25.
  auto run = run_worker_process(args("w1", "inline-ka", store.url(),
                                     {"--ttl-s", "2", "--segments", "1", "--chunks", "30", "--chunk-interval-ms", "100",
                                      "--keepalive", "inline"}),
                                dir_->path() / "inline.err", [&](const Event& e, pid_t) {
                                  if (e.kind == EventKind::kAcquireOk) lease = *e.lease_id;
                                  if (e.kind == EventKind::kWriteInvoke && e.chunk == 25)
                                    ttl_left_s = EtcdClient(etcd_->client_url()).lease_time_to_live(lease).ttl.count();
                                });
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;
  EXPECT_GT(ttl_left_s, 0) << "the lease was not renewed";
  EXPECT_EQ(of_kind(run.events, EventKind::kAcquireOk).size(), 1u);
  EXPECT_EQ(of_kind(run.events, EventKind::kWriteOk).size(), 30u);
  EXPECT_TRUE(of_kind(run.events, EventKind::kLeaseLost).empty()) << dump(run.events);
  EXPECT_TRUE(of_kind(run.events, EventKind::kKeepaliveFail).empty()) << dump(run.events);
}

TEST_F(WorkerDesignsTest, InlineKeepaliveFallsBehindWhileTheJobThreadComputes) {
  test::FakeStore store;
  // The write costs 2.5 s of this thread's CPU: the renewal that follows comes after the 2 s TTL.
  auto run = run_worker_process(args("w1", "inline-busy", store.url(),
                                     {"--ttl-s", "2", "--segments", "1", "--chunks", "1", "--keepalive", "inline",
                                      "--cpu-per-write-ms", "2500"}),
                                dir_->path() / "busy.err");
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;
  const Event acquired = of_kind(run.events, EventKind::kAcquireOk).at(0);
  auto lost = of_kind(run.events, EventKind::kLeaseLost);
  ASSERT_EQ(lost.size(), 1u) << dump(run.events);
  EXPECT_EQ(lost[0].lease_id, acquired.lease_id);
  EXPECT_EQ(lost[0].token, acquired.token);
  EXPECT_NE(lost[0].detail.find("inline renewal"), std::string::npos) << lost[0].detail;
  // The holder's belief is intact: it writes anyway, with the token of the lease it lost.
  const auto lost_at = index_of(run.events, [](const Event& e) { return e.kind == EventKind::kLeaseLost; });
  const auto write_at = index_of(run.events, [](const Event& e) { return e.kind == EventKind::kWriteInvoke; });
  EXPECT_LT(lost_at, write_at);
  EXPECT_EQ(run.events[write_at].token, acquired.token);
  // Its CPU work took at least 2.5 s of wall time between the acquire and the write.
  EXPECT_GE(run.events[write_at].src_ns - acquired.src_ns, 2'500'000'000);
}

}  // namespace
}  // namespace fencecheck
