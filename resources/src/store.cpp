#include "fencecheck/resources/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>

#include "text.h"
#include "fencecheck/proto/chunk.h"

namespace fencecheck {
namespace {

using detail::shown;

namespace fs = std::filesystem;

constexpr std::string_view kMagic = "fcstlog1";
constexpr std::uint8_t kRecordVersion = 1;
constexpr std::size_t kRecordHeaderBytes = 8;  // u32 payload_len, u32 crc32
// version + seq + token + segment + chunk + key_len + client_len + data_len
constexpr std::size_t kPayloadFixedBytes = 1 + 8 * 4 + 2 + 2 + 4;
constexpr std::size_t kMaxPayloadBytes = kPayloadFixedBytes + kMaxKeyBytes + kMaxClientBytes + kMaxChunkBytes;

constexpr std::array<std::pair<FencingMode, std::string_view>, 2> kModeNames{{
    {FencingMode::kPerKey, "per-key"},
    {FencingMode::kNone, "none"},
}};

std::string errno_text(int err) { return std::string(std::strerror(err)); }

[[noreturn]] void throw_io(const std::string& what, const fs::path& path, int err) {
  throw std::runtime_error("fencecheck-store: " + what + " " + path.string() + ": " + errno_text(err));
}

// Little-endian fixed-width encoding.
template <typename U>
void put_le(std::string& out, U v) {
  for (std::size_t i = 0; i < sizeof(U); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

template <typename U>
U get_le(std::string_view in, std::size_t at) {
  U v = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i) v |= static_cast<U>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return v;
}

void append_record(std::string& out, std::int64_t seq, const WriteRequest& r) {
  std::string payload;
  payload.reserve(kPayloadFixedBytes + r.key.size() + r.client.size() + r.bytes.size());
  payload.push_back(static_cast<char>(kRecordVersion));
  put_le(payload, static_cast<std::uint64_t>(seq));
  put_le(payload, static_cast<std::uint64_t>(r.token.value()));
  put_le(payload, static_cast<std::uint64_t>(r.segment));
  put_le(payload, static_cast<std::uint64_t>(r.chunk));
  put_le(payload, static_cast<std::uint16_t>(r.key.size()));
  payload += r.key;
  put_le(payload, static_cast<std::uint16_t>(r.client.size()));
  payload += r.client;
  put_le(payload, static_cast<std::uint32_t>(r.bytes.size()));
  payload += r.bytes;
  put_le(out, static_cast<std::uint32_t>(payload.size()));
  put_le(out, crc32(payload));
  out += payload;
}

struct DecodedRecord {
  std::int64_t seq = 0;
  WriteRequest request;
};

// Decodes one payload whose CRC already matched. Returns "" or what is wrong.
std::string decode_payload(std::string_view p, DecodedRecord& out) {
  if (p.size() < kPayloadFixedBytes) return "payload of " + std::to_string(p.size()) + " bytes is too short";
  if (static_cast<std::uint8_t>(p[0]) != kRecordVersion)
    return "unknown record version " + std::to_string(static_cast<unsigned>(static_cast<std::uint8_t>(p[0])));
  std::size_t at = 1;
  auto i64 = [&] {
    auto v = static_cast<std::int64_t>(get_le<std::uint64_t>(p, at));
    at += 8;
    return v;
  };
  out.seq = i64();
  out.request.token = FencingToken(i64());
  out.request.segment = i64();
  out.request.chunk = i64();
  auto str = [&](std::size_t len_bytes, std::string& s) {
    if (p.size() < at + len_bytes) return false;
    std::size_t len = len_bytes == 2 ? get_le<std::uint16_t>(p, at) : get_le<std::uint32_t>(p, at);
    at += len_bytes;
    if (p.size() < at + len) return false;
    s.assign(p.substr(at, len));
    at += len;
    return true;
  };
  if (!str(2, out.request.key) || !str(2, out.request.client) || !str(4, out.request.bytes))
    return "a length field runs past the end of the payload";
  if (at != p.size()) return std::to_string(p.size() - at) + " unexpected bytes after the data";
  if (out.seq < 1 || out.request.token.value() < 0 || out.request.segment < 0 || out.request.chunk < 0)
    return "negative seq, token, segment or chunk";
  if (auto why = name_problem("key", out.request.key, kMaxKeyBytes); !why.empty()) return why;
  if (auto why = name_problem("client", out.request.client, kMaxClientBytes); !why.empty()) return why;
  return "";
}

void validate(const WriteRequest& r) {
  if (auto why = name_problem("key", r.key, kMaxKeyBytes); !why.empty()) throw std::invalid_argument(why);
  if (auto why = name_problem("client", r.client, kMaxClientBytes); !why.empty()) throw std::invalid_argument(why);
  if (r.segment < 0) throw std::invalid_argument("segment " + std::to_string(r.segment) + " is negative");
  if (r.chunk < 0) throw std::invalid_argument("chunk " + std::to_string(r.chunk) + " is negative");
  if (r.token.value() < 0) throw std::invalid_argument("token " + r.token.str() + " is negative");
  if (r.bytes.empty()) throw std::invalid_argument("chunk bytes are empty: a chunk must carry at least one byte");
  if (r.bytes.size() > kMaxChunkBytes)
    throw std::invalid_argument("chunk is " + std::to_string(r.bytes.size()) + " bytes, over the store's limit of " +
                                std::to_string(kMaxChunkBytes));
}

// write(2) until done; "" or the error.
std::string write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return "write: " + errno_text(errno);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return "";
}

void sync_dir(const fs::path& dir) {
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) throw_io("cannot open directory", dir, errno);
  int rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  if (rc != 0) throw_io("cannot fsync directory", dir, err);
}

}  // namespace

