#include "fencecheck/faults/relay.h"

#include <sched.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <future>
#include <map>
#include <optional>
#include <stdexcept>

#include <boost/asio.hpp>

namespace fencecheck::faults {
namespace asio = boost::asio;
using asio::ip::tcp;

std::vector<RelayRoute> plan_relays(const std::vector<RelayRequest>& requests) {
  std::vector<RelayRoute> plan;
  for (const auto& r : requests) {
    if (r.lab_address.empty()) throw std::invalid_argument("relay " + r.name + ": no lab address");
    if (r.target.port == 0) throw std::invalid_argument("relay " + r.name + ": target " + r.target.text() + " has no port");
    if (find_relay(plan, r.lab_address, r.target)) continue;
    auto taken = [&](std::uint16_t port) {
      for (const auto& p : plan)
        if (p.listen.host == r.lab_address && p.listen.port == port) return true;
      return false;
    };
    std::uint16_t port = r.target.port;
    while (taken(port)) port = port == 65535 ? 1024 : static_cast<std::uint16_t>(port + 1);
    plan.push_back({r.name, {r.lab_address, port}, r.target});
  }
  return plan;
}

const RelayRoute* find_relay(const std::vector<RelayRoute>& plan, const std::string& lab_address, const NetAddress& target) {
  for (const auto& p : plan)
    if (p.listen.host == lab_address && p.target == target) return &p;
  return nullptr;
}

namespace {

constexpr std::size_t kBuffer = 16 * 1024;

struct Counters {
  std::atomic<std::uint64_t> accepted{0}, connected{0};
};

/// One relayed connection: `down` (the worker's, accepted in the hub) and `up` (ours, to the
/// target, opened by the relay thread in the original namespace).
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket down, asio::io_context& io, Counters& counters)
      : down_(std::move(down)), up_(io), counters_(counters) {}

  void start(const tcp::resolver::results_type& target) {
    asio::async_connect(up_, target, [self = shared_from_this()](const boost::system::error_code& ec, const tcp::endpoint&) {
      if (ec) return self->close();
      self->counters_.connected.fetch_add(1, std::memory_order_relaxed);
      self->pump(self->down_, self->up_, self->to_up_, 0);
      self->pump(self->up_, self->down_, self->to_down_, 1);
    });
  }

  void close() {
    boost::system::error_code ignored;
    down_.close(ignored);
    up_.close(ignored);
  }

 private:
  void pump(tcp::socket& from, tcp::socket& to, std::array<char, kBuffer>& buf, int dir) {
    from.async_read_some(asio::buffer(buf), [self = shared_from_this(), &from, &to, &buf, dir](
                                                const boost::system::error_code& ec, std::size_t n) {
      if (n > 0) {
        asio::async_write(to, asio::buffer(buf.data(), n),
                          [self, &from, &to, &buf, dir](const boost::system::error_code& wec, std::size_t) {
                            if (wec) return self->close();
                            self->pump(from, to, buf, dir);
                          });
        return;
      }
      if (ec == asio::error::eof) {  // a half-close: pass it on, keep the other direction
        boost::system::error_code ignored;
        to.shutdown(tcp::socket::shutdown_send, ignored);
        self->ended_[dir] = true;
        if (self->ended_[0] && self->ended_[1]) self->close();
        return;
      }
      self->close();  // a reset or our own close
    });
  }

  tcp::socket down_, up_;
  std::array<char, kBuffer> to_up_{}, to_down_{};
  bool ended_[2] = {false, false};
  Counters& counters_;
};

}  // namespace

struct TcpRelay::Impl {
  // Declared so that they are destroyed in the right order: the thread (joined by stop()), the
  // listeners, then the io_context (and with it every session's handlers and sockets), the counters
  // the sessions point at last.
  std::vector<std::unique_ptr<Counters>> counters;
  std::optional<asio::io_context> io{std::in_place};
  std::vector<tcp::resolver::results_type> targets;
  std::vector<tcp::acceptor> acceptors;
  std::thread thread;

  void accept(std::size_t i) {
    acceptors[i].async_accept([this, i](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptors[i].is_open()) return;
      if (!ec) {
        counters[i]->accepted.fetch_add(1, std::memory_order_relaxed);
        std::make_shared<Session>(std::move(socket), *io, *counters[i])->start(targets[i]);
      }
      accept(i);
    });
  }
};

TcpRelay::TcpRelay(std::vector<RelayRoute> routes, int upstream_netns_fd)
    : routes_(std::move(routes)), impl_(std::make_unique<Impl>()) {
  // The listeners: made here, so they live in the caller's namespace (the hub).
  for (const auto& r : routes_) {
    impl_->counters.push_back(std::make_unique<Counters>());
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(r.listen.host, ec);
    if (ec) throw std::runtime_error("relay " + r.name + ": " + r.listen.host + " is not an IP address");
    tcp::acceptor a(*impl_->io);
    const tcp::endpoint at(addr, r.listen.port);
    a.open(at.protocol(), ec);
    if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) a.bind(at, ec);
    if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw std::runtime_error("relay " + r.name + ": cannot listen on " + r.listen.text() + ": " + ec.message());
    impl_->acceptors.push_back(std::move(a));
  }
  // The thread: enters the original namespace, resolves there, then serves.
  std::promise<void> ready;
  auto started = ready.get_future();
  impl_->thread = std::thread([this, upstream_netns_fd, &ready] {
    try {
      if (upstream_netns_fd >= 0 && ::setns(upstream_netns_fd, CLONE_NEWNET) != 0)
        throw std::runtime_error(std::string("relay: setns to the harness's own network namespace: ") + std::strerror(errno));
      tcp::resolver resolver(*impl_->io);
      for (const auto& r : routes_) {
        boost::system::error_code ec;
        auto found = resolver.resolve(r.target.host, std::to_string(r.target.port), ec);
        if (ec || found.empty())
          throw std::runtime_error("relay " + r.name + ": cannot resolve " + r.target.host + ": " + ec.message());
        impl_->targets.push_back(std::move(found));
      }
      for (std::size_t i = 0; i < routes_.size(); ++i) impl_->accept(i);
      ready.set_value();
    } catch (...) {
      ready.set_exception(std::current_exception());
      return;
    }
    impl_->io->run();
  });
  try {
    started.get();
  } catch (...) {
    impl_->thread.join();
    throw;
  }
}

TcpRelay::~TcpRelay() { stop(); }

void TcpRelay::stop() noexcept {
  if (!impl_->thread.joinable()) return;
  impl_->io->stop();
  impl_->thread.join();
  // Every session lives in a handler the io_context holds: destroying it closes both sides of
  // every relayed connection.
  impl_->acceptors.clear();
  impl_->targets.clear();
  impl_->io.reset();
}

std::uint64_t TcpRelay::accepted(std::size_t index) const {
  return index < impl_->counters.size() ? impl_->counters[index]->accepted.load() : 0;
}
std::uint64_t TcpRelay::connected(std::size_t index) const {
  return index < impl_->counters.size() ? impl_->counters[index]->connected.load() : 0;
}

}  // namespace fencecheck::faults
