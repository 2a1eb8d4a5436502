#include "fencecheck/http/client.h"

#include <array>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace fencecheck::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using std::chrono::milliseconds;

milliseconds at_least_1ms(milliseconds d) { return d.count() < 1 ? milliseconds(1) : d; }

/// One exchange, every step an asynchronous operation run by a private io_context on the calling
/// thread. Async (not blocking) calls only so that tcp_stream's per-operation timeouts and a
/// cancellation posted from another thread can interrupt any step.
class Exchange {
 public:
  Exchange(const Request& request, const Timeouts& timeouts, const BodySink& sink)
      : request_(request), timeouts_(timeouts), sink_(sink) {}

  Reply run(const Endpoint& endpoint, const std::stop_token& stop) {
    const auto t0 = std::chrono::steady_clock::now();
    if (stop.stop_requested()) {
      reply_.failure = Failure::kCanceled;
      reply_.detail = "stop requested before the call";
      return std::move(reply_);
    }
    std::vector<tcp::endpoint> targets;
    if (!resolve(endpoint, targets)) return std::move(reply_);
    {
      // Runs on the requesting thread (or right here when the token is already stopped); the
      // cancellation itself runs on this thread, between the exchange's own handlers.
      std::stop_callback on_stop(stop, [this] { asio::post(io_, [this] { cancel(); }); });
      connect(std::move(targets));
      io_.run();
    }
    reply_.elapsed = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0);
    return std::move(reply_);
  }

 private:
  bool resolve(const Endpoint& endpoint, std::vector<tcp::endpoint>& out) {
    const auto port = static_cast<unsigned short>(endpoint.port);
    beast::error_code ec;
    auto address = asio::ip::make_address(endpoint.host, ec);
    if (!ec) {
      out.emplace_back(address, port);
      return true;
    }
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(endpoint.host, std::to_string(endpoint.port), ec);
    if (ec) {
      fail(Failure::kConnection, "cannot resolve " + endpoint.host + ": " + ec.message());
      return false;
    }
    for (const auto& r : results) out.push_back(r.endpoint());
    return true;
  }

  void connect(std::vector<tcp::endpoint> targets) {
    targets_ = std::move(targets);
    stream_.expires_after(at_least_1ms(timeouts_.connect));
    stream_.async_connect(targets_, [this](beast::error_code ec, const tcp::endpoint&) {
      if (done_) return;
      if (ec) return fail(Failure::kConnection, why(ec, timeouts_.connect, "no connection"));
      send();
    });
  }

  void send() {
    out_.version(11);
    out_.method_string(request_.method);
    out_.target(request_.target);
    out_.set(bhttp::field::host, host_header());
    out_.set(bhttp::field::connection, "close");
    if (!request_.content_type.empty()) out_.set(bhttp::field::content_type, request_.content_type);
    for (const auto& [name, value] : request_.headers) out_.insert(name, value);
    out_.body() = request_.body;
    if (!request_.body.empty() || request_.method != "GET") out_.prepare_payload();
    stream_.expires_after(at_least_1ms(timeouts_.write));
    bhttp::async_write(stream_, out_, [this](beast::error_code ec, std::size_t) {
      if (done_) return;
      if (ec) return fail(Failure::kWrite, why(ec, timeouts_.write, "request not sent"));
      in_.body_limit(boost::none);  // a watch streams for as long as it lasts
      read();
    });
  }

  // Reads the reply one receive at a time, each with its own `read` bound (as a socket timeout
  // would: a reply may take any time while bytes keep coming), handing body bytes over as they
  // arrive. A bound that passed while the process was stopped (SIGSTOP) does not hide bytes that
  // arrived meanwhile: the socket's completion runs before the timer's.
  void read() {
    in_.get().body().data = piece_.data();
    in_.get().body().size = piece_.size();
    stream_.expires_after(at_least_1ms(timeouts_.read));
    bhttp::async_read_some(stream_, buffer_, in_, [this](beast::error_code ec, std::size_t) {
      if (done_) return;
      if (ec == bhttp::error::need_buffer) ec = {};  // piece_ is full: handed over below
      if (in_.is_header_done() && reply_.status == 0) take_head();
      const std::size_t n = piece_.size() - in_.get().body().size;
      if (n > 0 && !deliver(std::string_view(piece_.data(), n))) return;
      if (ec) return fail_read(ec);
      if (in_.is_done()) return finish();
      read();
    });
  }

  // Copies the status and the header fields once the head is parsed (before any body byte).
  void take_head() {
    reply_.status = in_.get().result_int();
    for (const auto& field : in_.get())
      reply_.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }

  bool deliver(std::string_view piece) {
    if (!sink_) {
      reply_.body.append(piece);
      return true;
    }
    if (sink_(reply_.status, piece)) return true;
    fail(Failure::kCanceled, "the body sink stopped the read");
    return false;
  }

  void fail_read(const beast::error_code& ec) {
    if (ec == beast::error::timeout) return fail(Failure::kReadTimeout, why(ec, timeouts_.read, "no reply"));
    fail(Failure::kRead, why(ec, timeouts_.read, "no reply"));
  }

  void cancel() {
    if (done_) return;
    fail(Failure::kCanceled, "stop requested");
  }

  void finish() {
    done_ = true;
    close();
  }

  void fail(Failure failure, std::string detail) {
    if (done_) return;
    done_ = true;
    reply_.failure = failure;
    reply_.detail = std::move(detail);
    close();  // completes any pending operation at once (operation_aborted), so io_.run() returns
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  /// The cause in words: "<what> within N ms" for a timeout, else the system's message.
  static std::string why(const beast::error_code& ec, milliseconds bound, const char* what) {
    if (ec == beast::error::timeout)
      return std::string(what) + " within " + std::to_string(at_least_1ms(bound).count()) + " ms";
    return ec.message();
  }

  [[nodiscard]] std::string host_header() const {
    const auto& e = targets_.front();
    const std::string host = e.address().is_v6() ? "[" + e.address().to_string() + "]" : e.address().to_string();
    return host + ":" + std::to_string(e.port());
  }

  const Request& request_;
  const Timeouts& timeouts_;
  const BodySink& sink_;
  asio::io_context io_{1};
  beast::tcp_stream stream_{io_};
  std::vector<tcp::endpoint> targets_;
  bhttp::request<bhttp::string_body> out_;
  beast::flat_buffer buffer_;
  bhttp::response_parser<bhttp::buffer_body> in_;
  std::array<char, 16 * 1024> piece_{};
  Reply reply_;
  /// Set by the first of finish() and fail(): a cancellation can race with an operation's own
  /// completion, and every handler after the first ending returns without a word.
  bool done_ = false;
};

}  // namespace

std::string_view failure_name(Failure failure) {
  switch (failure) {
    case Failure::kNone: return "";
    case Failure::kConnection: return "Connection";
    case Failure::kWrite: return "Write";
    case Failure::kReadTimeout: return "Read timeout";
    case Failure::kRead: return "Read";
    case Failure::kCanceled: return "Canceled";
  }
  return "unknown failure";
}

std::optional<std::string> Reply::header(std::string_view name) const {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  auto same = [&](std::string_view a) {
    if (a.size() != name.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (lower(a[i]) != lower(name[i])) return false;
    return true;
  };
  std::optional<std::string> out;
  for (const auto& [n, v] : headers) {
    if (!same(n)) continue;
    if (out) {
      *out += ", ";
      *out += v;
    } else {
      out = v;
    }
  }
  return out;
}

std::string Reply::error_text() const {
  if (failure == Failure::kNone) return "";
  return std::string(failure_name(failure)) + " (" + detail + ")";
}

Reply exchange(const Endpoint& endpoint, const Request& request, const Timeouts& timeouts, std::stop_token stop,
               const BodySink& sink) {
  Exchange x(request, timeouts, sink);
  return x.run(endpoint, stop);
}

}  // namespace fencecheck::http
