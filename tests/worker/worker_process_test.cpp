// Runs the real fencecheck-worker binary against a real etcd (EmbeddedEtcd) and an in-test fenced
// store, reads its JSON-lines events as they come, and checks the protocol from three sides: the
// worker's events, etcd's own history (a watch on the lock prefix) and what the store received.
#include "fencecheck/process/server_support.h"
#include "worker_process_support.h"

namespace fencecheck {
namespace {

using namespace std::chrono_literals;

TEST_F(WorkerProcessTest, HappyPathAcquiresWritesEveryChunkAndReleases) {
  test::FakeStore store;
  const std::string lock = "happy";
  LockWatch watch(etcd_->client_url(), lock + "/");
  auto run = run_worker_process(args("w1", lock, store.url(),
                                     {"--segments", "2", "--chunks", "3", "--chunk-bytes", "100", "--chunk-interval-ms", "5"}),
                                dir_->path() / "happy.err");
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;
  for (const auto& e : run.events) EXPECT_EQ(e.source, "w1");

  // hello (the worker protocol's first line, docs/worker-protocol.md), acquire.invoke, acquire.ok,
  // then (write.invoke, write.ok) x 6, job.done, release.invoke, release.ok
  std::vector<EventKind> kinds;
  for (const auto& e : run.events)
    if (e.kind != EventKind::kLog && e.kind != EventKind::kPause) kinds.push_back(e.kind);
  std::vector<EventKind> expected{EventKind::kHello, EventKind::kAcquireInvoke, EventKind::kAcquireOk};
  for (int i = 0; i < 6; ++i) {
    expected.push_back(EventKind::kWriteInvoke);
    expected.push_back(EventKind::kWriteOk);
  }
  expected.insert(expected.end(), {EventKind::kJobDone, EventKind::kReleaseInvoke, EventKind::kReleaseOk});
  ASSERT_EQ(kinds, expected) << dump(run.events);

  const Event acquired = of_kind(run.events, EventKind::kAcquireOk).at(0);
  ASSERT_TRUE(acquired.token && acquired.lease_id && acquired.revision);
  EXPECT_EQ(acquired.lock, lock);
  EXPECT_EQ(acquired.lock_key.rfind(lock + "/", 0), 0u);
  const std::int64_t token = *acquired.token;

  auto oks = of_kind(run.events, EventKind::kWriteOk);
  for (std::size_t i = 0; i < oks.size(); ++i) {
    EXPECT_EQ(oks[i].segment, static_cast<std::int64_t>(i / 3));
    EXPECT_EQ(oks[i].chunk, static_cast<std::int64_t>(i % 3));
    EXPECT_EQ(oks[i].token, token);
    EXPECT_EQ(oks[i].high_water, token);
    EXPECT_EQ(oks[i].key, "ledger");
  }
  const Event released = of_kind(run.events, EventKind::kReleaseOk).at(0);
  EXPECT_EQ(released.lock_key, acquired.lock_key);
  EXPECT_EQ(released.token, token);
  ASSERT_TRUE(released.revision);
  EXPECT_GT(*released.revision, token);
  EXPECT_EQ(of_kind(run.events, EventKind::kJobDone).at(0).token, token);

  expect_matches_etcd_history(run.events, watch.events);

  auto reqs = store.requests();
  ASSERT_EQ(reqs.size(), 6u);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(reqs[i].token, token);
    EXPECT_EQ(reqs[i].client, "w1");
    ChunkDecode d = decode_chunk(reqs[i].body);
    ASSERT_TRUE(d.ok) << d.error;
    EXPECT_EQ(d.header, (ChunkHeader{"w1", token, "ledger", reqs[i].segment, reqs[i].chunk}));
    EXPECT_GE(reqs[i].body.size(), 100u);
  }
  EXPECT_TRUE(EtcdClient(etcd_->client_url()).range_prefix(lock + "/").empty());
}

TEST_F(WorkerProcessTest, RejectionReacquiresWithAGreaterTokenAndRedoesTheSegment) {
  test::FakeStore store;
  store.reject_once(1, 1);
  const std::string lock = "fenced";
  LockWatch watch(etcd_->client_url(), lock + "/");
  auto run = run_worker_process(args("w2", lock, store.url(),
                                     {"--segments", "2", "--chunks", "3", "--chunk-interval-ms", "5"}),
                                dir_->path() / "fenced.err");
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;

  auto acquired = of_kind(run.events, EventKind::kAcquireOk);
  ASSERT_EQ(acquired.size(), 2u) << dump(run.events);
  const std::int64_t t1 = *acquired[0].token;
  const std::int64_t t2 = *acquired[1].token;
  EXPECT_GT(t2, t1);
  EXPECT_NE(acquired[0].lock_key, acquired[1].lock_key);
  EXPECT_NE(acquired[0].lease_id, acquired[1].lease_id);

  auto fails = of_kind(run.events, EventKind::kWriteFail);
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_EQ(fails[0].segment, 1);
  EXPECT_EQ(fails[0].chunk, 1);
  EXPECT_EQ(fails[0].token, t1);
  EXPECT_TRUE(fails[0].high_water);

  // After the write.fail: release of the old holding, a new acquire, then segment 1 from chunk 0.
  auto fail_at = std::find_if(run.events.begin(), run.events.end(), [](const Event& e) { return e.kind == EventKind::kWriteFail; });
  std::vector<Event> after(fail_at + 1, run.events.end());
  std::vector<Event> protocol;
  std::copy_if(after.begin(), after.end(), std::back_inserter(protocol),
               [](const Event& e) { return e.kind != EventKind::kLog && e.kind != EventKind::kPause; });
  ASSERT_GE(protocol.size(), 6u) << dump(after);
  EXPECT_EQ(protocol[0].kind, EventKind::kReleaseInvoke);
  EXPECT_EQ(protocol[0].token, t1);
  EXPECT_EQ(protocol[1].kind, EventKind::kReleaseOk);
  EXPECT_EQ(protocol[2].kind, EventKind::kAcquireInvoke);
  EXPECT_EQ(protocol[3].kind, EventKind::kAcquireOk);
  EXPECT_EQ(protocol[4].kind, EventKind::kWriteInvoke);
  EXPECT_EQ(protocol[4].segment, 1);
  EXPECT_EQ(protocol[4].chunk, 0);
  EXPECT_EQ(protocol[4].token, t2);
  for (const auto& e : after) {
    if (e.kind == EventKind::kWriteInvoke) {
      EXPECT_EQ(e.token, t2) << to_json_line(e);
    }
  }

  // The store's side: the rejected token never came back.
  auto reqs = store.requests();
  auto rejected = std::find_if(reqs.begin(), reqs.end(), [](const test::StoreRequest& r) { return r.status == 409; });
  ASSERT_NE(rejected, reqs.end());
  EXPECT_EQ(rejected->token, t1);
  for (auto it = rejected + 1; it != reqs.end(); ++it) EXPECT_GT(it->token, t1) << "segment " << it->segment << " chunk " << it->chunk;
  // 3 (segment 0) + 2 (segment 1 up to the rejection) + 3 (segment 1 again)
  ASSERT_EQ(reqs.size(), 8u);
  std::vector<std::pair<std::int64_t, std::int64_t>> redo;
  for (auto it = rejected + 1; it != reqs.end(); ++it) redo.emplace_back(it->segment, it->chunk);
  EXPECT_EQ(redo, (std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 0}, {1, 1}, {1, 2}}));
  EXPECT_EQ(of_kind(run.events, EventKind::kJobDone).size(), 1u);
  EXPECT_EQ(of_kind(run.events, EventKind::kReleaseOk).size(), 2u);
  expect_matches_etcd_history(run.events, watch.events);
}

