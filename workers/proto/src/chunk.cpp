#include "fencecheck/proto/chunk.h"

#include <charconv>
#include <cstdio>
#include <stdexcept>

#include <boost/crc.hpp>

namespace fencecheck {
namespace {

constexpr std::string_view kMagic = "fc1 ";
constexpr std::string_view kCrcTag = " crc=";

bool read_field(std::string_view& rest, std::string_view name, std::string_view& value) {
  if (rest.substr(0, name.size()) != name) return false;
  rest.remove_prefix(name.size());
  auto sp = rest.find(' ');
  value = rest.substr(0, sp);
  rest = sp == std::string_view::npos ? std::string_view{} : rest.substr(sp + 1);
  return true;
}

bool to_int(std::string_view s, std::int64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && out >= 0;
}

}  // namespace

bool is_safe_name(std::string_view s, std::size_t max_len) {
  if (s.empty() || s.size() > max_len) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-';
    if (!ok) return false;
  }
  return true;
}

std::uint32_t crc32(std::string_view bytes) {
  boost::crc_32_type crc;
  crc.process_bytes(bytes.data(), bytes.size());
  return crc.checksum();
}

std::string encode_chunk(const ChunkHeader& h, std::size_t size_bytes) {
  if (!is_safe_name(h.worker, 64)) throw std::invalid_argument("chunk worker id '" + h.worker + "' must be 1-64 of [A-Za-z0-9_.-]");
  if (!is_safe_name(h.key, 256)) throw std::invalid_argument("chunk key '" + h.key + "' must be 1-256 of [A-Za-z0-9_.-]");
  if (h.token < 0 || h.segment < 0 || h.chunk < 0) throw std::invalid_argument("chunk token, segment and chunk must be >= 0");
  std::string out(kMagic);
  out += "w=" + h.worker + " t=" + std::to_string(h.token) + " k=" + h.key + " s=" + std::to_string(h.segment) +
         " c=" + std::to_string(h.chunk) + " f=";
  const std::size_t tail = kCrcTag.size() + 8;
  if (out.size() + tail < size_bytes) out.append(size_bytes - out.size() - tail, 'x');
  char crc[9];
  std::snprintf(crc, sizeof crc, "%08x", crc32(out));
  out += kCrcTag;
  out += crc;
  return out;
}

ChunkDecode decode_chunk(std::string_view bytes) {
  ChunkDecode d;
  if (bytes.substr(0, kMagic.size()) != kMagic) {
    d.error = "not a fencecheck chunk: it does not start with 'fc1 '";
    return d;
  }
  auto crc_pos = bytes.rfind(kCrcTag);
  if (crc_pos == std::string_view::npos || bytes.size() - crc_pos - kCrcTag.size() != 8) {
    d.error = "chunk has no ' crc=XXXXXXXX' trailer (torn write?)";
    return d;
  }
  std::string_view stored = bytes.substr(crc_pos + kCrcTag.size());
  char want[9];
  std::snprintf(want, sizeof want, "%08x", crc32(bytes.substr(0, crc_pos)));
  if (stored != std::string_view(want, 8)) {
    d.error = "chunk checksum mismatch: stored " + std::string(stored) + ", computed " + want;
    return d;
  }
  std::string_view rest = bytes.substr(kMagic.size(), crc_pos - kMagic.size());
  std::string_view w, t, k, s, c, f;
  if (!read_field(rest, "w=", w) || !read_field(rest, "t=", t) || !read_field(rest, "k=", k) ||
      !read_field(rest, "s=", s) || !read_field(rest, "c=", c) || !read_field(rest, "f=", f)) {
    d.error = "chunk header is missing a field (expected w= t= k= s= c= f=)";
    return d;
  }
  if (!to_int(t, d.header.token) || !to_int(s, d.header.segment) || !to_int(c, d.header.chunk)) {
    d.error = "chunk header has a non-numeric token, segment or chunk";
    return d;
  }
  d.header.worker = std::string(w);
  d.header.key = std::string(k);
  d.ok = true;
  return d;
}

}  // namespace fencecheck
