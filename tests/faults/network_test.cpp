// The command runner, the network lab, partition and netem with a recording runner: the exact
// `ip` / `tc` argv for setup, each partition kind, netem, heal, teardown and the ledger healers.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "fencecheck/faults/command.h"
#include "fencecheck/faults/ledger.h"
#include "fencecheck/faults/netem.h"
#include "fencecheck/faults/netns.h"
#include "fencecheck/faults/partition.h"
#include "cbpf.h"
#include "undo_failure.h"
#include "healers.h"
#include "../support/remove_at_end.h"

using namespace fencecheck::faults;
using Argv = std::vector<std::string>;
using Calls = std::vector<Argv>;
namespace fs = std::filesystem;

namespace {
// A responder that fails the commands whose argv satisfies pred with the given stderr.
template <typename Pred>
RecordingCommandRunner::Responder fail_when(Pred pred, std::string stderr_text, int status = 2) {
  return [pred, stderr_text, status](const Argv& argv) -> std::string {
    if (pred(argv)) throw CommandError(argv, status, stderr_text);
    return "";
  };
}
bool contains(const Argv& a, const std::string& word) { return std::find(a.begin(), a.end(), word) != a.end(); }

fs::path temp_file(const std::string& name) {
  const fs::path dir = fencecheck::testing::remove_at_end(fs::temp_directory_path() / ("fc-network-test-" + std::to_string(::getpid())));
  fs::create_directories(dir);
  fs::remove(dir / name);
  return dir / name;
}

const std::string kLockIngress = "6,40 0 0 12,21 0 3 2048,32 0 0 30,21 0 1 181731330,6 0 0 2,6 0 0 4294967295";
const std::string kLockEgress = "6,40 0 0 12,21 0 3 2048,32 0 0 26,21 0 1 181731330,6 0 0 2,6 0 0 4294967295";
const std::string kFull = "5,40 0 0 12,21 2 0 2048,21 1 0 34525,6 0 0 4294967295,6 0 0 2";
}  // namespace

// ---------------------------------------------------------------- the real runner
TEST(SystemCommandRunner, RunsArgvWithoutAShell) {
  SystemCommandRunner r;
  EXPECT_EQ(r.run({"printf", "%s|%s", "a b;c", "$HOME"}), "a b;c|$HOME");
}

TEST(SystemCommandRunner, FailureCarriesTheCommandLineAndStderr) {
  SystemCommandRunner r;
  try {
    r.run({"sh", "-c", "echo out; echo 'it broke' >&2; exit 3"});
    FAIL() << "must throw";
  } catch (const CommandError& e) {
    EXPECT_EQ(e.exit_status(), 3);
    EXPECT_EQ(e.stderr_text(), "it broke");
    EXPECT_EQ(std::string(e.what()),
              "command failed: sh -c 'echo out; echo '\\''it broke'\\'' >&2; exit 3': exit status 3: it broke");
  }
}

