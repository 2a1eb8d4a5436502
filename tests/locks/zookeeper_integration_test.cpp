// The zookeeper kind against a real ZooKeeper 3.8 server the test starts itself (the kind's own
// embedded server, Debian's zookeeper package) on a free loopback port: the lock recipe, its
// tokens, a holder stopped past its session timeout, restarts on the same and on fresh data, the
// issuer's history, orphan cleanup, and an endpoint with nothing behind it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "fake_resource_fields.h"
#include "fencecheck/process/child_process.h"
#include "fencecheck/locks/lock_client.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "temp_dir.h"
#include "watch_sink.h"
#include "zookeeper_server.h"

namespace {

namespace fs = std::filesystem;
namespace locks = fencecheck::locks;
using namespace std::chrono_literals;
using fencecheck::Event;
using fencecheck::EventKind;
using fencecheck::testing::TempDir;
using Clock = std::chrono::steady_clock;

const locks::LockServiceKind& kind() { return *locks::find_lock_service_kind("zookeeper"); }

using Server = fencecheck::testing::ZooKeeperServer;

/// The watch's events, waited on by predicate (no sleeps); ZooKeeper's waits include a session
/// timeout, so they get 20 s.
class Events : public fencecheck::testing::Sink {
 public:
  std::function<void(Event)> sink() { return fn(); }
  bool wait(const std::function<bool(const std::vector<Event>&)>& pred, std::chrono::milliseconds bound = 20s) {
    return Sink::wait(pred, bound);
  }
  std::vector<Event> all() { return events(); }
};

const Event* find(const std::vector<Event>& events, EventKind kind, const std::string& key) {
  for (const auto& e : events)
    if (e.kind == kind && e.lock_key == key) return &e;
  return nullptr;
}

std::string dump(const std::vector<Event>& events) {
  std::string out = "the history:\n";
  for (const auto& e : events) out += "  " + fencecheck::to_json_line(e) + "\n";
  return out;
}

std::size_t count(const std::vector<Event>& events, EventKind kind) {
  return static_cast<std::size_t>(
      std::count_if(events.begin(), events.end(), [&](const Event& e) { return e.kind == kind; }));
}

/// A holder in a process of its own (zookeeper_holder), its stdout lines kept.
class Holder {
 public:
  Holder(const fs::path& dir, const std::string& endpoint, int ttl_ms, const std::string& lock) {
    fencecheck::process::ChildSpec spec;
    spec.name = "holder";
    spec.exe = FENCECHECK_ZOOKEEPER_HOLDER;
    spec.args = {endpoint, std::to_string(ttl_ms), lock};
    spec.stderr_log = dir / "holder.stderr";
    proc_ = std::make_unique<fencecheck::process::ChildProcess>(spec, [this](std::string_view line, std::int64_t, bool eof) {
      std::lock_guard l(mu_);
      if (eof) closed_ = true;
      else lines_.emplace_back(line);
      cv_.notify_all();
    });
  }
  ~Holder() {
    if (proc_) proc_->terminate(1000ms);
  }
  /// The first line starting with `prefix` at index >= from (its index), waiting up to `bound`.
  std::optional<std::pair<std::size_t, std::string>> line(const std::string& prefix, std::size_t from = 0,
                                                          std::chrono::milliseconds bound = 20s) {
    std::unique_lock l(mu_);
    std::optional<std::pair<std::size_t, std::string>> out;
    cv_.wait_for(l, bound, [&] {
      for (std::size_t i = from; i < lines_.size(); ++i)
        if (lines_[i].rfind(prefix, 0) == 0) {
          out = {i, lines_[i]};
          return true;
        }
      return closed_;
    });
    return out;
  }
  std::size_t size() {
    std::lock_guard l(mu_);
    return lines_.size();
  }
  pid_t pid() const { return proc_->pid(); }
  std::string stderr_text(const fs::path& dir) const {
    std::ifstream in(dir / "holder.stderr");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  bool closed_ = false;
  std::unique_ptr<fencecheck::process::ChildProcess> proc_;
};

/// The n-th whitespace-separated field of a line, as an integer.
std::int64_t field(const std::string& line, int n) {
  std::istringstream in(line);
  std::string word;
  for (int i = 0; i <= n; ++i) in >> word;
  return std::stoll(word);
}
std::string word(const std::string& line, int n) {
  std::istringstream in(line);
  std::string w;
  for (int i = 0; i <= n; ++i) in >> w;
  return w;
}

class ZooKeeperLock : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<Server>(); }
  static void TearDownTestSuite() { server_.reset(); }
  static std::unique_ptr<Server> server_;
};
std::unique_ptr<Server> ZooKeeperLock::server_;

