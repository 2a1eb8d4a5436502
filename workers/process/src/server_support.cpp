// server_support.h: helpers shared by the embedded servers.
#include "fencecheck/process/server_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace fencecheck::process {

int free_tcp_port(const std::string& host) {
  const bool v6 = host.find(':') != std::string::npos;
  const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket(): ") + std::strerror(errno));
  sockaddr_storage ss{};
  socklen_t len = 0;
  int ok = 0;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    ok = ::inet_pton(AF_INET6, host.c_str(), &a->sin6_addr);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    ok = ::inet_pton(AF_INET, host.c_str(), &a->sin_addr);
    len = sizeof *a;
  }
  if (ok != 1) {
    ::close(fd);
    throw std::runtime_error(std::string("not an IPv") + (v6 ? "6" : "4") + " address: " + host);
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error("binding a free port on " + host + ": " + std::strerror(err));
  }
  ::close(fd);
  return ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

std::string read_text(const std::filesystem::path& file, std::uintmax_t from) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return {};
  if (from > 0) in.seekg(static_cast<std::streamoff>(from));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tail_text(std::string_view text, std::size_t max_lines, std::size_t max_bytes) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  std::size_t start = text.size();
  std::size_t lines = 0;
  while (lines < max_lines && start > 0) {
    const std::size_t nl = text.rfind('\n', start - 1);
    ++lines;
    if (nl == std::string_view::npos) {
      start = 0;
      break;
    }
    start = nl + (lines < max_lines ? 0 : 1);
  }
  if (max_lines == 0) start = text.size();
  if (text.size() - start > max_bytes) start = text.size() - max_bytes;
  if (start < text.size() && text[start] == '\n') ++start;
  return (start > 0 ? "..." : "") + std::string(text.substr(start));
}

std::string start_failure(const std::string& what, bool exited, const std::pair<std::string, std::string>& ready,
                          std::chrono::milliseconds timeout, const std::filesystem::path& log,
                          const std::string& log_text) {
  return what + " " +
         (exited ? "exited before it " + ready.first
                 : "did not " + ready.second + " within " + std::to_string(timeout.count()) + " ms; stopped it") +
         ". " + log.string() + ":\n" + tail_text(log_text);
}

bool port_was_taken(const std::string& log_text) {
  return log_text.find("Address already in use") != std::string::npos ||
         log_text.find("address already in use") != std::string::npos ||
         log_text.find("could not bind") != std::string::npos;
}

bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

bool wait_process_gone(pid_t pid, std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!process_gone(pid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace fencecheck::process
