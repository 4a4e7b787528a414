// What the CLI says to a mistyped command, where CLI11 says only "A subcommand is required": the
// word it did not know, and the nearest command it has.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace lakecache::cli {

// After `app` failed to parse: "unknown command 'cluster upp'; did you mean 'cluster up'? ..." when
// the deepest command parsed needs a subcommand and a word was left over; empty otherwise.
std::string UnknownCommandMessage(const CLI::App& app);

// The name in `names` nearest to `word` (fewest single-letter edits, or one it begins), or empty
// when none is near enough to be what was meant.
std::string NearestName(const std::string& word, const std::vector<std::string>& names);

}  // namespace lakecache::cli
