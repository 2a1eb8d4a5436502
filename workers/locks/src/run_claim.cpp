// A run's claim on a shared lock service (lock_service_kind.h, RunClaim): its value, its names and
// the sentence a refused run ends with. Kind-neutral; each kind stores the names its own way.
#include <algorithm>

#include "fencecheck/locks/lock_service_kind.h"

namespace fencecheck::locks {

nlohmann::json RunClaim::to_json() const {
  return {{"run_id", run_id}, {"host", host},   {"pid", pid},           {"started", started},
          {"scenario", scenario}, {"lock", lock}, {"resource", resource}, {"keys", keys},
          {"ttl_s", ttl.count()}};
}

RunClaim RunClaim::from_json(const nlohmann::json& j) {
  RunClaim c;
  if (!j.is_object()) return c;
  const auto text = [&](const char* name, std::string& out) {
    if (auto it = j.find(name); it != j.end() && it->is_string()) out = it->get<std::string>();
  };
  text("run_id", c.run_id);
  text("host", c.host);
  text("started", c.started);
  text("scenario", c.scenario);
  text("lock", c.lock);
  text("resource", c.resource);
  if (auto it = j.find("pid"); it != j.end() && it->is_number_integer()) c.pid = it->get<long>();
  if (auto it = j.find("ttl_s"); it != j.end() && it->is_number_integer() && it->get<long>() > 0)
    c.ttl = std::chrono::seconds(it->get<long>());
  if (auto it = j.find("keys"); it != j.end() && it->is_array())
    for (const auto& k : *it)
      if (k.is_string()) c.keys.push_back(k.get<std::string>());
  return c;
}

std::vector<std::string> RunClaim::names() const {
  std::vector<std::string> out{"lock/" + lock};
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  for (const auto& k : sorted) out.push_back("key/" + resource + "/" + k);
  return out;
}

std::string claim_refusal_message(const RunClaim& mine, const std::string& name, const std::optional<RunClaim>& holder,
                                  const std::string& service) {
  const bool is_lock = name.rfind("lock/", 0) == 0;
  std::string what;
  if (is_lock) {
    what = "lock \"" + mine.lock + "\"";
  } else {
    const std::string prefix = "key/" + mine.resource + "/";
    what = "resource key \"" + (name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name) + "\" (" + mine.resource +
           ")";
  }
  std::string out = "another run holds this run's " + what + " in the lock service " + service + ": ";
  if (holder && !holder->run_id.empty()) {
    out += "run " + holder->run_id + " on host " + (holder->host.empty() ? "(unknown)" : holder->host);
    if (holder->pid > 0) out += " (pid " + std::to_string(holder->pid) + ")";
    if (!holder->scenario.empty()) out += ", scenario " + holder->scenario;
    if (!holder->started.empty()) out += ", started " + holder->started;
  } else {
    out += "a run whose claim could not be read back";
  }
  out += ". Two runs on one lock or one key judge each other's writes, so this run did not start. Wait for that run "
         "to end (a killed harness's claim lapses within " + std::to_string((holder ? holder->ttl : mine.ttl).count()) +
         " s), or isolate this run: ";
  out += is_lock ? "lock_service.run_suffix: true gives it a lock name of its own (\"" + mine.lock + "/<run id>\")"
                 : "give it resource keys of its own (job.key, workers[].key)";
  return out;
}

}  // namespace fencecheck::locks
