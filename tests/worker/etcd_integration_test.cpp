// Integration tests against a real etcd (Debian's etcd-server) started by EmbeddedEtcd: every
// claim the client's header makes about etcd's behaviour is checked here.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <thread>

#include "fencecheck/locks/etcd/embedded_etcd.h"
#include "fencecheck/locks/etcd/etcd_client.h"
#include "test_support.h"

namespace fencecheck {
namespace {

using namespace std::chrono_literals;

class EtcdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir("etcd-it");
    etcd_ = new EmbeddedEtcd();
    etcd_->start(dir_->path() / "data", dir_->path() / "etcd.log");
  }
  static void TearDownTestSuite() {
    delete etcd_;
    delete dir_;
    etcd_ = nullptr;
    dir_ = nullptr;
  }
  EtcdClient client() { return EtcdClient(etcd_->client_url()); }
  /// A lock name no other test uses.
  static std::string unique_name(const std::string& base) {
    static int n = 0;
    return base + std::to_string(++n);
  }
  /// Waits (bounded) until the keys under prefix number `count`.
  bool wait_for_keys(const std::string& prefix, std::size_t count) {
    EtcdClient etcd = client();
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (etcd.range_prefix(prefix).size() == count) return true;
      std::this_thread::sleep_for(10ms);  // polling a condition, bounded
    }
    return false;
  }

  static test::TempDir* dir_;
  static EmbeddedEtcd* etcd_;
};

test::TempDir* EtcdTest::dir_ = nullptr;
EmbeddedEtcd* EtcdTest::etcd_ = nullptr;

TEST_F(EtcdTest, EmbeddedEtcdIsHealthyOnLoopback) {
  EXPECT_EQ(etcd_->client_url().rfind("http://127.0.0.1:", 0), 0u) << etcd_->client_url();
  EXPECT_TRUE(etcd_->running());
  EXPECT_GT(etcd_->pid(), 0);
  EXPECT_TRUE(client().health());
}

TEST_F(EtcdTest, GrantKeepaliveRevoke) {
  EtcdClient etcd = client();
  LeaseGrant g = etcd.lease_grant(10s);
  EXPECT_NE(g.id, 0);
  EXPECT_EQ(g.ttl, 10s);
  EXPECT_EQ(etcd.lease_keepalive(g.id), std::optional<std::chrono::seconds>(10s));
  LeaseTimeToLive t = etcd.lease_time_to_live(g.id);
  EXPECT_TRUE(t.exists());
  EXPECT_EQ(t.granted_ttl, 10s);
  EXPECT_GT(t.ttl.count(), 0);

  EXPECT_TRUE(etcd.lease_revoke(g.id));
  EXPECT_EQ(etcd.lease_keepalive(g.id), std::nullopt);  // the reply has no TTL: the lease is gone
  EXPECT_FALSE(etcd.lease_time_to_live(g.id).exists());
  EXPECT_EQ(etcd.lease_time_to_live(g.id).ttl, -1s);
  EXPECT_FALSE(etcd.lease_revoke(g.id));  // HTTP 404, grpc code 5: not an error for us
  try {
    (void)etcd.lock(unique_name("lock-"), g.id, 5s);
    FAIL() << "locked with a revoked lease";
  } catch (const EtcdError& e) {
    // A gRPC error body followed by a chunked trailer: the message must still come through.
    EXPECT_EQ(e.http_status(), 500);
    EXPECT_EQ(e.etcd_message(), "etcdserver: requested lease not found");
    EXPECT_NE(std::string(e.what()).find("/v3/lock/lock"), std::string::npos) << e.what();
  }
}

TEST_F(EtcdTest, MinimumTtlIsTwoSecondsWithDefaultElectionTimeout) {
  EtcdClient etcd = client();
  LeaseGrant g = etcd.lease_grant(1s);
  EXPECT_EQ(g.ttl, 2s);  // ceil(1.5 * 1000 ms election timeout)
  etcd.lease_revoke(g.id);
}

