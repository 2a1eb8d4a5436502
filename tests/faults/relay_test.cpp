// The network lab's relays without root (docs/architecture.md, "Relays"): how an endpoint's
// address is found and respelled at the relay's (URLs, host:port, libpq DSNs), the relay address
// plan, each kind's hooks, `validate`'s refusals at file:line:col, and the relay itself forwarding
// on loopback (upstream namespace = the caller's). Namespaces and real runs: relay_root_test.cpp.
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <array>
#include <thread>

#include <boost/asio.hpp>

#include "fencecheck/faults/relay.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/proto/net_address.h"
#include "fencecheck/resources/postgres.h"
#include "fencecheck/resources/resource_kind.h"

namespace {
using namespace fencecheck;
namespace asio = boost::asio;
using asio::ip::tcp;

TEST(NetAddress, UrlsGiveTheirHostAndPortAndAreRespelledKeepingTheRest) {
  std::string why;
  auto a = url_address("http://127.0.0.1:23790", 0, &why);
  ASSERT_TRUE(a) << why;
  EXPECT_EQ(*a, (NetAddress{"127.0.0.1", 23790}));
  a = url_address("http://[::1]:2379/v3", 0, &why);
  ASSERT_TRUE(a) << why;
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->text(), "[::1]:2379");
  EXPECT_EQ(url_at("http://etcd.lan:2379/base?x=1", {"10.213.0.2", 2379}), "http://10.213.0.2:2379/base?x=1");
  EXPECT_EQ(url_at("redis://127.0.0.1:6379", {"10.213.0.2", 6380}), "redis://10.213.0.2:6380");
  EXPECT_EQ(url_at("http://127.0.0.1:1", {"fd00::2", 80}), "http://[fd00::2]:80");
  EXPECT_FALSE(url_address("http://127.0.0.1", 0, &why));
  EXPECT_EQ(why, "http://127.0.0.1 names no port");
  EXPECT_FALSE(url_address("http://127.0.0.1:70000", 0, &why));
  EXPECT_EQ(why, "http://127.0.0.1:70000: port 70000 is not in 1..65535");
  a = host_port_address("[::1]:2181", &why);
  ASSERT_TRUE(a) << why;
  EXPECT_EQ(*a, (NetAddress{"::1", 2181}));
  EXPECT_FALSE(host_port_address("zk:0", &why));
  EXPECT_FALSE(host_port_address("zk", &why));
  EXPECT_EQ(why, "zk is not host:port");
}

TEST(Dsn, ItsAddressIsHostaddrOrHostAndPortAndARewriteKeepsEveryOtherKeyword) {
  std::string why;
  auto a = postgres::dsn_address("host=127.0.0.1 port=5433 dbname=app user=svc sslmode=require", &why);
  ASSERT_TRUE(a) << why;
  EXPECT_EQ(*a, (NetAddress{"127.0.0.1", 5433}));
  EXPECT_EQ(postgres::dsn_at("host=db.lan port=5433 dbname=app user=svc sslmode=require", {"10.213.0.3", 5433}),
            "hostaddr=10.213.0.3 port=5433 user=svc dbname=app host=db.lan sslmode=require");
  // A URI: parsed the same way; its query's keywords are kept, no port means libpq's 5432.
  a = postgres::dsn_address("postgresql://svc@db.lan/app?connect_timeout=5", &why);
  ASSERT_TRUE(a) << why;
  EXPECT_EQ(*a, (NetAddress{"db.lan", 5432}));
  EXPECT_EQ(postgres::dsn_at("postgresql://svc@db.lan/app?connect_timeout=5", {"10.213.0.3", 5432}),
            "hostaddr=10.213.0.3 port=5432 user=svc connect_timeout=5 dbname=app host=db.lan");
  // hostaddr wins over host (libpq connects to hostaddr) and is what is replaced.
  a = postgres::dsn_address("host=db.lan hostaddr=192.0.2.7 dbname=app", &why);
  ASSERT_TRUE(a) << why;
  EXPECT_EQ(a->host, "192.0.2.7");
  // What a relay cannot stand in for.
  EXPECT_FALSE(postgres::dsn_address("host=/var/run/postgresql dbname=app", &why));
  EXPECT_NE(why.find("host /var/run/postgresql is a Unix-socket directory"), std::string::npos) << why;
  EXPECT_FALSE(postgres::dsn_address("dbname=app", &why));
  EXPECT_NE(why.find("names no host, so libpq connects through a Unix socket"), std::string::npos) << why;
  EXPECT_FALSE(postgres::dsn_address("host=a,b dbname=app", &why));
  EXPECT_NE(why.find("several hosts (a,b)"), std::string::npos) << why;
  EXPECT_THROW((void)postgres::dsn_at("dbname=app", {"10.213.0.3", 5432}), std::invalid_argument);
}

