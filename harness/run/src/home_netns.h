// fencecheck — the user's services, reached from the harness's own network namespace while the
// main thread sits in the network lab's hub (services.h; docs/architecture.md, "Relays").
//
// With `network: namespaces` the main thread enters the hub for the run, so that embedded services
// start there and the harness reaches them at the lab's addresses. The user's lock service and
// resource are outside the lab: the workers reach them through the relays (fencecheck/faults/
// relay.h), the harness directly, from the namespace it started in. These wrappers make each call
// (health, the issuer watch, the read-back) with the calling thread moved back to that namespace
// for the length of the call; a thread started inside a call (the issuer watch's) stays there.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fencecheck/harness/netns_scope.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/resources/resource_kind.h"

namespace fencecheck::harness::detail {

/// A claim held on the user's lock service, released from the namespace of `home_fd`.
class HomeClaim final : public locks::HeldClaim {
 public:
  HomeClaim(std::unique_ptr<locks::HeldClaim> inner, int home_fd) : inner_(std::move(inner)), fd_(home_fd) {}
  ~HomeClaim() override { release(); }
  void release() noexcept override {
    try {
      NetnsScope home(fd_, "the harness's own");
      inner_->release();
    } catch (...) {
      inner_->release();  // entering failed: release from here (its lease then lapses by itself)
    }
  }
  std::string lost() const override { return inner_->lost(); }
  std::string describe() const override { return inner_->describe(); }

 private:
  std::unique_ptr<locks::HeldClaim> inner_;
  int fd_;
};

/// The user's lock service, every call made from the namespace of `home_fd` (which must outlive
/// the wrapper). Thread-safety: the wrapped instance's.
class HomeLockService final : public locks::LockServiceInstance {
 public:
  HomeLockService(std::unique_ptr<locks::LockServiceInstance> inner, int home_fd)
      : inner_(std::move(inner)), fd_(home_fd) {}
  ~HomeLockService() override { stop(); }
  nlohmann::json endpoint() const override { return inner_->endpoint(); }
  std::string endpoints_text() const override { return inner_->endpoints_text(); }
  std::map<std::string, std::string> worker_env() const override { return inner_->worker_env(); }
  std::string describe() const override { return inner_->describe(); }
  bool healthy() override {
    NetnsScope home(fd_, "the harness's own");
    return inner_->healthy();
  }
  std::unique_ptr<locks::IssuerWatch> watch(const std::string& name, std::function<void(Event)> sink) override {
    NetnsScope home(fd_, "the harness's own");
    return inner_->watch(name, std::move(sink));
  }
  void advance(std::int64_t count) override {
    NetnsScope home(fd_, "the harness's own");
    inner_->advance(count);
  }
  /// The run's claim (issue 34 item 3), taken and released from the harness's own namespace;
  /// its renewal thread, started inside claim(), stays there.
  std::unique_ptr<locks::HeldClaim> claim(const locks::RunClaim& c, std::string& why) override {
    NetnsScope home(fd_, "the harness's own");
    auto held = inner_->claim(c, why);
    if (!held) return held;
    return std::make_unique<HomeClaim>(std::move(held), fd_);
  }
  int pid() const override { return inner_->pid(); }
  void stop_server() override {
    NetnsScope home(fd_, "the harness's own");
    inner_->stop_server();
  }
  void start_server(bool fresh_data) override {
    NetnsScope home(fd_, "the harness's own");
    inner_->start_server(fresh_data);
  }
  // The member seam (issue 35): forwarded, every call that talks to the service from home.
  std::vector<locks::LockServiceMember> members() const override { return inner_->members(); }
  std::optional<int> leader_member(std::string& why) override {
    NetnsScope home(fd_, "the harness's own");
    return inner_->leader_member(why);
  }
  void stop_member(int index, bool kill9) override {
    NetnsScope home(fd_, "the harness's own");
    inner_->stop_member(index, kill9);
  }
  void start_member(int index) override {
    NetnsScope home(fd_, "the harness's own");
    inner_->start_member(index);
  }
  void stop() noexcept override {
    try {
      NetnsScope home(fd_, "the harness's own");
      inner_->stop();
    } catch (...) {
      inner_->stop();  // stop() of the user's service closes connections only
    }
  }

 private:
  std::unique_ptr<locks::LockServiceInstance> inner_;
  int fd_;
};

/// The user's resource, every call made from the namespace of `home_fd` (which must outlive the
/// wrapper). Thread-safety: the wrapped instance's.
class HomeResource final : public resources::ResourceInstance {
 public:
  HomeResource(std::unique_ptr<resources::ResourceInstance> inner, int home_fd) : inner_(std::move(inner)), fd_(home_fd) {}
  ~HomeResource() override { stop(); }
  nlohmann::json endpoint() const override { return inner_->endpoint(); }
  std::string describe() const override { return inner_->describe(); }
  bool healthy() override {
    NetnsScope home(fd_, "the harness's own");
    return inner_->healthy();
  }
  /// The run's keys go to the wrapped instance, whose read-back uses them.
  void set_read_scope(std::set<std::string> keys) override {
    ResourceInstance::set_read_scope(keys);
    inner_->set_read_scope(std::move(keys));
  }
  ReadBack readback() override {
    NetnsScope home(fd_, "the harness's own");
    return inner_->readback();
  }
  Removal remove_keys(const std::vector<std::string>& keys) override {
    NetnsScope home(fd_, "the harness's own");
    return inner_->remove_keys(keys);
  }
  ReadBack readback_into(const ReadBackLogSink& log) override {
    NetnsScope home(fd_, "the harness's own");
    return inner_->readback_into(log);
  }
  void stop() override {
    try {
      NetnsScope home(fd_, "the harness's own");
      inner_->stop();
    } catch (...) {
      inner_->stop();  // stop() of the user's resource closes connections only
    }
  }
  bool restart() override {
    NetnsScope home(fd_, "the harness's own");
    return inner_->restart();
  }

 private:
  std::unique_ptr<resources::ResourceInstance> inner_;
  int fd_;
};

}  // namespace fencecheck::harness::detail
