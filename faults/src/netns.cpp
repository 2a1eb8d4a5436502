#include "fencecheck/faults/netns.h"

#include <arpa/inet.h>

#include <algorithm>
#include <iostream>
#include <set>

#include "healers.h"
#include "net_internal.h"

namespace fencecheck::faults {
namespace {

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

std::string ipv4(std::uint32_t host_order) {
  in_addr a{};
  a.s_addr = htonl(host_order);
  char buf[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

// The ledger entry of a lab: the ledger takes Faults, and a lab is recorded like one (kind
// "netns-lab") so that heal_outstanding() deletes a dead run's namespaces.
class LabEntry final : public Fault {
 public:
  explicit LabEntry(const NetworkLab& lab) : lab_(lab) {}
  [[nodiscard]] std::string_view kind() const override { return "netns-lab"; }
  [[nodiscard]] std::string target() const override { return "network lab of run " + lab_.run_id(); }
  void inject() override {}
  [[nodiscard]] bool heal() noexcept override { return healed(); }  // NetworkLab::teardown() records the lab's heal
  [[nodiscard]] bool active() const override { return false; }
  [[nodiscard]] nlohmann::json ledger_record() const override { return lab_.ledger_record(); }

 private:
  const NetworkLab& lab_;
};

}  // namespace

std::string lab_tag(std::string_view run_id) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a 64
  for (unsigned char c : run_id) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string tag(6, '0');
  for (int i = 5; i >= 0; --i) {
    tag[static_cast<std::size_t>(i)] = kDigits[h % 36];
    h /= 36;
  }
  return tag;
}

NetworkLab::NetworkLab(NetworkLabOptions options, CommandRunner& runner, FaultLedger* ledger)
    : runner_(&runner), ledger_(ledger) {
  run_id_ = options.run_id;
  for (char& c : run_id_)
    if (!name_char(c)) c = '_';
  if (run_id_.empty() || run_id_.size() > 64)
    throw std::invalid_argument("network lab: the run id must have 1 to 64 characters, got \"" + options.run_id + "\"");
  tag_ = lab_tag(run_id_);
  hub_ = "fc-" + run_id_ + "-hub";
  bridge_ = "fc" + tag_ + "br";

  // Subnet.
  subnet_ = options.subnet;
  auto slash = subnet_.find('/');
  in_addr net{};
  int prefix = -1;
  if (slash != std::string::npos) {
    try {
      std::size_t used = 0;
      prefix = std::stoi(subnet_.substr(slash + 1), &used);
      if (used != subnet_.size() - slash - 1) prefix = -1;
    } catch (...) {
      prefix = -1;
    }
  }
  if (slash == std::string::npos || ::inet_pton(AF_INET, subnet_.substr(0, slash).c_str(), &net) != 1 || prefix < 8 ||
      prefix > 29)
    throw std::invalid_argument("network lab: subnet \"" + subnet_ + "\" is not an IPv4 CIDR with a prefix of 8 to 29");
  prefix_ = prefix;
  const std::uint32_t base = ntohl(net.s_addr);
  const std::uint32_t mask = prefix_ == 0 ? 0 : ~std::uint32_t{0} << (32 - prefix_);
  if ((base & ~mask) != 0)
    throw std::invalid_argument("network lab: subnet \"" + subnet_ + "\" has host bits set; did you mean " +
                                ipv4(base & mask) + "/" + std::to_string(prefix_) + "?");
  const std::uint64_t usable = (std::uint64_t{1} << (32 - prefix_)) - 2;
  const std::uint64_t needed = 1 + options.services.size() + options.hosts.size();
  if (needed > usable)
    throw std::invalid_argument("network lab: subnet " + subnet_ + " has " + std::to_string(usable) +
                                " host addresses; the hub, " + std::to_string(options.services.size()) + " service(s) and " +
                                std::to_string(options.hosts.size()) + " host(s) need " + std::to_string(needed));
  if (options.hosts.size() > 999) throw std::invalid_argument("network lab: at most 999 hosts");
  hub_address_ = ipv4(base + 1);

  std::set<std::string> seen;
  std::uint32_t next = base + 2;
  for (const auto& s : options.services) {
    if (s.empty() || !seen.insert("service:" + s).second)
      throw std::invalid_argument("network lab: service names must be non-empty and distinct (\"" + s + "\")");
    services_.push_back({s, ipv4(next++)});
  }
  for (std::size_t i = 0; i < options.hosts.size(); ++i) {
    const std::string& h = options.hosts[i];
    if (h.empty() || h.size() > 64 || !std::all_of(h.begin(), h.end(), name_char))
      throw std::invalid_argument("network lab: host name \"" + h + "\" must be 1 to 64 characters of [A-Za-z0-9_.-]");
    if (h == "hub") throw std::invalid_argument("network lab: \"hub\" is the hub's namespace; choose another host name");
    if (!seen.insert("host:" + h).second) throw std::invalid_argument("network lab: host \"" + h + "\" is listed twice");
    const std::string link = "fc" + tag_ + std::to_string(i);
    hosts_.push_back({h, "fc-" + run_id_ + "-" + h, ipv4(next++), link + "a", link + "b"});
  }
}

NetworkLab::~NetworkLab() { teardown(); }

const LabHost& NetworkLab::host(std::string_view name) const {
  for (const auto& h : hosts_)
    if (h.name == name) return h;
  std::string known;
  for (const auto& h : hosts_) known += (known.empty() ? "" : ", ") + h.name;
  throw std::out_of_range("network lab: no host \"" + std::string(name) + "\" (hosts: " + known + ")");
}

const LabService& NetworkLab::service(std::string_view name) const {
  for (const auto& s : services_)
    if (s.name == name) return s;
  std::string known;
  for (const auto& s : services_) known += (known.empty() ? "" : ", ") + s.name;
  throw std::out_of_range("network lab: no service \"" + std::string(name) + "\" (services: " + known + ")");
}

std::vector<std::string> NetworkLab::namespaces() const {
  std::vector<std::string> out{hub_};
  for (const auto& h : hosts_) out.push_back(h.netns);
  return out;
}

std::vector<std::string> NetworkLab::exec_argv(const std::string& netns, const std::vector<std::string>& argv) const {
  auto all = namespaces();
  if (std::find(all.begin(), all.end(), netns) == all.end())
    throw std::invalid_argument("network lab: \"" + netns + "\" is not one of this run's namespaces");
  if (argv.empty()) throw std::invalid_argument("network lab: empty command for namespace " + netns);
  std::vector<std::string> out{"ip", "netns", "exec", netns};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::string NetworkLab::run_in(const std::string& netns, const std::vector<std::string>& argv) const {
  return runner_->run(exec_argv(netns, argv));
}

std::vector<std::vector<std::string>> NetworkLab::setup_commands() const {
  const std::string p = "/" + std::to_string(prefix_);
  std::vector<std::vector<std::string>> c;
  c.push_back({"ip", "netns", "add", hub_});
  c.push_back({"ip", "-n", hub_, "link", "set", "lo", "up"});
  c.push_back({"ip", "-n", hub_, "link", "add", bridge_, "type", "bridge"});
  c.push_back({"ip", "-n", hub_, "addr", "add", hub_address_ + p, "dev", bridge_});
  for (const auto& s : services_) c.push_back({"ip", "-n", hub_, "addr", "add", s.address + p, "dev", bridge_});
  c.push_back({"ip", "-n", hub_, "link", "set", bridge_, "up"});
  for (const auto& h : hosts_) {
    c.push_back({"ip", "netns", "add", h.netns});
    c.push_back({"ip", "-n", h.netns, "link", "set", "lo", "up"});
    // Created inside the hub with its peer directly in the host's namespace: the root namespace
    // never holds either end, not even for a moment.
    c.push_back({"ip", "-n", hub_, "link", "add", h.hub_link, "type", "veth", "peer", "name", h.host_link, "netns", h.netns});
    c.push_back({"ip", "-n", hub_, "link", "set", h.hub_link, "master", bridge_});
    c.push_back({"ip", "-n", hub_, "link", "set", h.hub_link, "up"});
    c.push_back({"tc", "-n", hub_, "qdisc", "add", "dev", h.hub_link, "clsact"});
    c.push_back({"ip", "-n", h.netns, "addr", "add", h.address + p, "dev", h.host_link});
    c.push_back({"ip", "-n", h.netns, "link", "set", h.host_link, "up"});
  }
  return c;
}

nlohmann::json NetworkLab::ledger_record() const {
  nlohmann::json links = nlohmann::json::array();
  for (const auto& h : hosts_) links.push_back({{"hub", h.hub_link}, {"host", h.host_link}, {"netns", h.netns}});
  return {{"run_id", run_id_}, {"namespaces", namespaces()}, {"bridge", bridge_}, {"links", links}, {"subnet", subnet_}};
}

void NetworkLab::setup() {
  if (set_up_) return;
  if (ledger_ && ledger_id_ < 0) {
    try {
      ledger_id_ = ledger_->record_inject(LabEntry(*this));
    } catch (const std::exception& err) {
      throw FaultError(std::string("network lab: ") + err.what());
    }
  }
  set_up_ = true;  // from here on teardown() deletes what setup() created
  for (const auto& cmd : setup_commands()) {
    const bool adding_ns = cmd.size() == 4 && cmd[1] == "netns" && cmd[2] == "add";
    try {
      runner_->run(cmd);
      if (adding_ns) created_.push_back(cmd[3]);
    } catch (const CommandError& err) {
      teardown();
      if (adding_ns && (detail::says(err, "Operation not permitted") || detail::says(err, "Permission denied")))
        throw FaultUnavailable("network namespaces unavailable (they need root and CONFIG_NET_NS): " +
                               std::string(err.what()));
      if (adding_ns && detail::says(err, "File exists"))
        throw FaultError("network lab: namespace " + cmd[3] +
                         " already exists (a leftover of a run with this id? `fencecheck cleanup` removes it): " +
                         err.what());
      if (cmd[0] == "tc" && detail::says(err, "qdisc kind is unknown"))
        throw FaultUnavailable("network lab: the kernel has no clsact qdisc (CONFIG_NET_SCH_INGRESS), needed for "
                               "partitions: " + std::string(err.what()));
      throw FaultError("network lab setup failed: " + std::string(err.what()));
    } catch (const std::exception& err) {
      teardown();
      throw FaultError("network lab setup failed: " + std::string(err.what()));
    }
  }
}

void NetworkLab::teardown() noexcept {
  if (!set_up_) return;
  std::vector<std::string> failed;
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {  // hosts first, the hub last
    try {
      runner_->run({"ip", "netns", "del", *it});
    } catch (const CommandError& err) {
      if (!detail::already_gone(err)) {
        failed.insert(failed.begin(), *it);
        std::cerr << "fencecheck: network lab teardown: " << err.what() << "\n";
      }
    } catch (const std::exception& err) {
      failed.insert(failed.begin(), *it);
      std::cerr << "fencecheck: network lab teardown: " << err.what() << "\n";
    }
  }
  created_ = failed;
  if (!failed.empty()) return;  // still set up: teardown() again retries
  set_up_ = false;
  if (ledger_ && ledger_id_ >= 0) {
    ledger_->record_heal(ledger_id_);
    ledger_id_ = -1;
  }
}

// ---------------------------------------------------------------------------------------------
std::string detail::heal_netns_lab_record(const nlohmann::json& entry, CommandRunner& runner) {
  const std::string who = "netns-lab " + entry.value("run_id", std::string("?"));
  std::vector<std::string> deleted, gone;
  auto list = entry.find("namespaces");
  if (list == entry.end() || !list->is_array()) return who + ": the record names no namespaces; nothing to do";
  std::vector<std::string> names;
  for (const auto& n : *list)
    if (n.is_string()) names.push_back(n.get<std::string>());
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    if (it->rfind("fc-", 0) != 0) continue;  // never a namespace fencecheck does not name
    try {
      runner.run({"ip", "netns", "del", *it});
      deleted.push_back(*it);
    } catch (const CommandError& err) {
      if (!already_gone(err)) throw std::runtime_error(who + ": " + err.what());
      gone.push_back(*it);
    }
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  std::string said = who + ": ";
  if (!deleted.empty()) said += "deleted namespaces " + join(deleted);
  if (!gone.empty()) said += std::string(deleted.empty() ? "" : "; ") + "already gone: " + join(gone);
  return said;
}

CommandRunner& detail::healer_runner() {
  static SystemCommandRunner runner;
  return runner;
}

}  // namespace fencecheck::faults
