// The network lab and partitions for real: TCP servers in the hub namespace, clients in host
// namespaces; partition -> packets vanish (no RST, no ICMP: the connection stays ESTABLISHED and
// reads time out), heal -> the stalled data goes through; a worker's whole process tree is in its
// host's namespace. Needs root; skips otherwise.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <memory>

#include "fencecheck/faults/netem.h"
#include "fencecheck/faults/netns.h"
#include "fencecheck/faults/partition.h"
#include "fencecheck/faults/process_tree.h"
#include "root_util.h"

using namespace fencecheck::faults;
using namespace std::chrono_literals;
using fctest::Connect;

namespace {

constexpr std::uint16_t kLockPort = 7001, kResourcePort = 7002;

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// The lab, or a skip reason.
std::unique_ptr<NetworkLab> make_lab(CommandRunner& runner, const std::string& run, std::string& skip) {
  if (!fctest::is_root()) {
    skip = "needs root: it creates network namespaces";
    return nullptr;
  }
  auto lab = std::make_unique<NetworkLab>(NetworkLabOptions{run, {"w1", "w2"}}, runner);
  try {
    lab->setup();
  } catch (const FaultUnavailable& e) {
    skip = e.what();
    return nullptr;
  }
  return lab;
}

bool netns_listed(CommandRunner& r, const std::string& name) {
  const std::string out = r.run({"ip", "netns", "list"});
  std::size_t pos = 0;
  while ((pos = out.find(name, pos)) != std::string::npos) {
    const bool start = pos == 0 || out[pos - 1] == '\n';
    const std::size_t end = pos + name.size();
    if (start && (end == out.size() || out[end] == ' ' || out[end] == '\n')) return true;
    pos = end;
  }
  return false;
}

}  // namespace

TEST(NetworkLabReal, ItsAddressesExistOnlyInsideItsNamespaces) {
  SystemCommandRunner r;
  std::string skip;
  const std::string run = "nl" + std::to_string(::getpid());
  auto lab = make_lab(r, run, skip);
  if (!lab) GTEST_SKIP() << skip;
  for (const auto& ns : lab->namespaces()) EXPECT_TRUE(netns_listed(r, ns)) << ns;
  const auto& w1 = lab->host("w1");
  EXPECT_NE(lab->run_in(w1.netns, {"ip", "-o", "-4", "addr", "show", "dev", w1.host_link}).find(w1.address + "/24"),
            std::string::npos);
  EXPECT_NE(lab->run_in(lab->hub_netns(), {"ip", "-o", "-4", "addr", "show", "dev", lab->bridge()})
                .find(lab->service("lock-service").address + "/24"),
            std::string::npos);
  // The root namespace got nothing: none of the lab's links or addresses.
  const std::string root_links = r.run({"ip", "-o", "link", "show"});
  const std::string root_addrs = r.run({"ip", "-o", "-4", "addr", "show"});
  EXPECT_EQ(root_links.find("fc" + lab->tag()), std::string::npos) << root_links;
  for (const auto& h : lab->hosts()) EXPECT_EQ(root_addrs.find(" " + h.address + "/"), std::string::npos) << root_addrs;
  for (const auto& s : lab->services()) EXPECT_EQ(root_addrs.find(" " + s.address + "/"), std::string::npos);

  lab->teardown();
  for (const auto& ns : lab->namespaces()) EXPECT_FALSE(netns_listed(r, ns)) << ns;
}

