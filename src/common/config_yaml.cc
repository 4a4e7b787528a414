// YAML text to ConfigTree. yaml-cpp reports syntax errors by exception; they become Status here.
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "common/config_tree.h"

namespace lakecache::config_internal {

Result<ConfigTree> ParseYamlTree(std::string_view text, const std::string& source) {
  ConfigTree tree;
  try {
    // One document per file: a second one would otherwise be ignored without a word.
    std::vector<YAML::Node> documents = YAML::LoadAll(std::string(text));
    if (documents.size() > 1) {
      return Status::InvalidArgument(source + ": holds " + std::to_string(documents.size()) +
                                     " YAML documents; expected one");
    }
    if (!documents.empty()) tree.root = documents.front();
  } catch (const YAML::Exception& e) {
    // e.msg says what is wrong without quoting the text, so no secret value can leak through it.
    std::string where = e.mark.is_null() ? std::string()
                                         : "line " + std::to_string(e.mark.line + 1) + ", column " +
                                               std::to_string(e.mark.column + 1) + ": ";
    return Status::InvalidArgument(source + ": " + where + "YAML syntax error: " + e.msg);
  }
  return tree;
}

}  // namespace lakecache::config_internal
