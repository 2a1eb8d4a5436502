// fencecheck — FencedStore: the reference fenced resource's state machine and its durability,
// independent of HTTP (store_server.h puts it on the wire).
//
// The rule it enforces comes from Kleppmann, "How to do distributed locking" (2016): the lock
// service hands out strictly increasing fencing tokens; every write carries its holder's token;
// the *resource* remembers the highest token it has accepted per key (its high-water mark) and
// refuses a lower one. The comparison, the update of the high-water mark and the write itself are
// one atomic step here (one critical section), because a check done apart from the write is the
// very race fencing exists to close. The failure catalogue (docs/catalogue-plan.md) adds modes
// that get this wrong on purpose: one mark for the whole store ("global") and a check done apart
// from the write ("check-then-write").
//
// Three kinds of mutation, all fenced by the same rule and made durable the same way:
//   * chunk writes   (write():         PUT /v1/keys/{key}/segments/{s}/chunks/{c})
//   * counter writes (write_counter(): PUT /v1/counters/{key}; the holder read N and writes N+1)
//   * side effects   (post_effect():   POST /v1/effects/{key}; fenced, unfenced or idempotent)
//
// Durability. Every accepted write — and every side effect request, applied or not — is appended
// to `<data_dir>/store.log` and fdatasync'ed before the call returns, so an acknowledged write
// survives `kill -9` of the process and a power loss (the simulated-crash test, store_crash_test,
// drops every byte not yet fdatasync'ed and finds no acknowledged write lost). Appends are group
// committed: one flusher thread writes whatever records are pending and fdatasyncs once, and every
// writer waits for the flush that covers its own record, so N concurrent writes cost about one
// fdatasync rather than N (watch StoreStats::fsyncs). Every file operation goes through a
// StoreFileSystem (POSIX by default; a test puts a fault-injecting one in its place).
//
// Recovery. On open() the log is replayed to rebuild the state (chunks, counters, effects,
// high-water marks). Records are read front to back; each must have a whole header, a length
// within the limit that fits in the file, a matching CRC, a payload that decodes, and the next seq.
// At the first record that does not (the "damage", at byte offset D), the rest of the file is
// scanned for an intact record: any byte offset P >= D where a record header, its length, its CRC
// and its payload all check out (decoding included, the seq not required), tried at every byte
// (resynchronisation as in RocksDB's log reader, which skips to the next block and reports the
// dropped bytes; here the framing has no blocks, so every offset is tried; O(bytes after D)
// cheap header checks, a CRC only where the header is plausible). Then:
//   * no intact record at or after D, and the record at D is incomplete (too few bytes for its
//     header or its length, a length over the limit, a zero length, or a CRC mismatch): a torn
//     tail, what a crash in the middle of an append leaves (the last write may hold several
//     records of one group commit, none of them acknowledged, since the fdatasync had not
//     returned). It is truncated away (RecoveryReport::truncated_bytes, ::problem) and the store
//     starts. No readable record is ever in it.
//   * anything else — an intact record after the damage (a flipped byte, a damaged length or CRC
//     field, a record deleted from the middle: a seq gap, zeroed blocks), or a complete record
//     whose CRC matches but whose payload does not decode (another writer's or a newer format's
//     record; a crash cannot make one): corruption. open() throws StoreLogDamaged naming the file,
//     the byte offset, the record (its 1-based position and the seq expected) and the first
//     intact record after it, and changes nothing on disk (the acknowledged records after the
//     damage must not be cut away, and a high-water mark must not fall: the issue-14 bug).
//   * StoreOptions::repair_log (fencecheck-store --repair-log) starts anyway: every region of
//     damage is skipped up to the next intact record and every readable record is kept (seq gaps
//     become a "gap" record, type 4, so the repaired log replays; a record whose seq is not above
//     the last one is renumbered), each key's high-water mark is the highest token of every
//     readable record; RecoveryReport::damage lists each skipped region (offset, bytes, the seqs
//     it held). The damaged file is first copied whole to `store.log.damaged.N` (fsync'ed), the
//     repaired log is written to `store.log.repair`, fdatasync'ed, renamed over store.log and the
//     directory fsync'ed, so a crash during repair leaves either the old log or the new one.
// Limits: damage that reaches the end of the file with nothing readable after it cannot be told
// from a torn tail and is trimmed like one; a mark raised only by an unreadable record is lost
// with it (repair reports the lost seqs, it cannot know their tokens); and because chunk bodies
// are client bytes, a body that embeds a well-formed record makes a torn tail inside that record
// look like damage followed by an intact record: the store then refuses (fail-safe) and
// --repair-log starts it.
// Log file format (all integers little-endian):
//   file   := magic record*
//   magic  := "fcstlog1" (8 bytes)
//   record := u32 payload_len, u32 crc32(payload) (fencecheck::crc32, IEEE), payload
//   payload:= u8 type, then by type:
//     1 chunk:   i64 seq, i64 token, i64 segment, i64 chunk,
//                u16 key_len, key, u16 client_len, client, u32 data_len, data
//     2 counter: i64 seq, i64 token, i64 value, u16 key_len, key, u16 client_len, client
//     3 effect:  i64 seq, i64 token, u8 mode (0 fenced, 1 unfenced, 2 idempotent), u8 applied (0|1),
//                u16 key_len, key, u16 client_len, client, u16 id_len, id
//     4 gap:     i64 seq, i64 first — written only by a repair: seqs first..seq were lost to damage
//                (first is the seq after the previous record's; the next record has seq + 1)
// Type 1 is the only record older stores wrote (its first byte was the "version", 1), so their
// logs replay unchanged. Every record takes the next store-wide seq, whatever its type.
// Write rejections are not logged: they are kept in memory for the read-back and are gone after a
// restart. The mode is not logged either: replay rebuilds the same state in every mode (the
// high-water mark is the largest token logged for the key; a chunk slot holds its last record;
// a counter its last value; effects are replayed with the outcome logged for them).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "fencecheck/proto/readback.h"
#include "fencecheck/proto/token.h"
#include "fencecheck/resources/effect_mode.h"

