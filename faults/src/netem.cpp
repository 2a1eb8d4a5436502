#include "fencecheck/faults/netem.h"

#include <algorithm>
#include <charconv>
#include <iostream>

#include "healers.h"
#include "net_internal.h"

namespace fencecheck::faults {
namespace {

std::string tc_time(std::chrono::microseconds t) {
  if (t.count() % 1000 == 0) return std::to_string(t.count() / 1000) + "ms";
  return std::to_string(t.count()) + "us";
}

std::string tc_percent(double p) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, p);
  return std::string(buf, ec == std::errc() ? end : buf) + "%";
}

std::vector<std::string> qdisc_del(const std::string& netns, const std::string& dev) {
  return {"tc", "-n", netns, "qdisc", "del", "dev", dev, "root"};
}

}  // namespace

void NetemSpec::validate() const {
  if (delay.count() < 0 || jitter.count() < 0) throw std::invalid_argument("netem: delay and jitter must not be negative");
  if (jitter.count() > 0 && delay.count() == 0) throw std::invalid_argument("netem: jitter needs a delay");
  if (jitter > delay) throw std::invalid_argument("netem: jitter must not exceed the delay");
  if (!(loss_percent >= 0 && loss_percent <= 100)) throw std::invalid_argument("netem: loss must be 0 to 100 percent");
  if (delay.count() == 0 && loss_percent == 0) throw std::invalid_argument("netem: neither delay nor loss: nothing to do");
}

std::vector<std::string> NetemSpec::tc_args() const {
  std::vector<std::string> a;
  if (delay.count() > 0) {
    a.push_back("delay");
    a.push_back(tc_time(delay));
    if (jitter.count() > 0) a.push_back(tc_time(jitter));
  }
  if (loss_percent > 0) {
    a.push_back("loss");
    a.push_back(tc_percent(loss_percent));
  }
  return a;
}

NetemFault::NetemFault(const NetworkLab& lab, const std::string& host, NetemSpec spec)
    : runner_(&lab.runner()), spec_(spec) {
  spec_.validate();
  const LabHost& h = lab.host(host);
  host_ = h.name;
  host_netns_ = h.netns;
  hub_netns_ = lab.hub_netns();
  host_link_ = h.host_link;
  hub_link_ = h.hub_link;
}

NetemFault::~NetemFault() { (void)heal(); }  // a last try; the ledger keeps it outstanding

std::string NetemFault::target() const {
  std::string t = host_ + " (" + host_netns_ + ")";
  for (const auto& a : spec_.tc_args()) t += " " + a;
  return t;
}

std::vector<std::vector<std::string>> NetemFault::inject_commands() const {
  std::vector<std::vector<std::string>> c;
  for (const auto& [ns, dev] : {std::pair{host_netns_, host_link_}, std::pair{hub_netns_, hub_link_}}) {
    std::vector<std::string> cmd{"tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "netem"};
    for (const auto& a : spec_.tc_args()) cmd.push_back(a);
    c.push_back(std::move(cmd));
  }
  return c;
}

std::vector<std::vector<std::string>> NetemFault::heal_commands() const {
  return {qdisc_del(hub_netns_, hub_link_), qdisc_del(host_netns_, host_link_)};
}

void NetemFault::inject() {
  if (active_) return;
  const auto cmds = inject_commands();
  qdiscs_in_effect_ = 0;
  for (std::size_t i = 0; i < cmds.size(); ++i) {
    try {
      runner_->run(cmds[i]);
      ++qdiscs_in_effect_;
    } catch (const CommandError& err) {
      const std::string who = "netem " + target();
      const bool unavailable = detail::says(err, "qdisc kind is unknown");
      std::string failure = unavailable
                                ? who + ": the kernel has no netem qdisc (sch_netem, CONFIG_NET_SCH_NETEM): " + err.what()
                                : who + ": " + err.what();
      if (qdiscs_in_effect_ > 0) {  // heal() deletes the qdiscs this inject added, and only those
        active_ = true;
        failure = undo_failed_inject(failure);
      }
      if (unavailable) throw FaultUnavailable(failure);
      throw FaultError(failure);
    }
  }
  active_ = true;
}

bool NetemFault::heal() noexcept {
  if (!active_) return healed();
  bool clean = true;
  std::string why;
  const auto cmds = heal_commands();  // the reverse of inject_commands(): the last added first
  for (std::size_t j = cmds.size() - std::min(qdiscs_in_effect_, cmds.size()); j < cmds.size(); ++j) {
    const auto& cmd = cmds[j];
    try {
      runner_->run(cmd);
    } catch (const CommandError& err) {
      if (!detail::already_gone(err)) {
        clean = false;
        why = err.what();
        std::cerr << "fencecheck: netem " << target() << ": heal: " << err.what() << "\n";
      }
    } catch (const std::exception& err) {
      clean = false;
      why = err.what();
      std::cerr << "fencecheck: netem " << target() << ": heal: " << err.what() << "\n";
    }
  }
  if (!clean) return not_healed("netem " + target() + ": " + why);  // still active: a later heal() retries
  active_ = false;
  qdiscs_in_effect_ = 0;
  return healed();
}

nlohmann::json NetemFault::ledger_record() const {
  return {{"target", host_},
          {"links", {{{"netns", host_netns_}, {"device", host_link_}}, {{"netns", hub_netns_}, {"device", hub_link_}}}},
          {"args", spec_.tc_args()}};
}

std::string detail::heal_netem_record(const nlohmann::json& entry, CommandRunner& runner) {
  const std::string who = "netem " + entry.value("target", std::string("?"));
  auto links = entry.find("links");
  if (links == entry.end() || !links->is_array()) return who + ": the record names no links; nothing to do";
  int removed = 0;
  for (const auto& l : *links) {
    const std::string ns = l.value("netns", std::string()), dev = l.value("device", std::string());
    if (ns.rfind("fc-", 0) != 0 || dev.rfind("fc", 0) != 0) continue;  // only what fencecheck names
    try {
      runner.run(qdisc_del(ns, dev));
      ++removed;
    } catch (const CommandError& err) {
      if (!already_gone(err)) throw std::runtime_error(who + ": " + err.what());
    }
  }
  if (removed == 0) return who + ": already gone";
  return who + ": removed " + std::to_string(removed) + " netem qdisc(s)";
}

}  // namespace fencecheck::faults
