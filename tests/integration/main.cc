// The main of integration_tests, the one program every integration-test file is linked into (one
// link and one set of shared objects instead of one program per file).
//
//   integration_tests STEM...   the tests of tests/integration/STEM.cc only, e.g. etcd_ha_test;
//                               this is what CTest's integration.STEM runs
//   integration_tests           every integration test, one file after the other
//
// gtest's own flags apply within the chosen files: --gtest_filter narrows them further,
// --gtest_list_tests lists them, and GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX split them.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace {

// gtest's pattern syntax: '*' any run of characters, '?' one character.
bool Glob(std::string_view pattern, std::string_view name) {
  size_t p = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool AnyGlob(std::string_view patterns, std::string_view name) {
  while (true) {
    size_t colon = patterns.find(':');
    if (Glob(patterns.substr(0, colon), name)) return true;
    if (colon == std::string_view::npos) return false;
    patterns.remove_prefix(colon + 1);
  }
}

// --gtest_filter's syntax: POSITIVE[-NEGATIVE], each a ':'-separated list of patterns; an empty
// POSITIVE is '*'.
bool MatchesFilter(std::string_view filter, std::string_view name) {
  size_t dash = filter.find('-');
  std::string_view positive = filter.substr(0, dash);
  if (positive.empty()) positive = "*";
  if (!AnyGlob(positive, name)) return false;
  return dash == std::string_view::npos || !AnyGlob(filter.substr(dash + 1), name);
}

// "tests/integration/etcd_ha_test.cc" -> "etcd_ha_test".
std::string Stem(std::string_view file) {
  size_t slash = file.rfind('/');
  if (slash != std::string_view::npos) file.remove_prefix(slash + 1);
  size_t dot = file.rfind('.');
  return std::string(file.substr(0, dot));
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);  // removes gtest's flags from argv
  std::set<std::string> stems(argv + 1, argv + argc);
  if (!stems.empty()) {
    const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
    const std::string user_filter = GTEST_FLAG_GET(filter);
    std::set<std::string> found;
    std::string filter;
    for (int i = 0; i < unit.total_test_suite_count(); ++i) {
      const testing::TestSuite& suite = *unit.GetTestSuite(i);
      for (int j = 0; j < suite.total_test_count(); ++j) {
        const testing::TestInfo& test = *suite.GetTestInfo(j);
        std::string stem = Stem(test.file());
        if (!stems.count(stem)) continue;
        found.insert(stem);
        std::string name = std::string(test.test_suite_name()) + "." + test.name();
        if (!MatchesFilter(user_filter, name)) continue;
        filter += (filter.empty() ? "" : ":") + name;
      }
    }
    for (const std::string& stem : stems) {
      if (!found.count(stem)) {
        std::fprintf(stderr,
                     "integration_tests: no test comes from %s.cc (the arguments name files "
                     "of tests/integration/ without .cc)\n",
                     stem.c_str());
        return 2;
      }
    }
    // No test of the files passes the user's filter: a pattern that matches no test name.
    GTEST_FLAG_SET(filter, filter.empty() ? "-*" : filter);
  }
  return RUN_ALL_TESTS();
}