TEST(PartitionReal, FromLockServiceStallsThatTrafficOnlyAndHealRestoresIt) {
  SystemCommandRunner r;
  std::string skip;
  const std::string run = "np" + std::to_string(::getpid());
  auto lab = make_lab(r, run, skip);
  if (!lab) GTEST_SKIP() << skip;
  const std::string lock = lab->service("lock-service").address, res = lab->service("resource").address;
  const std::string w1 = lab->host("w1").netns, w2 = lab->host("w2").netns;
  {
    fctest::EchoServer lock_server(lab->hub_netns(), lock, kLockPort), res_server(lab->hub_netns(), res, kResourcePort);
    ASSERT_TRUE(lock_server.ok() && res_server.ok());

    // Baseline: w1 talks to the lock service.
    Fd conn;
    ASSERT_EQ(fctest::connect_from(w1, lock, kLockPort, 5s, conn.fd), Connect::kConnected);
    ASSERT_TRUE(fctest::send_all(conn.fd, "a"));
    ASSERT_TRUE(fctest::receive(conn.fd, "a", 5s));

    PartitionFault part(*lab, "w1", PartitionSpec::from("lock-service"));
    part.inject();
    ASSERT_TRUE(part.active());
    // Observe: the send is accepted locally, but no reply comes and nothing is refused: the
    // connection stays ESTABLISHED with no error, the read just times out.
    ASSERT_TRUE(fctest::send_all(conn.fd, "b"));
    EXPECT_FALSE(fctest::receive(conn.fd, "b", 500ms));
    EXPECT_EQ(fctest::tcp_state(conn.fd), TCP_ESTABLISHED);
    EXPECT_EQ(fctest::socket_error(conn.fd), 0);
    {
      Fd fresh;  // a new connection is not refused either: its SYN vanishes
      EXPECT_EQ(fctest::connect_from(w1, lock, kLockPort, 500ms, fresh.fd), Connect::kTimedOut);
    }
    {
      Fd store;  // the store (same hub, other address) is still reachable from w1
      ASSERT_EQ(fctest::connect_from(w1, res, kResourcePort, 5s, store.fd), Connect::kConnected);
      ASSERT_TRUE(fctest::send_all(store.fd, "s"));
      EXPECT_TRUE(fctest::receive(store.fd, "s", 5s));
    }
    {
      Fd other;  // and w2 still reaches the lock service
      ASSERT_EQ(fctest::connect_from(w2, lock, kLockPort, 5s, other.fd), Connect::kConnected);
      ASSERT_TRUE(fctest::send_all(other.fd, "o"));
      EXPECT_TRUE(fctest::receive(other.fd, "o", 5s));
    }

    EXPECT_TRUE(part.heal());
    EXPECT_FALSE(part.active());
    // Healed: TCP retransmits the stalled "b" and its echo arrives on the same connection.
    EXPECT_TRUE(fctest::receive(conn.fd, "b", 15s));
    ASSERT_TRUE(fctest::send_all(conn.fd, "c"));
    EXPECT_TRUE(fctest::receive(conn.fd, "c", 5s));
    Fd again;
    EXPECT_EQ(fctest::connect_from(w1, lock, kLockPort, 5s, again.fd), Connect::kConnected);
    // Heal removed exactly its filters: none are left on the link.
    const std::string dev = lab->host("w1").hub_link;
    EXPECT_EQ(lab->run_in(lab->hub_netns(), {"tc", "filter", "show", "dev", dev, "ingress"}), "");
    EXPECT_EQ(lab->run_in(lab->hub_netns(), {"tc", "filter", "show", "dev", dev, "egress"}), "");
  }
  lab->teardown();
  for (const auto& ns : lab->namespaces()) EXPECT_FALSE(netns_listed(r, ns)) << ns;
}

// The tc filters on a link's hook, as `tc filter show` prints them ("" when none).
std::string filters(const NetworkLab& lab, const std::string& host, const std::string& hook) {
  return lab.run_in(lab.hub_netns(), {"tc", "filter", "show", "dev", lab.host(host).hub_link, hook});
}

// A fresh connection from netns to the greeting echo server at addr:port works both ways.
void expect_round_trip(const std::string& netns, const std::string& addr, std::uint16_t port, const std::string& what) {
  Fd c;
  ASSERT_EQ(fctest::connect_from(netns, addr, port, 5s, c.fd), Connect::kConnected);
  ASSERT_TRUE(fctest::receive(c.fd, "hello", 5s));
  ASSERT_TRUE(fctest::send_all(c.fd, what));
  EXPECT_TRUE(fctest::receive(c.fd, what, 5s));
}