TEST_F(WorkerProcessTest, UnknownWriteOutcomeIsTreatedLikeARejection) {
  test::FakeStore store;
  store.stall_once(0, 1);  // never answered while the worker runs
  const std::string lock = "unsure";
  LockWatch watch(etcd_->client_url(), lock + "/");
  auto run = run_worker_process(
      args("w7", lock, store.url(), {"--segments", "1", "--chunks", "3", "--chunk-interval-ms", "5", "--store-timeout-ms", "300"}),
      dir_->path() / "unsure.err");
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;
  auto infos = of_kind(run.events, EventKind::kWriteInfo);
  ASSERT_EQ(infos.size(), 1u) << dump(run.events);
  EXPECT_EQ(infos[0].segment, 0);
  EXPECT_EQ(infos[0].chunk, 1);
  EXPECT_FALSE(infos[0].detail.empty());
  auto acquired = of_kind(run.events, EventKind::kAcquireOk);
  ASSERT_EQ(acquired.size(), 2u);
  const std::int64_t t1 = *acquired[0].token;
  const std::int64_t t2 = *acquired[1].token;
  EXPECT_EQ(infos[0].token, t1);
  EXPECT_GT(t2, t1);
  auto oks = of_kind(run.events, EventKind::kWriteOk);
  ASSERT_EQ(oks.size(), 4u);  // (0,0) with t1, then (0,0) (0,1) (0,2) with t2
  EXPECT_EQ(oks[0].token, t1);
  for (std::size_t i = 1; i < oks.size(); ++i) {
    EXPECT_EQ(oks[i].token, t2);
    EXPECT_EQ(oks[i].chunk, static_cast<std::int64_t>(i - 1));
  }
  auto reqs = store.requests();
  auto stalled = std::find_if(reqs.begin(), reqs.end(), [](const test::StoreRequest& r) { return r.status == 0; });
  ASSERT_NE(stalled, reqs.end());
  EXPECT_EQ(stalled->token, t1);
  for (auto it = stalled + 1; it != reqs.end(); ++it) EXPECT_EQ(it->token, t2);
  expect_matches_etcd_history(run.events, watch.events);
}