namespace fencecheck {

/// How the store decides whether a write's token is acceptable. Names on the wire and the command
/// line are fencing_mode_name(). See FencedStore::write().
enum class FencingMode {
  kPerKey,  ///< "per-key": accept iff token >= the key's high-water mark. The correct rule.
  kNone,    ///< "none": accept every write (the control that proves the checkers can fail); the
            ///< high-water mark is still tracked (the largest token seen per key) for the read-back.
  kGlobal,  ///< "global": ONE high-water mark for the whole store: accept iff token >= the largest
            ///< token accepted for ANY key (a mistake: writes to key X are refused because key Y
            ///< advanced). The rejection says "global high-water". Per-key marks are still kept
            ///< for the read-back.
  kCheckThenWrite,  ///< "check-then-write": the per-key check, then the lock is RELEASED for
                    ///< StoreOptions::check_window, then the write is applied without checking
                    ///< again (two separately locked steps: a higher token landing inside the
                    ///< window does not stop the lower one; the race is real).
};

/// The wire name of a mode: "per-key", "none", "global", "check-then-write". Total; pure; thread-safe.
[[nodiscard]] std::string_view fencing_mode_name(FencingMode mode);
/// The mode for a wire name; nullopt for an unknown name. Pure; thread-safe.
[[nodiscard]] std::optional<FencingMode> fencing_mode_from_name(std::string_view name);
/// Every mode's wire name, in declaration order (for --help text and error messages).
[[nodiscard]] std::vector<std::string_view> fencing_mode_names();

/// Largest chunk the store will hold (bytes). The HTTP server's body limit must not exceed it;
/// replay treats a record claiming more as corrupt.
inline constexpr std::size_t kMaxChunkBytes = 16u * 1024 * 1024;
/// Longest key (bytes), alphabet [A-Za-z0-9_.-] (fencecheck::is_safe_name).
inline constexpr std::size_t kMaxKeyBytes = 256;
/// Longest client (writer) id (bytes), alphabet [A-Za-z0-9_.-], as worker ids in chunk.h.
inline constexpr std::size_t kMaxClientBytes = 64;
/// Longest side-effect id (bytes), alphabet [A-Za-z0-9_.:-] (e.g. "w1:seg2").
inline constexpr std::size_t kMaxEffectIdBytes = 256;

/// Checks a name (key or client id) against is_safe_name's rule: 1..max_len bytes of
/// [A-Za-z0-9_.-]. Returns "" when it is fine, otherwise a message naming `what` and the exact
/// problem: "key is empty", "key is 300 bytes, over the 256-byte limit", "key 'a b' has a
/// character outside [A-Za-z0-9_.-] at offset 1". Long values are shown cut to 40 characters,
/// unprintable bytes as \xNN. Pure; thread-safe.
[[nodiscard]] std::string name_problem(std::string_view what, std::string_view value, std::size_t max_len);

/// Checks a side-effect id: 1..kMaxEffectIdBytes bytes of [A-Za-z0-9_.:-]. "" when fine, else a
/// message in name_problem's style ("effect id 'a b' has a character outside [A-Za-z0-9_.:-] at
/// offset 1"). Pure; thread-safe.
[[nodiscard]] std::string effect_id_problem(std::string_view id);

/// One write: put `bytes` into the slot key/segment/chunk under fencing token `token`.
struct WriteRequest {
  std::string key;           ///< 1..kMaxKeyBytes of [A-Za-z0-9_.-]
  std::int64_t segment = 0;  ///< >= 0
  std::int64_t chunk = 0;    ///< >= 0
  FencingToken token;        ///< the holder's fencing token (>= 0)
  std::string client;        ///< writer id, 1..kMaxClientBytes of [A-Za-z0-9_.-]
  std::string bytes;         ///< the chunk, 1..kMaxChunkBytes bytes
};

/// What became of one write.
enum class WriteStatus {
  kAccepted,  ///< applied and durable (fdatasync'ed) before write() returned
  kRejected,  ///< fenced: token below the key's high-water mark; nothing changed
  kFailed,    ///< the store is closed or hit an I/O error (it then refuses every later write);
              ///< whether this write survives a restart is unknown (Jepsen's "info")
};

/// The reply to one write.
struct WriteResult {
  WriteStatus status = WriteStatus::kFailed;
  bool accepted = false;        ///< status == kAccepted
  std::int64_t high_water = 0;  ///< the key's high-water mark after this write (for a rejection:
                                ///< the mark the token was compared against); durable either way
  std::int64_t seq = 0;         ///< store-wide acceptance order, 1-based; 0 unless accepted
  std::string error;            ///< why, when not accepted
};

/// One counter write: set counter `key` to `value` under fencing token `token` (the holder read
/// value - 1 and adds one). Fenced exactly like a chunk write to the same key: counters and chunks
/// share the key's high-water mark.
struct CounterWriteRequest {
  std::string key;          ///< 1..kMaxKeyBytes of [A-Za-z0-9_.-]
  std::int64_t value = 0;   ///< the new value, >= 0
  FencingToken token;       ///< >= 0
  std::string client;       ///< 1..kMaxClientBytes of [A-Za-z0-9_.-]
};

/// A counter as read: its value (0 when never written) and the high-water mark a write to it is
/// compared against (the key's mark; in global mode the global one; 0 when none).
struct CounterReading {
  std::int64_t value = 0;
  std::int64_t high_water = 0;
};

/// One side effect ("webhook", "payout") the holder asks the store to perform, once per completed
/// segment of its job. The store records it; `mode` says how it is guarded.
struct EffectRequest {
  std::string key;      ///< the resource key the effect belongs to (its high-water mark fences it)
  std::string id;       ///< the effect's identity, e.g. "w1:seg2"; 1..kMaxEffectIdBytes of [A-Za-z0-9_.:-]
  FencingToken token;   ///< >= 0
  std::string client;   ///< 1..kMaxClientBytes of [A-Za-z0-9_.-]
  /// The guard. StoreServer fills it from its configuration (StoreServerOptions::effect_mode),
  /// never from the HTTP request: how an effect is guarded is the resource's design.
  EffectMode mode = EffectMode::kFenced;
};

/// What became of one side effect.
enum class EffectStatus {
  kApplied,    ///< performed (and durable)
  kDuplicate,  ///< idempotent, and an effect with this key and id was already applied: ignored
  kRejected,   ///< fenced: the token is below the mark (per the store's mode); not performed
  kFailed,     ///< the store is closed or failed; unknown whether it survives a restart
};

struct EffectResult {
  EffectStatus status = EffectStatus::kFailed;
  bool applied = false;         ///< status == kApplied
  std::int64_t high_water = 0;  ///< the mark the token was (or, unfenced, would have been) compared against
  std::int64_t seq = 0;         ///< the effect record's seq (every effect request gets one); 0 when failed
  std::string error;            ///< why, when rejected or failed; what, when a duplicate
};

/// One side-effect request as the read-back shows it (every request, applied or not, in seq order).
struct StoreEffectEntry {
  std::string key;
  std::string id;
  std::int64_t token = 0;
  std::string client;
  std::int64_t seq = 0;
  bool applied = false;
  EffectMode mode = EffectMode::kFenced;
};

/// Everything the store holds, taken in one critical section: the chunk read-back plus the
/// effects and counters (GET /v1/readback adds these as "effects" and "counters").
struct StoreSnapshot {
  ReadBack readback;                              ///< as FencedStore::readback()
  std::vector<StoreEffectEntry> effects;          ///< every effect request, by seq
  std::map<std::string, std::int64_t> counters;   ///< counter key -> current value
};

/// Counters for metrics and tests. A snapshot: values may move on right after.
struct StoreStats {
  std::int64_t accepted = 0;     ///< accepted chunk and counter writes since open (not counting replayed ones)
  std::int64_t rejected = 0;     ///< fenced chunk and counter writes since open
  std::int64_t fsyncs = 0;       ///< fdatasync calls made by the flusher since open
  std::int64_t last_seq = 0;     ///< highest seq assigned (including replayed records)
  std::int64_t durable_seq = 0;  ///< every record with seq <= this is on disk
  bool failed = false;           ///< an I/O error happened; every later write gets kFailed
  std::string failure;           ///< the I/O error, when failed
  std::int64_t effects_applied = 0;  ///< side effects applied since open
  std::int64_t effects_skipped = 0;  ///< side effects refused (fenced) or ignored (duplicate) since open
};

/// One region of a damaged log that a repair skipped (StoreOptions::repair_log).
struct LogDamage {
  std::uint64_t offset = 0;          ///< byte offset of the first unreadable byte
  std::uint64_t bytes = 0;           ///< bytes skipped, up to the next intact record
  std::int64_t record = 0;           ///< 1-based position of the unreadable record (records read before it + 1)
  std::int64_t first_lost_seq = 0;   ///< the seqs the region held (from the seqs on either side);
  std::int64_t last_lost_seq = -1;   ///< first > last when no seq is missing (junk between intact records)
  std::string problem;               ///< what was wrong at offset ("checksum mismatch ...", "seq gap ...")
};

/// What open() found in the log.
struct RecoveryReport {
  std::int64_t records = 0;          ///< complete records replayed (gap records included)
  std::uint64_t kept_bytes = 0;      ///< log length after recovery
  std::uint64_t truncated_bytes = 0; ///< bytes of a torn tail cut off (0 when the log was clean)
  std::string problem;               ///< why the tail was cut ("torn record header at offset N", ...)
  bool repaired = false;             ///< repair_log was set and the log was rewritten (damage or renumbering)
  std::vector<LogDamage> damage;     ///< repair only: each region skipped, in file order
  std::int64_t lost_records = 0;     ///< repair only: seqs missing, summed over damage and old gap records
  std::int64_t renumbered = 0;       ///< repair only: records kept under a new seq (theirs was not above the last)
  std::filesystem::path damaged_copy;  ///< repair only: where the damaged file was copied before the rewrite
  /// One line for a log: records, torn bytes, and with a repair every region and what was lost.
  [[nodiscard]] std::string summary() const;
};

/// open() found damage that is not a torn tail and repair_log was not set. Nothing on disk was
/// changed. what() names the file, the byte offset, the record and the next intact record, and
/// says to use --repair-log.
class StoreLogDamaged : public std::runtime_error {
 public:
  StoreLogDamaged(const std::string& what, std::filesystem::path log, std::uint64_t offset, std::int64_t record,
                  std::int64_t expected_seq)
      : std::runtime_error(what), log_(std::move(log)), offset_(offset), record_(record), expected_seq_(expected_seq) {}
  [[nodiscard]] const std::filesystem::path& log() const { return log_; }
  [[nodiscard]] std::uint64_t offset() const { return offset_; }        ///< byte offset of the damage
  [[nodiscard]] std::int64_t record() const { return record_; }         ///< 1-based position of the bad record
  [[nodiscard]] std::int64_t expected_seq() const { return expected_seq_; }