// requests: the worker's data never reaches the service, but the connection opens (the
// handshake passes) and the service's own data still reaches the worker.
TEST(PartitionReal, RequestsTheConnectionOpensTheRequestNeverArrives) {
  SystemCommandRunner r;
  std::string skip;
  auto lab = make_lab(r, "nq" + std::to_string(::getpid()), skip);
  if (!lab) GTEST_SKIP() << skip;
  const std::string lock = lab->service("lock-service").address, res = lab->service("resource").address;
  const std::string w1 = lab->host("w1").netns, w2 = lab->host("w2").netns;
  {
    fctest::EchoServer store(lab->hub_netns(), res, kResourcePort, "hello"), etcd(lab->hub_netns(), lock, kLockPort, "hello");
    ASSERT_TRUE(store.ok() && etcd.ok());
    expect_round_trip(w1, res, kResourcePort, "base");

    PartitionFault part(*lab, "w1", PartitionSpec::from("resource", PartitionSpec::Direction::kRequests));
    EXPECT_EQ(part.target(), "w1 (" + w1 + ") from resource " + res + " (requests)");
    part.inject();
    EXPECT_EQ(filters(*lab, "w1", "egress"), "");  // one hook only
    EXPECT_NE(filters(*lab, "w1", "ingress"), "");

    Fd conn;
    const int accepted = store.accepted();
    ASSERT_EQ(fctest::connect_from(w1, res, kResourcePort, 5s, conn.fd), Connect::kConnected);
    EXPECT_TRUE(fctest::wait_until([&] { return store.accepted() == accepted + 1; }, 5s)) << "the handshake passes";
    EXPECT_TRUE(fctest::receive(conn.fd, "hello", 5s)) << "the service's data still reaches the worker";
    ASSERT_TRUE(fctest::send_all(conn.fd, "req1"));
    // Lost: through ~3 retransmissions (RTO from 200 ms, doubling), the service receives nothing
    // and so answers nothing; nothing is refused either.
    EXPECT_FALSE(store.wait_received("req1", 1500ms)) << store.received();
    EXPECT_FALSE(fctest::receive(conn.fd, "req1", 100ms));
    EXPECT_EQ(fctest::tcp_state(conn.fd), TCP_ESTABLISHED);
    EXPECT_EQ(fctest::socket_error(conn.fd), 0);
    // A client that gives up and closes: its kernel keeps the request (and the FIN) to retransmit
    // (an orphaned socket). It read all it was sent first: closing with unread data would reset
    // the connection instead (tcp(7)), and discard the request.
    Fd gave_up;
    ASSERT_EQ(fctest::connect_from(w1, res, kResourcePort, 5s, gave_up.fd), Connect::kConnected);
    ASSERT_TRUE(fctest::receive(gave_up.fd, "hello", 5s));
    ASSERT_TRUE(fctest::send_all(gave_up.fd, "late"));
    ::close(gave_up.fd);
    gave_up.fd = -1;
    expect_round_trip(w1, lock, kLockPort, "o");  // the lock service from w1, the resource from w2: untouched
    expect_round_trip(w2, res, kResourcePort, "w2");
    EXPECT_EQ(store.received().find("req1"), std::string::npos);
    EXPECT_EQ(store.received().find("late"), std::string::npos);

    EXPECT_TRUE(part.heal());
    EXPECT_FALSE(part.active());
    EXPECT_EQ(filters(*lab, "w1", "ingress"), "");
    EXPECT_EQ(filters(*lab, "w1", "egress"), "");
    // TCP retransmits what was lost: the stalled request arrives (and is answered) after the
    // heal, and so does the one whose client had given up: a request lost in a requests
    // partition may still act, late (partition.h).
    EXPECT_TRUE(fctest::receive(conn.fd, "req1", 15s));
    EXPECT_TRUE(store.wait_received("late", 15s)) << store.received();
    expect_round_trip(w1, res, kResourcePort, "after");  // baseline restored
  }
  lab->teardown();
}