TEST(RelayPlan, EachEndpointKeepsItsPortOnItsServiceAddressUnlessTaken) {
  using faults::RelayRequest;
  const auto plan = faults::plan_relays({
      RelayRequest{"etcd a", "10.213.0.2", {"10.0.0.1", 2379}},
      RelayRequest{"etcd b", "10.213.0.2", {"10.0.0.2", 2379}},
      RelayRequest{"etcd a again", "10.213.0.2", {"10.0.0.1", 2379}},
      RelayRequest{"etcd c", "10.213.0.2", {"10.0.0.3", 2380}},
      RelayRequest{"pg", "10.213.0.3", {"127.0.0.1", 2379}},
  });
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0].listen, (NetAddress{"10.213.0.2", 2379}));
  EXPECT_EQ(plan[1].listen, (NetAddress{"10.213.0.2", 2380}));  // 2379 is a's
  EXPECT_EQ(plan[2].listen, (NetAddress{"10.213.0.2", 2381}));  // 2380 is b's now
  EXPECT_EQ(plan[3].listen, (NetAddress{"10.213.0.3", 2379}));  // another address: its own port
  EXPECT_EQ(faults::find_relay(plan, "10.213.0.2", {"10.0.0.2", 2379}), &plan[1]);
  EXPECT_EQ(faults::find_relay(plan, "10.213.0.3", {"10.0.0.2", 2379}), nullptr);
  EXPECT_EQ(faults::plan_relays({RelayRequest{"x", "10.213.0.2", {"h", 65535}}, RelayRequest{"y", "10.213.0.2", {"i", 65535}}})[1]
                .listen.port,
            1024);
  EXPECT_THROW((void)faults::plan_relays({RelayRequest{"x", "", {"h", 1}}}), std::invalid_argument);
}

TEST(RelayHooks, EveryKindSpellsItsEndpointAtTheRelay) {
  const NetAddress at{"10.213.0.2", 23790};
  std::string why;
  const auto* etcd = locks::find_lock_service_kind("etcd");
  EXPECT_EQ(etcd->endpoint_address("http://127.0.0.1:23790", &why), (NetAddress{"127.0.0.1", 23790}));
  EXPECT_EQ(etcd->endpoint_at("http://127.0.0.1:23790", at), "http://10.213.0.2:23790");
  EXPECT_EQ(locks::find_lock_service_kind("zookeeper")->endpoint_at("127.0.0.1:2181", at), "10.213.0.2:23790");
  EXPECT_EQ(locks::find_lock_service_kind("redis")->endpoint_at("redis://192.168.1.5:6379", at), "redis://10.213.0.2:23790");
  EXPECT_FALSE(locks::find_lock_service_kind("none")->endpoint_address("x", &why));
  const auto* http = resources::find_resource_kind("http");
  const nlohmann::json e{{"kind", "http"}, {"url", "http://127.0.0.1:8080/api"}, {"write_path", "/w"}};
  EXPECT_EQ(http->endpoint_address(e, &why), (NetAddress{"127.0.0.1", 8080}));
  const auto relayed = http->endpoint_at(e, {"10.213.0.3", 8080});
  EXPECT_EQ(relayed["url"], "http://10.213.0.3:8080/api");
  EXPECT_EQ(relayed["write_path"], "/w");
  const auto* pg = resources::find_resource_kind("postgres");
  const nlohmann::json p{{"kind", "postgres"}, {"dsn", "host=127.0.0.1 port=5432 dbname=app"}, {"write", {"UPDATE"}}};
  EXPECT_EQ(pg->endpoint_at(p, {"10.213.0.3", 5432})["dsn"], "hostaddr=10.213.0.3 port=5432 dbname=app host=127.0.0.1");
  EXPECT_EQ(pg->endpoint_at(p, {"10.213.0.3", 5432})["write"], p["write"]);
  EXPECT_FALSE(resources::find_resource_kind("store")->relay_problem({}));  // embedded: runs in the lab
}

std::string scenario_with(const std::string& resource, const std::string& network) {
  return "name: relay\nlease_ttl: 2s\nresource: " + resource + "\nnetwork: " + network +
         "\njob: {key: k}\nworkers: [{id: w1}]\nexpect: {outcome: safe}\n";
}

TEST(RelayValidate, AUnixSocketDsnInNetworkNamespacesIsRefusedAtTheDsn) {
  try {
    (void)harness::parse_scenario(scenario_with("{kind: postgres, dsn: 'host=/var/run/postgresql dbname=app'}", "namespaces"),
                                  "s.yaml");
    FAIL() << "loaded";
  } catch (const harness::ScenarioError& e) {
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.column(), 33);  // the DSN's opening quote
    EXPECT_NE(e.message().find("network: namespaces relays the DSN's TCP address to the workers; host "
                               "/var/run/postgresql is a Unix-socket directory"),
              std::string::npos)
        << e.what();
  }
  // The mapping spelling too; and the same DSN on the host network is fine.
  EXPECT_THROW((void)harness::parse_scenario(scenario_with("{kind: postgres, dsn: 'dbname=app'}", "{mode: namespaces}")),
               harness::ScenarioError);
  EXPECT_NO_THROW((void)harness::parse_scenario(scenario_with("{kind: postgres, dsn: 'dbname=app'}", "host")));
  EXPECT_NO_THROW((void)harness::parse_scenario(
      scenario_with("{kind: postgres, dsn: 'host=127.0.0.1 port=5432 dbname=app'}", "namespaces")));
}

