// The redis lock-service kind (workers/locks/redis/redis_kind.cpp) with a real redis-server 7 that
// each test starts through the kind on a free loopback port, in its own temporary run directory:
// the embedded server and its persistence across restarts, the fence counter, the issuer's history
// from keyspace notifications, the user's endpoints, and what is left after a kill -9.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "redis_test_util.h"

namespace fencecheck::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using locks::Session;
using nlohmann::json;

constexpr const char* kKindLock = "fc-test-lock";

/// Takes the lock with a fresh session and returns its token (the client stays the caller's).
std::int64_t take(locks::LockClient& client, Session& s, std::chrono::milliseconds ttl = 30s) {
  s = client.open_session(ttl);
  const auto h = client.acquire(kKindLock, s, 5s, {});
  if (!h) throw std::runtime_error("the lock was not granted within 5 s");
  return h->token;
}

std::int64_t take_and_release(locks::LockClient& client) {
  Session s;
  const std::int64_t token = take(client, s);
  client.release(kKindLock, locks::Holding{kKindLock, token, std::nullopt}, s);
  return token;
}

/// Alive and not a zombie (/proc/<pid>/stat's state).
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

bool eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

TEST(RedisKind, StartsItsOwnServerOnLoopbackWithTheConfigurationItWasGiven) {
  EmbeddedRedisFixture redis;
  const auto& inst = *redis.instance;
  EXPECT_THAT(inst.endpoints_text(), StartsWith("redis://127.0.0.1:"));
  EXPECT_EQ(inst.endpoint(), (json{{"kind", "redis"}, {"endpoints", {inst.endpoints_text()}}, {"token", "fenced"}}));
  EXPECT_EQ(inst.worker_env(), (std::map<std::string, std::string>{{"REDIS_URL", inst.endpoints_text()}}));
  EXPECT_THAT(inst.describe(), HasSubstr("embedded, persistence none, data redis-data"));
  EXPECT_TRUE(redis.instance->healthy());
  EXPECT_GT(inst.pid(), 0);
  EXPECT_TRUE(fs::is_directory(redis.dir.path() / "redis-data"));
  EXPECT_TRUE(fs::exists(redis.dir.path() / "logs" / "redis.log"));
  Raw raw(redis.port());
  const auto config = [&](const std::string& name) { return raw.config(name); };
  EXPECT_EQ(config("appendonly"), "no");
  EXPECT_EQ(config("save"), "");
  EXPECT_EQ(config("bind"), "127.0.0.1");
  EXPECT_EQ(config("dir"), fs::canonical(redis.dir.path() / "redis-data").string());
  const std::string flags = config("notify-keyspace-events");
  for (char f : std::string("Kg$x")) EXPECT_NE(flags.find(f), std::string::npos) << f << " in " << flags;
}

// prior_revisions: the fence counter is advanced, so the first token is above it.
TEST(RedisKind, AdvanceRaisesTheFenceCounter) {
  EmbeddedRedisFixture redis;
  redis.instance->advance(100);
  auto client = redis.client();
  EXPECT_EQ(take_and_release(*client), 101);
  EXPECT_EQ(take_and_release(*client), 102);
}

// persistence none: the restart loses the lock key and the fence counter with everything else;
// the next grant's token is 1 again, below every token issued before.
TEST(RedisKind, ARestartWithoutPersistenceStartsTokensAgainAtOne) {
  EmbeddedRedisFixture redis;
  redis.instance->advance(100);
  auto client = redis.client();
  Session held;
  const std::int64_t before = take(*client, held);
  EXPECT_EQ(before, 101);
  const std::string url = redis.url();
  const int pid = redis.instance->pid();
  redis.instance->stop_server();
  EXPECT_EQ(redis.instance->pid(), 0);
  EXPECT_FALSE(alive(pid));
  EXPECT_FALSE(redis.instance->healthy());
  redis.instance->start_server(false);
  EXPECT_EQ(redis.url(), url) << "the same address after a restart";
  EXPECT_NE(redis.instance->pid(), pid);
  Raw raw(redis.port());
  EXPECT_EQ(raw.cmd({"EXISTS", kKindLock}), "0") << "the holder's key is gone with the restart";
  EXPECT_FALSE(client->keepalive(held)) << "the holder learns it only from its next renewal";
  auto other = redis.client();
  const std::int64_t after = take_and_release(*other);
  EXPECT_EQ(after, 1);
  EXPECT_LT(after, before) << "the token went backwards";
  EXPECT_TRUE(fs::is_empty(redis.dir.path() / "redis-data")) << "nothing was ever written";
}

