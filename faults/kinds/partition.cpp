// Fault kind partition: drop packets between the target worker's network namespace and the lock
// service, the resource, or everything (faults/partition.h). Parameters: from (lock-service,
// resource or full; required), direction (both, requests or replies; default both). Needs
// `network: namespaces`.
#include "../src/healers.h"
#include "fencecheck/faults/partition.h"
#include "kinds.h"

namespace fencecheck::faults::detail {
namespace {

const std::vector<std::string_view> kFroms{"lock-service", "resource", "full"};
const std::vector<std::string_view> kDirections{"both", "requests", "replies"};

class Partition final : public FaultKind {
 public:
  std::string_view name() const override { return "partition"; }
  std::vector<std::string_view> fields() const override { return {"from", "direction"}; }
  nlohmann::json parse(const KindFields& f) const override {
    const auto from = kFroms[f.choice("from", kFroms, "partition source")];
    const auto direction = f.has("direction") ? kDirections[f.choice("direction", kDirections, "partition direction")]
                                              : kDirections[0];
    return {{"from", std::string(from)}, {"direction", std::string(direction)}};
  }
  bool needs_network_namespaces() const override { return true; }
  std::unique_ptr<Fault> make(const nlohmann::json& params, const FaultContext& ctx) const override {
    using Direction = PartitionSpec::Direction;
    const std::string direction = params.value("direction", "both");
    const Direction d = direction == "requests" ? Direction::kRequests
                        : direction == "replies" ? Direction::kReplies
                                                 : Direction::kBoth;
    const std::string from = params.value("from", "full");
    const PartitionSpec spec = from == "full" ? PartitionSpec::full(d) : PartitionSpec::from(from, d);
    return std::make_unique<PartitionFault>(ctx.need_lab(name()), ctx.target, spec);
  }
  std::string heal_record(const nlohmann::json& entry) const override {
    return heal_partition_record(entry, healer_runner());
  }
};

}  // namespace

const FaultKind& partition_kind() {
  static const Partition k;
  return k;
}

}  // namespace fencecheck::faults::detail
