// The checker benchmark's synthetic history (bench/synthetic_history.h) is what it claims: a valid
// run of the requested size whose read-back matches it, with fenced stale writes and lease
// expiries in it; and the checkers it is used to measure do catch a corruption of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/checkers.h"
#include "fencecheck/harness/live_checker.h"
#include "synthetic_history.h"

namespace fb = fencecheck::bench;
namespace fh = fencecheck::harness;
using fencecheck::EventKind;

namespace {

std::size_t count_kind(const fh::History& h, EventKind kind) {
  return static_cast<std::size_t>(
      std::count_if(h.begin(), h.end(), [&](const fencecheck::Event& e) { return e.kind == kind; }));
}

fh::CheckContext context() {
  fh::CheckContext c;
  c.lease_ttl = std::chrono::seconds(2);
  return c;
}

TEST(SyntheticHistory, HasTheRequestedSizeAndMatchingReadBack) {
  const fb::Synthetic s = fb::make_history(10'000);
  EXPECT_GE(s.history.size(), 10'000u);
  EXPECT_LT(s.history.size(), 10'020u);
  EXPECT_EQ(s.readback.log.size(), count_kind(s.history, EventKind::kWriteOk));
  EXPECT_EQ(s.readback.rejections.size(), count_kind(s.history, EventKind::kWriteFail));
  EXPECT_GT(s.readback.rejections.size(), 5u);  // every 64th holding is fenced once resumed
  EXPECT_EQ(s.readback.high_water.size(), static_cast<std::size_t>(fb::kKeys));
  EXPECT_EQ(s.readback.chunks.size(), static_cast<std::size_t>(fb::kKeys * fb::kSegments * fb::kChunks));
  // Deterministic: the benchmark measures the same input every time.
  const fb::Synthetic again = fb::make_history(10'000);
  EXPECT_EQ(again.history.size(), s.history.size());
  EXPECT_EQ(again.readback.log.back().token, s.readback.log.back().token);
}

TEST(SyntheticHistory, IsAValidRunWithExpiriesAndFencedWrites) {
  const fb::Synthetic s = fb::make_history(10'000);
  const fh::Analysis a = fh::analyze(s.history, s.readback, context());
  for (const auto& r : a.checkers) EXPECT_EQ(r.verdict, fh::Verdict::kValid) << r.name << ": " << r.error;
  EXPECT_EQ(a.verdict, fh::Verdict::kValid);
  EXPECT_EQ(a.anomaly_count(), 0u);
}

TEST(SyntheticHistory, AStaleAcceptedWriteInItIsCaught) {
  fb::Synthetic s = fb::make_history(10'000);
  // The store accepts, after the key's newest write, a write carrying an older token of that key.
  const fencecheck::AcceptedWrite last = s.readback.log.back();
  fencecheck::AcceptedWrite stale = last;
  stale.seq = last.seq + 1;
  stale.token = last.token - 200;  // below the key's high-water mark
  stale.client = "w-stale";
  s.readback.log.push_back(stale);
  const fh::Analysis a = fh::analyze(s.history, s.readback, context());
  EXPECT_EQ(a.verdict, fh::Verdict::kInvalid);
  EXPECT_FALSE(a.anomalies_named("stale-write-accepted").empty());
}

// The expiry figure (lease expiries during work) and token-regression both use per-key indexes
// and a per-lock running maximum since they were made O(n log n) for long histories (issue 7);
// these pin down what they must still find.
TEST(SyntheticHistory, EveryPausedHoldersExpiryIsCountedWithItsEvidence) {
  const fb::Synthetic s = fb::make_history(10'000);
  const fh::Figures f = fh::compute_figures(s.history, s.readback, context());
  std::size_t unexplained_deletes = 0;  // lock.delete without release.ok: the paused holders
  for (std::size_t i = 0; i < s.history.size(); ++i)
    if (s.history[i].kind == EventKind::kLockDelete &&
        (i + 1 >= s.history.size() || s.history[i + 1].kind != EventKind::kReleaseOk))
      ++unexplained_deletes;
  ASSERT_GT(unexplained_deletes, 5u);
  ASSERT_EQ(f.expiries_during_work.size(), unexplained_deletes);
  for (const auto& x : f.expiries_during_work) {
    ASSERT_EQ(x.evidence.size(), 3u);  // acquire.ok, lock.grant, lock.delete of that key
    EXPECT_EQ(s.history[x.evidence[0]].kind, EventKind::kLockGrant);
    EXPECT_EQ(s.history[x.evidence[1]].kind, EventKind::kAcquireOk);
    EXPECT_EQ(s.history[x.evidence[1]].source, x.worker);
    EXPECT_EQ(s.history[x.evidence[2]].kind, EventKind::kLockDelete);
    EXPECT_EQ(*s.history[x.evidence[1]].token, x.token);
  }
}

/// Index of the n-th from last acquire.ok on `lock`.
std::size_t nth_last_acquire(const fh::History& h, const std::string& lock, int n) {
  for (std::size_t i = h.size(); i-- > 0;)
    if (h[i].kind == EventKind::kAcquireOk && h[i].lock == lock && n-- == 0) return i;
  throw std::logic_error("no such acquire");
}

TEST(SyntheticHistory, TokenRegressionIsJudgedPerLock) {
  const fh::TokenRegressionChecker checker;
  fb::Synthetic s = fb::make_history(10'000);
  const std::size_t last = nth_last_acquire(s.history, "lock-k5", 0);
  const std::int64_t previous = *s.history[nth_last_acquire(s.history, "lock-k5", 1)].token;
  // Above the lock's own previous token, below tokens other locks were granted since: no regression.
  s.history.events[last].token = previous + 1;
  EXPECT_EQ(checker.check_with(s.history, s.readback, context()).verdict, fh::Verdict::kValid);
  // Below the lock's own previous grant, which completed before this acquire was invoked.
  s.history.events[last].token = previous - 1;
  const fh::CheckerResult r = checker.check_with(s.history, s.readback, context());
  ASSERT_EQ(r.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 1u);
  // The lock service's grant of that lock key still carries the token the edit replaced, so the
  // worker's token is not the issuer's (issue 31, item 9): that grant's token is listed and cited.
  const std::vector<std::int64_t>& tokens = r.anomalies[0].tokens;
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(tokens[0], previous - 1);
  EXPECT_EQ(tokens[1], previous);
  EXPECT_GT(tokens[2], previous);
  // Said once: the token is the worker's own, with the issuer's grant of that key beside it.
  EXPECT_NE(r.anomalies[0].description.find("not one the issuer granted (the lock service granted "), std::string::npos)
      << r.anomalies[0].description;
  EXPECT_NE(r.anomalies[0].description.find(" with token " + std::to_string(tokens[2]) + ")"), std::string::npos)
      << r.anomalies[0].description;
  EXPECT_TRUE(std::find(r.anomalies[0].evidence.begin(), r.anomalies[0].evidence.end(), last) !=
              r.anomalies[0].evidence.end());
}

// analyze() builds one HistoryIndex and hands it to every checker and to the figures; a checker
// called on its own builds its own. The results must be the same, anomalies and all: corrupt the
// history in several ways so that most checkers have something to say, then compare.
// bench_live_checker streams generate_history() without a read-back: the same events, in the
// same order, as make_history() holds; and the live checker finds nothing in the valid run, while
// a stale write accepted in it is found at its write.ok.
TEST(SyntheticHistory, TheStreamIsTheSameHistoryAndTheLiveCheckerFindsNothingInIt) {
  const auto held = fb::make_history(20'000);
  std::size_t i = 0;
  fencecheck::ReadBack untouched;
  fb::generate_history(
      20'000,
      [&](const fencecheck::Event& e) {
        ASSERT_LT(i, held.history.size());
        EXPECT_EQ(fencecheck::to_json_line(e), fencecheck::to_json_line(held.history[i])) << i;
        ++i;
      },
      nullptr);
  EXPECT_EQ(i, held.history.size());
  EXPECT_TRUE(fh::live_anomalies(held.history, fh::CheckContext{}).empty());

  fh::History stale = held.history;
  for (auto& e : stale.events)
    if (e.kind == EventKind::kWriteFail) {  // a fenced write, now acknowledged as if accepted
      e.kind = EventKind::kWriteOk;
      break;
    }
  const auto live = fh::live_anomalies(stale, fh::CheckContext{});
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].anomaly.name, "stale-write-accepted");
  EXPECT_EQ(stale[live[0].found_at].kind, EventKind::kWriteOk);
}

TEST(SyntheticHistory, TheSharedIndexChangesNoResult) {
  fb::Synthetic s = fb::make_history(10'000);
  // A stale accepted write (store log), a lost acknowledged write (the first one: its slot was
  // overwritten by holding 400, and now the log has no record of it either), a
  // token handed out twice (acquire.ok), a release of another holder's key, a storm of rejections.
  fencecheck::AcceptedWrite stale = s.readback.log.back();
  stale.seq += 1;
  stale.token -= 200;
  s.readback.log.push_back(stale);
  s.readback.log.erase(s.readback.log.begin());
  s.history.events[nth_last_acquire(s.history, "lock-k7", 0)].token =
      *s.history[nth_last_acquire(s.history, "lock-k7", 1)].token;
  for (std::size_t i = 0; i < s.history.size(); ++i)
    if (s.history[i].kind == EventKind::kReleaseOk) {
      s.history.events[i].source = "w-intruder";
      break;
    }
  for (std::size_t i = 0; i < s.history.size(); ++i)
    if (s.history[i].kind == EventKind::kWriteFail) {
      s.history.events.insert(s.history.events.begin() + static_cast<std::ptrdiff_t>(i) + 1, s.history[i]);
      break;
    }

  fh::CheckContext shared = context();
  shared.index = std::make_shared<const fh::HistoryIndex>(s.history);
  std::vector<std::string> with_anomalies;
  for (const auto& checker : fh::default_checkers()) {
    const fh::CheckerResult alone = checker->check_with(s.history, s.readback, context());
    const fh::CheckerResult indexed = checker->check_with(s.history, s.readback, shared);
    EXPECT_EQ(alone.verdict, indexed.verdict) << checker->name();
    ASSERT_EQ(alone.anomalies.size(), indexed.anomalies.size()) << checker->name();
    for (std::size_t i = 0; i < alone.anomalies.size(); ++i) {
      EXPECT_EQ(alone.anomalies[i].description, indexed.anomalies[i].description) << checker->name();
      EXPECT_EQ(alone.anomalies[i].evidence, indexed.anomalies[i].evidence) << checker->name();
      EXPECT_EQ(alone.anomalies[i].tokens, indexed.anomalies[i].tokens) << checker->name();
    }
    if (!alone.anomalies.empty()) with_anomalies.emplace_back(checker->name());
  }
  EXPECT_EQ(with_anomalies, (std::vector<std::string>{"stale-write-accepted", "rejection-storm", "foreign-release",
                                                      "token-regression", "lost-acknowledged-write"}));
  const fh::Figures alone = fh::compute_figures(s.history, s.readback, context());
  const fh::Figures indexed = fh::compute_figures(s.history, s.readback, shared);
  EXPECT_EQ(alone.expiries_during_work.size(), indexed.expiries_during_work.size());
  EXPECT_EQ(alone.rejected_writes_history, indexed.rejected_writes_history);
  EXPECT_EQ(alone.max_rejections_per_token, indexed.max_rejections_per_token);
  EXPECT_EQ(alone.pauses.size(), indexed.pauses.size());
}

TEST(HistoryIndex, ListsTheEventsOfTheAskedKindsAndKnowsItsHistory) {
  fb::Synthetic s = fb::make_history(1'000);
  const fh::HistoryIndex index(s.history);
  ASSERT_TRUE(index.matches(s.history));
  const std::vector<std::size_t> writes = index.of({EventKind::kWriteOk, EventKind::kWriteFail});
  ASSERT_EQ(writes.size(), count_kind(s.history, EventKind::kWriteOk) + count_kind(s.history, EventKind::kWriteFail));
  EXPECT_TRUE(std::is_sorted(writes.begin(), writes.end()));
  for (std::size_t i : writes)
    EXPECT_TRUE(s.history[i].kind == EventKind::kWriteOk || s.history[i].kind == EventKind::kWriteFail);
  EXPECT_EQ(index.kind(writes.front()), s.history[writes.front()].kind);
  const fb::Synthetic other = fb::make_history(1'000);
  EXPECT_FALSE(index.matches(other.history));  // same size, another history
  s.history.add(s.history[0]);
  EXPECT_FALSE(index.matches(s.history));  // appended to since
}

}  // namespace
