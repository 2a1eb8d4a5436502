// The resource kinds registered by name (resource_kind.h). A constant table rather than
// self-registering statics: a static library drops an object file nothing refers to, and with it
// the kind.
#include <array>

#include "kinds.h"

namespace fencecheck::resources {
namespace {

using Row = const ResourceKind& (*)();
constexpr std::array<Row, 3> kKinds{&detail::store_kind, &detail::postgres_kind, &detail::http_kind};

}  // namespace

const ResourceKind* find_resource_kind(std::string_view name) {
  for (Row row : kKinds)
    if (row().name() == name) return &row();
  return nullptr;
}

std::vector<std::string_view> resource_kind_names() {
  std::vector<std::string_view> out;
  for (Row row : kKinds) out.push_back(row().name());
  return out;
}

}  // namespace fencecheck::resources
