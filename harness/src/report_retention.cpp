// Retention of a run root (`--keep N`): see report.h, prune_run_root().
#include <algorithm>
#include <cctype>
#include <optional>
#include <string_view>
#include <tuple>

#include "fencecheck/harness/report.h"

#include "fencecheck/faults/ledger.h"
#include "fencecheck/harness/run_dir.h"

namespace fencecheck::harness {
namespace fs = std::filesystem;

namespace {

struct Candidate {
  fs::path path;
  std::string stamp;  ///< yyyymmddTHHMMSSZ
  fs::file_time_type planned;  ///< scenario.json's modification time (written once, at the run's start)
  std::string name;
};

bool newer(const Candidate& a, const Candidate& b) {
  return std::tie(a.stamp, a.planned, a.name) > std::tie(b.stamp, b.planned, b.name);
}

/// The UTC stamp of a run directory's name, "yyyymmddTHHMMSSZ-<scenario>": nullopt when the name
/// is not shaped like one.
std::optional<std::string> run_stamp(std::string_view name) {
  constexpr std::string_view kShape = "ddddddddTddddddZ-";  // d: a digit; then a non-empty scenario name
  if (name.size() <= kShape.size()) return std::nullopt;
  for (std::size_t i = 0; i < kShape.size(); ++i) {
    const bool ok = kShape[i] == 'd' ? std::isdigit(static_cast<unsigned char>(name[i])) != 0 : name[i] == kShape[i];
    if (!ok) return std::nullopt;
  }
  return std::string(name.substr(0, kShape.size() - 1));
}

bool same_dir(const fs::path& a, const fs::path& b) {
  std::error_code ec1, ec2;
  const bool eq = fs::equivalent(a, b, ec1);
  if (!ec1) return eq;
  return fs::weakly_canonical(a, ec2) == fs::weakly_canonical(b, ec2);
}

/// A run another harness is still writing is locked (RunDirectory::in_use); a killed run whose
/// ledger still lists unhealed faults is what `fencecheck cleanup` needs: neither is removed.
bool unhealed(const fs::path& dir) {
  const fs::path ledger = dir / "faults.ledger";
  std::error_code ec;
  if (!fs::exists(ledger, ec)) return false;
  try {
    return !fencecheck::faults::FaultLedger::outstanding(ledger).empty();
  } catch (const std::exception&) {
    return true;  // unreadable: keep it for a person to look at
  }
}

}  // namespace

PruneResult prune_run_root(const fs::path& run_root, std::size_t keep, const std::vector<fs::path>& protect) {
  PruneResult out;
  if (keep == 0) {
    out.errors.push_back("--keep must be at least 1");
    return out;
  }
  std::vector<Candidate> runs;
  std::error_code ec;
  for (fs::directory_iterator it(run_root, ec), end; !ec && it != end; it.increment(ec)) {
    const auto& entry = *it;
    std::error_code e2;
    if (entry.is_symlink(e2) || !entry.is_directory(e2)) continue;  // `latest`, files: never touched
    const std::string name = entry.path().filename().string();
    const auto stamp = run_stamp(name);
    if (!stamp) continue;
    const fs::path plan = entry.path() / "scenario.json";
    if (!fs::is_regular_file(fs::symlink_status(plan, e2))) continue;  // not a fencecheck run directory
    runs.push_back({entry.path(), *stamp, fs::last_write_time(plan, e2), name});
  }
  if (ec) {
    out.errors.push_back(run_root.string() + ": " + ec.message());
    return out;
  }
  std::sort(runs.begin(), runs.end(), newer);
  std::vector<fs::path> doomed;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const bool is_protected =
        std::any_of(protect.begin(), protect.end(), [&](const fs::path& p) { return !p.empty() && same_dir(p, runs[i].path); }) ||
        RunDirectory::in_use(runs[i].path) || unhealed(runs[i].path);
    if (i < keep || is_protected) out.kept.push_back(runs[i].path);
    else doomed.push_back(runs[i].path);
  }
  for (auto it = doomed.rbegin(); it != doomed.rend(); ++it) {
    std::error_code e3;
    fs::remove_all(*it, e3);  // removes symlinks inside, never what they point to
    if (e3) out.errors.push_back(it->string() + ": " + e3.message());
    else out.removed.push_back(*it);
  }
  return out;
}

}  // namespace fencecheck::harness
