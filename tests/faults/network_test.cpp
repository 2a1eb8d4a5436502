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
  f.heal();
  EXPECT_FALSE(f.active());
  EXPECT_EQ(r.calls(),
            (Calls{{"tc", "-n", "fc-r1-hub", "filter", "del", "dev", dev, "ingress", "protocol", "all", "pref", "200",
                    "handle", "1", "bpf"},
                   {"tc", "-n", "fc-r1-hub", "filter", "del", "dev", dev, "egress", "protocol", "all", "pref", "200",
                    "handle", "1", "bpf"}}));
  r.clear();
  f.heal();  // idempotent
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
            (nlohmann::json{{"target", "w1"}, {"spec", "full"}, {"netns", "fc-r1-hub"}, {"device", lab.host("w1").hub_link},
                            {"pref", 100}, {"hooks", {"ingress", "egress"}}}));
  EXPECT_EQ(res.ledger_record()["address"], "10.213.0.3");
  r.clear();
  full.heal();  // heals only its own filters
  for (const auto& c : r.calls()) EXPECT_EQ(c[11], "100");
  res.heal();
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
  gone.heal();
  EXPECT_FALSE(gone.active());

  err = "RTNETLINK answers: Operation not permitted";
  PartitionFault stuck(lab, "w1", PartitionSpec::from("resource"));
  stuck.inject();
  stuck.heal();
  EXPECT_TRUE(stuck.active());
  err = "Error: Filter with specified priority/protocol not found.";
  stuck.heal();
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
  f.heal();
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