 private:
  std::filesystem::path log_;
  std::uint64_t offset_;
  std::int64_t record_;
  std::int64_t expected_seq_;
};

/// Thrown by read_counter(), readback() and snapshot() once the store has failed (an fdatasync
/// or write error): the state in memory may hold records the disk does not, so nothing is
/// answered from it (the HTTP server turns it into an error reply). what() has the I/O error.
class StoreFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One open file of the store, as a StoreFileSystem hands it out. Every call returns 0 or an
/// errno value (EIO, ENOSPC, ...). The shape is RocksDB's FSWritableFile as wrapped by its
/// FaultInjectionTestFS (utilities/fault_injection_fs.h): appends are buffered by the OS until
/// sync(), and a test implementation may drop or tear whatever was not synced. One thread at a
/// time per file (the store guarantees it). Destroying it closes the file and releases its lock.
class StoreFile {
 public:
  virtual ~StoreFile() = default;
  /// The whole file, as read now (unsynced bytes included).
  virtual int read_all(std::string& out) = 0;
  /// Appends data at the end of the file (all of it, or an error; after an error how much landed
  /// is unknown).
  virtual int append(std::string_view data) = 0;
  /// fdatasync(2): every byte appended and every truncate before it is durable when it returns 0.
  virtual int sync() = 0;
  /// ftruncate(2) to size bytes; later appends go at the new end. Durable after sync().
  virtual int truncate(std::uint64_t size) = 0;
};

/// The file operations the store makes, so a test can replace them (see StoreFile).
/// Implementations must be thread-safe.
class StoreFileSystem {
 public:
  enum class OpenMode {
    kOpenOrCreateLocked,  ///< read-write, created (0644) when missing, exclusive non-blocking lock
                          ///< (flock: EWOULDBLOCK when another holder has it)
    kCreateNew,           ///< read-write, must not exist yet (EEXIST), no lock
  };
  virtual ~StoreFileSystem() = default;
  /// mkdir -p.
  virtual int create_directories(const std::filesystem::path& dir) = 0;
  /// Opens path; `created` says whether this call created it (its directory entry is durable only
  /// after sync_dir()).
  virtual int open(const std::filesystem::path& path, OpenMode mode, std::unique_ptr<StoreFile>& out,
                   bool& created) = 0;
  /// rename(2): atomic replacement; durable after sync_dir() of the directory.
  virtual int rename(const std::filesystem::path& from, const std::filesystem::path& to) = 0;
  /// fsync(2) of a directory: its entries (creations, renames) are durable when it returns 0.
  virtual int sync_dir(const std::filesystem::path& dir) = 0;
};

/// The real file system (open/pwrite/fdatasync/ftruncate/rename/fsync, flock). Shared, stateless.
[[nodiscard]] std::shared_ptr<StoreFileSystem> posix_store_file_system();

/// Knobs for open(). The defaults are what the binary uses.
struct StoreOptions {
  /// Test seam: called by the flusher thread, without any store lock held, right before each
  /// fdatasync, with the number of records in the batch about to be synced. Tests use it to hold
  /// a flush until a known number of writers are waiting, which makes group commit observable
  /// without sleeping. Must not call back into the store's write().
  std::function<void(std::int64_t batch_records)> before_sync;
  /// Test seam: called by the writing thread after the fencing decision is made and applied (or
  /// the rejection recorded), with the store lock released, just before it waits for durability.
  /// accepted=false means fenced (seq 0). Lets a test know a writer is parked on a flush.
  /// Chunk writes only.
  std::function<void(const WriteRequest& request, bool accepted, std::int64_t seq)> after_decision;
  /// check-then-write only: how long the lock stays released between the check and the write.
  /// >= 0 (0 still releases and retakes the lock). Ignored in other modes.
  std::chrono::milliseconds check_window{0};
  /// Test seam (check-then-write only): called by the writing thread after its check passed, with
  /// no store lock held, right before it sleeps check_window — for chunk writes, counter writes and
  /// fenced effects alike, with the key, token and client of the request. A test blocks one writer
  /// here while another, higher token lands, then lets it go on: the race without a sleep.
  std::function<void(std::string_view key, FencingToken token, std::string_view client)> in_check_window;
  /// Start on a damaged log anyway, keeping every readable record (see "Recovery" above). Off by
  /// default: a damaged log is refused (StoreLogDamaged). fencecheck-store --repair-log.
  bool repair_log = false;
  /// The file layer; null means posix_store_file_system(). Tests put a fault-injecting one here.
  std::shared_ptr<StoreFileSystem> file_system;
  /// TEST ONLY, never set by fencecheck-store (no flag reaches it): acknowledge a batch as soon as
  /// the flusher takes it, BEFORE its write and fdatasync — the broken store the simulated-crash
  /// test must catch losing acknowledged writes (it proves that test can fail).
  bool test_only_ack_before_sync = false;
};

/// A fenced key-value store of chunk slots, durable in an append-only log.
///
/// Thread-safety: every public member may be called from any number of threads at once, except
/// that the object must outlive all calls (destroy it only after they return).
class FencedStore {
 public:
  /// Opens (creating when missing) the store in data_dir: creates the directory and
  /// `store.log`, takes an exclusive flock on the log (a second store on the same directory is
  /// refused), replays it and truncates a torn tail (see "Recovery" above and recovery()); with
  /// options.repair_log, repairs a damaged log. Starts the flusher thread. Throws
  /// StoreLogDamaged (a std::runtime_error) when the log is damaged beyond a torn tail and
  /// repair_log is not set (nothing on disk changed); std::runtime_error naming the path and the
  /// errno text when the directory or file cannot be created, opened, locked, read or repaired,
  /// or when the file is not a fencecheck-store log.
  [[nodiscard]] static std::unique_ptr<FencedStore> open(const std::filesystem::path& data_dir, FencingMode mode,
                                                         StoreOptions options = {});