std::string_view fencing_mode_name(FencingMode mode) {
  for (const auto& [m, n] : kModeNames)
    if (m == mode) return n;
  return "per-key";
}

std::optional<FencingMode> fencing_mode_from_name(std::string_view name) {
  for (const auto& [m, n] : kModeNames)
    if (n == name) return m;
  return std::nullopt;
}

std::vector<std::string_view> fencing_mode_names() {
  std::vector<std::string_view> out;
  for (const auto& [m, n] : kModeNames) out.push_back(n);
  return out;
}

std::string name_problem(std::string_view what, std::string_view value, std::size_t max_len) {
  const std::string w(what);
  if (value.empty()) return w + " is empty";
  if (value.size() > max_len)
    return w + " '" + shown(value) + "' is " + std::to_string(value.size()) + " bytes, over the " +
           std::to_string(max_len) + "-byte limit";
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (!is_safe_name(value.substr(i, 1), 1))
      return w + " '" + shown(value) + "' has a character outside [A-Za-z0-9_.-] at offset " + std::to_string(i);
  }
  return "";
}

FencedStore::FencedStore(std::filesystem::path data_dir, FencingMode mode, StoreOptions options)
    : data_dir_(std::move(data_dir)), mode_(mode), options_(std::move(options)) {}

std::unique_ptr<FencedStore> FencedStore::open(const std::filesystem::path& data_dir, FencingMode mode,
                                               StoreOptions options) {
  std::unique_ptr<FencedStore> store(new FencedStore(data_dir, mode, std::move(options)));
  std::error_code ec;
  fs::create_directories(data_dir, ec);
  if (ec) throw std::runtime_error("fencecheck-store: cannot create data directory " + data_dir.string() + ": " + ec.message());
  const fs::path path = store->log_path();
  const bool existed = fs::exists(path, ec);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw_io("cannot open log", path, errno);
  store->fd_ = fd;  // closed by ~FencedStore from here on, even if open() throws below
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      throw std::runtime_error("fencecheck-store: data directory " + data_dir.string() +
                               " is in use by another store (flock on " + path.string() + " is held)");
    throw_io("cannot lock log", path, errno);
  }
  if (!existed) sync_dir(data_dir);  // make the new file's directory entry durable
  {
    std::lock_guard lock(store->mu_);
    store->replay_locked();
  }
  store->flusher_ = std::thread(&FencedStore::flusher_loop, store.get());
  return store;
}