TEST_F(EtcdTest, PutRangeDelete) {
  EtcdClient etcd = client();
  const std::string key = unique_name("kv-");
  EXPECT_EQ(etcd.range(key), std::nullopt);
  const std::int64_t r1 = etcd.put(key, "");
  auto kv = etcd.range(key);
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->value, "");  // etcd omits an empty value
  EXPECT_EQ(kv->create_revision, r1);
  EXPECT_EQ(kv->lease, 0);
  const std::int64_t r2 = etcd.put(key, std::string("v\0\xff", 3));
  kv = etcd.range(key);
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->value, std::string("v\0\xff", 3));
  EXPECT_EQ(kv->create_revision, r1);
  EXPECT_EQ(kv->mod_revision, r2);
  EXPECT_EQ(kv->version, 2);
  DeleteResult d = etcd.delete_key(key);
  EXPECT_EQ(d.deleted, 1);
  EXPECT_GT(d.revision, r2);
  EXPECT_EQ(etcd.delete_key(key).deleted, 0);
  EXPECT_THROW(etcd.put(key, "x", 12345), EtcdError);  // unknown lease
}

TEST_F(EtcdTest, ContendedLockTokenIsCreateRevisionNotHeaderRevision) {
  EtcdClient etcd = client();
  const std::string name = unique_name("lock-");
  LeaseGrant la = etcd.lease_grant(60s);
  LeaseGrant lb = etcd.lease_grant(60s);

  auto a = etcd.lock(name, la.id, 10s);
  ASSERT_TRUE(a);
  auto akv = etcd.range(a->key);
  ASSERT_TRUE(akv);
  EXPECT_EQ(akv->lease, la.id);
  EXPECT_EQ(a->header_revision, akv->create_revision);  // uncontended: they agree

  auto b = std::async(std::launch::async, [&] { return client().lock(name, lb.id, 30s); });
  ASSERT_TRUE(wait_for_keys(name + "/", 2));  // B's key exists: B is waiting
  etcd.put(unique_name("unrelated-"), "x");   // revisions move on while B waits
  EXPECT_EQ(b.wait_for(0s), std::future_status::timeout) << "B got the lock while A's key exists";

  const std::int64_t unlock_revision = etcd.unlock(a->key);
  auto bres = b.get();
  ASSERT_TRUE(bres);
  auto bkv = etcd.range(bres->key);
  ASSERT_TRUE(bkv);
  const std::int64_t token_b = bkv->create_revision;
  EXPECT_GT(token_b, akv->create_revision);   // tokens strictly increase
  EXPECT_LT(token_b, unlock_revision);        // B's key was created while it waited
  EXPECT_GE(bres->header_revision, unlock_revision);  // the pitfall: the header is the wait's end,
  EXPECT_NE(bres->header_revision, token_b);           // not B's create_revision
  // Unlocking a gone key deletes nothing, so the revision does not move: the current revision is
  // still the one A's unlock made (B's grant wrote nothing), however often it is repeated.
  EXPECT_EQ(etcd.unlock(a->key), unlock_revision);
  EXPECT_EQ(etcd.unlock(a->key), unlock_revision);
  etcd.lease_revoke(la.id);
  etcd.lease_revoke(lb.id);
  EXPECT_TRUE(etcd.range_prefix(name + "/").empty());  // revoke deleted B's key
}

TEST_F(EtcdTest, StoppingALockWaiterDeletesItsKey) {
  EtcdClient etcd = client();
  const std::string name = unique_name("lock-");
  LeaseGrant la = etcd.lease_grant(60s);
  LeaseGrant lb = etcd.lease_grant(60s);
  ASSERT_TRUE(etcd.lock(name, la.id, 10s));
  std::stop_source stop;
  auto b = std::async(std::launch::async, [&] { return client().lock(name, lb.id, 60s, stop.get_token()); });
  ASSERT_TRUE(wait_for_keys(name + "/", 2));
  stop.request_stop();
  EXPECT_EQ(b.get(), std::nullopt);
  EXPECT_TRUE(wait_for_keys(name + "/", 1));  // the gateway cancelled the waiter: its key is gone
  etcd.lease_revoke(la.id);
  etcd.lease_revoke(lb.id);
}

