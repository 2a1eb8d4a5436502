// fencecheck — reading a YAML file's documents without yaml-cpp 0.7's endless loop.
//
// Debian 12's yaml-cpp 0.7.0 loops for ever in YAML::LoadAll on a stream with a token no node can
// start with where a document's node is expected (a lone ',' at the top level, e.g. the text ",\n"
// or "- a\n,\n"): its SingleDocParser reports a null node without consuming the token, and
// LoadAll asks for the next document again, at the same place, allocating each time until memory
// runs out (jbeder/yaml-cpp#1040; fixed upstream by PR #1319, 2024, not in Debian 12). Found by
// the scenario fuzz target (tests/fuzz/regressions/scenario/). Every YAML file fencecheck reads
// (scenarios, probe files) goes through load_yaml_documents() instead of LoadAll.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

namespace fencecheck::harness {

/// The documents of one YAML text, as the loaders need them.
struct YamlDocuments {
  std::size_t count = 0;  ///< documents in the stream (0 for an empty text)
  YAML::Node first;       ///< the first document's root (a null node when count == 0)
  YAML::Mark second;      ///< where the second document's root starts (count >= 2 only)
};

/// Reads every document of `text` (UTF-8 YAML 1.2). Throws YAML::ParserException (with the mark
/// of the offending character or scalar) for a syntax error, including
///  - the token yaml-cpp 0.7 would loop on ("unexpected ','");
///  - a control character (C0 but tab, line feed and carriage return; DEL): YAML 1.2 section 5.1
///    allows printable characters only, and yaml-cpp 0.7 reads a NUL as if it were a backslash;
///  - a scalar of the first document that is not UTF-8 once its escapes are read: yaml-cpp 0.7
///    turns the escapes \N and \_ into the single bytes 0x85 and 0xA0, not U+0085 and U+00A0,
///    which no JSON file (scenario.json) can hold (found by the scenario fuzz target);
///  - a text that is not UTF-8 (YAML 1.2, 5.2: a YAML stream is Unicode), at its first bad byte;
/// and YAML::Exception for the library's other errors. Pure; thread-safe.
[[nodiscard]] YamlDocuments load_yaml_documents(const std::string& text);

/// The 0-based byte offset of the first byte of `text` that does not begin a valid UTF-8 sequence
/// (RFC 3629, section 3: no overlong forms, no surrogates U+D800..U+DFFF, nothing above U+10FFFF,
/// no sequence cut short by the end), or nullopt when all of `text` is UTF-8. Every string a
/// scenario holds ends up in scenario.json, and a JSON serialiser refuses invalid UTF-8 (found by
/// tests/fuzz/scenario_fuzz.cpp). Pure; thread-safe.
[[nodiscard]] std::optional<std::size_t> first_invalid_utf8(std::string_view text);

}  // namespace fencecheck::harness
