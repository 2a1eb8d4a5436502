// PLACEHOLDER until the http kind lands: it is registered but refuses to open.
#include <stdexcept>

#include "kinds.h"

namespace fencecheck::resources::detail {
namespace {
class Kind final : public ResourceKind {
 public:
  std::string_view name() const override { return "http"; }
  std::vector<std::string_view> fields() const override { return {}; }
  nlohmann::json parse(const ResourceFields& f) const override { f.fail("", "resource kind http is not implemented yet"); }
  bool embedded(const nlohmann::json&) const override { return true; }
  Evidence evidence(const nlohmann::json&) const override { return {}; }
  std::string design(const nlohmann::json&) const override { return "http"; }
  std::unique_ptr<ResourceInstance> open(const nlohmann::json&, const ResourceRunContext&) const override {
    throw ResourceUnavailable("resource kind http is not implemented yet");
  }
};
}  // namespace
const ResourceKind& http_kind() {
  static const Kind kind;
  return kind;
}
}  // namespace fencecheck::resources::detail
