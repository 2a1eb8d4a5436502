// Internal: the ledger healer of each built-in fault kind, listed in one table (ledger.cpp) so
// that `fencecheck cleanup` knows every kind without static-initialisation tricks.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace fencecheck::faults::detail {

std::string heal_sigstop_record(const nlohmann::json& entry);

}  // namespace fencecheck::faults::detail