  /// close()s.
  ~FencedStore();
  FencedStore(const FencedStore&) = delete;
  FencedStore& operator=(const FencedStore&) = delete;

  /// Applies one write. In one critical section: compare the token with the key's high-water
  /// mark (per the mode), and when acceptable, raise the mark, assign the next seq, update the
  /// chunk slot and append the log record. Then, outside it, wait until the flusher has made
  /// that record durable, and only then return kAccepted. A rejection is recorded (in memory) and
  /// returned only once the high-water mark it cites is durable, so a reply never cites a mark a
  /// crash could take back. Per-key rule: accept iff token >= high-water (equal is accepted: one
  /// holder writes many chunks under one token). Blocks for about one fdatasync.
  /// Global rule: accept iff token >= the largest token accepted for any key. None: accept.
  /// Check-then-write: the per-key check under the lock; then the lock is released for
  /// StoreOptions::check_window; then the write is applied without a second check.
  /// Throws std::invalid_argument naming the field when the request breaks WriteRequest's rules
  /// (nothing changes then). I/O errors and writes after close() give kFailed, never a throw.
  [[nodiscard]] WriteResult write(const WriteRequest& request);

  /// Sets a counter, fenced exactly as write() (same rule, same mark as chunk writes to the key,
  /// same check-then-write window). Accepted: logged durably, the counter takes `value`, the log
  /// (read-back) gets an entry of kind WriteKind::kCounter with `value` (segment and chunk
  /// kNoSlot). Rejected: recorded in the read-back's rejections the same way, with the value
  /// refused. Throws
  /// std::invalid_argument for a bad key/client, a negative value or token.
  [[nodiscard]] WriteResult write_counter(const CounterWriteRequest& request);