TEST_F(ZooKeeperLock, SessionTimeoutsAreGrantedAsAskedAndCloseEndsThem) {
  auto c = server_->client();
  for (auto ttl : {1000ms, 2000ms, 10000ms}) {
    const locks::Session s = c->open_session(ttl);
    EXPECT_NE(s.id, 0);
    EXPECT_EQ(s.ttl, ttl) << "the embedded server grants 1-60 s as asked";
    EXPECT_TRUE(c->keepalive(s));
    const auto left = c->remaining(s);
    ASSERT_TRUE(left.has_value());
    EXPECT_GT(*left, 0ms);
    EXPECT_LE(*left, ttl);
    EXPECT_TRUE(c->close_session(s));
    EXPECT_FALSE(c->keepalive(s)) << "a closed session is gone";
    EXPECT_FALSE(c->remaining(s).has_value());
    EXPECT_FALSE(c->close_session(s)) << "closing it twice";
  }
}

TEST_F(ZooKeeperLock, ContendedTokensStrictlyIncreaseAcrossGrants) {
  const std::string lock = "fencecheck/contended";
  constexpr int kClients = 3;
  constexpr int kRounds = 8;
  std::mutex mu;
  std::vector<std::int64_t> tokens;  // in grant order: appended while holding
  std::atomic<int> holders{0};
  std::atomic<int> overlaps{0};
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&] {
      try {
        auto c = server_->client();
        const locks::Session s = c->open_session(5000ms);
        for (int r = 0; r < kRounds; ++r) {
          const auto held = c->acquire(lock, s, 20s, {});
          if (!held) throw std::runtime_error("not acquired within 20 s");
          if (holders.fetch_add(1) != 0) ++overlaps;
          {
            std::lock_guard l(mu);
            tokens.push_back(held->token);
          }
          holders.fetch_sub(1);
          const locks::Released rel = c->release(lock, *held, s);
          if (!rel.existed || rel.token != held->token || rel.lease_id != s.id)
            throw std::runtime_error("release did not delete its own znode");
          if (!rel.revision || *rel.revision <= held->token)
            throw std::runtime_error("a release's revision (its delete's zxid) must follow its create's");
        }
        c->close_session(s);
      } catch (const std::exception& e) {
        std::lock_guard l(mu);
        errors.emplace_back(e.what());
      }
    });
  for (auto& t : threads) t.join();
  ASSERT_TRUE(errors.empty()) << errors.front();
  EXPECT_EQ(overlaps.load(), 0) << "two holders at once";
  ASSERT_EQ(tokens.size(), static_cast<std::size_t>(kClients * kRounds));
  for (std::size_t i = 1; i < tokens.size(); ++i)
    EXPECT_GT(tokens[i], tokens[i - 1]) << "grant " << i << " got a token not above the one before";
}

TEST_F(ZooKeeperLock, WaiterIsGrantedOnlyAfterTheHoldersRelease) {
  const std::string lock = "fencecheck/waiter";
  Events events;
  auto watch = server_->inst->watch(lock, events.sink());
  auto a = server_->client();
  auto b = server_->client();
  const locks::Session sa = a->open_session(5000ms);
  const locks::Session sb = b->open_session(5000ms);
  const auto held_a = a->acquire(lock, sa, 5s, {});
  ASSERT_TRUE(held_a);
  std::atomic<bool> released{false};
  std::atomic<bool> done{false};
  bool released_when_granted = false;
  std::optional<locks::Holding> held_b;
  std::thread waiter([&] {
    held_b = b->acquire(lock, sb, 20s, {});
    released_when_granted = released.load();
    done = true;
  });
  // B is waiting once its znode exists (the issuer's history shows its grant).
  ASSERT_TRUE(events.wait([&](const auto& ev) {
    return std::any_of(ev.begin(), ev.end(), [&](const Event& e) {
      return e.kind == EventKind::kLockGrant && e.lease_id == sb.id;
    });
  })) << "B's znode never appeared";
  EXPECT_FALSE(done.load()) << "B returned while A still held the lock";
  released = true;
  EXPECT_TRUE(a->release(lock, *held_a, sa).existed);
  waiter.join();
  ASSERT_TRUE(held_b);
  EXPECT_TRUE(released_when_granted);
  EXPECT_GT(held_b->token, held_a->token);
  ASSERT_TRUE(held_b->revision);
  EXPECT_GE(*held_b->revision, held_b->token) << "the grant was seen at or after its create";
  EXPECT_TRUE(b->release(lock, *held_b, sb).existed);
  // Releasing again: already gone, and never someone else's.
  EXPECT_FALSE(b->release(lock, *held_b, sb).existed);
  watch->stop();
}

