#include "cli/unknown_command.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <numeric>

namespace lakecache::cli {
namespace {

// Edits (a letter added, removed or changed) that make `a` into `b`.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// More edits than this and a word is something else, not a typo.
constexpr size_t kMaxEdits = 2;

}  // namespace

std::string NearestName(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_edits = kMaxEdits + 1;
  for (const std::string& name : names) {
    size_t edits = name.starts_with(word) ? 0 : EditDistance(word, name);
    if (edits < best_edits) {
      best = name;
      best_edits = edits;
    }
  }
  return best;
}

std::string UnknownCommandMessage(const CLI::App& app) {
  const CLI::App* command = &app;
  std::string parsed;  // "cluster "
  while (!command->get_subcommands().empty()) {
    command = command->get_subcommands().front();
    parsed += command->get_name() + " ";
  }
  if (command->get_require_subcommand_min() == 0) return "";
  std::string word;
  for (const std::string& w : app.remaining(/*recurse=*/true)) {
    if (!w.empty() && w.front() != '-') {
      word = w;
      break;
    }
  }
  if (word.empty()) return "";
  std::vector<std::string> names;
  for (const CLI::App* sub : command->get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  std::string message = "unknown command '" + parsed + word + "'";
  if (std::string nearest = NearestName(word, names); !nearest.empty()) {
    message += "; did you mean '" + parsed + nearest + "'?";
  }
  return message + " (`lakecache " + parsed + "--help` lists the commands)";
}

}  // namespace lakecache::cli