TEST_F(WorkerProcessTest, SigstopShowsUpAsAPauseAtLeastAsLongAsTheStop) {
  test::FakeStore store;
  constexpr auto kStop = 1500ms;
  bool stopped_once = false;
  std::chrono::steady_clock::duration stopped_for{};
  auto run = run_worker_process(
      args("w3", "paused", store.url(),
           {"--ttl-s", "5", "--segments", "1", "--chunks", "4", "--chunk-interval-ms", "20"}),
      dir_->path() / "paused.err", [&](const Event& e, pid_t pid) {
        if (e.kind != EventKind::kWriteOk || stopped_once) return;
        stopped_once = true;
        ASSERT_EQ(::kill(pid, SIGSTOP), 0);
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, WUNTRACED), pid);  // it really is stopped from here
        ASSERT_TRUE(WIFSTOPPED(status));
        const auto t0 = std::chrono::steady_clock::now();
        std::this_thread::sleep_for(kStop);  // the fault itself, not a synchronisation
        stopped_for = std::chrono::steady_clock::now() - t0;
        ASSERT_EQ(::kill(pid, SIGCONT), 0);
      });
  ASSERT_EQ(run.exit_code, 0) << dump(run.events) << run.stderr_text;
  ASSERT_TRUE(stopped_once);
  auto pauses = of_kind(run.events, EventKind::kPause);
  ASSERT_FALSE(pauses.empty()) << dump(run.events);
  std::int64_t longest = 0;
  for (const auto& p : pauses) longest = std::max(longest, p.duration_ns.value_or(0));
  EXPECT_GE(longest, std::chrono::duration_cast<std::chrono::nanoseconds>(stopped_for).count()) << dump(pauses);
  const Event first_ok = of_kind(run.events, EventKind::kWriteOk).at(0);
  auto long_pause = std::find_if(pauses.begin(), pauses.end(), [&](const Event& p) { return p.duration_ns == longest; });
  EXPECT_EQ(long_pause->token, first_ok.token);  // it held the lock while paused
  EXPECT_EQ(of_kind(run.events, EventKind::kWriteOk).size(), 4u);
}