// persistence aof (appendfsync always): the counter and the held key come back from the file,
// tokens keep rising; on fresh data they start again at 1.
TEST(RedisKind, ARestartWithAppendOnlyPersistenceKeepsTokensRising) {
  EmbeddedRedisFixture redis(json{{"persistence", "aof"}});
  EXPECT_THAT(redis.instance->describe(), HasSubstr("persistence aof"));
  redis.instance->advance(100);
  auto client = redis.client();
  Session held;
  const std::int64_t before = take(*client, held);
  EXPECT_EQ(before, 101);
  redis.instance->stop_server();
  redis.instance->start_server(false);
  EXPECT_TRUE(client->keepalive(held)) << "the held key survived the restart with its owner";
  EXPECT_TRUE(client->release(kKindLock, locks::Holding{kKindLock, before, std::nullopt}, held).existed);
  auto other = redis.client();
  const std::int64_t after = take_and_release(*other);
  EXPECT_EQ(after, before + 1);
  EXPECT_TRUE(fs::exists(redis.dir.path() / "redis-data" / "appendonlydir"));

  redis.instance->stop_server();
  redis.instance->start_server(true);
  EXPECT_THAT(redis.instance->describe(), HasSubstr("data redis-data-2"));
  EXPECT_EQ(take_and_release(*other), 1) << "an empty directory has no counter";
}

// The issuer's history: a grant with the token and owner read from the value, a release's DEL as
// "deleted", a TTL running out as "expired", each delete with the token of the holding it ended.
TEST(RedisKind, TheWatchReportsGrantsReleasesAndExpiriesWithTheirTokens) {
  EmbeddedRedisFixture redis;
  Sink sink;
  auto watch = redis.instance->watch(kKindLock, sink.fn());
  auto a = redis.client();
  Session sa;
  const std::int64_t ta = take(*a, sa);
  ASSERT_TRUE(a->release(kKindLock, locks::Holding{kKindLock, ta, std::nullopt}, sa).existed);
  auto b = redis.client();
  Session sb;
  const std::int64_t tb = take(*b, sb, 200ms);  // never renewed: it expires
  ASSERT_TRUE(sink.wait_count(4)) << "got " << sink.events().size() << " events";
  watch->stop();
  const auto events = sink.events();
  ASSERT_EQ(events.size(), 4u);
  for (const auto& e : events) {
    EXPECT_EQ(e.source, "lock");
    EXPECT_EQ(e.lock_key, kKindLock);
    EXPECT_FALSE(e.revision.has_value());
  }
  EXPECT_EQ(events[0].kind, EventKind::kLockGrant);
  EXPECT_EQ(events[0].token, std::optional(ta));
  EXPECT_EQ(events[0].lease_id, std::optional(sa.id));
  EXPECT_EQ(events[1].kind, EventKind::kLockDelete);
  EXPECT_EQ(events[1].detail, "deleted");
  EXPECT_EQ(events[1].token, std::optional(ta));
  EXPECT_EQ(events[1].lease_id, std::optional(sa.id));
  EXPECT_EQ(events[2].kind, EventKind::kLockGrant);
  EXPECT_EQ(events[2].token, std::optional(tb));
  EXPECT_EQ(events[2].lease_id, std::optional(sb.id));
  EXPECT_GT(tb, ta);
  EXPECT_EQ(events[3].kind, EventKind::kLockDelete);
  EXPECT_EQ(events[3].detail, "expired");
  EXPECT_EQ(events[3].token, std::optional(tb));
  EXPECT_EQ(events[3].lease_id, std::optional(sb.id));
}

