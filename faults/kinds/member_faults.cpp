#include "member_faults.h"

namespace fencecheck::faults::detail {

std::string members_name(const std::vector<MemberRef>& members) {
  std::string out = members.size() == 1 ? "lock-service member " : "lock-service members ";
  for (std::size_t i = 0; i < members.size(); ++i) out += (i ? ", " : "") + std::to_string(members[i].index);
  return out;
}

MembersFault::MembersFault(std::string_view kind, std::string target, std::string why,
                           std::vector<std::unique_ptr<Fault>> parts)
    : kind_(kind), target_(std::move(target)), why_(std::move(why)), parts_(std::move(parts)) {}

MembersFault::~MembersFault() { (void)heal(); }

void MembersFault::inject() {
  for (auto& p : parts_) {
    try {
      p->inject();
    } catch (const std::exception& err) {
      throw FaultError(undo_failed_inject(target_ + ": " + err.what()));
    }
  }
}

bool MembersFault::heal() noexcept {
  std::string failed;
  for (auto& p : parts_)
    if (!p->heal()) failed += (failed.empty() ? "" : "; ") + p->target() + ": " + p->heal_failure();
  return failed.empty() ? healed() : not_healed(failed);
}

bool MembersFault::active() const {
  for (const auto& p : parts_)
    if (p->active()) return true;
  return false;
}

nlohmann::json MembersFault::ledger_record() const {
  nlohmann::json parts = nlohmann::json::array();
  for (const auto& p : parts_) parts.push_back(p->ledger_record());
  return {{"target", target_}, {"why", why_}, {"parts", std::move(parts)}};
}

}  // namespace fencecheck::faults::detail
