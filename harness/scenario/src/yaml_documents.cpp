#include "fencecheck/harness/yaml_documents.h"

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

}  // namespace

YamlDocuments load_yaml_documents(const std::string& text) {
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
  if (out.count >= 1) out.first = YAML::Load(text);
  return out;
}

}  // namespace fencecheck::harness