// replies: the request reaches the service, which acts on it; its reply never comes back.
TEST(PartitionReal, RepliesTheRequestArrivesAndActsTheReplyNeverComesBack) {
  SystemCommandRunner r;
  std::string skip;
  auto lab = make_lab(r, "ny" + std::to_string(::getpid()), skip);
  if (!lab) GTEST_SKIP() << skip;
  const std::string lock = lab->service("lock-service").address, res = lab->service("resource").address;
  const std::string w1 = lab->host("w1").netns;
  {
    fctest::EchoServer store(lab->hub_netns(), res, kResourcePort, "hello"), etcd(lab->hub_netns(), lock, kLockPort, "hello");
    ASSERT_TRUE(store.ok() && etcd.ok());
    Fd before;  // baseline, and a connection open across the whole partition
    ASSERT_EQ(fctest::connect_from(w1, res, kResourcePort, 5s, before.fd), Connect::kConnected);
    ASSERT_TRUE(fctest::receive(before.fd, "hello", 5s));

    PartitionFault part(*lab, "w1", PartitionSpec::from("resource", PartitionSpec::Direction::kReplies));
    part.inject();
    EXPECT_EQ(filters(*lab, "w1", "ingress"), "");
    EXPECT_NE(filters(*lab, "w1", "egress"), "");

    // A connection per call, as the workers' clients make: it opens (the SYN-ACK passes) ...
    Fd call;
    ASSERT_EQ(fctest::connect_from(w1, res, kResourcePort, 5s, call.fd), Connect::kConnected);
    EXPECT_FALSE(fctest::receive(call.fd, "hello", 300ms)) << "the service's data is lost";
    // ... the request arrives and the service acts on it (here: records it, and echoes) ...
    ASSERT_TRUE(fctest::send_all(call.fd, "write k=v"));
    EXPECT_TRUE(store.wait_received("write k=v", 5s)) << store.received();
    // ... and the answer never comes: no data, no error, the connection just waits (a client's
    // read timeout: outcome unknown).
    EXPECT_FALSE(fctest::receive(call.fd, "hellowrite k=v", 1000ms));
    EXPECT_EQ(fctest::tcp_state(call.fd), TCP_ESTABLISHED);
    EXPECT_EQ(fctest::socket_error(call.fd), 0);
    // The same on a connection opened before the partition.
    ASSERT_TRUE(fctest::send_all(before.fd, "unlock"));
    EXPECT_TRUE(store.wait_received("unlock", 5s)) << store.received();
    EXPECT_FALSE(fctest::receive(before.fd, "unlock", 300ms));
    expect_round_trip(w1, lock, kLockPort, "o");  // the lock service: untouched

    EXPECT_TRUE(part.heal());
    EXPECT_FALSE(part.active());
    EXPECT_EQ(filters(*lab, "w1", "egress"), "");
    // Retransmitted, the lost replies arrive; the request was acted on once (not resent: its
    // delivery had been acknowledged).
    EXPECT_TRUE(fctest::receive(call.fd, "hellowrite k=v", 15s));
    EXPECT_TRUE(fctest::receive(before.fd, "unlock", 15s));
    const std::string got = store.received();
    EXPECT_EQ(got.find("write k=v"), got.rfind("write k=v")) << got;
    expect_round_trip(w1, res, kResourcePort, "after");  // baseline restored
  }
  lab->teardown();
}