  /// A counter's value and the mark a write to it is compared against. Waits until the value it
  /// returns is durable (a value a crash could take back is never shown). Throws
  /// std::invalid_argument for a bad key, StoreFailed once the store failed (an fdatasync error:
  /// the value might not be on disk).
  [[nodiscard]] CounterReading read_counter(const std::string& key) const;

  /// Performs (records) one side effect. fenced: the same check as write() (the store's mode, the
  /// key's mark; check-then-write with its window) — but an effect never raises a mark, it is only
  /// judged by it. unfenced: always applied. idempotent: applied iff no effect with this key and
  /// id was applied before (then kDuplicate; no token check). Every request, whatever its outcome,
  /// gets a seq and a durable record, so the read-back's effects survive a restart. Blocks for
  /// about one fdatasync. Throws std::invalid_argument for a bad key, id, client or token.
  [[nodiscard]] EffectResult post_effect(const EffectRequest& request);

  /// Everything, as the checkers read it: chunks (each slot's last accepted write, sorted by key,
  /// segment, chunk), log (every accepted write in seq order), rejections (since open, in order),
  /// high_water per key; resource "store", fencing = the mode's name. Waits until everything it
  /// returns is durable, so a read-back never shows a write a crash could take back; throws
  /// StoreFailed once the store failed. Copies the data: O(size of the store).
  [[nodiscard]] ReadBack readback() const;

