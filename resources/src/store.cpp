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
// The payload's first byte: the record type (type 1 was the "version" byte of the first format).
constexpr std::uint8_t kChunkRecord = 1;
constexpr std::uint8_t kCounterRecord = 2;
constexpr std::uint8_t kEffectRecord = 3;
constexpr std::size_t kRecordHeaderBytes = 8;  // u32 payload_len, u32 crc32
// type + seq + token + segment + chunk + key_len + client_len + data_len
constexpr std::size_t kPayloadFixedBytes = 1 + 8 * 4 + 2 + 2 + 4;
// type + seq + token + value + key_len + client_len
constexpr std::size_t kCounterFixedBytes = 1 + 8 * 3 + 2 + 2;
// type + seq + token + mode + applied + key_len + client_len + id_len
constexpr std::size_t kEffectFixedBytes = 1 + 8 * 2 + 1 + 1 + 2 + 2 + 2;
constexpr std::size_t kMaxPayloadBytes = kPayloadFixedBytes + kMaxKeyBytes + kMaxClientBytes + kMaxChunkBytes;

constexpr std::array<std::pair<FencingMode, std::string_view>, 4> kModeNames{{
    {FencingMode::kPerKey, "per-key"},
    {FencingMode::kNone, "none"},
    {FencingMode::kGlobal, "global"},
    {FencingMode::kCheckThenWrite, "check-then-write"},
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

void seal(std::string& out, const std::string& payload) {
  put_le(out, static_cast<std::uint32_t>(payload.size()));
  put_le(out, crc32(payload));
  out += payload;
}

void put_str16(std::string& payload, const std::string& s) {
  put_le(payload, static_cast<std::uint16_t>(s.size()));
  payload += s;
}

void append_record(std::string& out, std::int64_t seq, const WriteRequest& r) {
  std::string payload;
  payload.reserve(kPayloadFixedBytes + r.key.size() + r.client.size() + r.bytes.size());
  payload.push_back(static_cast<char>(kChunkRecord));
  put_le(payload, static_cast<std::uint64_t>(seq));
  put_le(payload, static_cast<std::uint64_t>(r.token.value()));
  put_le(payload, static_cast<std::uint64_t>(r.segment));
  put_le(payload, static_cast<std::uint64_t>(r.chunk));
  put_str16(payload, r.key);
  put_str16(payload, r.client);
  put_le(payload, static_cast<std::uint32_t>(r.bytes.size()));
  payload += r.bytes;
  seal(out, payload);
}

void append_counter_record(std::string& out, std::int64_t seq, const CounterWriteRequest& r) {
  std::string payload;
  payload.reserve(kCounterFixedBytes + r.key.size() + r.client.size());
  payload.push_back(static_cast<char>(kCounterRecord));
  put_le(payload, static_cast<std::uint64_t>(seq));
  put_le(payload, static_cast<std::uint64_t>(r.token.value()));
  put_le(payload, static_cast<std::uint64_t>(r.value));
  put_str16(payload, r.key);
  put_str16(payload, r.client);
  seal(out, payload);
}

std::uint8_t mode_byte(EffectMode m) {
  switch (m) {
    case EffectMode::kFenced: return 0;
    case EffectMode::kUnfenced: return 1;
    case EffectMode::kIdempotent: return 2;
  }
  return 0;
}

void append_effect_record(std::string& out, const StoreEffectEntry& e) {
  std::string payload;
  payload.reserve(kEffectFixedBytes + e.key.size() + e.client.size() + e.id.size());
  payload.push_back(static_cast<char>(kEffectRecord));
  put_le(payload, static_cast<std::uint64_t>(e.seq));
  put_le(payload, static_cast<std::uint64_t>(e.token));
  payload.push_back(static_cast<char>(mode_byte(e.mode)));
  payload.push_back(static_cast<char>(e.applied ? 1 : 0));
  put_str16(payload, e.key);
  put_str16(payload, e.client);
  put_str16(payload, e.id);
  seal(out, payload);
}

struct DecodedRecord {
  std::uint8_t type = 0;
  std::int64_t seq = 0;
  WriteRequest request;          // type 1
  CounterWriteRequest counter;   // type 2
  StoreEffectEntry effect;       // type 3
};

// Reads fields of one payload front to back; every read is bounds-checked.
class PayloadReader {
 public:
  explicit PayloadReader(std::string_view p) : p_(p) {}
  bool i64(std::int64_t& v) {
    if (p_.size() < at_ + 8) return false;
    v = static_cast<std::int64_t>(get_le<std::uint64_t>(p_, at_));
    at_ += 8;
    return true;
  }
  bool u8(std::uint8_t& v) {
    if (p_.size() < at_ + 1) return false;
    v = static_cast<std::uint8_t>(p_[at_]);
    at_ += 1;
    return true;
  }
  bool str(std::size_t len_bytes, std::string& s) {
    if (p_.size() < at_ + len_bytes) return false;
    std::size_t len = len_bytes == 2 ? get_le<std::uint16_t>(p_, at_) : get_le<std::uint32_t>(p_, at_);
    at_ += len_bytes;
    if (p_.size() < at_ + len) return false;
    s.assign(p_.substr(at_, len));
    at_ += len;
    return true;
  }
  [[nodiscard]] std::size_t left() const { return p_.size() - at_; }

 private:
  std::string_view p_;
  std::size_t at_ = 0;
};

// Decodes one payload whose CRC already matched. Returns "" or what is wrong.
std::string decode_payload(std::string_view p, DecodedRecord& out) {
  if (p.empty()) return "empty payload";
  out.type = static_cast<std::uint8_t>(p[0]);
  PayloadReader in(p.substr(1));
  const std::string short_payload = "a field runs past the end of the payload";
  std::int64_t token = 0;
  std::string key;
  std::string client;
  switch (out.type) {
    case kChunkRecord: {
      if (p.size() < kPayloadFixedBytes) return "payload of " + std::to_string(p.size()) + " bytes is too short";
      std::int64_t segment = 0;
      std::int64_t chunk = 0;
      if (!in.i64(out.seq) || !in.i64(token) || !in.i64(segment) || !in.i64(chunk)) return short_payload;
      out.request.token = FencingToken(token);
      out.request.segment = segment;
      out.request.chunk = chunk;
      if (!in.str(2, out.request.key) || !in.str(2, out.request.client) || !in.str(4, out.request.bytes))
        return "a length field runs past the end of the payload";
      if (segment < 0 || chunk < 0) return "negative segment or chunk";
      key = out.request.key;
      client = out.request.client;
      break;
    }
    case kCounterRecord: {
      std::int64_t value = 0;
      if (!in.i64(out.seq) || !in.i64(token) || !in.i64(value) || !in.str(2, out.counter.key) ||
          !in.str(2, out.counter.client))
        return short_payload;
      if (value < 0) return "negative counter value";
      out.counter.token = FencingToken(token);
      out.counter.value = value;
      key = out.counter.key;
      client = out.counter.client;
      break;
    }
    case kEffectRecord: {
      std::uint8_t mode = 0;
      std::uint8_t applied = 0;
      StoreEffectEntry& e = out.effect;
      if (!in.i64(out.seq) || !in.i64(token) || !in.u8(mode) || !in.u8(applied) || !in.str(2, e.key) ||
          !in.str(2, e.client) || !in.str(2, e.id))
        return short_payload;
      if (mode > 2) return "unknown effect mode " + std::to_string(mode);
      if (applied > 1) return "effect 'applied' byte is " + std::to_string(applied);
      e.mode = mode == 0 ? EffectMode::kFenced : mode == 1 ? EffectMode::kUnfenced : EffectMode::kIdempotent;
      e.applied = applied == 1;
      e.seq = out.seq;
      e.token = token;
      if (auto why = effect_id_problem(e.id); !why.empty()) return why;
      key = e.key;
      client = e.client;
      break;
    }
    default:
      return "unknown record type " + std::to_string(static_cast<unsigned>(out.type));
  }
  if (in.left() != 0) return std::to_string(in.left()) + " unexpected bytes after the last field";
  if (out.seq < 1 || token < 0) return "negative seq or token";
  if (auto why = name_problem("key", key, kMaxKeyBytes); !why.empty()) return why;
  if (auto why = name_problem("client", client, kMaxClientBytes); !why.empty()) return why;
  return "";
}

void validate_names(const std::string& key, const std::string& client, FencingToken token) {
  if (auto why = name_problem("key", key, kMaxKeyBytes); !why.empty()) throw std::invalid_argument(why);
  if (auto why = name_problem("client", client, kMaxClientBytes); !why.empty()) throw std::invalid_argument(why);
  if (token.value() < 0) throw std::invalid_argument("token " + token.str() + " is negative");
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

std::string effect_id_problem(std::string_view id) {
  if (id.empty()) return "effect id is empty";
  if (id.size() > kMaxEffectIdBytes)
    return "effect id '" + shown(id) + "' is " + std::to_string(id.size()) + " bytes, over the " +
           std::to_string(kMaxEffectIdBytes) + "-byte limit";
  for (std::size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    if (c != ':' && !is_safe_name(id.substr(i, 1), 1))
      return "effect id '" + shown(id) + "' has a character outside [A-Za-z0-9_.:-] at offset " + std::to_string(i);
  }
  return "";
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
    switch (rec.type) {
      case kChunkRecord: apply_locked(rec.seq, rec.request); break;
      case kCounterRecord: apply_counter_locked(rec.seq, rec.counter); break;
      case kEffectRecord: apply_effect_locked(rec.effect); break;
    }
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

void FencedStore::raise_marks_locked(const std::string& key, std::int64_t token, std::int64_t seq) {
  auto& hw = high_water_[key];
  if (hw.seq == 0 || token > hw.token) hw = HighWater{token, seq};
  if (global_high_water_.seq == 0 || token > global_high_water_.token) {
    global_high_water_ = HighWater{token, seq};
    global_key_ = key;
  }
}

void FencedStore::apply_locked(std::int64_t seq, const WriteRequest& r) {
  raise_marks_locked(r.key, r.token.value(), seq);
  auto& slot = chunks_[SlotKey{r.key, r.segment, r.chunk}];
  slot = StoredChunk{r.key, r.segment, r.chunk, r.token.value(), r.client, seq, r.bytes};
  log_.push_back(AcceptedWrite{seq, r.key, r.segment, r.chunk, r.token.value(), r.client});
  last_seq_ = seq;
}

void FencedStore::apply_counter_locked(std::int64_t seq, const CounterWriteRequest& r) {
  raise_marks_locked(r.key, r.token.value(), seq);
  counters_[r.key] = Counter{r.value, seq};
  // The read-back's log shows a counter write with fields of its own (kind counter, value).
  log_.push_back(AcceptedWrite{seq, r.key, kNoSlot, kNoSlot, r.token.value(), r.client, WriteKind::kCounter, r.value});
  last_seq_ = seq;
}

void FencedStore::apply_effect_locked(const StoreEffectEntry& e) {
  effects_.push_back(e);
  if (e.applied) applied_effects_.emplace(e.key, e.id);
  last_seq_ = e.seq;
}

FencedStore::HighWater FencedStore::mark_for_locked(const std::string& key) const {
  if (mode_ == FencingMode::kGlobal) return global_high_water_;
  auto it = high_water_.find(key);
  return it == high_water_.end() ? HighWater{} : it->second;
}

FencedStore::Fence FencedStore::check_locked(const std::string& key, std::int64_t token) const {
  Fence f;
  f.cited = mark_for_locked(key);
  switch (mode_) {
    case FencingMode::kPerKey:
    case FencingMode::kCheckThenWrite:
      f.fenced = token < f.cited.token;
      if (f.fenced)
        f.why = "token " + std::to_string(token) + " is below the high-water mark " + std::to_string(f.cited.token) +
                " of key '" + key + "': a holder with a newer token has written (fenced)";
      break;
    case FencingMode::kGlobal:
      f.fenced = token < f.cited.token;
      if (f.fenced)
        f.why = "token " + std::to_string(token) + " is below the global high-water mark " +
                std::to_string(f.cited.token) + " (set by a write to key '" + global_key_ + "'): one mark for every key (fenced)";
      break;
    case FencingMode::kNone:
      f.fenced = false;
      break;
  }
  return f;
}

bool FencedStore::check_window_locked(std::unique_lock<std::mutex>& lock, std::string_view key, FencingToken token,
                                      std::string_view client) {
  // The mistake on purpose: the decision above is acted on after the lock was let go.
  lock.unlock();
  if (options_.in_check_window) options_.in_check_window(key, token, client);
  if (options_.check_window.count() > 0) std::this_thread::sleep_for(options_.check_window);
  lock.lock();
  return !failed_ && !closing_;
}

WriteResult FencedStore::closed_result_locked() const {
  WriteResult out;
  out.error = failed_ ? "store failed: " + failure_ : "store is closed";
  return out;
}

template <typename Append, typename AfterDecision>
WriteResult FencedStore::fenced_mutation_locked(std::unique_lock<std::mutex>& lock, const std::string& key,
                                                FencingToken token, const std::string& client, RejectedWrite rejected,
                                                Append&& append_and_apply, AfterDecision&& after_decision) {
  WriteResult out;
  // The fencing decision, the high-water update and the append are one critical section —
  // except in check-then-write mode, which lets the lock go in between (the race it shows).
  const Fence fence = check_locked(key, token.value());
  if (!fence.fenced && mode_ == FencingMode::kCheckThenWrite && !check_window_locked(lock, key, token, client))
    return closed_result_locked();
  if (fence.fenced) {
    const HighWater current = fence.cited;
    rejected.high_water = current.token;
    rejections_.push_back(std::move(rejected));
    ++rejected_;
    if (options_.after_decision) {
      lock.unlock();
      after_decision(false, std::int64_t{0});
      lock.lock();
    }
    // Never cite a high-water mark that a crash could still take back.
    if (!wait_durable(lock, current.seq)) {
      out.error = "store failed before the high-water mark it would cite was durable: " + failure_;
      return out;
    }
    out.status = WriteStatus::kRejected;
    out.high_water = current.token;
    out.error = fence.why;
    return out;
  }
  const std::int64_t seq = last_seq_ + 1;
  append_and_apply(seq);
  ++pending_records_;
  ++accepted_;
  const std::int64_t high_water = mark_for_locked(key).token;
  work_cv_.notify_one();
  if (options_.after_decision) {
    lock.unlock();
    after_decision(true, seq);
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

WriteResult FencedStore::write(const WriteRequest& r) {
  validate(r);
  std::unique_lock lock(mu_);
  if (failed_ || closing_) return closed_result_locked();
  return fenced_mutation_locked(
      lock, r.key, r.token, r.client, RejectedWrite{r.key, r.segment, r.chunk, r.token.value(), r.client, 0},
      [&](std::int64_t seq) {
        append_record(pending_, seq, r);
        apply_locked(seq, r);
      },
      [&](bool accepted, std::int64_t seq) {
        if (options_.after_decision) options_.after_decision(r, accepted, seq);
      });
}

WriteResult FencedStore::write_counter(const CounterWriteRequest& r) {
  validate_names(r.key, r.client, r.token);
  if (r.value < 0) throw std::invalid_argument("counter value " + std::to_string(r.value) + " is negative");
  std::unique_lock lock(mu_);
  if (failed_ || closing_) return closed_result_locked();
  return fenced_mutation_locked(
      lock, r.key, r.token, r.client,
      RejectedWrite{r.key, kNoSlot, kNoSlot, r.token.value(), r.client, 0, WriteKind::kCounter, r.value},
      [&](std::int64_t seq) {
        append_counter_record(pending_, seq, r);
        apply_counter_locked(seq, r);
      },
      [](bool, std::int64_t) {});
}

CounterReading FencedStore::read_counter(const std::string& key) const {
  if (auto why = name_problem("key", key, kMaxKeyBytes); !why.empty()) throw std::invalid_argument(why);
  std::unique_lock lock(mu_);
  CounterReading out;
  std::int64_t seq = 0;
  if (auto it = counters_.find(key); it != counters_.end()) {
    out.value = it->second.value;
    seq = it->second.seq;
  }
  const HighWater mark = mark_for_locked(key);
  out.high_water = mark.token;
  wait_durable(lock, std::max(seq, mark.seq));
  return out;
}

EffectResult FencedStore::post_effect(const EffectRequest& r) {
  validate_names(r.key, r.client, r.token);
  if (auto why = effect_id_problem(r.id); !why.empty()) throw std::invalid_argument(why);
  EffectResult out;
  std::unique_lock lock(mu_);
  if (failed_ || closing_) {
    out.error = failed_ ? "store failed: " + failure_ : "store is closed";
    return out;
  }
  bool applied = true;
  bool duplicate = false;
  std::string why;
  HighWater cited = mark_for_locked(r.key);
  switch (r.mode) {
    case EffectMode::kFenced: {
      const Fence fence = check_locked(r.key, r.token.value());
      if (!fence.fenced && mode_ == FencingMode::kCheckThenWrite &&
          !check_window_locked(lock, r.key, r.token, r.client)) {
        out.error = failed_ ? "store failed: " + failure_ : "store is closed";
        return out;
      }
      applied = !fence.fenced;
      cited = fence.cited;
      why = fence.why;
      break;
    }
    case EffectMode::kUnfenced:
      applied = true;
      break;
    case EffectMode::kIdempotent:
      duplicate = applied_effects_.contains({r.key, r.id});
      applied = !duplicate;
      if (duplicate) why = "effect '" + r.id + "' of key '" + r.key + "' was already applied: ignored (idempotent)";
      break;
  }
  StoreEffectEntry entry{r.key, r.id, r.token.value(), r.client, last_seq_ + 1, applied, r.mode};
  append_effect_record(pending_, entry);
  ++pending_records_;
  apply_effect_locked(entry);
  ++(applied ? effects_applied_ : effects_skipped_);
  work_cv_.notify_one();
  // The record's seq is after the cited mark's, so this also makes the mark durable.
  if (!wait_durable(lock, entry.seq)) {
    out.error = "store failed before the effect was durable: " + failure_;
    return out;
  }
  out.status = applied ? EffectStatus::kApplied : duplicate ? EffectStatus::kDuplicate : EffectStatus::kRejected;
  out.applied = applied;
  out.high_water = cited.token;
  out.seq = entry.seq;
  out.error = why;
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

ReadBack FencedStore::readback() const { return snapshot().readback; }

StoreSnapshot FencedStore::snapshot() const {
  StoreSnapshot snap;
  ReadBack& rb = snap.readback;
  rb.resource = "store";
  rb.fencing = std::string(fencing_mode_name(mode_));
  std::unique_lock lock(mu_);
  rb.chunks.reserve(chunks_.size());
  for (const auto& [slot, c] : chunks_) rb.chunks.push_back(c);
  rb.log = log_;
  rb.rejections = rejections_;
  for (const auto& [key, hw] : high_water_) rb.high_water[key] = hw.token;
  snap.effects = effects_;
  for (const auto& [key, c] : counters_) snap.counters[key] = c.value;
  wait_durable(lock, last_seq_);
  return snap;
}

std::map<std::string, std::int64_t> FencedStore::high_water() const {
  std::map<std::string, std::int64_t> out;
  std::lock_guard lock(mu_);
  for (const auto& [key, hw] : high_water_) out[key] = hw.token;
  return out;
}

StoreStats FencedStore::stats() const {
  std::lock_guard lock(mu_);
  return StoreStats{accepted_,   rejected_, fsyncs_,          last_seq_,       durable_seq_,
                    failed_,     failure_,  effects_applied_, effects_skipped_};
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
