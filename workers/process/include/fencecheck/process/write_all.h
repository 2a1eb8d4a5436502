// fencecheck — write(2) until every byte is written: the one write_all in fencecheck (the history
// file's writer, harness/check; the fault ledger, faults/). Part of fencecheck_process.
#pragma once

#include <string_view>

namespace fencecheck::process {

/// Writes all of `bytes` to `fd`, calling write(2) again after a short write and after EINTR.
/// True when every byte was written; false on any other error, with errno set by write(2) (some
/// bytes may have been written). No fsync. Thread-safe as write(2) is (one call's bytes may
/// interleave with another writer's on the same descriptor).
[[nodiscard]] bool write_all(int fd, std::string_view bytes);

}  // namespace fencecheck::process