  /// readback() plus every effect request and every counter, in one consistent cut (same
  /// durability wait; StoreFailed once the store failed). O(size of the store).
  [[nodiscard]] StoreSnapshot snapshot() const;

  /// The high-water mark of every key that has one (no waiting for durability: for metrics).
  [[nodiscard]] std::map<std::string, std::int64_t> high_water() const;

  /// Current counters.
  [[nodiscard]] StoreStats stats() const;

  /// What open() found and repaired. Immutable after open.
  [[nodiscard]] const RecoveryReport& recovery() const { return recovery_; }

  [[nodiscard]] FencingMode mode() const { return mode_; }
  [[nodiscard]] const std::filesystem::path& data_dir() const { return data_dir_; }
  /// The log file's path: data_dir / "store.log".
  [[nodiscard]] std::filesystem::path log_path() const { return data_dir_ / "store.log"; }

  /// Makes every pending record durable, stops the flusher, releases the lock and closes the
  /// log. Writes that were waiting complete normally; later writes get kFailed ("store is
  /// closed"). Idempotent; never throws.
  void close() noexcept;

 private:
  using SlotKey = std::tuple<std::string, std::int64_t, std::int64_t>;
  struct HighWater {
    std::int64_t token = 0;
    std::int64_t seq = 0;  ///< the write that set this mark: it is durable once durable_seq_ >= seq
  };
  struct Counter {
    std::int64_t value = 0;
    std::int64_t seq = 0;  ///< the write that set it
  };
  /// The fencing decision for `token` on `key` under mode_ (check-then-write: the per-key check).
  struct Fence {
    bool fenced = false;
    HighWater cited;   ///< the mark compared against
    std::string why;   ///< the rejection message, when fenced
  };