TEST_F(ZooKeeperLock, AStoppedHolderLosesItsZnodeAndTheWaiterGetsALargerToken) {
  const std::string lock = "fencecheck/sigstop";
  Events events;
  auto watch = server_->inst->watch(lock, events.sink());
  TempDir dir("zk-holder");
  Holder holder(dir.path(), server_->inst->endpoints_text(), 1500, lock);
  const auto session = holder.line("session ");
  const auto held = holder.line("held ");
  ASSERT_TRUE(session && held) << holder.stderr_text(dir.path());
  const std::int64_t holder_session = field(session->second, 1);
  const std::int64_t holder_token = field(held->second, 1);
  const std::string holder_key = word(held->second, 2);
  EXPECT_EQ(field(session->second, 2), 1500) << "granted as asked";

  ASSERT_EQ(::kill(holder.pid(), SIGSTOP), 0);
  auto c = server_->client();
  const locks::Session s = c->open_session(5000ms);
  const auto got = c->acquire(lock, s, 20s, {});
  ASSERT_TRUE(got) << "the stopped holder's session never expired";
  EXPECT_GT(got->token, holder_token);

  // The issuer's history: the holder's znode deleted by the expiry, before the waiter's grant.
  ASSERT_TRUE(events.wait([&](const auto& ev) { return find(ev, EventKind::kLockDelete, holder_key) != nullptr; }));
  const auto ev = events.all();
  const Event* del = find(ev, EventKind::kLockDelete, holder_key);
  EXPECT_EQ(del->detail, "expired");
  EXPECT_EQ(del->token, holder_token);
  EXPECT_EQ(del->lease_id, holder_session);
  EXPECT_FALSE(del->revision.has_value());

  // Resumed, the holder's client learns the expiry. What it believes first (its own thread may
  // not have run yet) goes to the test log; that it learns it is the assertion.
  const std::int64_t resumed_ns = fencecheck::monotonic_ns();
  ASSERT_EQ(::kill(holder.pid(), SIGCONT), 0);
  std::optional<std::string> first;
  std::optional<std::int64_t> learned_ns;
  for (std::size_t from = 0; !learned_ns;) {
    const auto l = holder.line("state ", from, 10s);
    if (!l) break;
    from = l->first + 1;
    if (field(l->second, 1) < resumed_ns) continue;  // written before the stop
    if (!first) first = word(l->second, 2);
    if (word(l->second, 2) == "expired") learned_ns = field(l->second, 1);
  }
  ASSERT_TRUE(learned_ns) << "the resumed holder never saw its session expire";
  std::cout << "[ zookeeper ] the resumed holder first read \"" << first.value_or("?") << "\", and \"expired\" "
            << (*learned_ns - resumed_ns) / 1000000 << " ms after SIGCONT\n";
  EXPECT_TRUE(c->release(lock, *got, s).existed);
  watch->stop();
}

