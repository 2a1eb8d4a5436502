// The zookeeper kind without a server: its registry rows, its own fields, the endpoint spelling,
// the lock-name mapping and the client's endpoint JSON.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "fake_resource_fields.h"
#include "fencecheck/locks/lock_client.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "temp_dir.h"
#include "zookeeper/zk_handle.h"
#include "zookeeper/zookeeper_watch.h"

namespace {

using fencecheck::testing::FakeFields;
using fencecheck::testing::FieldError;
namespace locks = fencecheck::locks;

const locks::LockServiceKind& kind() {
  const auto* k = locks::find_lock_service_kind("zookeeper");
  if (!k) throw std::runtime_error("zookeeper is not registered");
  return *k;
}

/// The message parse() fails with, at which field; "" when it does not fail.
std::pair<std::string, std::string> parse_error(const FakeFields& f) {
  try {
    (void)kind().parse(f);
  } catch (const FieldError& e) {
    return {e.field, e.message};
  }
  return {"", ""};
}

TEST(ZooKeeperKind, IsRegisteredWithItsOwnFields) {
  EXPECT_EQ(kind().name(), "zookeeper");
  const auto names = locks::lock_service_kind_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "zookeeper"), names.end());
  EXPECT_EQ(kind().fields(), (std::vector<std::string_view>{"tick_time", "init_limit", "sync_limit"}));
  EXPECT_NE(kind().token_description().find("czxid"), std::string::npos);
  const std::string effect = kind().restart_effect(nlohmann::json::object());
  EXPECT_NE(effect.find("Fresh data"), std::string::npos) << effect;
  EXPECT_NE(effect.find("lower"), std::string::npos) << effect;
}

TEST(ZooKeeperKind, TickTimeDefaultsAndNormalizesAndParsesAgain) {
  EXPECT_EQ(kind().parse(FakeFields{}), (nlohmann::json{{"tick_time", "100ms"}}));
  const nlohmann::json two = kind().parse(FakeFields{{"tick_time", "2s"}});
  EXPECT_EQ(two, (nlohmann::json{{"tick_time", "2000ms"}}));
  EXPECT_EQ(kind().parse(FakeFields(two)), two) << "the normalized form parses to itself";
}

TEST(ZooKeeperKind, WithEndpointsNothingOfTheEmbeddedServerIsKept) {
  EXPECT_EQ(kind().parse(FakeFields{{"endpoints", nlohmann::json::array({"127.0.0.1:2181"})}}),
            nlohmann::json::object());
}

TEST(ZooKeeperKind, TickTimeErrorsNameTheFieldAndTheRule) {
  auto [field, message] = parse_error(FakeFields{{"tick_time", "1500us"}});
  EXPECT_EQ(field, "tick_time");
  EXPECT_NE(message.find("whole number of milliseconds"), std::string::npos) << message;

  std::tie(field, message) = parse_error(FakeFields{{"tick_time", "5ms"}});
  EXPECT_EQ(field, "tick_time");
  EXPECT_NE(message.find("10ms..5s"), std::string::npos) << message;

  std::tie(field, message) = parse_error(FakeFields{{"tick_time", "6s"}});
  EXPECT_NE(message.find("10ms..5s"), std::string::npos) << message;

  std::tie(field, message) =
      parse_error(FakeFields{{"tick_time", "200ms"}, {"endpoints", nlohmann::json::array({"127.0.0.1:2181"})}});
  EXPECT_EQ(field, "tick_time");
  EXPECT_NE(message.find("with endpoints"), std::string::npos) << message;
}

TEST(ZooKeeperKind, EndpointsAreHostColonPort) {
  EXPECT_EQ(kind().check_endpoint("127.0.0.1:2181"), "");
  EXPECT_EQ(kind().check_endpoint("zk1.example:2181"), "");
  for (const char* bad : {"http://127.0.0.1:2181", "127.0.0.1", "127.0.0.1:", ":2181", "127.0.0.1:21x",
                          "127.0.0.1:2181/chroot", "a:1,b:2"}) {
    const std::string err = kind().check_endpoint(bad);
    EXPECT_NE(err.find("expected host:port"), std::string::npos) << bad << ": " << err;
    EXPECT_NE(err.find(bad), std::string::npos) << "names what it got: " << err;
  }
  EXPECT_NE(kind().check_endpoint("127.0.0.1:0").find("1..65535"), std::string::npos);
  EXPECT_NE(kind().check_endpoint("127.0.0.1:70000").find("1..65535"), std::string::npos);
}

