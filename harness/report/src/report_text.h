// fencecheck — private text helpers shared by the report writers (report_html.cpp, junit.cpp,
// report.cpp): making arbitrary bytes safe for XML/HTML, escaping, and number formatting.
// Not a public header: it lives beside the sources that use it.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fencecheck::harness::report_text {

/// Makes `in` valid UTF-8 made only of characters XML 1.0 allows (#x9, #xA, #xD, #x20-#xD7FF,
/// #xE000-#xFFFD, #x10000-#x10FFFF). Any other byte or code point is spelled out as the text
/// "\xNN" (one per byte), so nothing is silently lost and the output always parses. Pure.
inline std::string xml_safe(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  auto hex = [&out](unsigned char b) {
    static constexpr char kDigits[] = "0123456789ABCDEF";
    out += "\\x";
    out += kDigits[b >> 4];
    out += kDigits[b & 0xF];
  };
  std::size_t i = 0;
  while (i < in.size()) {
    const auto b0 = static_cast<unsigned char>(in[i]);
    if (b0 < 0x80) {
      if (b0 >= 0x20 || b0 == 0x9 || b0 == 0xA || b0 == 0xD) out += static_cast<char>(b0);
      else hex(b0);
      ++i;
      continue;
    }
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if ((b0 & 0xE0) == 0xC0) len = 2, cp = b0 & 0x1F;
    else if ((b0 & 0xF0) == 0xE0) len = 3, cp = b0 & 0x0F;
    else if ((b0 & 0xF8) == 0xF0) len = 4, cp = b0 & 0x07;
    bool ok = len != 0 && i + len <= in.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(in[i + k]);
      if ((b & 0xC0) != 0x80) ok = false;
      else cp = (cp << 6) | (b & 0x3F);
    }
    if (ok) {
      const bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
      const bool allowed = (cp >= 0x20 && cp <= 0xD7FF) || (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
      ok = !overlong && allowed;
    }
    if (ok) {
      out.append(in.substr(i, len));
      i += len;
    } else {
      hex(b0);
      ++i;
    }
  }
  return out;
}

/// Escapes text for HTML element content and (double- or single-quoted) attribute values, after
/// xml_safe(). Pure.
inline std::string html(std::string_view in) {
  const std::string safe = xml_safe(in);
  std::string out;
  out.reserve(safe.size() + safe.size() / 8);
  for (char c : safe) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

/// printf into a std::string (for numbers: "%.2f").
[[gnu::format(printf, 1, 2)]] inline std::string format(const char* fmt, ...) {
  char buf[128];
  std::va_list args;
  va_start(args, fmt);
  std::va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  std::string out;
  if (n >= 0 && static_cast<std::size_t>(n) < sizeof buf) {
    out.assign(buf, static_cast<std::size_t>(n));
  } else if (n >= 0) {
    out.resize(static_cast<std::size_t>(n) + 1);
    std::vsnprintf(out.data(), out.size(), fmt, again);
    out.resize(static_cast<std::size_t>(n));
  }
  va_end(again);
  return out;
}

/// Seconds with two decimals and a unit: "6.00 s".
inline std::string seconds(double s) { return format("%.2f s", s); }

/// Replaces `path` with `text` atomically: writes a hidden temporary file beside it, then renames
/// it over `path`, so a reader sees the old file or the new one, never half of one. The parent
/// directory must exist. Throws std::runtime_error naming the path (the temporary is removed).
inline void write_file_atomically(const std::filesystem::path& path, const std::string& text) {
  namespace fs = std::filesystem;
  const fs::path tmp = path.parent_path() / ("." + path.filename().string() + ".tmp");
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (out) out << text << std::flush;
    if (!out) {
      fs::remove(tmp, ec);
      throw std::runtime_error("cannot write " + tmp.string());
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot write " + path.string() + ": " + why);
  }
}

}  // namespace fencecheck::harness::report_text
