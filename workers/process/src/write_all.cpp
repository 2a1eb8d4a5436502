// write_all.h: write(2) until every byte is written.
#include "fencecheck/process/write_all.h"

#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace fencecheck::process {

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace fencecheck::process