TEST(SystemCommandRunner, MissingProgramAndTimeout) {
  SystemCommandRunner r(std::chrono::milliseconds(200));
  EXPECT_THROW(r.run({"fencecheck-no-such-program"}), CommandError);
  auto t0 = std::chrono::steady_clock::now();
  try {
    r.run({"sleep", "10"});
    FAIL() << "must time out";
  } catch (const CommandError& e) {
    EXPECT_NE(std::string(e.what()).find("did not finish within 200 ms"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_THROW(r.run({}), std::invalid_argument);
}

TEST(SystemCommandRunner, ChildMessagesAreUntranslated) {
  SystemCommandRunner r;
  EXPECT_EQ(r.run({"sh", "-c", "printf %s \"$LC_ALL\""}), "C");
}

TEST(RecordingCommandRunner, RecordsAndResponds) {
  RecordingCommandRunner r([](const Argv& a) { return a[0] == "x" ? std::string("out") : std::string(); });
  EXPECT_EQ(r.run({"x", "1"}), "out");
  EXPECT_EQ(r.run({"y"}), "");
  EXPECT_EQ(r.calls(), (Calls{{"x", "1"}, {"y"}}));
  r.clear();
  EXPECT_TRUE(r.calls().empty());
}

// ---------------------------------------------------------------- lab
TEST(NetworkLab, NamesAndAddresses) {
  RecordingCommandRunner r;
  NetworkLab lab({"r1", {"w1", "w2"}}, r);
  const std::string tag = lab.tag();
  ASSERT_EQ(tag.size(), 6u);
  EXPECT_EQ(tag, lab_tag("r1"));
  EXPECT_NE(lab_tag("r1"), lab_tag("r2"));
  EXPECT_EQ(lab.hub_netns(), "fc-r1-hub");
  EXPECT_EQ(lab.bridge(), "fc" + tag + "br");
  EXPECT_EQ(lab.hub_address(), "10.213.0.1");
  EXPECT_EQ(lab.service("lock-service").address, "10.213.0.2");
  EXPECT_EQ(lab.service("resource").address, "10.213.0.3");
  const LabHost& w2 = lab.host("w2");
  EXPECT_EQ(w2.netns, "fc-r1-w2");
  EXPECT_EQ(w2.address, "10.213.0.5");
  EXPECT_EQ(w2.hub_link, "fc" + tag + "1a");
  EXPECT_EQ(w2.host_link, "fc" + tag + "1b");
  EXPECT_LE(w2.hub_link.size(), 15u);  // IFNAMSIZ - 1
  EXPECT_EQ(lab.namespaces(), (Argv{"fc-r1-hub", "fc-r1-w1", "fc-r1-w2"}));
  EXPECT_THROW((void)lab.host("w9"), std::out_of_range);
  EXPECT_THROW((void)lab.service("dns"), std::out_of_range);
  EXPECT_TRUE(r.calls().empty());  // the constructor runs nothing
}

TEST(NetworkLab, RejectsBadOptions) {
  RecordingCommandRunner r;
  EXPECT_THROW(NetworkLab({"", {"w1"}}, r), std::invalid_argument);
  EXPECT_THROW(NetworkLab({"r1", {"w1", "w1"}}, r), std::invalid_argument);
  EXPECT_THROW(NetworkLab({"r1", {"hub"}}, r), std::invalid_argument);
  EXPECT_THROW(NetworkLab({"r1", {"w 1"}}, r), std::invalid_argument);
  EXPECT_THROW(NetworkLab({"r1", {"w1"}, {"lock-service"}, "10.213.0.0"}, r), std::invalid_argument);
  EXPECT_THROW(NetworkLab({"r1", {"w1"}, {"lock-service"}, "10.213.0.1/24"}, r), std::invalid_argument);
  EXPECT_THROW(NetworkLab({"r1", {"w1", "w2", "w3", "w4", "w5"}, {"a", "b"}, "10.9.0.0/29"}, r), std::invalid_argument);
  EXPECT_NO_THROW(NetworkLab({"r1", {"w1", "w2", "w3"}, {"a", "b"}, "10.9.0.0/29"}, r));  // 6 addresses: exactly enough
}

TEST(NetworkLab, SetupRunsExactlyTheseCommandsAndTeardownDeletesTheNamespaces) {
  RecordingCommandRunner r;
  NetworkLab lab({"r1", {"w1", "w2"}, {"lock-service", "resource"}, "10.213.0.0/24"}, r);
  const std::string t = lab.tag(), br = "fc" + t + "br";
  lab.setup();
  EXPECT_TRUE(lab.is_set_up());
  Calls want{
      {"ip", "netns", "add", "fc-r1-hub"},
      {"ip", "-n", "fc-r1-hub", "link", "set", "lo", "up"},
      {"ip", "-n", "fc-r1-hub", "link", "add", br, "type", "bridge"},
      {"ip", "-n", "fc-r1-hub", "addr", "add", "10.213.0.1/24", "dev", br},
      {"ip", "-n", "fc-r1-hub", "addr", "add", "10.213.0.2/24", "dev", br},
      {"ip", "-n", "fc-r1-hub", "addr", "add", "10.213.0.3/24", "dev", br},
      {"ip", "-n", "fc-r1-hub", "link", "set", br, "up"},
  };
  int i = 0;
  for (const char* h : {"w1", "w2"}) {
    const std::string ns = std::string("fc-r1-") + h, a = "fc" + t + std::to_string(i) + "a",
                      b = "fc" + t + std::to_string(i) + "b", addr = "10.213.0." + std::to_string(4 + i) + "/24";
    want.push_back({"ip", "netns", "add", ns});
    want.push_back({"ip", "-n", ns, "link", "set", "lo", "up"});
    want.push_back({"ip", "-n", "fc-r1-hub", "link", "add", a, "type", "veth", "peer", "name", b, "netns", ns});
    want.push_back({"ip", "-n", "fc-r1-hub", "link", "set", a, "master", br});
    want.push_back({"ip", "-n", "fc-r1-hub", "link", "set", a, "up"});
    want.push_back({"tc", "-n", "fc-r1-hub", "qdisc", "add", "dev", a, "clsact"});
    want.push_back({"ip", "-n", ns, "addr", "add", addr, "dev", b});
    want.push_back({"ip", "-n", ns, "link", "set", b, "up"});
    ++i;
  }
  EXPECT_EQ(r.calls(), want);
  EXPECT_EQ(lab.setup_commands(), want);
  // Nothing ever names the root namespace: every ip/tc command is "-n <ns>" or "netns add".
  for (const auto& c : r.calls()) EXPECT_TRUE(c[1] == "-n" || c[1] == "netns") << format_command(c);
  r.clear();
  lab.setup();  // idempotent
  EXPECT_TRUE(r.calls().empty());

  lab.teardown();
  EXPECT_EQ(r.calls(), (Calls{{"ip", "netns", "del", "fc-r1-w2"},
                              {"ip", "netns", "del", "fc-r1-w1"},
                              {"ip", "netns", "del", "fc-r1-hub"}}));
  r.clear();
  lab.teardown();  // idempotent
  EXPECT_TRUE(r.calls().empty());
}

TEST(NetworkLab, ExecArgvRunsInsideANamespace) {
  RecordingCommandRunner r;
  NetworkLab lab({"r1", {"w1"}}, r);
  EXPECT_EQ(lab.exec_argv("fc-r1-w1", {"fencecheck-worker", "--id", "w1"}),
            (Argv{"ip", "netns", "exec", "fc-r1-w1", "fencecheck-worker", "--id", "w1"}));
  EXPECT_THROW((void)lab.exec_argv("some-other-ns", {"sh"}), std::invalid_argument);
  EXPECT_THROW((void)lab.exec_argv("fc-r1-w1", {}), std::invalid_argument);
  lab.run_in("fc-r1-hub", {"ss", "-tln"});
  EXPECT_EQ(r.calls(), (Calls{{"ip", "netns", "exec", "fc-r1-hub", "ss", "-tln"}}));
}

TEST(NetworkLab, NoPermissionIsUnavailableAndNothingIsLeft) {
  RecordingCommandRunner r(fail_when([](const Argv& a) { return contains(a, "add") && a[1] == "netns"; },
                                     "mount --make-shared /run/netns failed: Operation not permitted", 1));
  NetworkLab lab({"r1", {"w1"}}, r);
  EXPECT_THROW(lab.setup(), FaultUnavailable);
  EXPECT_FALSE(lab.is_set_up());
  EXPECT_EQ(r.calls(), (Calls{{"ip", "netns", "add", "fc-r1-hub"}}));  // nothing was created: nothing deleted
}

TEST(NetworkLab, AFailureHalfwayDeletesWhatWasCreated) {
  RecordingCommandRunner r(
      fail_when([](const Argv& a) { return contains(a, "veth"); }, "RTNETLINK answers: File exists", 2));
  NetworkLab lab({"r1", {"w1"}}, r);
  try {
    lab.setup();
    FAIL() << "must throw";
  } catch (const FaultError& e) {
    EXPECT_NE(std::string(e.what()).find("network lab setup failed"), std::string::npos) << e.what();
  }
  auto calls = r.calls();
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls[calls.size() - 2], (Argv{"ip", "netns", "del", "fc-r1-w1"}));
  EXPECT_EQ(calls.back(), (Argv{"ip", "netns", "del", "fc-r1-hub"}));
  EXPECT_FALSE(lab.is_set_up());
}

TEST(NetworkLab, AnExistingNamespaceIsNotOursToDelete) {
  RecordingCommandRunner r(fail_when([](const Argv& a) { return a == Argv{"ip", "netns", "add", "fc-r1-hub"}; },
                                     "Cannot create namespace file \"/run/netns/fc-r1-hub\": File exists", 1));
  NetworkLab lab({"r1", {"w1"}}, r);
  try {
    lab.setup();
    FAIL() << "must throw";
  } catch (const FaultError& e) {
    EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
  }
  EXPECT_EQ(r.calls(), (Calls{{"ip", "netns", "add", "fc-r1-hub"}}));
}

TEST(NetworkLab, IsRecordedInTheLedgerBeforeItExistsAndHealedAtTeardown) {
  auto path = temp_file("lab.ledger");
  RecordingCommandRunner r;
  FaultLedger ledger(path, "r1");
  NetworkLab lab({"r1", {"w1"}}, r, &ledger);
  lab.setup();
  auto out = FaultLedger::outstanding(path);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["kind"], "netns-lab");
  EXPECT_EQ(out[0]["namespaces"], (nlohmann::json{"fc-r1-hub", "fc-r1-w1"}));
  EXPECT_EQ(out[0]["bridge"], lab.bridge());
  EXPECT_EQ(out[0]["subnet"], "10.213.0.0/24");
  lab.teardown();
  EXPECT_TRUE(FaultLedger::outstanding(path).empty());
}

TEST(NetworkLab, TeardownToleratesVanishedNamespacesButRetriesOtherFailures) {
  bool deny = true;
  RecordingCommandRunner r([&deny](const Argv& a) -> std::string {
    if (a[2] == "del" && a[3] == "fc-r1-w1")
      throw CommandError(a, 1, "Cannot remove namespace file \"/run/netns/fc-r1-w1\": No such file or directory");
    if (a[2] == "del" && a[3] == "fc-r1-hub" && deny)
      throw CommandError(a, 1, "Cannot remove namespace file \"/run/netns/fc-r1-hub\": Device or resource busy");
    return "";
  });
  NetworkLab lab({"r1", {"w1"}}, r);
  lab.setup();
  lab.teardown();
  EXPECT_TRUE(lab.is_set_up());  // the hub could not be deleted: still there
  deny = false;
  r.clear();
  lab.teardown();
  EXPECT_EQ(r.calls(), (Calls{{"ip", "netns", "del", "fc-r1-hub"}}));
  EXPECT_FALSE(lab.is_set_up());
}

// ---------------------------------------------------------------- partition
TEST(PartitionBytecode, ProgramsForEachKind) {
  EXPECT_EQ(partition_bytecode(PartitionSpec::from("lock-service"), "ingress", "10.213.0.2"), kLockIngress);
  EXPECT_EQ(partition_bytecode(PartitionSpec::from("lock-service"), "egress", "10.213.0.2"), kLockEgress);
  EXPECT_EQ(partition_bytecode(PartitionSpec::full(), "ingress", ""), kFull);
  EXPECT_EQ(partition_bytecode(PartitionSpec::full(), "egress", ""), kFull);
  EXPECT_THROW((void)partition_bytecode(PartitionSpec::from("x"), "ingress", "not-an-ip"), std::invalid_argument);
}

namespace {
namespace cbpf = fctest::cbpf;
using Direction = PartitionSpec::Direction;
using cbpf::Frame;

/// What the program of spec on hook does with frame (address: the lock service's, 10.213.0.2,
/// or the resource's, 10.213.0.3).
std::uint32_t verdict(const PartitionSpec& spec, const std::string& hook, const Frame& frame,
                      const std::string& address = "10.213.0.3") {
  return cbpf::run(cbpf::decode(partition_bytecode(spec, hook, address)), frame.bytes());
}

// The worker w1 (10.213.0.4) and the resource (10.213.0.3): a request goes w1 -> resource
// (ingress at the hub's port), a reply resource -> w1 (egress).
Frame request(std::uint8_t flags, std::size_t payload = 0) {
  Frame f;
  f.flags = flags;
  f.payload = payload;
  return f;
}
Frame reply(std::uint8_t flags, std::size_t payload = 0) {
  Frame f = request(flags, payload);
  std::swap(f.src, f.dst);
  return f;
}
}  // namespace

TEST(PartitionBytecode, TheDecoderChecksWhatItDecodes) {
  // The test's own decoder must refuse what the kernel refuses, or the checks below prove little.
  EXPECT_THROW(cbpf::decode("2,6 0 0 2"), std::invalid_argument);            // count mismatch
  EXPECT_THROW(cbpf::decode("2,21 0 5 2048,6 0 0 2"), std::invalid_argument); // jump past the end
  EXPECT_THROW(cbpf::decode("1,40 0 0 12"), std::invalid_argument);           // no return at the end
  EXPECT_THROW(cbpf::decode("2,99 0 0 0,6 0 0 2"), std::invalid_argument);    // unknown opcode
  EXPECT_EQ(cbpf::run(cbpf::decode("2,40 0 0 200,6 0 0 2"), Frame{}.bytes()), 0u);  // a load past the end: 0
}

TEST(PartitionBytecode, BothWaysDropsEveryPacketOfThePeerAndNothingElse) {
  for (const std::string hook : {"ingress", "egress"}) {
    SCOPED_TRACE(hook);
    const PartitionSpec spec = PartitionSpec::from("resource");
    const auto peer = [&](Frame f) { return hook == "ingress" ? f : (std::swap(f.src, f.dst), f); };
    EXPECT_EQ(verdict(spec, hook, peer(request(cbpf::kSyn))), cbpf::kDrop);
    EXPECT_EQ(verdict(spec, hook, peer(request(cbpf::kAck))), cbpf::kDrop);
    EXPECT_EQ(verdict(spec, hook, peer(request(cbpf::kAck | cbpf::kPsh, 100))), cbpf::kDrop);
    Frame udp = peer(request(0, 10));
    udp.protocol = 17;
    EXPECT_EQ(verdict(spec, hook, udp), cbpf::kDrop);
    Frame other = request(cbpf::kAck | cbpf::kPsh, 100);
    other.dst = other.src = "10.213.0.2";  // the lock service, on both sides
    EXPECT_EQ(verdict(spec, hook, other), cbpf::kPass);
    Frame arp;
    arp.l3 = Frame::L3::kArp;
    EXPECT_EQ(verdict(spec, hook, arp), cbpf::kPass);
    Frame v6;
    v6.l3 = Frame::L3::kIpv6;
    EXPECT_EQ(verdict(spec, hook, v6), cbpf::kPass);
    EXPECT_EQ(verdict(PartitionSpec::full(), hook, v6), cbpf::kDrop);
    EXPECT_EQ(verdict(PartitionSpec::full(), hook, other), cbpf::kDrop);
    EXPECT_EQ(verdict(PartitionSpec::full(), hook, arp), cbpf::kPass);
  }
}

TEST(PartitionBytecode, OneWayProgramDecodesToTheTcpAwareFilter) {
  // requests from the lock service (10.213.0.2 = 0x0ad50002), on the hub's ingress: the payload
  // length is the IPv4 total length [16] minus the IPv4 header length (4 * IHL, ldxb) minus the
  // TCP header length (the data offset's high nibble * 4: >> 2 & 0x3c).
  EXPECT_EQ(cbpf::disassemble(cbpf::decode(
                partition_bytecode(PartitionSpec::from("lock-service", Direction::kRequests), "ingress", "10.213.0.2"))),
            "0: ldh [12]\n"
            "1: jeq #0x800 jt 2 jf 19\n"   // not IPv4: pass
            "2: ld [30]\n"                 // the destination address
            "3: jeq #0xad50002 jt 4 jf 19\n"
            "4: ldb [23]\n"                // protocol
            "5: jeq #0x6 jt 6 jf 20\n"     // not TCP: drop
            "6: ldh [20]\n"
            "7: jset #0x1fff jt 20 jf 8\n" // a later fragment: drop
            "8: ldxb 4*([14]&0xf)\n"
            "9: ldb [x+27]\n"              // TCP flags
            "10: jset #0x5 jt 20 jf 11\n"  // FIN or RST: drop
            "11: ldb [x+26]\n"             // data offset
            "12: rsh #2\n"
            "13: and #0x3c\n"
            "14: add x\n"
            "15: tax\n"
            "16: ldh [16]\n"
            "17: sub x\n"
            "18: jeq #0x0 jt 19 jf 20\n"   // no payload: pass
            "19: ret #-1\n"
            "20: ret #2\n");
  // replies match the source address instead, on egress; the rest is the same.
  const std::string replies =
      cbpf::disassemble(cbpf::decode(partition_bytecode(PartitionSpec::from("lock-service", Direction::kReplies), "egress", "10.213.0.2")));
  EXPECT_NE(replies.find("2: ld [26]\n"), std::string::npos) << replies;
}

TEST(PartitionBytecode, RequestsLetTheHandshakeThroughAndDropTheWorkersData) {
  const PartitionSpec spec = PartitionSpec::from("resource", Direction::kRequests);
  auto v = [&](const Frame& f) { return verdict(spec, "ingress", f); };
  // Opening the connection and acknowledging: through.
  EXPECT_EQ(v(request(cbpf::kSyn)), cbpf::kPass);
  EXPECT_EQ(v(request(cbpf::kAck)), cbpf::kPass);
  // The request, and the end of the stream: lost.
  EXPECT_EQ(v(request(cbpf::kAck | cbpf::kPsh, 1)), cbpf::kDrop);
  EXPECT_EQ(v(request(cbpf::kAck | cbpf::kPsh, 1400)), cbpf::kDrop);
  EXPECT_EQ(v(request(cbpf::kAck | cbpf::kFin)), cbpf::kDrop);
  EXPECT_EQ(v(request(cbpf::kRst)), cbpf::kDrop);
  EXPECT_EQ(v(request(cbpf::kAck | cbpf::kRst)), cbpf::kDrop);
  EXPECT_EQ(v(request(cbpf::kSyn, 16)), cbpf::kDrop);  // a SYN with data (TCP Fast Open)
  // Header lengths from the packet, not assumed: IPv4 options and TCP options (timestamps, SACK).
  for (std::size_t ip_opt : {0, 4, 40})
    for (std::size_t tcp_opt : {0, 12, 40}) {
      SCOPED_TRACE(std::to_string(ip_opt) + " bytes of IPv4 options, " + std::to_string(tcp_opt) + " of TCP options");
      Frame f = request(cbpf::kAck);
      f.ip_options = ip_opt;
      f.tcp_options = tcp_opt;
      EXPECT_EQ(v(f), cbpf::kPass);
      f.payload = 1;
      EXPECT_EQ(v(f), cbpf::kDrop);
      f.flags = cbpf::kSyn;
      f.payload = 0;
      EXPECT_EQ(v(f), cbpf::kPass);
    }
  // Not TCP: dropped whole. A later fragment (it carries payload only, whatever its bytes look
  // like) and a first one: dropped. A total length shorter than the headers (malformed; also a
  // GSO packet above 64 KiB, whose total length is 0): dropped.
  Frame udp = request(0, 30), icmp = request(0, 8);
  udp.protocol = 17;
  icmp.protocol = 1;
  EXPECT_EQ(v(udp), cbpf::kDrop);
  EXPECT_EQ(v(icmp), cbpf::kDrop);
  Frame later = request(cbpf::kAck);
  later.fragment = 185;
  EXPECT_EQ(v(later), cbpf::kDrop);
  Frame first = request(cbpf::kAck | cbpf::kPsh, 1000);
  first.fragment = 0x2000;  // MF, offset 0
  EXPECT_EQ(v(first), cbpf::kDrop);
  Frame dont_fragment = request(cbpf::kAck);
  dont_fragment.fragment = 0x4000;  // DF: an ordinary packet
  EXPECT_EQ(v(dont_fragment), cbpf::kPass);
  Frame short_total = request(cbpf::kAck);
  short_total.total_length = 0;
  EXPECT_EQ(v(short_total), cbpf::kDrop);
  // Another peer, ARP, IPv6: not this partition's.
  Frame lock = request(cbpf::kAck | cbpf::kPsh, 100);
  lock.dst = "10.213.0.2";
  EXPECT_EQ(v(lock), cbpf::kPass);
  Frame arp, v6;
  arp.l3 = Frame::L3::kArp;
  v6.l3 = Frame::L3::kIpv6;
  EXPECT_EQ(v(arp), cbpf::kPass);
  EXPECT_EQ(v(v6), cbpf::kPass);
  // On ingress the program matches the destination: a reply-shaped frame (from the resource)
  // is not the partition's.
  EXPECT_EQ(v(reply(cbpf::kAck | cbpf::kPsh, 100)), cbpf::kPass);
}

TEST(PartitionBytecode, RepliesLetTheHandshakeThroughAndDropTheServicesData) {
  const PartitionSpec spec = PartitionSpec::from("resource", Direction::kReplies);
  auto v = [&](const Frame& f) { return verdict(spec, "egress", f); };
  EXPECT_EQ(v(reply(cbpf::kSyn | cbpf::kAck)), cbpf::kPass);  // SYN-ACK
  EXPECT_EQ(v(reply(cbpf::kAck)), cbpf::kPass);               // the request's acknowledgement
  EXPECT_EQ(v(reply(cbpf::kAck | cbpf::kPsh, 200)), cbpf::kDrop);  // the reply
  EXPECT_EQ(v(reply(cbpf::kAck | cbpf::kFin)), cbpf::kDrop);
  EXPECT_EQ(v(reply(cbpf::kAck | cbpf::kFin | cbpf::kPsh, 200)), cbpf::kDrop);
  EXPECT_EQ(v(reply(cbpf::kRst)), cbpf::kDrop);
  Frame udp = reply(0, 30);
  udp.protocol = 17;
  EXPECT_EQ(v(udp), cbpf::kDrop);
  Frame lock = reply(cbpf::kAck | cbpf::kPsh, 100);
  lock.src = "10.213.0.2";
  EXPECT_EQ(v(lock), cbpf::kPass);
  EXPECT_EQ(v(request(cbpf::kAck | cbpf::kPsh, 100)), cbpf::kPass);  // to the resource: not on this hook's match
}

TEST(PartitionBytecode, FullOneWayIsTheSameRuleForEveryPeerAndDropsIpv6) {
  for (const auto& [direction, hook] : {std::pair{Direction::kRequests, "ingress"}, std::pair{Direction::kReplies, "egress"}}) {
    SCOPED_TRACE(hook);
    const PartitionSpec spec = PartitionSpec::full(direction);
    for (const std::string peer : {"10.213.0.2", "10.213.0.3", "10.213.0.9", "192.0.2.1"}) {
      Frame f = request(cbpf::kAck | cbpf::kPsh, 50);
      f.dst = peer;
      EXPECT_EQ(verdict(spec, hook, f, ""), cbpf::kDrop) << peer;
      f.payload = 0;
      f.flags = cbpf::kSyn;
      EXPECT_EQ(verdict(spec, hook, f, ""), cbpf::kPass) << peer;
    }
    Frame arp, v6;
    arp.l3 = Frame::L3::kArp;
    v6.l3 = Frame::L3::kIpv6;
    EXPECT_EQ(verdict(spec, hook, arp, ""), cbpf::kPass);
    EXPECT_EQ(verdict(spec, hook, v6, ""), cbpf::kDrop);
  }
}

TEST(PartitionBytecode, AHookTheDirectionLeavesOpenHasNoProgram) {
  EXPECT_THROW((void)partition_bytecode(PartitionSpec::from("resource", Direction::kRequests), "egress", "10.213.0.3"),
               std::invalid_argument);
  EXPECT_THROW((void)partition_bytecode(PartitionSpec::full(Direction::kReplies), "ingress", ""), std::invalid_argument);
  EXPECT_THROW((void)partition_bytecode(PartitionSpec::from("resource", Direction::kReplies), "egress", "10.213.0"),
               std::invalid_argument);
}

TEST(PartitionSpec, DescribeAndHooks) {
  EXPECT_EQ(PartitionSpec::from("lock-service").describe(), "from lock-service");
  EXPECT_EQ(PartitionSpec::from("resource", Direction::kReplies).describe(), "from resource (replies)");
  EXPECT_EQ(PartitionSpec::full(Direction::kRequests).describe(), "full (requests)");
  EXPECT_EQ(PartitionSpec::full().hooks(), (Argv{"ingress", "egress"}));
  EXPECT_EQ(PartitionSpec::full(Direction::kRequests).hooks(), (Argv{"ingress"}));
  EXPECT_EQ(PartitionSpec::from("resource", Direction::kReplies).hooks(), (Argv{"egress"}));
  EXPECT_EQ(to_string(Direction::kBoth), "both");
  EXPECT_EQ(to_string(Direction::kRequests), "requests");
  EXPECT_EQ(to_string(Direction::kReplies), "replies");
}

TEST(PartitionFault, OneWayFiltersOneHookAndHealRemovesExactlyIt) {
  RecordingCommandRunner r;
  NetworkLab lab({"r1", {"w1"}}, r);
  const std::string dev = lab.host("w1").hub_link;
  PartitionFault replies(lab, "w1", PartitionSpec::from("resource", Direction::kReplies));
  PartitionFault requests(lab, "w1", PartitionSpec::from("resource", Direction::kRequests));
  EXPECT_EQ(replies.target(), "w1 (fc-r1-w1) from resource 10.213.0.3 (replies)");
  EXPECT_EQ(requests.target(), "w1 (fc-r1-w1) from resource 10.213.0.3 (requests)");
  replies.inject();
  EXPECT_EQ(r.calls(), (Calls{{"tc", "-n", "fc-r1-hub", "filter", "add", "dev", dev, "egress", "protocol", "all", "pref",
                               "201", "handle", "1", "bpf", "bytecode",
                               partition_bytecode(PartitionSpec::from("resource", Direction::kReplies), "egress", "10.213.0.3"),
                               "da"}}));
  EXPECT_EQ(replies.ledger_record(),
            (nlohmann::json{{"target", "w1"}, {"spec", "from resource (replies)"}, {"direction", "replies"},
                            {"netns", "fc-r1-hub"}, {"device", dev}, {"pref", 201}, {"hooks", {"egress"}},
                            {"address", "10.213.0.3"}}));
  r.clear();
  requests.inject();  // the other hook: both may be in effect at once
  ASSERT_EQ(r.calls().size(), 1u);
  EXPECT_EQ(r.calls()[0][7], "ingress");
  r.clear();
  EXPECT_TRUE(replies.heal());
  EXPECT_EQ(r.calls(), (Calls{{"tc", "-n", "fc-r1-hub", "filter", "del", "dev", dev, "egress", "protocol", "all", "pref",
                               "201", "handle", "1", "bpf"}}));
  r.clear();
  // From the ledger record alone (fencecheck cleanup): the same single filter.
  EXPECT_EQ(detail::heal_partition_record(requests.ledger_record(), r),
            "partition w1 from resource (requests): removed 1 filter(s) at pref 201 on " + dev + " in fc-r1-hub");
  EXPECT_EQ(r.calls(), requests.heal_commands());
  EXPECT_EQ(requests.heal_commands().size(), 1u);
  EXPECT_EQ(requests.ledger_record()["hooks"], nlohmann::json::array({"ingress"}));
  EXPECT_EQ(PartitionFault(lab, "w1", PartitionSpec::from("lock-service")).ledger_record()["direction"], "both");
}

TEST(PartitionFault, TheSameHookTwiceIsAlreadyInEffect) {
  RecordingCommandRunner r(fail_when([](const Argv& a) { return contains(a, "add") && contains(a, "ingress"); },
                                     "Error: Filter already exists.\nWe have an error talking to the kernel"));
  NetworkLab lab({"r1", {"w1"}}, r);
  PartitionFault f(lab, "w1", PartitionSpec::from("lock-service", Direction::kRequests));
  try {
    f.inject();
    FAIL() << "must throw";
  } catch (const FaultError& e) {
    EXPECT_NE(std::string(e.what()).find("partition w1 (fc-r1-w1) from lock-service 10.213.0.2 (requests): a partition "
                                         "from lock-service that filters ingress is already in effect on this host"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(f.active());
  EXPECT_EQ(r.calls().size(), 1u);  // nothing to undo
}

TEST(PartitionFault, FromLockServiceDropsOnlyThatAddressBothWays) {
  RecordingCommandRunner r;
  NetworkLab lab({"r1", {"w1", "w2"}}, r);
  const std::string dev = lab.host("w2").hub_link;
  PartitionFault f(lab, "w2", PartitionSpec::from("lock-service"));
  EXPECT_EQ(f.kind(), "partition");
  EXPECT_EQ(f.target(), "w2 (fc-r1-w2) from lock-service 10.213.0.2");
  f.inject();
  EXPECT_TRUE(f.active());
  EXPECT_EQ(r.calls(),
            (Calls{{"tc", "-n", "fc-r1-hub", "filter", "add", "dev", dev, "ingress", "protocol", "all", "pref", "200",
                    "handle", "1", "bpf", "bytecode", kLockIngress, "da"},
                   {"tc", "-n", "fc-r1-hub", "filter", "add", "dev", dev, "egress", "protocol", "all", "pref", "200",
                    "handle", "1", "bpf", "bytecode", kLockEgress, "da"}}));
  r.clear();
  f.inject();  // idempotent
  EXPECT_TRUE(r.calls().empty());
  EXPECT_TRUE(f.heal());
  EXPECT_FALSE(f.active());
  EXPECT_EQ(r.calls(),
            (Calls{{"tc", "-n", "fc-r1-hub", "filter", "del", "dev", dev, "ingress", "protocol", "all", "pref", "200",
                    "handle", "1", "bpf"},
                   {"tc", "-n", "fc-r1-hub", "filter", "del", "dev", dev, "egress", "protocol", "all", "pref", "200",
                    "handle", "1", "bpf"}}));
  r.clear();
  EXPECT_TRUE(f.heal());  // idempotent
  EXPECT_TRUE(r.calls().empty());
}

TEST(PartitionFault, FromResourceAndFullUseTheirOwnPreference) {
  RecordingCommandRunner r;
  NetworkLab lab({"r1", {"w1"}}, r);
  PartitionFault res(lab, "w1", PartitionSpec::from("resource"));
  PartitionFault full(lab, "w1", PartitionSpec::full());
  EXPECT_EQ(full.target(), "w1 (fc-r1-w1) full");
  res.inject();
  full.inject();
  auto calls = r.calls();
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[0][11], "201");
  EXPECT_EQ(calls[0][16], "6,40 0 0 12,21 0 3 2048,32 0 0 30,21 0 1 181731331,6 0 0 2,6 0 0 4294967295");
  EXPECT_EQ(calls[2][11], "100");
  EXPECT_EQ(calls[2][16], kFull);
  EXPECT_EQ(calls[3][16], kFull);
  EXPECT_EQ(full.ledger_record(),
            (nlohmann::json{{"target", "w1"}, {"spec", "full"}, {"direction", "both"}, {"netns", "fc-r1-hub"},
                            {"device", lab.host("w1").hub_link}, {"pref", 100}, {"hooks", {"ingress", "egress"}}}));
  EXPECT_EQ(res.ledger_record()["address"], "10.213.0.3");
  r.clear();
  EXPECT_TRUE(full.heal());  // heals only its own filters
  for (const auto& c : r.calls()) EXPECT_EQ(c[11], "100");
  EXPECT_TRUE(res.heal());
}

TEST(PartitionFault, AHalfAddedPartitionIsUndone) {
  RecordingCommandRunner r(fail_when([](const Argv& a) { return contains(a, "add") && contains(a, "egress"); },
                                     "Error: Filter already exists.\nWe have an error talking to the kernel"));
  NetworkLab lab({"r1", {"w1"}}, r);
  PartitionFault f(lab, "w1", PartitionSpec::full());
  try {
    f.inject();
    FAIL() << "must throw";
  } catch (const FaultError& e) {
    EXPECT_NE(std::string(e.what()).find("already in effect"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(f.active());
  auto calls = r.calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2][4], "del");
  EXPECT_EQ(calls[2][7], "ingress");
}

// The half-added partition whose undo fails too: it stays active and outstanding, the message
// says so, only the filter this inject added is ever deleted (never the one already in effect),
// and a later heal removes it.
TEST(PartitionFault, AHalfAddedPartitionWhoseUndoFailsStaysActiveAndOutstanding) {
  bool refuse_del = true;
  RecordingCommandRunner r([&](const Argv& a) -> std::string {
    if (contains(a, "add") && contains(a, "egress"))
      throw CommandError(a, 2, "Error: Filter already exists.\nWe have an error talking to the kernel");
    if (contains(a, "del") && refuse_del) throw CommandError(a, 2, "RTNETLINK answers: Operation not permitted");
    return "";
  });
  NetworkLab lab({"r1", {"w1"}}, r);
  PartitionFault f(lab, "w1", PartitionSpec::full());
  fctest::FailedUndo undo(f, temp_file("partition-undo.ledger"));
  const std::string what = undo.inject_fails_and_stays_in_effect();
  EXPECT_NE(what.find("already in effect"), std::string::npos) << what;
  EXPECT_NE(what.find("; its undo failed too: partition w1"), std::string::npos) << what;
  EXPECT_NE(what.find("Operation not permitted; still in effect"), std::string::npos) << what;
  refuse_del = false;
  undo.heal_takes_effect();
  for (const auto& c : r.calls())
    if (contains(c, "del")) EXPECT_EQ(c[7], "ingress") << "the egress filter was another partition's";
}

TEST(PartitionFault, NoBpfClassifierIsUnavailable) {
  RecordingCommandRunner r(fail_when([](const Argv& a) { return contains(a, "bpf"); }, "Error: TC classifier not found."));
  NetworkLab lab({"r1", {"w1"}}, r);
  PartitionFault f(lab, "w1", PartitionSpec::full());
  EXPECT_THROW(f.inject(), FaultUnavailable);
  EXPECT_FALSE(f.active());
}

TEST(PartitionFault, HealOfAVanishedLabIsQuietAnotherFailureKeepsItActive) {
  std::string err = "Cannot open network namespace \"fc-r1-hub\": No such file or directory";
  RecordingCommandRunner r([&err](const Argv& a) -> std::string {
    if (contains(a, "del")) throw CommandError(a, 1, err);
    return "";
  });
  NetworkLab lab({"r1", {"w1"}}, r);
  PartitionFault gone(lab, "w1", PartitionSpec::full());
  gone.inject();
  EXPECT_TRUE(gone.heal());
  EXPECT_FALSE(gone.active());

  err = "RTNETLINK answers: Operation not permitted";
  PartitionFault stuck(lab, "w1", PartitionSpec::from("resource"));
  stuck.inject();
  EXPECT_FALSE(stuck.heal());
  EXPECT_TRUE(stuck.active());
  err = "Error: Filter with specified priority/protocol not found.";
  EXPECT_TRUE(stuck.heal());
  EXPECT_FALSE(stuck.active());
}

TEST(PartitionFault, UnknownHostOrService) {
  RecordingCommandRunner r;
  NetworkLab lab({"r1", {"w1"}}, r);
  EXPECT_THROW(PartitionFault(lab, "w7", PartitionSpec::full()), std::out_of_range);
  EXPECT_THROW(PartitionFault(lab, "w1", PartitionSpec::from("dns")), std::out_of_range);
}

// ---------------------------------------------------------------- netem
TEST(NetemSpec, ArgumentsAndValidation) {
  using std::chrono::microseconds;
  EXPECT_EQ((NetemSpec{microseconds(100000), microseconds(10000), 5}.tc_args()),
            (Argv{"delay", "100ms", "10ms", "loss", "5%"}));
  EXPECT_EQ((NetemSpec{microseconds(1500), microseconds(0), 0}.tc_args()), (Argv{"delay", "1500us"}));
  EXPECT_EQ((NetemSpec{microseconds(0), microseconds(0), 0.5}.tc_args()), (Argv{"loss", "0.5%"}));
  EXPECT_THROW((NetemSpec{}.validate()), std::invalid_argument);
  EXPECT_THROW((NetemSpec{microseconds(0), microseconds(5), 0}.validate()), std::invalid_argument);
  EXPECT_THROW((NetemSpec{microseconds(5), microseconds(6), 0}.validate()), std::invalid_argument);
  EXPECT_THROW((NetemSpec{microseconds(5), microseconds(0), 101}.validate()), std::invalid_argument);
  EXPECT_THROW((NetemSpec{microseconds(-1), microseconds(0), 1}.validate()), std::invalid_argument);
}

TEST(NetemFault, DelaysAndLosesOnBothEndsOfTheHostLink) {
  RecordingCommandRunner r;
  NetworkLab lab({"r1", {"w1"}}, r);
  const auto& h = lab.host("w1");
  NetemFault f(lab, "w1", {std::chrono::milliseconds(100), std::chrono::milliseconds(10), 5});
  EXPECT_EQ(f.kind(), "netem");
  EXPECT_EQ(f.target(), "w1 (fc-r1-w1) delay 100ms 10ms loss 5%");
  f.inject();
  EXPECT_EQ(r.calls(), (Calls{{"tc", "-n", "fc-r1-w1", "qdisc", "add", "dev", h.host_link, "root", "netem", "delay",
                               "100ms", "10ms", "loss", "5%"},
                              {"tc", "-n", "fc-r1-hub", "qdisc", "add", "dev", h.hub_link, "root", "netem", "delay",
                               "100ms", "10ms", "loss", "5%"}}));
  EXPECT_EQ(f.ledger_record(),
            (nlohmann::json{{"target", "w1"},
                            {"links", {{{"netns", "fc-r1-w1"}, {"device", h.host_link}}, {{"netns", "fc-r1-hub"}, {"device", h.hub_link}}}},
                            {"args", {"delay", "100ms", "10ms", "loss", "5%"}}}));
  r.clear();
  EXPECT_TRUE(f.heal());
  EXPECT_EQ(r.calls(), (Calls{{"tc", "-n", "fc-r1-hub", "qdisc", "del", "dev", h.hub_link, "root"},
                              {"tc", "-n", "fc-r1-w1", "qdisc", "del", "dev", h.host_link, "root"}}));
  EXPECT_FALSE(f.active());
}

TEST(NetemFault, NoNetemInTheKernelIsUnavailable) {
  RecordingCommandRunner r(fail_when([](const Argv& a) { return contains(a, "netem"); },
                                     "Error: Specified qdisc kind is unknown."));
  NetworkLab lab({"r1", {"w1"}}, r);
  NetemFault f(lab, "w1", {std::chrono::milliseconds(50), {}, 0});
  try {
    f.inject();
    FAIL() << "must throw";
  } catch (const FaultUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("CONFIG_NET_SCH_NETEM"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(f.active());
  EXPECT_EQ(r.calls().size(), 1u);
}

TEST(NetemFault, SecondEndFailingUndoesTheFirst) {
  RecordingCommandRunner r(fail_when([](const Argv& a) { return contains(a, "add") && a[2] == "fc-r1-hub"; },
                                     "RTNETLINK answers: No buffer space available"));
  NetworkLab lab({"r1", {"w1"}}, r);
  NetemFault f(lab, "w1", {std::chrono::milliseconds(50), {}, 0});
  EXPECT_THROW(f.inject(), FaultError);
  auto calls = r.calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2], (Argv{"tc", "-n", "fc-r1-w1", "qdisc", "del", "dev", lab.host("w1").host_link, "root"}));
}

TEST(NetemFault, SecondEndFailingWithAnUndoThatFailsStaysActiveAndOutstanding) {
  bool refuse_del = true;
  RecordingCommandRunner r([&](const Argv& a) -> std::string {
    if (contains(a, "add") && a[2] == "fc-r1-hub") throw CommandError(a, 2, "RTNETLINK answers: No buffer space available");
    if (contains(a, "del") && refuse_del) throw CommandError(a, 2, "RTNETLINK answers: Operation not permitted");
    return "";
  });
  NetworkLab lab({"r1", {"w1"}}, r);
  NetemFault f(lab, "w1", {std::chrono::milliseconds(50), {}, 0});
  fctest::FailedUndo undo(f, temp_file("netem-undo.ledger"));
  const std::string what = undo.inject_fails_and_stays_in_effect();
  EXPECT_NE(what.find("No buffer space available; its undo failed too: netem w1"), std::string::npos) << what;
  refuse_del = false;
  undo.heal_takes_effect();
  for (const auto& c : r.calls())
    if (contains(c, "del")) EXPECT_EQ(c[2], "fc-r1-w1") << "the hub's qdisc was never added: never deleted";
}

// ---------------------------------------------------------------- ledger healers from records
TEST(NetworkHealers, LabPartitionNetemFromRecordsAlone) {
  RecordingCommandRunner r;
  NetworkLab lab({"r1", {"w1"}}, r);
  PartitionFault p(lab, "w1", PartitionSpec::from("lock-service"));
  NetemFault n(lab, "w1", {std::chrono::milliseconds(20), {}, 0});
  const auto& h = lab.host("w1");

  EXPECT_EQ(detail::heal_netns_lab_record(lab.ledger_record(), r),
            "netns-lab r1: deleted namespaces fc-r1-w1, fc-r1-hub");
  EXPECT_EQ(r.calls(), (Calls{{"ip", "netns", "del", "fc-r1-w1"}, {"ip", "netns", "del", "fc-r1-hub"}}));
  r.clear();
  EXPECT_EQ(detail::heal_partition_record(p.ledger_record(), r),
            "partition w1 from lock-service: removed 2 filter(s) at pref 200 on " + h.hub_link + " in fc-r1-hub");
  EXPECT_EQ(r.calls(), p.heal_commands());
  r.clear();
  EXPECT_EQ(detail::heal_netem_record(n.ledger_record(), r), "netem w1: removed 2 netem qdisc(s)");
  EXPECT_EQ(r.calls(), (Calls{{"tc", "-n", "fc-r1-w1", "qdisc", "del", "dev", h.host_link, "root"},
                              {"tc", "-n", "fc-r1-hub", "qdisc", "del", "dev", h.hub_link, "root"}}));
}

TEST(NetworkHealers, AlreadyGoneIsHealedOtherFailuresThrow) {
  std::string err = "Cannot remove namespace file \"/run/netns/x\": No such file or directory";
  RecordingCommandRunner r([&err](const Argv& a) -> std::string { throw CommandError(a, 1, err); });
  NetworkLab lab({"r1", {"w1"}}, r);
  PartitionFault p(lab, "w1", PartitionSpec::full());
  EXPECT_EQ(detail::heal_netns_lab_record(lab.ledger_record(), r), "netns-lab r1: already gone: fc-r1-w1, fc-r1-hub");
  err = "Cannot open network namespace \"fc-r1-hub\": No such file or directory";
  EXPECT_NE(detail::heal_partition_record(p.ledger_record(), r).find("already gone"), std::string::npos);
  err = "RTNETLINK answers: Operation not permitted";
  EXPECT_THROW(detail::heal_netns_lab_record(lab.ledger_record(), r), std::runtime_error);
  EXPECT_THROW(detail::heal_partition_record(p.ledger_record(), r), std::runtime_error);
}

TEST(NetworkHealers, NeverTouchNamesFencecheckDidNotGive) {
  RecordingCommandRunner r;
  (void)detail::heal_netns_lab_record({{"run_id", "x"}, {"namespaces", {"prod", "fc-x-hub"}}}, r);
  EXPECT_EQ(r.calls(), (Calls{{"ip", "netns", "del", "fc-x-hub"}}));
  r.clear();
  (void)detail::heal_partition_record({{"netns", "prod"}, {"device", "eth0"}, {"pref", 100}}, r);
  (void)detail::heal_netem_record({{"links", {{{"netns", "prod"}, {"device", "eth0"}}}}}, r);
  EXPECT_TRUE(r.calls().empty());
}
