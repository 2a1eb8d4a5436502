// zookeeper_holder — a lock holder in a process of its own, for tests that stop it (SIGSTOP).
//
//   zookeeper_holder <host:port> <ttl_ms> <lock name>
//
// Opens a session of ttl_ms, takes the lock through ZooKeeperLockClient and prints, one line each
// (stdout, flushed):
//   session <id> <negotiated ms>
//   held <token> <lock_key>
// then, every 20 ms until the session has been gone for 1 s (or SIGTERM), what the client believes:
//   state <CLOCK_MONOTONIC ns> alive|expired|unknown
// (keepalive(): true, false, LockServiceError). Exit 0; 2 with a message on stderr on failure.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "fencecheck/locks/lock_client.h"
#include "fencecheck/proto/event.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: zookeeper_holder <host:port> <ttl_ms> <lock name>\n");
    return 2;
  }
  using namespace fencecheck::locks;
  try {
    auto client = make_lock_client({{"kind", "zookeeper"}, {"endpoints", {argv[1]}}});
    const Session s = client->open_session(std::chrono::milliseconds(std::stol(argv[2])));
    std::printf("session %lld %lld\n", static_cast<long long>(s.id), static_cast<long long>(s.ttl.count()));
    std::fflush(stdout);
    const auto held = client->acquire(argv[3], s, std::chrono::seconds(30), {});
    if (!held) {
      std::fprintf(stderr, "zookeeper_holder: not acquired within 30 s\n");
      return 2;
    }
    std::printf("held %lld %s\n", static_cast<long long>(held->token), held->lock_key.c_str());
    std::fflush(stdout);
    std::int64_t expired_since = 0;
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const char* state = "unknown";
      try {
        state = client->keepalive(s) ? "alive" : "expired";
      } catch (const LockServiceError&) {
      }
      const std::int64_t now = fencecheck::monotonic_ns();
      std::printf("state %lld %s\n", static_cast<long long>(now), state);
      std::fflush(stdout);
      if (std::string(state) != "expired") expired_since = 0;
      else if (expired_since == 0) expired_since = now;
      else if (now - expired_since > 1'000'000'000) break;
    }
    client->close_session(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zookeeper_holder: %s\n", e.what());
    return 2;
  }
  return 0;
}