  FencedStore(std::filesystem::path data_dir, FencingMode mode, StoreOptions options);
  void replay_locked();
  /// repair_log: writes `rewritten` as the new log (copy of the old, temp file, fdatasync, rename,
  /// directory fsync) and makes it file_.
  void rewrite_log_locked(const std::string& original, const std::string& rewritten);
  void apply_locked(std::int64_t seq, const WriteRequest& request);
  void apply_counter_locked(std::int64_t seq, const CounterWriteRequest& request);
  void apply_effect_locked(const StoreEffectEntry& entry);
  /// Raises the key's mark (and the global one) to token when higher; seq = the record's.
  void raise_marks_locked(const std::string& key, std::int64_t token, std::int64_t seq);
  [[nodiscard]] Fence check_locked(const std::string& key, std::int64_t token) const;
  /// The mark a write to key would be compared against (global mode: the global mark).
  [[nodiscard]] HighWater mark_for_locked(const std::string& key) const;
  /// check-then-write: releases the lock, calls the seam, sleeps the window, retakes the lock.
  /// False when the store failed or began closing meanwhile.
  bool check_window_locked(std::unique_lock<std::mutex>& lock, std::string_view key, FencingToken token,
                           std::string_view client);
  /// The one path of write() and write_counter() (lock held, not yet failed or closing): the
  /// fencing decision (with check-then-write's window), then either the rejection `rejected`
  /// recorded and answered once the cited mark is durable, or `append_and_apply(seq)` and the
  /// answer once seq is durable. When the after_decision seam is set, `after_decision(accepted,
  /// seq)` runs unlocked right after the decision.
  /// The answer to a mutation while the store is failed or closing (lock held).
  [[nodiscard]] WriteResult closed_result_locked() const;
  template <typename Append, typename AfterDecision>
  WriteResult fenced_mutation_locked(std::unique_lock<std::mutex>& lock, const std::string& key, FencingToken token,
                                     const std::string& client, RejectedWrite rejected, Append&& append_and_apply,
                                     AfterDecision&& after_decision);
  void flusher_loop();
  /// Waits (releasing lock) until seq is durable or the store failed/closed; true when durable.
  /// [[nodiscard]]: every caller must act on a failure (issue 14: two callers once ignored it).
  [[nodiscard]] bool wait_durable(std::unique_lock<std::mutex>& lock, std::int64_t seq) const;

