// PLACEHOLDER until the http kind lands.
#include <stdexcept>

#include "../kinds/kinds.h"

namespace fencecheck::detail {
std::unique_ptr<ResourceWriter> make_http_writer(const nlohmann::json&, std::chrono::milliseconds) {
  throw std::invalid_argument("resource kind http is not implemented yet");
}
}  // namespace fencecheck::detail