TEST_F(ZooKeeperLock, AWaiterWhoseSessionExpiresIsToldSoNeverGranted) {
  const std::string lock = "fencecheck/waiter-expired";
  Events events;
  auto watch = server_->inst->watch(lock, events.sink());
  auto a = server_->client();
  const locks::Session sa = a->open_session(5000ms);
  const auto held = a->acquire(lock, sa, 5s, {});
  ASSERT_TRUE(held);
  TempDir dir("zk-waiter");
  Holder waiter(dir.path(), server_->inst->endpoints_text(), 1000, lock);
  const auto session = waiter.line("session ");
  ASSERT_TRUE(session) << waiter.stderr_text(dir.path());
  const std::int64_t waiter_session = field(session->second, 1);
  // Waiting once its znode exists; stopped past its session timeout, the server deletes it.
  auto has = [&](EventKind kind) {
    return events.wait([&](const auto& ev) {
      return std::any_of(ev.begin(), ev.end(), [&](const Event& e) { return e.kind == kind && e.lease_id == waiter_session; });
    });
  };
  ASSERT_TRUE(has(EventKind::kLockGrant));
  ASSERT_EQ(::kill(waiter.pid(), SIGSTOP), 0);
  ASSERT_TRUE(has(EventKind::kLockDelete));
  ASSERT_EQ(::kill(waiter.pid(), SIGCONT), 0);
  EXPECT_FALSE(waiter.line("held ", 0, 10s)) << "a waiter whose session expired was granted the lock";
  EXPECT_NE(waiter.stderr_text(dir.path()).find("expired while waiting for the lock"), std::string::npos)
      << waiter.stderr_text(dir.path());
  EXPECT_TRUE(a->release(lock, *held, sa).existed);
  watch->stop();
}

TEST_F(ZooKeeperLock, TheWatchTellsAnExpiryFromAReleaseAndDeliversEverythingBeforeStopReturns) {
  const std::string lock = "fencecheck/history";
  Events events;
  auto watch = server_->inst->watch(lock, events.sink());
  auto c = server_->client();
  // Each holding ends only once the history has its grant: a znode created and deleted between two
  // of the watch's listings would not be in it at all (zookeeper_watch.h).
  auto granted = [&](const std::string& key) {
    return events.wait([&](const auto& ev) { return find(ev, EventKind::kLockGrant, key) != nullptr; });
  };

  // 1. A release.
  const locks::Session s1 = c->open_session(5000ms);
  const auto h1 = c->acquire(lock, s1, 5s, {});
  ASSERT_TRUE(h1);
  ASSERT_TRUE(granted(h1->lock_key));
  ASSERT_TRUE(c->release(lock, *h1, s1).existed);
  // 2. A session closed while holding: a deliberate end.
  const locks::Session s2 = c->open_session(5000ms);
  const auto h2 = c->acquire(lock, s2, 5s, {});
  ASSERT_TRUE(h2);
  ASSERT_TRUE(granted(h2->lock_key));
  ASSERT_TRUE(c->close_session(s2));
  // 3. A holder killed (no close): its session expires.
  TempDir dir("zk-holder");
  std::int64_t killed_token = 0;
  std::string killed_key;
  {
    Holder holder(dir.path(), server_->inst->endpoints_text(), 1000, lock);
    const auto held = holder.line("held ");
    ASSERT_TRUE(held) << holder.stderr_text(dir.path());
    killed_token = field(held->second, 1);
    killed_key = word(held->second, 2);
    ASSERT_EQ(::kill(holder.pid(), SIGKILL), 0);
  }
  ASSERT_TRUE(events.wait([&](const auto& ev) { return find(ev, EventKind::kLockDelete, killed_key) != nullptr; }));
  // 4. A release by name of another session's holding.
  const locks::Session s4 = c->open_session(5000ms);
  const locks::Session s5 = c->open_session(5000ms);
  const auto h4 = c->acquire(lock, s4, 5s, {});
  ASSERT_TRUE(h4);
  ASSERT_TRUE(granted(h4->lock_key));
  const auto by_name = c->release_by_name(lock, s5);
  ASSERT_EQ(by_name.size(), 1u);
  EXPECT_EQ(by_name[0].lock_key, h4->lock_key);
  EXPECT_EQ(by_name[0].token, h4->token);
  EXPECT_EQ(by_name[0].lease_id, s4.id);
  EXPECT_FALSE(by_name[0].own);
  ASSERT_TRUE(by_name[0].revision);
  EXPECT_GT(*by_name[0].revision, h4->token) << "the delete's zxid";
  // 5. A last release, right before stop(): delivered by the time stop() returns.
  const auto h6 = c->acquire(lock, s5, 5s, {});
  ASSERT_TRUE(h6);
  ASSERT_TRUE(granted(h6->lock_key));
  ASSERT_TRUE(c->release(lock, *h6, s5).existed);
  watch->stop();

  const auto ev = events.all();
  for (const auto* h : {&*h1, &*h2, &*h4, &*h6}) {
    const Event* g = find(ev, EventKind::kLockGrant, h->lock_key);
    ASSERT_TRUE(g) << "no grant for " << h->lock_key;
    EXPECT_EQ(g->token, h->token);
    EXPECT_EQ(g->revision, h->token) << "a grant's revision is its create's zxid";
    EXPECT_EQ(g->source, "lock");
    const Event* d = find(ev, EventKind::kLockDelete, h->lock_key);
    ASSERT_TRUE(d) << "no delete for " << h->lock_key;
    EXPECT_EQ(d->token, h->token);
    EXPECT_EQ(d->detail, "released") << h->lock_key;
  }
  EXPECT_EQ(find(ev, EventKind::kLockGrant, h1->lock_key)->lease_id, s1.id);
  EXPECT_EQ(find(ev, EventKind::kLockDelete, h2->lock_key)->lease_id, s2.id);
  const Event* killed = find(ev, EventKind::kLockDelete, killed_key);
  EXPECT_EQ(killed->detail, "expired");
  EXPECT_EQ(killed->token, killed_token);
  // Grants in the watch's order carry increasing tokens.
  std::int64_t last = 0;
  for (const auto& e : ev)
    if (e.kind == EventKind::kLockGrant) {
      EXPECT_GT(*e.token, last);
      last = *e.token;
    }
  EXPECT_EQ(count(ev, EventKind::kLockGrant), 5u);
  EXPECT_EQ(count(ev, EventKind::kLockDelete), 5u);
  c->close_session(s4);
  c->close_session(s5);
}