TEST_F(EtcdTest, LeaseExpiryReleasesTheLock) {
  EtcdClient etcd = client();
  const std::string name = unique_name("lock-");
  LeaseGrant la = etcd.lease_grant(2s);  // never kept alive
  LeaseGrant lb = etcd.lease_grant(60s);
  auto a = etcd.lock(name, la.id, 10s);
  ASSERT_TRUE(a);
  const std::int64_t token_a = etcd.range(a->key)->create_revision;
  auto b = etcd.lock(name, lb.id, 30s);  // returns once A's lease expires
  ASSERT_TRUE(b);
  auto bkv = etcd.range(b->key);
  ASSERT_TRUE(bkv);
  EXPECT_GT(bkv->create_revision, token_a);
  EXPECT_EQ(etcd.range(a->key), std::nullopt);
  EXPECT_EQ(etcd.lease_keepalive(la.id), std::nullopt);
  etcd.lease_revoke(lb.id);
}

TEST_F(EtcdTest, LockReturnsAGoneKeyWhenTheWaitersLeaseExpired) {
  EtcdClient etcd = client();
  const std::string name = unique_name("lock-");
  LeaseGrant la = etcd.lease_grant(60s);
  LeaseGrant lb = etcd.lease_grant(2s);  // expires while B waits
  auto a = etcd.lock(name, la.id, 10s);
  ASSERT_TRUE(a);
  auto b = std::async(std::launch::async, [&] { return client().lock(name, lb.id, 60s); });
  ASSERT_TRUE(wait_for_keys(name + "/", 2));
  ASSERT_TRUE(wait_for_keys(name + "/", 1));  // B's key went with its lease; B still waits
  etcd.unlock(a->key);
  auto bres = b.get();
  ASSERT_TRUE(bres) << "etcd 3.4 returns the key even though it is gone";
  EXPECT_EQ(etcd.range(bres->key), std::nullopt);  // so the holder must range it before trusting it
  etcd.lease_revoke(la.id);
}

TEST_F(EtcdTest, WatchSeesPutAndDeleteAndTheDeleteRevisionIsUnlocks) {
  EtcdClient etcd = client();
  const std::string name = unique_name("lock-");
  const std::int64_t from = etcd.put(unique_name("marker-"), "x") + 1;
  test::Collected<WatchEvent> events;
  std::stop_source stop;
  std::int64_t last = 0;
  std::thread watcher([&] {
    last = client().watch(name + "/", from, [&](const WatchEvent& e) { events.push(e); }, stop.get_token());
  });

  LeaseGrant l = etcd.lease_grant(60s);
  auto locked = etcd.lock(name, l.id, 10s);
  ASSERT_TRUE(locked);
  const std::int64_t token = etcd.range(locked->key)->create_revision;
  const std::int64_t unlock_revision = etcd.unlock(locked->key);
  const std::int64_t put_revision = etcd.put(name + "/plain", "hello");
  ASSERT_TRUE(events.wait_until([](const auto& v) { return v.size() >= 3; }));
  stop.request_stop();
  watcher.join();

  auto v = events.snapshot();
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].type, WatchEvent::Type::kPut);
  EXPECT_EQ(v[0].kv.key, locked->key);
  EXPECT_EQ(v[0].kv.create_revision, token);
  EXPECT_EQ(v[0].revision(), token);
  EXPECT_EQ(v[0].kv.lease, l.id);
  EXPECT_EQ(v[1].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(v[1].kv.key, locked->key);
  EXPECT_EQ(v[1].revision(), unlock_revision);
  ASSERT_TRUE(v[1].prev_kv);
  EXPECT_EQ(v[1].prev_kv->create_revision, token);
  EXPECT_EQ(v[1].prev_kv->lease, l.id);
  EXPECT_EQ(v[2].type, WatchEvent::Type::kPut);
  EXPECT_EQ(v[2].kv.value, "hello");
  EXPECT_EQ(v[2].revision(), put_revision);
  EXPECT_GE(last, put_revision);
  etcd.lease_revoke(l.id);
}