TEST_F(WorkerProcessTest, SigtermWhileWaitingForTheLockReleasesAndExits) {
  test::FakeStore store;
  const std::string lock = "busy";
  EtcdClient etcd(etcd_->client_url());
  LeaseGrant holder = etcd.lease_grant(60s);
  ASSERT_TRUE(etcd.lock(lock, holder.id, 10s));
  LockWatch watch(etcd_->client_url(), lock + "/");
  std::string waiter_key;
  bool signalled = false;
  auto run = run_worker_process(args("w4", lock, store.url()), dir_->path() / "busy.err", [&](const Event& e, pid_t pid) {
    if (e.kind != EventKind::kAcquireInvoke || signalled) return;
    // Wait until the worker's own key is queued behind the holder's, then SIGTERM it.
    ASSERT_TRUE(watch.events.wait_until([&](const std::vector<WatchEvent>& h) {
      for (const auto& w : h)
        if (w.type == WatchEvent::Type::kPut) {
          waiter_key = w.kv.key;
          return true;
        }
      return false;
    }));
    signalled = true;
    ASSERT_EQ(::kill(pid, SIGTERM), 0);
  });
  EXPECT_EQ(run.exit_code, 143) << dump(run.events) << run.stderr_text;
  EXPECT_TRUE(of_kind(run.events, EventKind::kAcquireOk).empty());
  EXPECT_TRUE(of_kind(run.events, EventKind::kWriteInvoke).empty());
  EXPECT_TRUE(store.requests().empty());
  // Its waiting key is gone (the cancelled Lock, then the lease revoke); the holder's remains.
  EXPECT_TRUE(watch.events.wait_until([&](const std::vector<WatchEvent>& h) {
    return std::any_of(h.begin(), h.end(), [&](const WatchEvent& w) {
      return w.type == WatchEvent::Type::kDelete && w.kv.key == waiter_key;
    });
  }));
  EXPECT_EQ(etcd.range_prefix(lock + "/").size(), 1u);
  etcd.lease_revoke(holder.id);
}

TEST_F(WorkerProcessTest, UnreachableEtcdFailsAcquiresThenExitsOne) {
  test::FakeStore store;
  const std::string dead = "http://127.0.0.1:" + std::to_string(process::free_tcp_port("127.0.0.1"));
  auto a = args("w5", "nowhere", store.url(), {"--max-acquires", "2"});
  a[3] = dead;  // --etcd
  auto run = run_worker_process(a, dir_->path() / "dead.err");
  EXPECT_EQ(run.exit_code, 1) << dump(run.events);
  auto fails = of_kind(run.events, EventKind::kAcquireFail);
  ASSERT_EQ(fails.size(), 2u) << dump(run.events);
  EXPECT_NE(fails[0].detail.find(dead), std::string::npos) << fails[0].detail;
  // It says it gives up, and why, before it exits 1 (docs/worker-protocol.md: exit 1 alone is a crash).
  auto gave_up = of_kind(run.events, EventKind::kJobGaveUp);
  ASSERT_EQ(gave_up.size(), 1u) << dump(run.events);
  EXPECT_EQ(gave_up[0].detail, "gave up after 2 acquisition attempts (--max-acquires)");
}

TEST_F(WorkerProcessTest, BadArgumentsExitTwo) {
  auto run = run_worker_process({"--id", "w6", "--chunks", "0"}, dir_->path() / "bad.err");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(run.events.empty());
  EXPECT_NE(run.stderr_text.find("--lock is required"), std::string::npos) << run.stderr_text;
}

}  // namespace
}  // namespace fencecheck