TEST(ZooKeeperRestart, SameDataKeepsSessionsAndTokensRise) {
  Server server;
  const std::string lock = "fencecheck/restart";
  auto a = server.client();
  auto b = server.client();
  const locks::Session sa = a->open_session(8000ms);
  const auto before = a->acquire(lock, sa, 5s, {});
  ASSERT_TRUE(before);
  const int old_pid = server.inst->pid();
  server.inst->stop_server();
  EXPECT_EQ(server.inst->pid(), 0);
  EXPECT_FALSE(server.inst->healthy());
  server.inst->start_server(false);
  EXPECT_TRUE(server.inst->healthy());
  EXPECT_NE(server.inst->pid(), old_pid);
  // A's client reconnects by itself. (A connection made while the server was still starting can
  // wait 2/3 of the session timeout for its answer before the client tries again.)
  const auto deadline = Clock::now() + 15s;
  bool reconnected = false;
  while (!reconnected && Clock::now() < deadline) {
    try {
      reconnected = a->keepalive(sa);
      if (!reconnected) break;  // expired: the assertion below says so
    } catch (const locks::LockServiceError&) {
      std::this_thread::sleep_for(20ms);  // connecting: look again
    }
  }
  ASSERT_TRUE(reconnected) << "A's session did not come back within 15 s of the restart";
  // The holder's session is restored from the data: it still holds; B waits until A releases.
  const locks::Session sb = b->open_session(8000ms);
  EXPECT_FALSE(b->acquire(lock, sb, 1s, {}).has_value()) << "the restarted server forgot A's holding";
  EXPECT_TRUE(a->release(lock, *before, sa).existed) << "A's session and znode survived the restart";
  const auto after = b->acquire(lock, sb, 5s, {});
  ASSERT_TRUE(after);
  EXPECT_GT(after->token, before->token) << "same data: the zxid counter continues";
}