// full, one way: every peer acts on what w1 sends, none is heard from.
TEST(PartitionReal, FullRepliesEveryServiceActsNoneIsHeard) {
  SystemCommandRunner r;
  std::string skip;
  auto lab = make_lab(r, "nz" + std::to_string(::getpid()), skip);
  if (!lab) GTEST_SKIP() << skip;
  const std::string lock = lab->service("lock-service").address, res = lab->service("resource").address;
  const std::string w1 = lab->host("w1").netns;
  {
    fctest::EchoServer store(lab->hub_netns(), res, kResourcePort), etcd(lab->hub_netns(), lock, kLockPort);
    ASSERT_TRUE(store.ok() && etcd.ok());
    PartitionFault part(*lab, "w1", PartitionSpec::full(PartitionSpec::Direction::kReplies));
    FaultGuard guard(part);
    part.inject();
    Fd a, b;
    ASSERT_EQ(fctest::connect_from(w1, lock, kLockPort, 5s, a.fd), Connect::kConnected);
    ASSERT_EQ(fctest::connect_from(w1, res, kResourcePort, 5s, b.fd), Connect::kConnected);
    ASSERT_TRUE(fctest::send_all(a.fd, "keepalive"));
    ASSERT_TRUE(fctest::send_all(b.fd, "write"));
    EXPECT_TRUE(etcd.wait_received("keepalive", 5s));
    EXPECT_TRUE(store.wait_received("write", 5s));
    EXPECT_FALSE(fctest::receive(a.fd, "keepalive", 500ms));
    EXPECT_FALSE(fctest::receive(b.fd, "write", 100ms));
  }
  EXPECT_EQ(filters(*lab, "w1", "egress"), "");
  lab->teardown();
}

TEST(PartitionReal, FullCutsEverythingAndHealRestoresIt) {
  SystemCommandRunner r;
  std::string skip;
  const std::string run = "nf" + std::to_string(::getpid());
  auto lab = make_lab(r, run, skip);
  if (!lab) GTEST_SKIP() << skip;
  const std::string lock = lab->service("lock-service").address, res = lab->service("resource").address;
  const std::string w1 = lab->host("w1").netns;
  {
    fctest::EchoServer lock_server(lab->hub_netns(), lock, kLockPort), res_server(lab->hub_netns(), res, kResourcePort);
    ASSERT_TRUE(lock_server.ok() && res_server.ok());
    Fd conn;
    ASSERT_EQ(fctest::connect_from(w1, res, kResourcePort, 5s, conn.fd), Connect::kConnected);

    PartitionFault full(*lab, "w1", PartitionSpec::full());
    {
      FaultGuard guard(full);
      full.inject();
      Fd a, b;
      EXPECT_EQ(fctest::connect_from(w1, lock, kLockPort, 500ms, a.fd), Connect::kTimedOut);
      EXPECT_EQ(fctest::connect_from(w1, res, kResourcePort, 500ms, b.fd), Connect::kTimedOut);
      ASSERT_TRUE(fctest::send_all(conn.fd, "x"));
      EXPECT_FALSE(fctest::receive(conn.fd, "x", 300ms));
      EXPECT_EQ(fctest::tcp_state(conn.fd), TCP_ESTABLISHED);
    }  // the guard heals
    EXPECT_FALSE(full.active());
    EXPECT_TRUE(fctest::receive(conn.fd, "x", 15s));
    Fd c;
    EXPECT_EQ(fctest::connect_from(w1, lock, kLockPort, 5s, c.fd), Connect::kConnected);
  }
  lab->teardown();
}

TEST(PartitionReal, HealAfterTheLabIsGoneIsQuiet) {
  SystemCommandRunner r;
  std::string skip;
  auto lab = make_lab(r, "ng" + std::to_string(::getpid()), skip);
  if (!lab) GTEST_SKIP() << skip;
  PartitionFault part(*lab, "w2", PartitionSpec::from("resource"));
  part.inject();
  lab->teardown();
  EXPECT_TRUE(part.heal());
  EXPECT_FALSE(part.active());
}