// stop() returns only after every change made before it was delivered: no waiting in the test.
TEST(RedisKind, StoppingTheWatchDeliversEveryChangeBeforeIt) {
  EmbeddedRedisFixture redis;
  Sink sink;
  auto watch = redis.instance->watch(kKindLock, sink.fn());
  auto client = redis.client();
  std::vector<std::int64_t> tokens;
  for (int i = 0; i < 20; ++i) tokens.push_back(take_and_release(*client));
  watch->stop();
  const auto events = sink.events();
  ASSERT_EQ(events.size(), 40u);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_EQ(events[2 * i].kind, EventKind::kLockGrant);
    EXPECT_EQ(events[2 * i].token, std::optional(tokens[i])) << "grant " << i;
    EXPECT_EQ(events[2 * i + 1].kind, EventKind::kLockDelete);
    EXPECT_EQ(events[2 * i + 1].token, std::optional(tokens[i])) << "delete " << i;
  }
  watch->stop();  // idempotent
}

// A holder known before the watch began is not reported, but its delete carries its token.
TEST(RedisKind, AHolderFromBeforeTheWatchIsKnownToItsDelete) {
  EmbeddedRedisFixture redis;
  auto client = redis.client();
  Session s;
  const std::int64_t token = take(*client, s);
  Sink sink;
  auto watch = redis.instance->watch(kKindLock, sink.fn());
  ASSERT_TRUE(client->release(kKindLock, locks::Holding{kKindLock, token, std::nullopt}, s).existed);
  watch->stop();
  const auto events = sink.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, EventKind::kLockDelete);
  EXPECT_EQ(events[0].token, std::optional(token));
}

// A restart without persistence deletes the held key without a notification: the watch sees the
// key missing when it reconnects and reports the holding as lost, then the new grant (token 1).
TEST(RedisKind, TheWatchReportsAHolderLostInARestart) {
  EmbeddedRedisFixture redis;
  redis.instance->advance(10);
  Sink sink;
  auto watch = redis.instance->watch(kKindLock, sink.fn());
  auto client = redis.client();
  Session s;
  const std::int64_t before = take(*client, s);
  ASSERT_TRUE(sink.wait_count(1));
  redis.instance->stop_server();
  redis.instance->start_server(false);
  ASSERT_TRUE(sink.wait_count(2)) << "no delete after the restart";
  auto other = redis.client();
  const std::int64_t after = take_and_release(*other);
  ASSERT_TRUE(sink.wait_count(4));
  watch->stop();
  const auto events = sink.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].token, std::optional(before));
  EXPECT_EQ(events[1].kind, EventKind::kLockDelete);
  EXPECT_EQ(events[1].token, std::optional(before));
  EXPECT_THAT(events[1].detail, StartsWith("lost:"));
  EXPECT_EQ(events[2].kind, EventKind::kLockGrant);
  EXPECT_EQ(events[2].token, std::optional(after));
  EXPECT_EQ(after, 1);
}

// token: none: the grants carry the owner (lease_id) but no token: the issuer has none. The plain
// SET NX publishes nothing, so the watch reads the value with a GET (redis_watch.h): the test holds
// the lock until the grant was reported, as any holder that does some work does.
TEST(RedisKind, WithTokenNoneTheHistoryHasOwnersButNoTokens) {
  EmbeddedRedisFixture redis(json{{"token", "none"}});
  Sink sink;
  auto watch = redis.instance->watch(kKindLock, sink.fn());
  auto client = redis.client();
  Session s;
  (void)take(*client, s);
  ASSERT_TRUE(sink.wait_count(1));
  ASSERT_TRUE(client->release(kKindLock, locks::Holding{kKindLock, 1, std::nullopt}, s).existed);
  watch->stop();
  const auto events = sink.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, EventKind::kLockGrant);
  EXPECT_EQ(events[0].lease_id, std::optional(s.id));
  EXPECT_FALSE(events[0].token.has_value());
  EXPECT_EQ(events[1].detail, "deleted");
  EXPECT_FALSE(events[1].token.has_value());
}

