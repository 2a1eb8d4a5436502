// PLACEHOLDER until the postgres kind lands.
#include <stdexcept>

#include "../kinds/kinds.h"

namespace fencecheck::detail {
std::unique_ptr<ResourceWriter> make_postgres_writer(const nlohmann::json&, std::chrono::milliseconds) {
  throw std::invalid_argument("resource kind postgres is not implemented yet");
}
}  // namespace fencecheck::detail
