// Retention of a run root (`--keep N`, `--keep-nights N`, `--keep-days D`): see report.h,
// prune_run_root().
#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>

#include "fencecheck/harness/report.h"

#include "fencecheck/faults/ledger.h"
#include "fencecheck/harness/night.h"
#include "fencecheck/harness/run_dir.h"

namespace fencecheck::harness {
namespace fs = std::filesystem;

namespace {

struct Candidate {
  fs::path path;
  std::string stamp;  ///< yyyymmddTHHMMSSZ
  fs::file_time_type planned;  ///< scenario.json's modification time (written once, at the run's start)
  std::string name;
  std::string night;  ///< the `night` file's id; "" when none (then the run is a night of its own)
  bool must_keep = false;  ///< protected, still going, or with faults unhealed
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

/// The UTC time of a run stamp "yyyymmddTHHMMSSZ".
std::time_t stamp_time(const std::string& stamp) {
  std::tm tm{};
  tm.tm_year = std::stoi(stamp.substr(0, 4)) - 1900;
  tm.tm_mon = std::stoi(stamp.substr(4, 2)) - 1;
  tm.tm_mday = std::stoi(stamp.substr(6, 2));
  tm.tm_hour = std::stoi(stamp.substr(9, 2));
  tm.tm_min = std::stoi(stamp.substr(11, 2));
  tm.tm_sec = std::stoi(stamp.substr(13, 2));
  return timegm(&tm);
}

/// Marks for removal (doomed[i] = true) the runs (sorted newest first) of every night the policy
/// does not keep; a night with a run that must stay stays whole.
void choose_nights(const std::vector<Candidate>& runs, const RetentionPolicy& policy, std::vector<bool>& doomed) {
  struct Night {
    std::vector<std::size_t> members;  // indices into runs, newest first
    std::string oldest_stamp;
    bool must_keep = false;
  };
  std::vector<Night> nights;  // newest first: by the first (newest) member
  std::map<std::string, std::size_t> by_id;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string key = runs[i].night.empty() ? "run:" + runs[i].name : runs[i].night;
    auto [it, inserted] = by_id.emplace(key, nights.size());
    if (inserted) nights.emplace_back();
    Night& n = nights[it->second];
    n.members.push_back(i);
    n.oldest_stamp = runs[i].stamp;  // members come newest first: the last one is the oldest
    n.must_keep = n.must_keep || runs[i].must_keep;
  }
  const std::time_t now = policy.now != 0 ? policy.now : std::time(nullptr);
  const auto horizon = static_cast<std::time_t>(policy.count) * 86400;
  for (std::size_t k = 0; k < nights.size(); ++k) {
    const bool keep = nights[k].must_keep ||
                      (policy.unit == RetentionPolicy::Unit::kNights ? k < policy.count
                                                                     : now - stamp_time(nights[k].oldest_stamp) < horizon);
    if (!keep)
      for (auto i : nights[k].members) doomed[i] = true;
  }
}

}  // namespace

PruneResult prune_run_root(const fs::path& run_root, std::size_t keep, const std::vector<fs::path>& protect) {
  return prune_run_root(run_root, RetentionPolicy{RetentionPolicy::Unit::kRuns, keep, 0}, protect);
}

PruneResult prune_run_root(const fs::path& run_root, const RetentionPolicy& policy, const std::vector<fs::path>& protect) {
  PruneResult out;
  if (policy.count == 0) {
    out.errors.push_back(std::string(policy.unit == RetentionPolicy::Unit::kRuns     ? "--keep"
                                     : policy.unit == RetentionPolicy::Unit::kNights ? "--keep-nights"
                                                                                      : "--keep-days") +
                         " must be at least 1");
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
    runs.push_back({entry.path(), *stamp, fs::last_write_time(plan, e2), name, recorded_night(entry.path()).value_or("")});
  }
  if (ec) {
    out.errors.push_back(run_root.string() + ": " + ec.message());
    return out;
  }
  std::sort(runs.begin(), runs.end(), newer);
  for (auto& run : runs)
    run.must_keep =
        std::any_of(protect.begin(), protect.end(), [&](const fs::path& p) { return !p.empty() && same_dir(p, run.path); }) ||
        RunDirectory::in_use(run.path) || unhealed(run.path);
  std::vector<bool> marked(runs.size(), false);
  if (policy.unit == RetentionPolicy::Unit::kRuns) {
    for (std::size_t i = 0; i < runs.size(); ++i) marked[i] = i >= policy.count && !runs[i].must_keep;
  } else {
    choose_nights(runs, policy, marked);
  }
  std::map<std::string, bool> night_survives;  // night id -> a run of it is still there
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (!marked[i]) out.kept.push_back(runs[i].path);
  for (std::size_t j = runs.size(); j-- > 0;) {  // oldest first
    bool gone = false;
    if (marked[j]) {
      std::error_code e3;
      fs::remove_all(runs[j].path, e3);  // removes symlinks inside, never what they point to
      if (e3) out.errors.push_back(runs[j].path.string() + ": " + e3.message());
      else out.removed.push_back(runs[j].path);
      gone = !e3;
    }
    if (!runs[j].night.empty()) night_survives[runs[j].night] = night_survives[runs[j].night] || !gone;
  }
  for (const auto& [night, survives] : night_survives) {
    if (survives) continue;
    const fs::path summary = night_summary_path(run_root, night);
    std::error_code e4;
    if (!fs::exists(fs::symlink_status(summary, e4))) continue;
    if (fs::remove(summary, e4)) out.removed_summaries.push_back(summary);
    else if (e4) out.errors.push_back(summary.string() + ": " + e4.message());
  }
  return out;
}

}  // namespace fencecheck::harness