// Another client's grants publish nothing: the watch GETs the value and bounds the race with a
// PING on its subscription (redis_watch.h). One script makes the races certain: a grant deleted
// before the watch can read it, then one set again before the read.
TEST(RedisKind, AnotherClientsGrantIsReadWithAGetAndAnUnreadableOneSaysSo) {
  EmbeddedRedisFixture redis;
  Sink sink;
  auto watch = redis.instance->watch(kKindLock, sink.fn());
  Raw raw(redis.port());
  ASSERT_EQ(raw.cmd({"EVAL", "redis.call('SET', KEYS[1], '11:7', 'NX', 'PX', 60000) redis.call('DEL', KEYS[1])", "1", kKindLock}),
            "(nil)");
  ASSERT_TRUE(sink.wait_count(2));
  ASSERT_EQ(raw.cmd({"EVAL",
                     "redis.call('SET', KEYS[1], '12:8', 'NX', 'PX', 60000) redis.call('DEL', KEYS[1]) "
                     "redis.call('SET', KEYS[1], '13:9', 'NX', 'PX', 60000)",
                     "1", kKindLock}),
            "(nil)");
  ASSERT_TRUE(sink.wait_count(5));
  ASSERT_EQ(raw.cmd({"SET", kKindLock, "uuid-of-redis-py", "PX", "60000"}), "OK");  // overwrites 13:9
  ASSERT_TRUE(sink.wait_count(7));
  watch->stop();
  const auto e = sink.events();
  ASSERT_EQ(e.size(), 7u);
  EXPECT_EQ(e[0].kind, EventKind::kLockGrant);
  EXPECT_FALSE(e[0].token.has_value());
  EXPECT_THAT(e[0].detail, HasSubstr("held too briefly to read"));
  EXPECT_EQ(e[1].kind, EventKind::kLockDelete);
  EXPECT_FALSE(e[1].token.has_value());
  EXPECT_EQ(e[2].kind, EventKind::kLockGrant);
  EXPECT_FALSE(e[2].token.has_value()) << "the value read may be the later grant's";
  EXPECT_THAT(e[2].detail, HasSubstr("set again before the watch's GET"));
  EXPECT_EQ(e[3].kind, EventKind::kLockDelete);
  EXPECT_EQ(e[4].kind, EventKind::kLockGrant);
  EXPECT_EQ(e[4].token, std::optional<std::int64_t>(9));
  EXPECT_EQ(e[4].lease_id, std::optional<std::int64_t>(13));
  EXPECT_EQ(e[5].kind, EventKind::kLockDelete);
  EXPECT_EQ(e[5].token, std::optional<std::int64_t>(9));
  EXPECT_THAT(e[5].detail, HasSubstr("overwritten"));
  EXPECT_EQ(e[6].kind, EventKind::kLockGrant);
  EXPECT_FALSE(e[6].token.has_value()) << "a value without a token (redis-py's uuid)";
  EXPECT_FALSE(e[6].lease_id.has_value());
  EXPECT_TRUE(e[6].detail.empty());
}

TEST(RedisKind, AnEndpointThatDoesNotAnswerIsUnavailable) {
  int port = 0;
  {
    EmbeddedRedisFixture gone;
    port = gone.port();
  }
  const std::string url = "redis://127.0.0.1:" + std::to_string(port);
  locks::LockServiceRunContext ctx;
  try {
    (void)redis_kind().open({url}, json{{"persistence", "none"}, {"token", "fenced"}}, ctx);
    FAIL() << "a closed port was accepted";
  } catch (const locks::LockServiceUnavailable& err) {
    EXPECT_THAT(err.what(), HasSubstr("no redis endpoint answered PING: " + url));
    EXPECT_THAT(err.what(), HasSubstr("refused"));
  }
}

