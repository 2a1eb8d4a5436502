// The clock shim (faults/clockshim/clock_shim.cpp, fencecheck/faults/clock_offset.h) preloaded into
// a real redis-server 7 (Debian's, linked with jemalloc, where libfaketime stalls at start-up):
// the server's wall clock moves at run time when the harness rewrites the offset file, and a key's
// expiry follows it. Two servers side by side, one shifted, one not: the same 10 s key expires on
// the shifted one as soon as its offset jumps by 11 s and lives on the other. Label integration.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include <hiredis/hiredis.h>

#include "../support/temp_dir.h"
#include "../../workers/locks/redis/embedded_redis.h"
#include "fencecheck/faults/clock_offset.h"

namespace {

using namespace std::chrono_literals;
using fencecheck::faults::ClockOffsetFile;
using fencecheck::locks::redis_detail::EmbeddedRedis;
using fencecheck::locks::redis_detail::EmbeddedRedisOptions;

/// One command on a fresh connection, the reply as text ("(nil)", an integer, a status, an
/// array's elements joined by spaces).
std::string run(const EmbeddedRedis& server, std::initializer_list<const char*> argv) {
  redisContext* c = redisConnect(server.endpoint().host.c_str(), server.endpoint().port);
  if (c == nullptr || c->err) throw std::runtime_error("cannot connect to redis " + server.endpoint().text());
  std::vector<const char*> args(argv);
  auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(args.size()), args.data(), nullptr));
  std::string out;
  if (r == nullptr) out = "(no reply)";
  else if (r->type == REDIS_REPLY_NIL) out = "(nil)";
  else if (r->type == REDIS_REPLY_INTEGER) out = std::to_string(r->integer);
  else if (r->type == REDIS_REPLY_ARRAY)
    for (size_t i = 0; i < r->elements; ++i) out += (i ? " " : "") + std::string(r->element[i]->str, r->element[i]->len);
  else out.assign(r->str, r->len);
  if (r) freeReplyObject(r);
  redisFree(c);
  return out;
}

/// The server's TIME in ms.
long long server_ms(const EmbeddedRedis& server) {
  const std::string t = run(server, {"TIME"});
  const auto space = t.find(' ');
  return std::stoll(t.substr(0, space)) * 1000 + std::stoll(t.substr(space + 1)) / 1000;
}

long long machine_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct ShiftedAndPlain {
  ShiftedAndPlain() : dir("clock-shim") {
    const auto shim = fencecheck::faults::clock_shim_library();
    if (shim.empty()) throw std::runtime_error("libfencecheck-clockshim.so is not beside the test (build it)");
    clock = std::make_unique<ClockOffsetFile>(dir.path() / "clock-offset");
    EmbeddedRedisOptions o;
    o.env = {{"LD_PRELOAD", shim.string()}, {fencecheck::faults::kClockFileVariable, clock->path().string()}};
    shifted = std::make_unique<EmbeddedRedis>(o);
    shifted->start(dir.path() / "shifted", dir.path() / "shifted.log");
    plain = std::make_unique<EmbeddedRedis>(EmbeddedRedisOptions{});
    plain->start(dir.path() / "plain", dir.path() / "plain.log");
  }
  fencecheck::testing::TempDir dir;
  std::unique_ptr<ClockOffsetFile> clock;
  std::unique_ptr<EmbeddedRedis> shifted;
  std::unique_ptr<EmbeddedRedis> plain;
};

TEST(ClockShim, AJumpOfElevenSecondsExpiresATenSecondKeyOnTheShiftedServerOnly) {
  ShiftedAndPlain s;
  // Preloaded, the server starts and answers (libfaketime's stall would time start() out).
  for (auto* server : {s.shifted.get(), s.plain.get()}) {
    ASSERT_EQ(run(*server, {"SET", "k", "v", "PX", "10000"}), "OK");
    EXPECT_EQ(run(*server, {"GET", "k"}), "v");
  }
  EXPECT_NEAR(static_cast<double>(server_ms(*s.shifted)), static_cast<double>(machine_ms()), 1000.0)
      << "no offset yet: the shifted server's clock is the machine's";

  s.clock->set(11s, 0);
  const long long shifted_now = server_ms(*s.shifted);
  EXPECT_GE(shifted_now - machine_ms(), 10'000) << "the shifted server's TIME is 11 s ahead";
  EXPECT_LE(shifted_now - machine_ms(), 12'000);
  EXPECT_EQ(run(*s.shifted, {"GET", "k"}), "(nil)") << "its wall clock passed the key's expiry time";
  EXPECT_EQ(run(*s.shifted, {"PTTL", "k"}), "-2");
  EXPECT_EQ(run(*s.plain, {"GET", "k"}), "v") << "the machine's clock did not move";
  const long long plain_ttl = std::stoll(run(*s.plain, {"PTTL", "k"}));
  EXPECT_GT(plain_ttl, 5000);
  EXPECT_NEAR(static_cast<double>(server_ms(*s.plain)), static_cast<double>(machine_ms()), 1000.0);

  // Back to 0: a key set now lives its full TTL on both.
  s.clock->reset();
  EXPECT_NEAR(static_cast<double>(server_ms(*s.shifted)), static_cast<double>(machine_ms()), 1000.0);
  ASSERT_EQ(run(*s.shifted, {"SET", "k2", "v", "PX", "10000"}), "OK");
  EXPECT_GT(std::stoll(run(*s.shifted, {"PTTL", "k2"})), 8000);
}

TEST(ClockShim, ABackwardJumpKeepsAKeyPastItsTtl) {
  ShiftedAndPlain s;
  ASSERT_EQ(run(*s.shifted, {"SET", "k", "v", "PX", "10000"}), "OK");
  s.clock->set(-30s, 0);
  EXPECT_LE(server_ms(*s.shifted) - machine_ms(), -29'000);
  EXPECT_GT(std::stoll(run(*s.shifted, {"PTTL", "k"})), 35'000) << "30 s were taken off its clock: 40 s to go";
}

TEST(ClockShim, ADriftGainsTimeAtItsRate) {
  ShiftedAndPlain s;
  s.clock->set(0s, 1'000'000);  // +1e6 ppm: the clock runs at twice the machine's rate
  const long long real0 = machine_ms();
  const long long server0 = server_ms(*s.shifted);
  std::this_thread::sleep_for(500ms);  // a measurement interval, not a synchronisation
  const long long real_elapsed = machine_ms() - real0;
  const long long server_elapsed = server_ms(*s.shifted) - server0;
  EXPECT_GE(server_elapsed, 2 * real_elapsed - 100) << "real " << real_elapsed << " ms, server " << server_elapsed << " ms";
  EXPECT_LE(server_elapsed, 2 * real_elapsed + 200);
  EXPECT_GT(s.clock->current().count(), 0);
}

}  // namespace
