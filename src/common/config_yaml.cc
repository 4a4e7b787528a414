// YAML text to ConfigTree. yaml-cpp reports syntax errors by exception; they become Status here.
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <sstream>
#include <string>
#include <vector>

#include "common/config_tree.h"

namespace lakecache::config_internal {
namespace {

// Where each document of a text starts; the rest of the events are not needed.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;

  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

std::string Where(const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1) +
         ": ";
}

}  // namespace

Result<ConfigTree> ParseYamlTree(std::string_view text, const std::string& source) {
  ConfigTree tree;
  std::string yaml(text);
  try {
    // One document per file: a second one would otherwise be ignored without a word. They are
    // counted with the event parser, not YAML::LoadAll: at a token no document can start with (a
    // ',' at the top level) yaml-cpp 0.7 hands out the same empty document forever without moving
    // on, and LoadAll never returns. A document starting where the last one did is that token.
    std::istringstream in(yaml);
    YAML::Parser parser(in);
    DocumentStarts documents;
    std::vector<YAML::Mark>& starts = documents.starts;
    while (parser.HandleNextDocument(documents)) {
      if (starts.size() > 1 && starts.back().pos == starts[starts.size() - 2].pos) {
        return Status::InvalidArgument(source + ": " + Where(starts.back()) +
                                       "YAML syntax error: unexpected token");
      }
    }
    if (starts.size() > 1) {
      return Status::InvalidArgument(source + ": holds " + std::to_string(starts.size()) +
                                     " YAML documents; expected one");
    }
    if (!starts.empty()) tree.root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    // e.msg says what is wrong without quoting the text, so no secret value can leak through it.
    return Status::InvalidArgument(source + ": " + Where(e.mark) + "YAML syntax error: " + e.msg);
  }
  return tree;
}

}  // namespace lakecache::config_internal
