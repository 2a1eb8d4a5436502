// fencecheck tests — an in-memory fenced resource with its fencing rule chosen by the test, as a
// ResourceInstance and a ResourceWriter: the probe's verdicts judged against a resource whose
// behaviour is known exactly, with no process, port or disk.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/resources/resource_kind.h"
#include "fencecheck/resources/writer.h"

namespace fencecheck::testing {

/// How the fake decides.
struct FakeRules {
  enum class Compare {
    kAtLeast,  ///< accept iff token >= the mark (correct)
    kAbove,    ///< accept iff token > the mark (the strict comparison: fenced-out)
    kNone,     ///< accept everything (no fence)
    kAsText,   ///< accept iff the token's decimal text >= the mark's ("9" >= "10": a text column)
  };
  Compare compare = Compare::kAtLeast;
  bool global = false;                ///< one mark for every key
  bool store_rejected = false;        ///< a rejected write is stored anyway (then answered "rejected")
  bool lose_mark_on_restart = false;  ///< restart() forgets every mark
  bool restartable = true;            ///< restart() returns true
  bool readback_fails = false;        ///< readback() throws
  bool unknown_outcomes = false;      ///< every write answers kUnknown (and is not applied)
};

/// The resource's state; thread-safe (one mutex), as writers write from the probe's threads.
class FakeResource {
 public:
  explicit FakeResource(FakeRules rules = {}) : rules_(rules) {}

  WriteReply write(std::string_view key, std::int64_t segment, std::int64_t chunk, std::int64_t token,
                   std::string_view client, std::string_view bytes) {
    std::lock_guard lock(mu_);
    writes_.push_back({std::string(key), segment, chunk, token, std::string(client)});
    WriteReply r;
    if (rules_.unknown_outcomes) {
      r.outcome = WriteOutcome::kUnknown;
      r.error = "fake: no reply";
      return r;
    }
    std::int64_t& mark = rules_.global ? global_ : marks_[std::string(key)];
    bool ok = true;
    switch (rules_.compare) {
      case FakeRules::Compare::kAtLeast: ok = token >= mark; break;
      case FakeRules::Compare::kAbove: ok = token > mark; break;
      case FakeRules::Compare::kNone: ok = true; break;
      case FakeRules::Compare::kAsText: ok = std::to_string(token) >= std::to_string(mark); break;
    }
    if (ok || rules_.store_rejected) {
      const std::int64_t seq = ++seq_;
      chunks_[{std::string(key), segment, chunk}] = StoredChunk{std::string(key), segment, chunk, token, std::string(client), seq, std::string(bytes)};
      log_.push_back(AcceptedWrite{seq, std::string(key), segment, chunk, token, std::string(client)});
      if (ok) {
        r.seq = seq;
        if (token > mark || rules_.compare == FakeRules::Compare::kAsText) mark = token;
        if (token > per_key_[std::string(key)]) per_key_[std::string(key)] = token;
      }
    }
    r.outcome = ok ? WriteOutcome::kAccepted : WriteOutcome::kRejected;
    r.high_water = mark;
    if (!ok) r.error = "fake: token " + std::to_string(token) + " below " + std::to_string(mark);
    return r;
  }

  ReadBack readback() {
    std::lock_guard lock(mu_);
    if (rules_.readback_fails) throw std::runtime_error("fake: the read-back does not answer");
    ReadBack rb;
    rb.resource = "fake";
    for (const auto& [slot, c] : chunks_) rb.chunks.push_back(c);
    rb.log = log_;
    rb.high_water = per_key_;
    return rb;
  }

  bool restart() {
    std::lock_guard lock(mu_);
    if (!rules_.restartable) return false;
    ++restarts_;
    if (rules_.lose_mark_on_restart) {
      marks_.clear();
      per_key_.clear();
      global_ = 0;
    }
    return true;
  }

  struct Write {
    std::string key;
    std::int64_t segment, chunk, token;
    std::string client;
  };
  std::vector<Write> writes() {
    std::lock_guard lock(mu_);
    return writes_;
  }
  int restarts() {
    std::lock_guard lock(mu_);
    return restarts_;
  }

 private:
  std::mutex mu_;
  FakeRules rules_;
  std::map<std::string, std::int64_t> marks_, per_key_;
  std::int64_t global_ = 0;
  std::int64_t seq_ = 0;
  std::map<std::tuple<std::string, std::int64_t, std::int64_t>, StoredChunk> chunks_;
  std::vector<AcceptedWrite> log_;
  std::vector<Write> writes_;
  int restarts_ = 0;
};

class FakeWriter final : public ResourceWriter {
 public:
  explicit FakeWriter(FakeResource& r) : r_(r) {}
  std::string_view kind() const override { return "fake"; }
  WriteReply write(std::string_view key, std::int64_t segment, std::int64_t chunk, FencingToken token,
                   std::string_view client, std::string_view bytes) override {
    return r_.write(key, segment, chunk, token.value(), client, bytes);
  }

 private:
  FakeResource& r_;
};

class FakeInstance final : public resources::ResourceInstance {
 public:
  FakeInstance(FakeResource& r, nlohmann::json endpoint = {{"kind", "fake"}}, bool healthy = true)
      : r_(r), endpoint_(std::move(endpoint)), healthy_(healthy) {}
  nlohmann::json endpoint() const override { return endpoint_; }
  std::string describe() const override { return "fake resource (in memory)"; }
  bool healthy() override { return healthy_; }
  ReadBack readback() override { return r_.readback(); }
  void stop() override { ++stops; }
  bool restart() override { return r_.restart(); }
  int stops = 0;

 private:
  FakeResource& r_;
  nlohmann::json endpoint_;
  bool healthy_;
};

}  // namespace fencecheck::testing
