// What of a file this process maps is resident: for tests that a process does not keep the pages
// of a file it reads or appends to mapped (they are the page cache's, not its memory).
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

namespace lakecache::testing {

// The resident KiB (Rss of /proc/self/smaps) of this process's maps whose path `names` accepts
// (as /proc shows it: canonical, " (deleted)" after an unlinked file's).
size_t MappedResidentKib(const std::function<bool(std::string_view path)>& names);

}  // namespace lakecache::testing
