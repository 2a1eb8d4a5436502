// The clock-jump fault kind on the embedded ZooKeeper ensemble's members (issue 35;
// docs/lock-service-zookeeper.md, "Clock faults"), against real ZooKeeper 3.8 servers started
// through the kind, each with the clock shim preloaded. What a jump does, member by member:
//  - on a follower: that member's wall clock (System.currentTimeMillis: its log's timestamps)
//    moves, and nothing a client reads does (the leader stamps every transaction's time);
//  - on the leader: the ctime of every znode created after it moves by the jump
//    (PrepRequestProcessor stamps the creating transaction with Time.currentWallTime());
//  - on neither: a session's expiry. ZooKeeper measures sessions on Time.currentElapsedTime()
//    (System.nanoTime, CLOCK_MONOTONIC), which the shim leaves alone: a 1 s session lives through
//    a +15 s jump of the leader's clock, and a dead client's 1 s session still expires about 1 s
//    after its last sign of life when the leader's clock is stepped back an hour in between.
// Label integration; RUN_SERIAL (three JVMs, as zookeeper_ensemble_test).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "fencecheck/faults/fault_kind.h"
#include "fencecheck/process/server_support.h"
#include "zookeeper/zk_handle.h"
#include "zookeeper_server.h"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace faults = fencecheck::faults;
namespace locks = fencecheck::locks;
using fencecheck::locks::zk::Handle;

long long machine_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// "2026-12-06T10:43:54.305+0000" (the ensemble's log format, slf4j-simple's dateTimeFormat
/// yyyy-MM-dd'T'HH:mm:ss.SSSZ, always UTC here) as ms since the epoch; -1 when it is not one.
long long log_time_ms(const std::string& line) {
  std::tm tm{};
  int ms = 0;
  if (std::sscanf(line.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3d+0000", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &ms) != 7)
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<long long>(::timegm(&tm)) * 1000 + ms;
}

/// The last line of `log` that contains `needle`, or "".
std::string last_line_with(const fs::path& log, const std::string& needle) {
  std::ifstream in(log);
  std::string line, found;
  while (std::getline(in, line))
    if (line.find(needle) != std::string::npos) found = line;
  return found;
}

faults::MemberRef ref_of(const locks::LockServiceMember& m) {
  faults::MemberRef r;
  r.index = m.index;
  r.process = faults::ProcessRef::of(m.pid);
  r.endpoint = m.endpoint;
  r.address = m.address;
  r.data_dir = m.data_dir;
  return r;
}

/// A clock-jump of `jump` on one member, built by the fault kind as the orchestrator builds it.
std::unique_ptr<faults::Fault> jump_on(const locks::LockServiceMember& m, const std::string& jump) {
  faults::FaultContext ctx;
  ctx.target = "lock-service";
  ctx.members = {ref_of(m)};
  ctx.members_why = "member " + std::to_string(m.index);
  return faults::find_fault_kind("clock-jump")->make({{"jump", jump}, {"drift_ppm", 0}}, ctx);
}

/// A client that dies without closing its session: ZooKeeper's ConnectRequest (protocol version 0,
/// no last zxid, `timeout_ms`, no session, an empty password) on a raw socket, the
/// ConnectResponse read, then the socket closed. Returns the session id the server granted.
std::int64_t open_and_abandon_session(const std::string& endpoint, int timeout_ms) {
  const auto colon = endpoint.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(endpoint.substr(colon + 1))));
  if (::inet_pton(AF_INET, endpoint.substr(0, colon).c_str(), &addr.sin_addr) != 1)
    throw std::runtime_error("not an IPv4 endpoint: " + endpoint);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot connect to " + endpoint);
  }
  std::string req;
  auto put32 = [&](std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) req.push_back(static_cast<char>((v >> s) & 0xff));
  };
  auto put64 = [&](std::uint64_t v) {
    put32(static_cast<std::uint32_t>(v >> 32));
    put32(static_cast<std::uint32_t>(v));
  };
  put32(0);  // protocolVersion
  put64(0);  // lastZxidSeen
  put32(static_cast<std::uint32_t>(timeout_ms));
  put64(0);   // sessionId: a new session
  put32(16);  // passwd: 16 zero bytes
  req.append(16, '\0');
  req.push_back('\0');  // readOnly: false
  std::string framed;
  std::swap(framed, req);
  put32(static_cast<std::uint32_t>(framed.size()));
  req += framed;
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    throw std::runtime_error("cannot send a ConnectRequest to " + endpoint);
  }
  // The ConnectResponse: length, protocolVersion, timeOut, sessionId, passwd.
  unsigned char buf[64];
  std::size_t got = 0;
  while (got < 20) {
    const ssize_t n = ::recv(fd, buf + got, sizeof buf - got, 0);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (got < 20) throw std::runtime_error("no ConnectResponse from " + endpoint);
  std::uint64_t sid = 0;
  for (int i = 12; i < 20; ++i) sid = (sid << 8) | buf[i];
  return static_cast<std::int64_t>(sid);
}

