// duplicate-effect (checkers.h says what it finds): decided by the read-back's effects alone
// (detail::effect_duplicates, which the figures share), before the history is read; the history
// adds the write.oks that asked for each application, as evidence, and one flag: whether any
// side effect was acknowledged (a side-effect job whose read-back lists no effects cannot be
// judged then).
// State: the anomalies (output), the (client, token, key) of each application they cite (output)
// and the flag: nothing grows with the history.
#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "../internal.h"
#include "stream_rules.h"

namespace fencecheck::harness::detail {
namespace {

class DuplicateEffectRule final : public StreamRule {
 public:
  std::string_view name() const override { return "duplicate-effect"; }
  bool reads_log() const override { return false; }
  std::uint64_t kinds() const override { return bit(EventKind::kWriteOk); }  // observe()'s first line

  void begin(const ReadBack& readback, const PackedLog&, const CheckContext& context) override {
    watch_acknowledged_ = context.job_kind == JobKind::kSideEffect && readback.effects.empty();
    for (const EffectDuplicates& dup : effect_duplicates(readback)) {
      const std::size_t at = anomalies_.size();
      Anomaly& a = anomalies_.emplace_back();
      a.name = "duplicate-effect";
      a.key = dup.key;
      // A trailing number of the identity ("seg2") is the segment the effect is about.
      std::optional<std::int64_t> segment;
      {
        std::size_t p = dup.identity.size();
        while (p > 0 && dup.identity[p - 1] >= '0' && dup.identity[p - 1] <= '9') --p;
        std::int64_t n = 0;
        const char* first = dup.identity.data() + p;
        const char* last = dup.identity.data() + dup.identity.size();
        if (p < dup.identity.size() && std::from_chars(first, last, n).ec == std::errc()) segment = n;
      }
      a.segment = segment;
      std::vector<std::string> parts;
      for (const EffectRecord* e : dup.applications) {
        a.tokens.push_back(e->token);
        a.clients.push_back(e->client);
        a.readback_seqs.push_back(e->seq);
        const bool duplicate = std::find(dup.duplicates.begin(), dup.duplicates.end(), e) != dup.duplicates.end();
        parts.push_back(std::string(duplicate ? "again by " : "by ") + e->client + " (token " + std::to_string(e->token) +
                        ", seq " + std::to_string(e->seq) + ")");
        // Its evidence: the write.oks by the application's client and token on its key or the
        // key's side-effect key (observe()).
        wanted_[{e->client, e->token, e->key}].push_back(at);
      }
      a.description = "effect " + dup.identity + " on " + dup.key + " was applied " +
                      std::to_string(dup.applications.size()) + " times: " + join(parts, ", ") + "; " +
                      std::to_string(dup.duplicates.size()) +
                      " application(s) came with a token not above one that had already applied it (a stale or "
                      "repeated side effect)";
    }
  }

  void observe(std::size_t index, const Event& x) override {
    if (x.kind != EventKind::kWriteOk) return;
    if (watch_acknowledged_ && is_effect_key(x.key)) acknowledged_ = true;
    if (wanted_.empty() || !x.token) return;
    // An application on key k cites write.oks on k and on k + ".effect": x cites those on x.key
    // and, when x.key ends with ".effect", on what comes before it.
    cite(index, x, x.key);
    if (std::string_view(x.key).ends_with(kEffectSuffix))
      cite(index, x, std::string_view(x.key).substr(0, x.key.size() - kEffectSuffix.size()));
  }

  CheckerResult finish(const StreamEnd&) override {
    if (acknowledged_) return unknown_result(name(), "side effects were acknowledged but the resource's read-back lists no effects");
    return result_of(name(), std::move(anomalies_));
  }

  std::size_t state_bytes() const override {
    std::size_t n = sizeof(*this);
    for (const auto& a : anomalies_)
      n += sizeof(a) + a.description.capacity() + a.evidence.capacity() * sizeof(std::size_t) +
           (a.tokens.capacity() + a.readback_seqs.capacity()) * sizeof(std::int64_t) +
           a.clients.capacity() * sizeof(std::string);
    for (const auto& [id, list] : wanted_)
      n += sizeof(id) + std::get<0>(id).capacity() + std::get<2>(id).capacity() + list.capacity() * sizeof(std::size_t) + 32;
    return n;
  }

 private:
  void cite(std::size_t index, const Event& x, std::string_view key) {
    const auto it = wanted_.find(ApplicationView(x.source, *x.token, key));
    if (it == wanted_.end()) return;
    if (!is_effect_key(x.key) && x.chunk) return;  // a chunk write to the key, not the effect
    for (std::size_t at : it->second) {
      Anomaly& a = anomalies_[at];
      if (a.segment && x.segment && *x.segment != *a.segment) continue;
      a.evidence.push_back(index);
    }
  }

  bool watch_acknowledged_ = false;
  bool acknowledged_ = false;
  std::vector<Anomaly> anomalies_;
  /// (client, token, key) of each application -> the anomalies citing it (once per application).
  using Application = std::tuple<std::string, std::int64_t, std::string>;
  using ApplicationView = std::tuple<std::string_view, std::int64_t, std::string_view>;
  /// Orders applications and their views alike (a view of each side), so find() takes a view
  /// without building strings. libstdc++ compares tuples of different element types only under
  /// GCC, hence the comparator rather than std::less<>.
  struct ApplicationLess {
    using is_transparent = void;
    static ApplicationView view(const Application& a) { return {std::get<0>(a), std::get<1>(a), std::get<2>(a)}; }
    static const ApplicationView& view(const ApplicationView& a) { return a; }
    template <class A, class B>
    bool operator()(const A& a, const B& b) const { return view(a) < view(b); }
  };
  std::map<Application, std::vector<std::size_t>, ApplicationLess> wanted_;
};

}  // namespace

std::unique_ptr<StreamRule> make_duplicate_effect_rule() { return std::make_unique<DuplicateEffectRule>(); }

}  // namespace fencecheck::harness::detail
