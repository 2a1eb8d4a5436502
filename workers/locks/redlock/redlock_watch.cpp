// RedlockTally and RedlockWatch (redlock_watch.h).
#include "redlock_watch.h"

#include <map>
#include <stdexcept>

#include <spdlog/spdlog.h>

namespace fencecheck::locks::redlock_detail {

RedlockTally::RedlockTally(int members, std::string lock)
    : members_(members), lock_(std::move(lock)), values_(static_cast<std::size_t>(std::max(members, 0))) {
  if (members < 1) throw std::invalid_argument("RedlockTally: at least one member");
}

std::vector<Event> RedlockTally::on_member(int member, const Event& change) {
  if (member < 1 || member > members_)
    throw std::out_of_range("RedlockTally: member " + std::to_string(member) + " of " + std::to_string(members_));
  auto& slot = values_[static_cast<std::size_t>(member - 1)];
  if (change.kind == EventKind::kLockGrant) slot = change.line;
  else if (change.kind == EventKind::kLockDelete) slot.reset();
  else return {};

  std::map<std::string, std::vector<int>> holders;  // value -> members holding it
  for (int m = 1; m <= members_; ++m)
    if (const auto& v = values_[static_cast<std::size_t>(m - 1)]; v && !v->empty()) holders[*v].push_back(m);
  std::optional<std::string> majority;
  for (const auto& [value, ms] : holders)
    if (static_cast<int>(ms.size()) >= quorum(members_)) majority = value;

  auto event = [&](EventKind kind, const std::string& value) {
    Event e;
    e.kind = kind;
    e.t_ns = change.t_ns;
    e.src_ns = change.src_ns;
    e.source = "lock";
    e.lock = lock_;
    e.lock_key = lock_;
    const redis_detail::LockValue lv = redis_detail::parse_lock_value(value);
    e.token = lv.token;
    e.lease_id = lv.owner;
    return e;
  };
  std::vector<Event> out;
  if (held_ && majority != held_) {
    Event e = event(EventKind::kLockDelete, *held_);
    // The issuer's word, as redis gave it for the master that took the holding below a majority.
    e.detail = change.kind == EventKind::kLockDelete ? change.detail
                                                     : "overwritten: a SET on member " + std::to_string(member) +
                                                           " replaced the holding below a majority";
    out.push_back(std::move(e));
    held_.reset();
  }
  if (majority && !held_) {
    Event e = event(EventKind::kLockGrant, *majority);
    std::string who;
    for (int m : holders[*majority]) who += (who.empty() ? "" : ", ") + std::to_string(m);
    e.detail = "granted by a majority: members " + who + " of " + std::to_string(members_);
    out.push_back(std::move(e));
    held_ = majority;
  }
  return out;
}

RedlockWatch::RedlockWatch(const std::vector<redis_detail::Endpoint>& masters, const std::string& lock,
                           std::function<void(Event)> sink)
    : tally_(static_cast<int>(masters.size()), lock), sink_(std::move(sink)) {
  try {
    for (std::size_t i = 0; i < masters.size(); ++i) {
      const int member = static_cast<int>(i) + 1;
      watches_.push_back(std::make_unique<redis_detail::RedisWatch>(
          masters[i], lock, [this, member](Event e) { on_member(member, std::move(e)); }, true));
    }
  } catch (...) {
    stop();
    throw;
  }
}

RedlockWatch::~RedlockWatch() { stop(); }

void RedlockWatch::stop() {
  for (auto& w : watches_) w->stop();
}

void RedlockWatch::restarted_fresh() {
  for (auto& w : watches_) w->restarted_fresh();
}

void RedlockWatch::on_member(int member, Event e) {
  std::lock_guard lock(mu_);
  spdlog::debug("redlock member {}: {} of {} ({})", member, kind_name(e.kind), e.lock,
                e.detail.empty() ? e.line : e.detail);
  for (auto& out : tally_.on_member(member, e)) sink_(std::move(out));
}

}  // namespace fencecheck::locks::redlock_detail