TEST(RedisKind, AMissingRedisServerIsUnavailableAndNamesDebiansPackage) {
  TempDir empty("no-redis");
  const std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", empty.path().c_str(), 1);
  try {
    TempDir run("redis-run");
    locks::LockServiceRunContext ctx;
    ctx.run_dir = run.path();
    (void)redis_kind().open({}, json{{"persistence", "none"}, {"token", "fenced"}}, ctx);
    ADD_FAILURE() << "opened a redis-server that is not on PATH";
  } catch (const locks::LockServiceUnavailable& err) {
    EXPECT_THAT(err.what(), HasSubstr("redis-server not found on PATH"));
    EXPECT_THAT(err.what(), HasSubstr("install Debian's redis-server"));
  }
  ::setenv("PATH", saved.c_str(), 1);
}

// The user's server: nothing is started or stopped, and keyspace notifications are switched on
// when the server has them off (Redis's default).
TEST(RedisKind, TheUsersServerIsUsedAsItIsWithNotificationsSwitchedOn) {
  EmbeddedRedisFixture server;
  Raw raw(server.port());
  ASSERT_EQ(raw.cmd({"CONFIG", "SET", "notify-keyspace-events", ""}), "OK");
  TempDir run("redis-external");
  locks::LockServiceRunContext ctx;
  ctx.run_dir = run.path();
  auto inst = redis_kind().open({"redis://127.0.0.1:1", server.url()}, server.config, ctx);
  EXPECT_EQ(inst->endpoints_text(), server.url()) << "the first endpoint that answers";
  EXPECT_EQ(inst->pid(), 0);
  EXPECT_THAT(inst->describe(), HasSubstr("the user's server"));
  EXPECT_THROW(inst->stop_server(), std::logic_error);
  const std::string flags = raw.config("notify-keyspace-events");
  for (char f : std::string("Kg$x")) EXPECT_NE(flags.find(f), std::string::npos) << f << " in " << flags;
  Sink sink;
  auto watch = inst->watch(kKindLock, sink.fn());
  auto client = locks::make_lock_client(inst->endpoint());
  const std::int64_t token = take_and_release(*client);
  watch->stop();
  const auto events = sink.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].token, std::optional(token));
  inst->stop();
  EXPECT_TRUE(server.instance->healthy()) << "stop() leaves the user's server running";
}

// A harness killed with SIGKILL takes its redis-server with it (PR_SET_PDEATHSIG): nothing is
// left for `fencecheck cleanup` to end.
TEST(RedisKind, AHarnessKilledWithSigkillTakesItsServerWithIt) {
  TempDir run("redis-holder");
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::execl(FENCECHECK_REDIS_HOLDER, FENCECHECK_REDIS_HOLDER, run.path().c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  struct KillAtEnd {  // the holder waits for ever: whatever an assertion skips, it must go
    pid_t pid;
    ~KillAtEnd() {
      if (::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, 0);
    }
  } kill_at_end{holder};
  // The holder's log lines come first; its last line is "ready <pid> <port>".
  std::string line;
  for (std::string next; line.rfind("ready ", 0) != 0;) {
    char c = 0;
    next.clear();
    while (::read(out[0], &c, 1) == 1 && c != '\n') next += c;
    if (next.empty()) break;
    line = next;
  }
  ::close(out[0]);
  int pid = 0;
  int port = 0;
  ASSERT_EQ(std::sscanf(line.c_str(), "ready %d %d", &pid, &port), 2) << "holder said: " << line;
  EXPECT_TRUE(alive(pid));
  EXPECT_EQ(Raw(port).cmd({"PING"}), "PONG");
  ASSERT_EQ(::kill(holder, SIGKILL), 0);
  ASSERT_EQ(::waitpid(holder, nullptr, 0), holder);
  EXPECT_TRUE(eventually([&] { return !alive(pid); })) << "redis-server " << pid << " outlived its harness";
}

}  // namespace
}  // namespace fencecheck::testing
