#include "fencecheck/harness/yaml_documents.h"

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <vector>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

namespace fencecheck::harness {
namespace {

/// Where each document, and its root node, starts; nothing else is kept.
class DocumentMarks final : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> documents;  // each document's start
  std::vector<YAML::Mark> roots;      // each document's root node (first node event after the start)

  void OnDocumentStart(const YAML::Mark& mark) override {
    documents.push_back(mark);
    want_root_ = true;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override { node(mark); }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(mark);
  }
  void OnMapEnd() override {}

 private:
  void node(const YAML::Mark& mark) {
    if (!want_root_) return;
    roots.push_back(mark);
    want_root_ = false;
  }
  bool want_root_ = false;
};

YAML::Mark mark_at(int pos, int line, int column) {
  YAML::Mark m;
  m.pos = pos;
  m.line = line;
  m.column = column;
  return m;
}

/// The first control character YAML 1.2 does not allow (5.1, c-printable: tab, LF and CR are the
/// only C0 characters; DEL is out too), as ParserException's 0-based mark.
void refuse_control_characters(const std::string& text) {
  int line = 0;
  int column = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) {
      char code[8];
      std::snprintf(code, sizeof code, "U+%04X", c);
      throw YAML::ParserException(mark_at(static_cast<int>(i), line, column),
                                  std::string("control character ") + code +
                                      " is not allowed: YAML text is printable characters only (YAML 1.2, 5.1)");
    }
    if (c == '\n') {
      ++line;
      column = 0;
    } else {
      ++column;  // in bytes, as the loader's UTF-8 check counts them
    }
  }
}

/// Every scalar of the tree (keys too) is UTF-8 once read, else a ParserException at it.
void refuse_non_utf8_scalars(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      if (first_invalid_utf8(node.Scalar()))
        throw YAML::ParserException(node.Mark(),
                                    "this string is not UTF-8 once its escapes are read: yaml-cpp 0.7 turns \\N and "
                                    "\\_ into single bytes, not U+0085 and U+00A0; write the character itself");
      break;
    case YAML::NodeType::Sequence:
      for (const auto& item : node) refuse_non_utf8_scalars(item);
      break;
    case YAML::NodeType::Map:
      for (const auto& kv : node) {
        refuse_non_utf8_scalars(kv.first);
        refuse_non_utf8_scalars(kv.second);
      }
      break;
    default:
      break;
  }
}

/// The text is UTF-8, else a ParserException at its first bad byte (column in bytes).
void refuse_non_utf8_text(const std::string& text) {
  const auto bad = first_invalid_utf8(text);
  if (!bad) return;
  int line = 0;
  int column = 0;
  for (std::size_t i = 0; i < *bad; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 0;
    } else {
      ++column;
    }
  }
  throw YAML::ParserException(mark_at(static_cast<int>(*bad), line, column),
                              "not UTF-8: YAML text is Unicode, encoded as UTF-8 here (YAML 1.2, 5.2)");
}

}  // namespace

std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n != 0 && i + n <= text.size();
    std::uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (std::size_t k = 1; ok && k < n; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      ok = (b & 0xC0) == 0x80;
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (ok && n > 1) ok = cp >= kMin[n] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) return i;
    i += n;
  }
  return std::nullopt;
}

YamlDocuments load_yaml_documents(const std::string& text) {
  refuse_non_utf8_text(text);
  refuse_control_characters(text);
  // Pass 1: the documents' marks, by events, stopping where the parser makes no progress.
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentMarks marks;
  while (parser.HandleNextDocument(marks)) {
    const auto n = marks.documents.size();
    // A document that starts where the previous one started consumed nothing: yaml-cpp 0.7
    // would report it again for ever (jbeder/yaml-cpp#1040). It is a token no node starts with.
    if (n >= 2 && marks.documents[n - 1].pos == marks.documents[n - 2].pos) {
      const YAML::Mark at = marks.documents[n - 1];
      const char c = at.pos >= 0 && static_cast<std::size_t>(at.pos) < text.size() ? text[static_cast<std::size_t>(at.pos)] : '?';
      throw YAML::ParserException(at, std::string("unexpected '") + c +
                                          "': no YAML node starts with it here (a flow indicator such as ',' belongs "
                                          "inside [ ] or { }; quote it to mean the character)");
    }
  }
  YamlDocuments out;
  out.count = marks.documents.size();
  if (out.count >= 2) out.second = marks.roots.size() >= 2 ? marks.roots[1] : marks.documents[1];
  // Pass 2: the first document as nodes (YAML::Load reads one document, so it cannot loop).
  if (out.count >= 1) {
    out.first = YAML::Load(text);
    refuse_non_utf8_scalars(out.first);
  }
  return out;
}

}  // namespace fencecheck::harness