TEST_F(EtcdTest, LeaseExpiryShowsAsADeleteInTheWatch) {
  EtcdClient etcd = client();
  const std::string name = unique_name("lock-");
  const std::int64_t from = etcd.put(unique_name("marker-"), "x") + 1;
  test::Collected<WatchEvent> events;
  std::stop_source stop;
  std::thread watcher([&] { client().watch(name + "/", from, [&](const WatchEvent& e) { events.push(e); }, stop.get_token()); });
  LeaseGrant l = etcd.lease_grant(2s);
  auto locked = etcd.lock(name, l.id, 10s);
  ASSERT_TRUE(locked);
  ASSERT_TRUE(events.wait_until([](const auto& v) { return v.size() >= 2; }));
  stop.request_stop();
  watcher.join();
  auto v = events.snapshot();
  EXPECT_EQ(v[1].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(v[1].kv.key, locked->key);
  ASSERT_TRUE(v[1].prev_kv);
  EXPECT_EQ(v[1].prev_kv->lease, l.id);
}

TEST(EmbeddedEtcdStopTest, StopMakesTheEndpointUnreachableAndErrorsNameIt) {
  test::TempDir dir("etcd-stop");
  EmbeddedEtcd etcd;
  etcd.start(dir.path() / "data", dir.path() / "logs" / "etcd.log");
  const std::string url = etcd.client_url();
  EtcdClient client(url, EtcdClient::Options{500ms, 2000ms});
  ASSERT_TRUE(client.health());
  EXPECT_THROW(etcd.start(dir.path() / "data2", dir.path() / "etcd2.log"), std::logic_error);
  etcd.stop();
  EXPECT_FALSE(etcd.running());
  EXPECT_FALSE(client.health());
  try {
    (void)client.range("k");
    FAIL() << "range against a stopped etcd returned";
  } catch (const EtcdError& e) {
    EXPECT_NE(std::string(e.what()).find(url), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("unreachable"), std::string::npos) << e.what();
  }
  etcd.stop();  // idempotent
  EXPECT_TRUE(std::filesystem::file_size(dir.path() / "logs" / "etcd.log") > 0);
}

/// True once `pid` no longer runs: gone, or a zombie waiting for a reaper that is not us.
bool process_ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && (line[close + 2] == 'Z' || line[close + 2] == 'X');
}

TEST(EmbeddedEtcdStopTest, EtcdDiesWithAKilledParent) {
  test::TempDir dir("etcd-orphan");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t parent = ::fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {  // the "harness": starts etcd, reports its pid, waits to be killed
    ::close(fds[0]);
    EmbeddedEtcd etcd;
    etcd.start(dir.path() / "data", dir.path() / "etcd.log");
    const int pid = etcd.pid();
    if (::write(fds[1], &pid, sizeof pid) != sizeof pid) ::_exit(2);
    ::pause();
    ::_exit(0);
  }
  ::close(fds[1]);
  int etcd_pid = 0;
  ASSERT_EQ(::read(fds[0], &etcd_pid, sizeof etcd_pid), static_cast<ssize_t>(sizeof etcd_pid));
  ::close(fds[0]);
  ASSERT_GT(etcd_pid, 0);
  EXPECT_FALSE(process_ended(etcd_pid));
  ASSERT_EQ(::kill(parent, SIGKILL), 0);  // no destructor runs
  int status = 0;
  ASSERT_EQ(::waitpid(parent, &status, 0), parent);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!process_ended(etcd_pid) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);  // polling a condition, bounded
  EXPECT_TRUE(process_ended(etcd_pid)) << "etcd pid " << etcd_pid << " outlived its killed parent";
}

}  // namespace
}  // namespace fencecheck