TEST(ZooKeeperClient, EndpointJsonIsChecked) {
  EXPECT_EQ(locks::make_lock_client({{"kind", "zookeeper"}, {"endpoints", {"127.0.0.1:2181"}}})->kind(), "zookeeper");
  try {
    (void)locks::make_lock_client({{"kind", "zookeeper"}});
    FAIL() << "no endpoints accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("\"endpoints\""), std::string::npos) << e.what();
  }
  try {
    (void)locks::make_lock_client({{"kind", "zookeeper"}, {"endpoints", {7}}});
    FAIL() << "a number accepted as an endpoint";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("host:port"), std::string::npos) << e.what();
  }
  try {
    (void)locks::make_lock_client({{"kind", "zk"}, {"endpoints", {"127.0.0.1:2181"}}});
    FAIL() << "an unknown kind accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("zookeeper"), std::string::npos) << "lists the known kinds: " << e.what();
  }
}

TEST(ZooKeeperNames, LockNamesAreZnodePaths) {
  namespace zk = fencecheck::locks::zk;
  EXPECT_EQ(zk::znode_path("fencecheck/x"), "/fencecheck/x");
  EXPECT_EQ(zk::znode_path("/fencecheck/x/"), "/fencecheck/x");
  EXPECT_EQ(zk::znode_path("fencecheck/x/lock-0000000012"), "/fencecheck/x/lock-0000000012");
  EXPECT_THROW((void)zk::znode_path(""), std::invalid_argument);
  EXPECT_THROW((void)zk::znode_path("/"), std::invalid_argument);
  EXPECT_THROW((void)zk::znode_path("a//b"), std::invalid_argument);
  EXPECT_EQ(zk::sequence_of("lock-0000000012"), 12);
  EXPECT_EQ(zk::sequence_of("6f1c__lock__0000000003"), 3) << "kazoo's names end with the sequence too";
  EXPECT_EQ(zk::sequence_of("lock-12"), std::nullopt);
  EXPECT_EQ(zk::session_hex(0x1000170e2b50003), "0x1000170e2b50003");
}

TEST(ZooKeeperKind, EnsembleSizesAndLimits) {
  EXPECT_EQ(kind().check_members(3), "");
  EXPECT_EQ(kind().check_members(5), "");
  EXPECT_NE(kind().check_members(2).find("1 server or an ensemble of 3 or 5"), std::string::npos);
  try {
    (void)kind().parse(fencecheck::testing::FakeFields{{"sync_limit", 30}});
    FAIL() << "sync_limit without an ensemble";
  } catch (const fencecheck::testing::FieldError& err) {
    EXPECT_EQ(err.field, "sync_limit");
  }
  const auto config = kind().parse(fencecheck::testing::FakeFields{{"members", 3}, {"sync_limit", 30}});
  EXPECT_EQ(config["sync_limit"], 30);
  EXPECT_EQ(config["init_limit"], 50);
}

// An ensemble's deposed leader logs expiries it never commits (zookeeper_watch.h, ExpiryLog).
TEST(ZooKeeperExpiryLog, AnExpiryFollowedByItsMembersLookingProvesNothing) {
  using fencecheck::locks::zk::ExpiryLog;
  fencecheck::testing::TempDir dir("zkexp");
  const auto deposed = dir.path() / "zookeeper-3.log";
  std::ofstream(deposed) << "07:12:37.626 [SessionTracker] INFO org.apache.zookeeper.server.ZooKeeperServer - Expiring "
                            "session 0x300046308a00001, timeout of 2000ms exceeded\n"
                         << "07:12:37.738 [QuorumPeer[myid=3]] INFO org.apache.zookeeper.server.quorum.QuorumPeer - LOOKING\n";
  ExpiryLog log;
  log.add(deposed);
  EXPECT_EQ(log.verdict(0x300046308a00001), ExpiryLog::Verdict::kUnknown);
  EXPECT_EQ(log.verdict(0x300046308a00002), ExpiryLog::Verdict::kNo);
  // The new leader's own expiry of the same session, with no LOOKING after it, is proof.
  const auto leader = dir.path() / "zookeeper-2.log";
  std::ofstream(leader) << "07:12:36.994 [SessionTracker] INFO org.apache.zookeeper.server.ZooKeeperServer - Expiring "
                           "session 0x300046308a00001, timeout of 2000ms exceeded\n";
  log.add(leader);
  EXPECT_EQ(log.verdict(0x300046308a00001), ExpiryLog::Verdict::kExpired);
  EXPECT_TRUE(log.expired(0x300046308a00001));
  // A standalone server never looks for a leader: its expiry lines stand.
  const auto standalone = dir.path() / "zookeeper.log";
  std::ofstream(standalone) << "INFO org.apache.zookeeper.server.ZooKeeperServer - Expiring session 0x1000, timeout of 2000ms exceeded\n";
  log.add(standalone);
  EXPECT_TRUE(log.expired(0x1000));
}

}  // namespace