void FencedStore::replay_locked() {
  const fs::path path = log_path();
  std::string data;
  {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw_io("cannot stat log", path, errno);
    data.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < data.size()) {
      ssize_t n = ::pread(fd_, data.data() + got, data.size() - got, static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw_io("cannot read log", path, errno);
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    data.resize(got);
  }

  std::string problem;
  std::size_t keep = 0;
  if (data.size() < kMagic.size()) {
    if (kMagic.substr(0, data.size()) != data)
      throw std::runtime_error("fencecheck-store: " + path.string() + " is not a fencecheck-store log (bad magic)");
    // A new file, or one whose creation was cut short: (re)write the magic.
    if (!data.empty()) problem = "torn file header (" + std::to_string(data.size()) + " bytes)";
    if (::ftruncate(fd_, 0) != 0) throw_io("cannot truncate log", path, errno);
    if (::lseek(fd_, 0, SEEK_SET) < 0) throw_io("cannot seek log", path, errno);
    if (auto err = write_all(fd_, kMagic); !err.empty())
      throw std::runtime_error("fencecheck-store: cannot write log header " + path.string() + ": " + err);
    if (::fdatasync(fd_) != 0) throw_io("cannot fdatasync log", path, errno);
    recovery_.kept_bytes = kMagic.size();
    recovery_.truncated_bytes = data.size();
    recovery_.problem = problem;
    if (!problem.empty()) spdlog::warn("fencecheck-store: {}: {}; rewrote it", path.string(), problem);
    return;
  }
  if (std::string_view(data).substr(0, kMagic.size()) != kMagic)
    throw std::runtime_error("fencecheck-store: " + path.string() + " is not a fencecheck-store log (bad magic)");

  const std::string_view all(data);
  std::size_t off = kMagic.size();
  while (off < all.size()) {
    const std::size_t left = all.size() - off;
    if (left < kRecordHeaderBytes) {
      problem = "torn record header at offset " + std::to_string(off) + " (" + std::to_string(left) + " of 8 bytes)";
      break;
    }
    const std::uint32_t len = get_le<std::uint32_t>(all, off);
    const std::uint32_t stored_crc = get_le<std::uint32_t>(all, off + 4);
    if (len > kMaxPayloadBytes) {
      problem = "record at offset " + std::to_string(off) + " claims " + std::to_string(len) +
                " bytes, over the limit of " + std::to_string(kMaxPayloadBytes);
      break;
    }
    if (left - kRecordHeaderBytes < len) {
      problem = "torn record at offset " + std::to_string(off) + ": header says " + std::to_string(len) +
                " bytes, only " + std::to_string(left - kRecordHeaderBytes) + " present";
      break;
    }
    const std::string_view payload = all.substr(off + kRecordHeaderBytes, len);
    if (const std::uint32_t crc = crc32(payload); crc != stored_crc) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "stored %08x, computed %08x", stored_crc, crc);
      problem = "checksum mismatch in record at offset " + std::to_string(off) + " (" + buf + ")";
      break;
    }
    DecodedRecord rec;
    if (auto why = decode_payload(payload, rec); !why.empty()) {
      problem = "malformed record at offset " + std::to_string(off) + ": " + why;
      break;
    }
    if (rec.seq != last_seq_ + 1) {
      problem = "record at offset " + std::to_string(off) + " has seq " + std::to_string(rec.seq) + ", expected " +
                std::to_string(last_seq_ + 1);
      break;
    }
    apply_locked(rec.seq, rec.request);
    ++recovery_.records;
    off += kRecordHeaderBytes + len;
  }
  keep = off;
  if (!problem.empty()) {
    spdlog::warn("fencecheck-store: {}: {}; truncating the log from {} to {} bytes (kept {} complete records)",
                 path.string(), problem, all.size(), keep, recovery_.records);
    if (::ftruncate(fd_, static_cast<off_t>(keep)) != 0) throw_io("cannot truncate log", path, errno);
    if (::fdatasync(fd_) != 0) throw_io("cannot fdatasync log", path, errno);
  }
  if (::lseek(fd_, static_cast<off_t>(keep), SEEK_SET) < 0) throw_io("cannot seek log", path, errno);
  recovery_.kept_bytes = keep;
  recovery_.truncated_bytes = all.size() - keep;
  recovery_.problem = problem;
  durable_seq_ = last_seq_;
}

void FencedStore::apply_locked(std::int64_t seq, const WriteRequest& r) {
  auto& hw = high_water_[r.key];
  if (hw.seq == 0 || r.token.value() > hw.token) hw = HighWater{r.token.value(), seq};
  auto& slot = chunks_[SlotKey{r.key, r.segment, r.chunk}];
  slot = StoredChunk{r.key, r.segment, r.chunk, r.token.value(), r.client, seq, r.bytes};
  log_.push_back(AcceptedWrite{seq, r.key, r.segment, r.chunk, r.token.value(), r.client});
  last_seq_ = seq;
}

