// A run's claim on a shared lock service (run_claim.h).
#include "fencecheck/harness/run_claim.h"

#include <unistd.h>

#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

#include "fencecheck/resources/resource_kind.h"

namespace fencecheck::harness {

locks::RunClaim make_run_claim(const Scenario& sc, const std::string& run_id, std::time_t started) {
  locks::RunClaim c;
  c.run_id = run_id;
  char host[256] = {};
  c.host = ::gethostname(host, sizeof host - 1) == 0 && host[0] != '\0' ? host : "localhost";
  c.pid = static_cast<long>(::getpid());
  std::tm tm{};
  gmtime_r(&started, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  c.started = stamp;
  c.scenario = sc.name();
  c.lock = sc.lock_service().lock;
  c.ttl = sc.lock_service().claim_ttl;
  const auto* kind = resources::find_resource_kind(sc.resource().kind);
  // An embedded resource is this run's alone: its keys cannot overlap another run's.
  if (kind && !kind->embedded(sc.resource().config)) {
    c.resource = sc.resource().kind;
    std::set<std::string> keys;
    for (const auto& w : sc.workers()) keys.insert(sc.key_of(w));
    c.keys.assign(keys.begin(), keys.end());
  }
  return c;
}

std::unique_ptr<locks::HeldClaim> claim_run(const Scenario& sc, const RunDirectory& dir,
                                            locks::LockServiceInstance& service) {
  const locks::RunClaim mine = make_run_claim(sc, dir.run_id(), std::time(nullptr));
  std::string why;
  std::unique_ptr<locks::HeldClaim> held;
  try {
    held = service.claim(mine, why);
  } catch (const locks::ClaimRefused& err) {
    dir.write_json("claim.json", {{"claimed", false}, {"refused", err.what()}, {"claim", mine.to_json()}});
    throw RunRefused(err.what());
  } catch (const locks::LockServiceUnavailable& err) {
    dir.write_json("claim.json", {{"claimed", false}, {"error", err.what()}, {"claim", mine.to_json()}});
    throw EnvironmentError(err.what());
  }
  if (!held) {
    dir.write_json("claim.json", {{"claimed", false}, {"why", why}, {"claim", mine.to_json()}});
    if (sc.lock_service().embedded() && sc.lock_service().kind != kNoLockService)
      spdlog::info("{}: no claim taken on the lock service: {}", sc.name(), why);
    else
      spdlog::warn("{}: no claim is possible on the lock service ({}): another run on lock \"{}\"{} would not be detected",
                   sc.name(), why, mine.lock, mine.keys.empty() ? "" : " or the same resource keys");
    return nullptr;
  }
  dir.write_json("claim.json", {{"claimed", true},
                                {"held", held->describe()},
                                {"claim", mine.to_json()},
                                {"names", mine.names()},
                                {"ttl_s", mine.ttl.count()}});
  spdlog::info("{}: claimed lock \"{}\"{} for this run: {}", sc.name(), mine.lock,
               mine.keys.empty() ? std::string() : " and " + std::to_string(mine.keys.size()) + " resource key(s)",
               held->describe());
  return held;
}

}  // namespace fencecheck::harness