  const std::filesystem::path data_dir_;
  const FencingMode mode_;
  const StoreOptions options_;
  RecoveryReport recovery_;
  std::shared_ptr<StoreFileSystem> fs_;
  std::unique_ptr<StoreFile> file_;  ///< the log; used by open() and then only by the flusher

  mutable std::mutex mu_;  ///< guards everything below
  mutable std::condition_variable work_cv_;     ///< flusher: records pending or closing
  mutable std::condition_variable durable_cv_;  ///< writers: durable_seq_ advanced or failure
  std::map<std::string, HighWater> high_water_;
  HighWater global_high_water_;        ///< the largest token accepted for any key
  std::string global_key_;             ///< the key global_high_water_ was set on
  std::map<std::string, Counter> counters_;
  std::vector<StoreEffectEntry> effects_;
  std::set<std::pair<std::string, std::string>> applied_effects_;  ///< (key, id) applied at least once
  std::int64_t effects_applied_ = 0;
  std::int64_t effects_skipped_ = 0;
  std::map<SlotKey, StoredChunk> chunks_;
  std::vector<AcceptedWrite> log_;
  std::vector<RejectedWrite> rejections_;
  std::string pending_;                 ///< encoded records not yet handed to the flusher
  std::int64_t pending_records_ = 0;
  std::int64_t last_seq_ = 0;
  std::int64_t durable_seq_ = 0;
  std::int64_t accepted_ = 0;
  std::int64_t rejected_ = 0;
  std::int64_t fsyncs_ = 0;
  bool closing_ = false;
  bool failed_ = false;
  std::string failure_;
  std::thread flusher_;
  std::mutex close_mu_;  ///< serialises close()
};

}  // namespace fencecheck