TEST(ZooKeeperRestart, FreshDataTokensGoBackwards) {
  Server server;
  const std::string lock = "fencecheck/fresh";
  server.inst->advance(200);
  Events events;
  auto watch = server.inst->watch(lock, events.sink());
  auto c = server.client();
  const locks::Session s = c->open_session(5000ms);
  const auto before = c->acquire(lock, s, 5s, {});
  ASSERT_TRUE(before);
  EXPECT_GT(before->token, 200) << "prior_revisions raised the zxid counter";
  // The watch has seen the grant (a znode created and lost between two of its listings would not
  // be in the history at all: zookeeper_watch.h).
  ASSERT_TRUE(events.wait([&](const auto& ev) { return find(ev, EventKind::kLockGrant, before->lock_key) != nullptr; }));
  server.inst->stop_server();
  watch->restarted_fresh();
  server.inst->start_server(true);
  // The old session is unknown to the new server: expired.
  auto d = server.client();
  const locks::Session s2 = d->open_session(5000ms);
  const auto after = d->acquire(lock, s2, 5s, {});
  ASSERT_TRUE(after);
  EXPECT_LT(after->token, before->token) << "fresh data: the zxid counter started again";
  EXPECT_LT(after->token, 20);
  // Same name as before (the fresh lock znode's sequence starts at 0 again), another czxid.
  EXPECT_EQ(after->lock_key, before->lock_key);
  ASSERT_TRUE(events.wait([&](const auto& ev) {
    return std::any_of(ev.begin(), ev.end(), [&](const Event& e) {
      return e.kind == EventKind::kLockGrant && e.token == after->token;
    });
  })) << "the watch never saw the fresh server's grant";
  watch->stop();
  const auto ev = events.all();
  // Same name under a fresh server, another czxid: a new grant after the old one, lower.
  const Event* old_grant = find(ev, EventKind::kLockGrant, before->lock_key);
  ASSERT_TRUE(old_grant);
  const Event* lost = find(ev, EventKind::kLockDelete, before->lock_key);
  ASSERT_TRUE(lost) << dump(ev);
  EXPECT_EQ(lost->detail, "lost");
  EXPECT_EQ(lost->token, before->token);
  const Event* new_grant = nullptr;
  for (const auto& e : ev)
    if (e.kind == EventKind::kLockGrant && e.token == after->token) new_grant = &e;
  ASSERT_TRUE(new_grant);
  EXPECT_GT(new_grant, old_grant) << "the regression is visible in the watch's order";
  // The old client saw zxids above the fresh server's: the server refuses it without telling it
  // that its session expired ("Refusing session ... as it has seen zxid"), so its state stays
  // unknown (connecting) rather than expired.
  EXPECT_THROW(c->keepalive(s), locks::LockServiceError);
}

TEST(ZooKeeperCleanup, AnOrphanedServerIsStoppedAndALiveHarnessesIsNot) {
  Server server;
  const fs::path run = server.dir.path();
  const int pid = server.inst->pid();
  ASSERT_GT(pid, 0);
  auto lines = kind().stop_orphans(run, false).said;
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("belongs to a live harness"), std::string::npos) << lines[0];
  EXPECT_TRUE(server.inst->healthy()) << "left alone";

  // The record says its harness is a process that is gone: an orphan.
  std::string text;
  {
    std::ifstream in(run / "zookeeper.pid");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  text = text.substr(0, text.find("harness ")) + "harness " + std::to_string(dead) + "\n";
  std::ofstream(run / "zookeeper.pid", std::ios::trunc) << text;
  const auto report = locks::stop_orphaned_lock_services(run, false);
  EXPECT_EQ(report.not_stopped, 0);
  lines = report.said;
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("stopped the orphaned embedded ZooKeeper pid " + std::to_string(pid)), std::string::npos)
      << lines[0];
  EXPECT_FALSE(server.inst->healthy());
  EXPECT_FALSE(fs::exists(run / "zookeeper.pid"));

  // A record naming another program: never signalled.
  const pid_t other = ::fork();
  if (other == 0) {
    ::pause();
    ::_exit(0);
  }
  std::ofstream(run / "zookeeper.pid") << "pid " << other << "\nconfig " << (run / "zookeeper.cfg").string()
                                        << "\nharness 1\n";
  lines = kind().stop_orphans(run, true).said;
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("not this run's ZooKeeper"), std::string::npos) << lines[0];
  EXPECT_EQ(::kill(other, 0), 0) << "the other program still runs";
  ::kill(other, SIGKILL);
  ::waitpid(other, nullptr, 0);
}

TEST(ZooKeeperEndpoints, NothingListeningIsUnavailableNamingTheEndpoint) {
  TempDir dir("zk-none");
  // A port that was free a moment ago: nothing listens there.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  const std::string endpoint = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  locks::LockServiceRunContext ctx;
  ctx.run_dir = dir.path();
  try {
    (void)kind().open({endpoint}, nlohmann::json::object(), ctx);
    FAIL() << "nothing listens at " << endpoint;
  } catch (const locks::LockServiceUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find(endpoint), std::string::npos) << e.what();
  }
}

}  // namespace
