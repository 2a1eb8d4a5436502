// The lock-service kind `none` (lock_service_kind.h): a lock fencecheck does not manage, such as
// PostgreSQL advisory locks released with their session, or a lease table in the resource's own
// database. Nothing is started; command workers get no lock-service endpoint; there is no issuer
// history, so the checkers that read it (evidence "lock-service": foreign-release,
// token-regression, unaccounted-write) answer unknown, never valid (checker.cpp, available()). The rest judge from
// the workers' events and the resource. docs/scenario-format.md, "lock_service", is the user's side.
//
//   lock_service:
//     kind: none
//     lock: payments/ledger     # optional: FENCECHECK_LOCK_NAME, the name the workers' own lock uses
//
// The loader refuses what needs a lock service fencecheck runs: endpoints (check_endpoint),
// prior_revisions, issuers above 1, lock-service-restart and partitions from the lock service,
// and fencecheck-worker (a worker without a command).
#include <nlohmann/json.hpp>

#include "../kinds.h"
#include "fencecheck/locks/lock_service_kind.h"

namespace fencecheck::locks {
namespace {

/// No issuer, so nothing to watch: stop() has nothing to wait for.
class NoWatch final : public IssuerWatch {
 public:
  void stop() override {}
  void restarted_fresh() override {}
};

class NoInstance final : public LockServiceInstance {
 public:
  nlohmann::json endpoint() const override { return {{"kind", "none"}}; }
  std::string endpoints_text() const override { return ""; }
  std::map<std::string, std::string> worker_env() const override { return {}; }
  std::string describe() const override { return "none (the workers bring their own lock; no issuer history)"; }
  bool healthy() override { return true; }
  std::unique_ptr<IssuerWatch> watch(const std::string& /*name*/, std::function<void(Event)> /*sink*/) override {
    return std::make_unique<NoWatch>();
  }
  void advance(std::int64_t count) override {
    if (count == 0) return;
    throw std::logic_error("lock service kind none has no revision counter to advance (the loader refuses prior_revisions)");
  }
  int pid() const override { return 0; }
  void stop_server() override {
    throw std::logic_error("lock service kind none has no server to stop (the loader refuses lock-service-restart)");
  }
  void start_server(bool /*fresh_data*/) override {
    throw std::logic_error("lock service kind none has no server to start (the loader refuses lock-service-restart)");
  }
  void stop() noexcept override {}
  std::unique_ptr<HeldClaim> claim(const RunClaim& /*claim*/, std::string& why) override {
    why = "kind none: fencecheck talks to no lock service, so it cannot claim the lock for this run";
    return nullptr;
  }
};

class NoneKind final : public LockServiceKind {
 public:
  std::string_view name() const override { return "none"; }
  std::vector<std::string_view> fields() const override { return {}; }
  nlohmann::json parse(const KindFields& /*fields*/) const override { return nlohmann::json::object(); }
  std::string check_endpoint(std::string_view /*endpoint*/) const override {
    return "lock service kind none has no endpoints: fencecheck neither starts nor talks to the workers' own lock";
  }
  std::string token_description() const override {
    return "the workers' own (kind none: fencecheck manages no lock service and sees no issuer history)";
  }
  std::string restart_effect(const nlohmann::json& /*config*/) const override {
    return "kind none: no lock service for fencecheck to restart";
  }
  std::unique_ptr<LockServiceInstance> open(const std::vector<std::string>& /*endpoints*/, const nlohmann::json& /*config*/,
                                            const LockServiceRunContext& /*ctx*/) const override {
    return std::make_unique<NoInstance>();
  }
};

}  // namespace

namespace detail {

const LockServiceKind& none_kind() {
  static const NoneKind kind;
  return kind;
}

}  // namespace detail
}  // namespace fencecheck::locks
