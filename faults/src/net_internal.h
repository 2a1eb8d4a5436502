// Internal: what the network faults share: reading `ip`/`tc` failures.
#pragma once

#include <string>
#include <string_view>

#include "fencecheck/faults/command.h"

namespace fencecheck::faults::detail {

/// True when stderr contains text.
inline bool says(const CommandError& e, std::string_view text) {
  return e.stderr_text().find(text) != std::string::npos;
}

/// True when a delete failed because the thing is already gone: the namespace, the link, the
/// clsact qdisc, the filter or the root qdisc (messages of iproute2 6.x and the kernel's extack).
inline bool already_gone(const CommandError& e) {
  for (const char* text : {"Cannot open network namespace", "Cannot find device", "Cannot find specified filter chain",
                           "Filter with specified priority/protocol not found", "Parent Qdisc doesn't exist",
                           "Cannot delete qdisc with handle of zero", "No such file or directory",
                           "Cannot find specified qdisc", "Specified filter handle not found", "Invalid handle"})
    if (says(e, text)) return true;
  return false;
}

}  // namespace fencecheck::faults::detail
