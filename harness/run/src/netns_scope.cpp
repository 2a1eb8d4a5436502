#include "fencecheck/harness/netns_scope.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <stdexcept>

namespace fencecheck::harness {

NetnsScope::NetnsScope(const std::string& name) : name_(name) {
  const std::string path = "/var/run/netns/" + name;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open network namespace " + name + " (" + path + "): " + std::strerror(errno));
  try {
    enter(fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

NetnsScope::NetnsScope(int netns_fd, std::string label) : name_(std::move(label)) { enter(netns_fd); }

void NetnsScope::enter(int fd) {
  saved_fd_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (saved_fd_ < 0) throw std::runtime_error(std::string("cannot open this thread's network namespace: ") + std::strerror(errno));
  if (::setns(fd, CLONE_NEWNET) != 0) {
    int err = errno;
    ::close(saved_fd_);
    saved_fd_ = -1;
    throw std::runtime_error("cannot enter network namespace " + name_ + ": " + std::strerror(err));
  }
}

NetnsScope::~NetnsScope() {
  if (saved_fd_ < 0) return;
  if (::setns(saved_fd_, CLONE_NEWNET) != 0)
    std::cerr << "fencecheck: cannot leave network namespace " << name_ << ": " << std::strerror(errno) << "\n";
  ::close(saved_fd_);
}

}  // namespace fencecheck::harness
