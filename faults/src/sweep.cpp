#include "fencecheck/faults/sweep.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cgroup_internal.h"
#include "fencecheck/faults/ledger.h"
#include "healers.h"
#include "net_internal.h"

namespace fencecheck::faults {
namespace fs = std::filesystem;
namespace {

struct Owner {
  fs::path ledger;
  bool alive = false;
  int harness_pid = 0;
  nlohmann::json entry;
};

std::string canonical_key(const fs::path& p) {
  std::error_code ec;
  auto c = fs::weakly_canonical(p, ec);
  return (ec ? p : c).lexically_normal().string();
}

void merge(std::map<std::string, Owner>& owners, const std::string& key, const Owner& o) {
  auto [it, inserted] = owners.emplace(key, o);
  if (!inserted && o.alive) it->second.alive = true;  // named by two ledgers: alive if either is
}

std::string owner_words(const Owner& o) {
  return "harness pid " + std::to_string(o.harness_pid) + ", ledger " + o.ledger.string();
}

}  // namespace

std::vector<std::string> sweep_leftovers(std::string_view prefix, const SweepOptions& o) {
  std::vector<std::string> said;
  std::map<std::string, Owner> netns_owner, cgroup_owner;

  // 1. Who names what, and is their harness alive?
  for (const auto& path : o.ledgers) {
    std::ifstream in(path);
    if (!in) {
      said.push_back("cannot read ledger " + path.string() + "; its objects are left alone");
      continue;
    }
    std::vector<nlohmann::json> injects;
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.value("op", "") == "inject") injects.push_back(std::move(j));
    }
    bool alive = false;
    int pid = 0;
    for (const auto& e : injects) {
      pid = FaultLedger::writer_pid(e).value_or(pid);  // a damaged entry: the PID seen before
      if (FaultLedger::writer_alive(e)) alive = true;
    }
    for (const auto& e : injects) {
      Owner owner{path, alive, FaultLedger::writer_pid(e).value_or(pid), e};
      const std::string kind = e.value("kind", "");
      if (kind == "netns-lab") {
        if (auto n = e.find("namespaces"); n != e.end() && n->is_array())
          for (const auto& name : *n)
            if (name.is_string()) merge(netns_owner, name.get<std::string>(), owner);
      } else if (kind == "cpu-throttle" || kind == "freeze") {
        const std::string dir = e.value("cgroup_dir", std::string());
        if (!dir.empty()) merge(cgroup_owner, canonical_key(dir), owner);
      }
    }
  }

  // 2. Namespaces (ip-netns(8): `ip netns list` prints "NAME" or "NAME (id: N)").
  SystemCommandRunner system_runner;
  CommandRunner& runner = o.runner ? *o.runner : static_cast<CommandRunner&>(system_runner);
  const std::string ns_prefix = "fc-" + std::string(prefix);
  std::vector<std::string> found;
  try {
    std::istringstream list(runner.run({"ip", "netns", "list"}));
    std::string l;
    while (std::getline(list, l)) {
      std::string name = l.substr(0, l.find(' '));
      if (!name.empty() && name.rfind(ns_prefix, 0) == 0) found.push_back(name);
    }
  } catch (const std::exception& err) {
    said.push_back(std::string("cannot list network namespaces: ") + err.what());
  }
  for (const auto& name : found) {
    auto it = netns_owner.find(name);
    if (it == netns_owner.end()) {
      said.push_back("left netns " + name + " alone: no ledger names it");
    } else if (it->second.alive) {
      said.push_back("left netns " + name + " alone: its harness is still running (" + owner_words(it->second) + ")");
    } else if (o.dry_run) {
      said.push_back("would remove netns " + name + " (" + owner_words(it->second) + ", dead)");
    } else {
      try {
        runner.run({"ip", "netns", "del", name});
        said.push_back("removed netns " + name + " (" + owner_words(it->second) + ", dead)");
      } catch (const CommandError& err) {
        said.push_back(detail::already_gone(err) ? "netns " + name + " vanished meanwhile"
                                                 : "cannot remove netns " + name + ": " + err.what());
      } catch (const std::exception& err) {
        said.push_back("cannot remove netns " + name + ": " + err.what());
      }
    }
  }

  // 3. Cgroups directly under each hierarchy's root.
  const std::string cg_prefix = "fencecheck-" + std::string(prefix);
  std::vector<fs::path> hierarchies;
  std::error_code ec;
  if (fs::exists(o.fs.root() / "cgroup.controllers", ec)) {
    hierarchies.push_back(o.fs.root());
  } else {
    for (const auto& e : fs::directory_iterator(o.fs.root(), ec))
      if (e.is_directory(ec)) hierarchies.push_back(e.path());
  }
  std::set<std::string> seen;
  for (const auto& h : hierarchies) {
    std::error_code ec2;
    for (const auto& e : fs::directory_iterator(h, ec2)) {
      const std::string name = e.path().filename().string();
      if (!e.is_directory(ec2) || name.rfind(cg_prefix, 0) != 0) continue;
      const std::string key = canonical_key(e.path());
      if (!seen.insert(key).second) continue;  // the same hierarchy through a symlink (cpu -> cpu,cpuacct)
      auto it = cgroup_owner.find(key);
      if (it == cgroup_owner.end()) {
        said.push_back("left cgroup " + e.path().string() + " alone: no ledger names it");
      } else if (it->second.alive) {
        said.push_back("left cgroup " + e.path().string() + " alone: its harness is still running (" +
                       owner_words(it->second) + ")");
      } else if (o.dry_run) {
        said.push_back("would remove cgroup " + e.path().string() + " (" + owner_words(it->second) + ", dead)");
      } else {
        try {
          const bool freeze = it->second.entry.value("kind", "") == "freeze";
          said.push_back(freeze ? detail::heal_freeze_record(it->second.entry, o.fs)
                                : detail::heal_cpu_throttle_record(it->second.entry, o.fs));
        } catch (const std::exception& err) {
          said.push_back(err.what());
        }
      }
    }
  }
  return said;
}

}  // namespace fencecheck::faults