WriteResult FencedStore::write(const WriteRequest& r) {
  validate(r);
  WriteResult out;
  std::unique_lock lock(mu_);
  if (failed_ || closing_) {
    out.error = failed_ ? "store failed: " + failure_ : "store is closed";
    return out;
  }
  // The fencing decision, the high-water update and the append are one critical section.
  HighWater current;
  if (auto it = high_water_.find(r.key); it != high_water_.end()) current = it->second;
  bool fenced = false;
  switch (mode_) {
    case FencingMode::kPerKey:
      fenced = r.token.value() < current.token;
      break;
    case FencingMode::kNone:
      fenced = false;
      break;
  }
  if (fenced) {
    rejections_.push_back(RejectedWrite{r.key, r.segment, r.chunk, r.token.value(), r.client, current.token});
    ++rejected_;
    if (options_.after_decision) {
      lock.unlock();
      options_.after_decision(r, false, 0);
      lock.lock();
    }
    // Never cite a high-water mark that a crash could still take back.
    if (!wait_durable(lock, current.seq)) {
      out.error = "store failed before the high-water mark it would cite was durable: " + failure_;
      return out;
    }
    out.status = WriteStatus::kRejected;
    out.high_water = current.token;
    out.error = "token " + r.token.str() + " is below the high-water mark " + std::to_string(current.token) +
                " of key '" + r.key + "': a holder with a newer token has written (fenced)";
    return out;
  }
  const std::int64_t seq = last_seq_ + 1;
  append_record(pending_, seq, r);
  ++pending_records_;
  apply_locked(seq, r);
  ++accepted_;
  const std::int64_t high_water = high_water_[r.key].token;
  work_cv_.notify_one();
  if (options_.after_decision) {
    lock.unlock();
    options_.after_decision(r, true, seq);
    lock.lock();
  }
  if (!wait_durable(lock, seq)) {
    out.error = "store failed before the write was durable: " + failure_;
    return out;
  }
  out.status = WriteStatus::kAccepted;
  out.accepted = true;
  out.high_water = high_water;
  out.seq = seq;
  return out;
}

bool FencedStore::wait_durable(std::unique_lock<std::mutex>& lock, std::int64_t seq) const {
  durable_cv_.wait(lock, [&] { return durable_seq_ >= seq || failed_; });
  return durable_seq_ >= seq;
}

void FencedStore::flusher_loop() {
  std::string batch;
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return !pending_.empty() || closing_; });
    if (pending_.empty()) break;  // closing, and everything is flushed
    batch.clear();
    batch.swap(pending_);
    const std::int64_t upto = last_seq_;  // every seq <= upto is in batch or already on disk
    const std::int64_t records = pending_records_;
    pending_records_ = 0;
    lock.unlock();

    if (options_.before_sync) options_.before_sync(records);
    std::string err = write_all(fd_, batch);
    bool synced = false;
    if (err.empty()) {
      synced = true;
      if (::fdatasync(fd_) != 0) err = "fdatasync: " + errno_text(errno);
    }

    lock.lock();
    if (synced) ++fsyncs_;
    if (!err.empty()) {
      // After a failed fsync the page cache's state is unknowable (PostgreSQL's "fsyncgate"):
      // refuse everything from now on rather than acknowledge on top of it.
      failed_ = true;
      failure_ = err + " on " + log_path().string();
      pending_.clear();
      pending_records_ = 0;
      spdlog::error("fencecheck-store: {}; refusing every further write", failure_);
      durable_cv_.notify_all();
      break;
    }
    durable_seq_ = upto;
    durable_cv_.notify_all();
  }
}

ReadBack FencedStore::readback() const {
  ReadBack rb;
  rb.resource = "store";
  rb.fencing = std::string(fencing_mode_name(mode_));
  std::unique_lock lock(mu_);
  rb.chunks.reserve(chunks_.size());
  for (const auto& [slot, c] : chunks_) rb.chunks.push_back(c);
  rb.log = log_;
  rb.rejections = rejections_;
  for (const auto& [key, hw] : high_water_) rb.high_water[key] = hw.token;
  wait_durable(lock, last_seq_);
  return rb;
}

std::map<std::string, std::int64_t> FencedStore::high_water() const {
  std::map<std::string, std::int64_t> out;
  std::lock_guard lock(mu_);
  for (const auto& [key, hw] : high_water_) out[key] = hw.token;
  return out;
}

StoreStats FencedStore::stats() const {
  std::lock_guard lock(mu_);
  return StoreStats{accepted_, rejected_, fsyncs_, last_seq_, durable_seq_, failed_, failure_};
}

void FencedStore::close() noexcept {
  std::lock_guard close_lock(close_mu_);
  {
    std::lock_guard lock(mu_);
    closing_ = true;
    work_cv_.notify_all();
  }
  if (flusher_.joinable()) flusher_.join();
  if (fd_ >= 0) {
    ::close(fd_);  // also releases the flock
    fd_ = -1;
  }
  std::lock_guard lock(mu_);
  durable_cv_.notify_all();
}

FencedStore::~FencedStore() { close(); }

}  // namespace fencecheck