TEST(RelayValidate, LockServiceEndpointsOfEveryKindAreRelayable) {
  for (const std::string ls : {"{kind: etcd, endpoints: ['http://127.0.0.1:23790']}",
                               "{kind: zookeeper, endpoints: ['127.0.0.1:2181', '[::1]:2181']}",
                               "{kind: redis, endpoints: ['redis://127.0.0.1:6379']}"}) {
    EXPECT_NO_THROW((void)harness::parse_scenario("name: r\nlease_ttl: 2s\nlock_service: " + ls +
                                                  "\nresource: {kind: store}\nnetwork: namespaces\njob: {key: k}\n"
                                                  "workers: [{id: w1}]\nexpect: {outcome: safe}\n"))
        << ls;
  }
}

/// An echo server on 127.0.0.1 that, at the client's end of stream, answers "bye" and closes.
class EchoServer {
 public:
  EchoServer() : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    thread_ = std::thread([this] {
      for (;;) {
        tcp::socket s(io_);
        boost::system::error_code ec;
        acceptor_.accept(s, ec);
        if (ec) return;
        std::array<char, 4096> buf{};
        for (;;) {
          const std::size_t n = s.read_some(asio::buffer(buf), ec);
          if (ec == asio::error::eof) {
            asio::write(s, asio::buffer(std::string("bye")), ec);
            break;
          }
          if (ec) break;
          asio::write(s, asio::buffer(buf.data(), n), ec);
        }
        s.close(ec);
      }
    });
  }
  /// Wakes the blocked accept() (shutdown(2) on a listening socket makes it fail on Linux); the
  /// connection being served, if any, ends when its client is gone.
  ~EchoServer() {
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    thread_.join();
  }
  [[nodiscard]] std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
};

std::uint16_t free_port() {
  asio::io_context io;
  tcp::acceptor a(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

/// A relay on 127.0.0.1 to an echo server and a client connected through it.
struct Relayed {
  EchoServer echo;
  std::uint16_t port = free_port();
  faults::TcpRelay relay{{{"echo", {"127.0.0.1", port}, {"127.0.0.1", echo.port()}}}, -1};
  asio::io_context io;
  tcp::socket c{io};
  Relayed() { c.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port)); }
};

TEST(TcpRelay, ForwardsBothWaysPassesAHalfCloseOnAndCountsConnections) {
  Relayed r;
  auto& c = r.c;
  auto& relay = r.relay;
  asio::write(c, asio::buffer(std::string("hello")));
  std::string got(5, '\0');
  asio::read(c, asio::buffer(got));
  EXPECT_EQ(got, "hello");
  c.shutdown(tcp::socket::shutdown_send);  // the server sees the end of stream through the relay
  std::string rest;
  boost::system::error_code ec;
  std::array<char, 64> buf{};
  for (;;) {
    const std::size_t n = c.read_some(asio::buffer(buf), ec);
    rest.append(buf.data(), n);
    if (ec) break;
  }
  EXPECT_EQ(rest, "bye");
  EXPECT_EQ(ec, asio::error::eof);
  EXPECT_EQ(relay.accepted(0), 1u);
  EXPECT_EQ(relay.connected(0), 1u);
}

TEST(TcpRelay, ARefusingTargetClosesTheAcceptedConnection) {
  const std::uint16_t port = free_port(), dead = free_port();
  faults::TcpRelay relay({{"dead", {"127.0.0.1", port}, {"127.0.0.1", dead}}}, -1);
  asio::io_context io;
  tcp::socket c(io);
  c.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  std::array<char, 8> buf{};
  boost::system::error_code ec;
  (void)c.read_some(asio::buffer(buf), ec);
  EXPECT_TRUE(ec == asio::error::eof || ec == asio::error::connection_reset) << ec.message();
  EXPECT_EQ(relay.accepted(0), 1u);
  EXPECT_EQ(relay.connected(0), 0u);
}

TEST(TcpRelay, StopClosesEveryRelayedConnectionAndTheListener) {
  Relayed r;
  auto& c = r.c;
  auto& io = r.io;
  asio::write(c, asio::buffer(std::string("x")));
  char one = 0;
  asio::read(c, asio::buffer(&one, 1));  // the relayed connection is up
  r.relay.stop();
  std::array<char, 8> buf{};
  boost::system::error_code ec;
  (void)c.read_some(asio::buffer(buf), ec);
  EXPECT_TRUE(ec == asio::error::eof || ec == asio::error::connection_reset) << ec.message();
  tcp::socket again(io);
  again.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), r.port), ec);
  EXPECT_EQ(ec, asio::error::connection_refused);
}

TEST(TcpRelay, AnAddressThatCannotBeBoundIsNamed) {
  try {
    faults::TcpRelay relay({{"lock service x", {"192.0.2.1", 2379}, {"127.0.0.1", 1}}}, -1);
    FAIL() << "bound a TEST-NET address this machine does not have";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("relay lock service x: cannot listen on 192.0.2.1:2379: "), std::string::npos)
        << e.what();
  }
}

}  // namespace