TEST(ZooKeeperClockJump, MovesAMembersWallClockButNotSessionExpiry) {
  fencecheck::testing::ZooKeeperServer e(3, /*clock_faults=*/true);
  ASSERT_NE(e.inst->describe().find("clock shim preloaded"), std::string::npos) << e.inst->describe();
  std::string why;
  const auto lead = e.inst->leader_member(why);
  ASSERT_TRUE(lead) << why;
  const int follower = *lead == 1 ? 2 : 1;
  const auto members = e.inst->members();
  const auto& leader_m = members[static_cast<std::size_t>(*lead - 1)];
  const auto& follower_m = members[static_cast<std::size_t>(follower - 1)];
  for (const auto& m : members) EXPECT_TRUE(fs::exists(m.data_dir / "clock-offset")) << m.data_dir;
  const fs::path logs = e.dir.path() / "logs";

  // A session of 1 s holding an ephemeral znode, opened before any jump (its client pings from its
  // own thread, every third of the timeout), and a writer.
  Handle holder(e.inst->endpoints_text(), 1000ms, 10s, "holder");
  ASSERT_EQ(holder.create("/held", "", ZOO_EPHEMERAL, 5s).rc, ZOK);
  Handle writer(e.inst->endpoints_text(), 10000ms, 10s, "writer");
  // ctime of a new znode minus this machine's clock when it was asked for, in ms.
  auto ctime_ahead = [&](const std::string& path) {
    const long long before = machine_ms();
    const auto r = writer.create(path, "", 0, 5s);
    EXPECT_EQ(r.rc, ZOK) << path;
    return r.stat.ctime_ms - before;
  };
  const long long plain = ctime_ahead("/plain");
  EXPECT_GE(plain, -1000);
  EXPECT_LE(plain, 1000) << "no jump yet: the leader's clock is the machine's";

  // A follower +15 s: its own clock moves (its log), the znodes' ctime does not.
  auto on_follower = jump_on(follower_m, "+15s");
  EXPECT_EQ(on_follower->target(), "lock-service member " + std::to_string(follower) + " (wall clock +15s)");
  on_follower->inject();
  const auto [host, port] = [&] {
    const auto colon = follower_m.endpoint.rfind(':');
    return std::pair{follower_m.endpoint.substr(0, colon), std::stoi(follower_m.endpoint.substr(colon + 1))};
  }();
  const long long asked = machine_ms();
  ASSERT_TRUE(fencecheck::locks::zk::four_letter_word(host, port, "srvr", 2s).has_value());
  const std::string said =
      last_line_with(logs / ("zookeeper-" + std::to_string(follower) + ".log"), "Processing srvr command");
  const long long follower_ahead = log_time_ms(said) - asked;
  EXPECT_GE(follower_ahead, 14'000) << said;
  EXPECT_LE(follower_ahead, 16'500) << said;
  const long long after_follower = ctime_ahead("/after-follower-jump");
  EXPECT_GE(after_follower, -1000);
  EXPECT_LE(after_follower, 1000) << "the leader stamps a znode's ctime, and its clock did not move";

  // The leader +15 s: the ctime of what it creates from now on is 15 s ahead.
  auto on_leader = jump_on(leader_m, "+15s");
  on_leader->inject();
  const long long after_leader = ctime_ahead("/after-leader-jump");
  EXPECT_GE(after_leader, 14'000);
  EXPECT_LE(after_leader, 16'500) << "the leader's wall clock stamps the znode's ctime";

  // A client that dies (its 1 s session abandoned), then the leader's clock an hour back: the
  // session still expires about 1 s after its last sign of life, by the monotonic clock; a
  // tracker on the wall clock would wait an hour. Synchronised on the leader's own expiry line.
  const fs::path leader_log = logs / ("zookeeper-" + std::to_string(*lead) + ".log");
  const std::int64_t victim = open_and_abandon_session(leader_m.endpoint, 1000);
  const auto abandoned = std::chrono::steady_clock::now();
  ASSERT_TRUE(on_leader->heal());
  auto back = jump_on(leader_m, "-3600s");
  back->inject();
  char hex[32];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(victim));
  const std::string expiring = std::string("Expiring session 0x") + hex + ",";
  std::string line;
  while ((line = last_line_with(leader_log, expiring)).empty() && std::chrono::steady_clock::now() - abandoned < 10s)
    std::this_thread::sleep_for(20ms);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - abandoned);
  ASSERT_FALSE(line.empty()) << "session 0x" << hex << " did not expire within 10 s of its client's death";
  std::cout << "[ clock ] the abandoned 1 s session expired " << took.count()
            << " ms after its client died, with the leader's clock an hour back: " << line << "\n";
  EXPECT_GE(took, 800ms) << "not before its timeout";
  EXPECT_LT(took, 5s);
  const long long stamped = log_time_ms(line) - machine_ms();
  EXPECT_LE(stamped, -3'500'000) << "the expiry line carries the leader's shifted clock: " << line;

  // The holder's 1 s session lived through the leader's +15 s and -1 h and the follower's +15 s.
  EXPECT_FALSE(holder.expired());
  const auto held = holder.exists("/held", false, 5s);
  EXPECT_EQ(held.rc, ZOK);
  EXPECT_EQ(held.stat.ephemeral_owner, holder.session_id());

  // Healed: the clocks are the machine's again.
  EXPECT_TRUE(back->heal());
  EXPECT_TRUE(on_follower->heal());
  const long long healed = ctime_ahead("/healed");
  EXPECT_GE(healed, -1000);
  EXPECT_LE(healed, 1000);
}

}  // namespace