TEST(NetemReal, DelaysTheHostsLink) {
  SystemCommandRunner r;
  std::string skip;
  auto lab = make_lab(r, "nn" + std::to_string(::getpid()), skip);
  if (!lab) GTEST_SKIP() << skip;
  const std::string lock = lab->service("lock-service").address, w1 = lab->host("w1").netns;
  fctest::EchoServer server(lab->hub_netns(), lock, kLockPort);
  ASSERT_TRUE(server.ok());
  Fd conn;
  ASSERT_EQ(fctest::connect_from(w1, lock, kLockPort, 5s, conn.fd), Connect::kConnected);
  auto rtt = [&] {
    auto t0 = std::chrono::steady_clock::now();
    if (!fctest::send_all(conn.fd, "p") || !fctest::receive(conn.fd, "p", 10s)) return std::chrono::milliseconds(-1);
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  };
  ASSERT_GE(rtt().count(), 0);
  NetemFault netem(*lab, "w1", {std::chrono::milliseconds(100), {}, 0});
  try {
    netem.inject();
  } catch (const FaultUnavailable& e) {
    GTEST_SKIP() << e.what();
  }
  EXPECT_GE(rtt(), 200ms);  // 100 ms each way
  EXPECT_TRUE(netem.heal());
  EXPECT_FALSE(netem.active());
  EXPECT_LT(rtt(), 150ms);
}

// A worker is launched as `ip netns exec <its namespace> <program>` (Services::worker_prefix), so
// every process it forks inherits that network namespace (a namespace is inherited across fork
// and exec, namespaces(7)): a partition of the host cuts the whole tree, with no code of its own.
TEST(PartitionReal, TheWorkersWholeTreeIsInItsNamespaceAndIsCutWithIt) {
  SystemCommandRunner r;
  std::string skip;
  auto lab = make_lab(r, "nt" + std::to_string(::getpid()), skip);
  if (!lab) GTEST_SKIP() << skip;
  const std::string lock = lab->service("lock-service").address;
  const std::string w1 = lab->host("w1").netns, w2 = lab->host("w2").netns;
  auto inode = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  };
  {
    fctest::TreeChild worker({"ip", "netns", "exec", w1, "/bin/sh", "-c", fctest::kThreeLevels});
    std::vector<TreeMember> tree;
    ASSERT_TRUE(fctest::wait_until(
        [&] {
          tree = walk_tree(ProcessRef::of(worker.pid()).value_or(ProcessRef{}));
          return tree.size() >= 4;
        },
        5s));
    ASSERT_EQ(tree.back().depth, 2);
    const auto w1_ns = inode("/run/netns/" + w1), host_ns = inode("/proc/self/ns/net");
    ASSERT_NE(w1_ns, 0u);
    for (const auto& m : tree) {
      const auto ns = inode("/proc/" + std::to_string(m.ref.pid) + "/ns/net");
      EXPECT_EQ(ns, w1_ns) << "pid " << m.ref.pid << " depth " << m.depth;
      EXPECT_NE(ns, host_ns) << "pid " << m.ref.pid << " depth " << m.depth;
    }
    // Connections made in the grandchild's own namespace (a socket opened after setns(2) to
    // /proc/<grandchild>/ns/net is exactly what the grandchild would open).
    const std::string grandchild_ns = "/proc/" + std::to_string(tree.back().ref.pid) + "/ns/net";
    fctest::EchoServer server(lab->hub_netns(), lock, kLockPort);
    ASSERT_TRUE(server.ok());
    {
      Fd before;
      ASSERT_EQ(fctest::connect_from(grandchild_ns, lock, kLockPort, 5s, before.fd), Connect::kConnected);
    }
    PartitionFault part(*lab, "w1", PartitionSpec::from("lock-service"));
    part.inject();
    {
      Fd cut, other;
      EXPECT_EQ(fctest::connect_from(grandchild_ns, lock, kLockPort, 500ms, cut.fd), Connect::kTimedOut);
      EXPECT_EQ(fctest::connect_from(w2, lock, kLockPort, 5s, other.fd), Connect::kConnected);
    }
    EXPECT_TRUE(part.heal());
    Fd after;
    EXPECT_EQ(fctest::connect_from(grandchild_ns, lock, kLockPort, 5s, after.fd), Connect::kConnected);
  }
  lab->teardown();
}
