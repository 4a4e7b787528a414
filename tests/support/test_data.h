// Test data for integration tests: deterministic object contents, and a file read back whole
// (with the errno of a failed read, for tests that expect one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lakecache::testing {

// `size` deterministic bytes, different for every seed.
std::string MakeBytes(uint64_t seed, size_t size);

// The whole file, or the errno of the call that failed.
struct FileBytes {
  int error = 0;
  std::string bytes;
};

// Reads `path` with open(2) and read(2) (retrying EINTR) to its end; on a failed open or read,
// `error` is its errno (and `bytes` what was read before).
FileBytes ReadWholeFile(const std::string& path);

}  // namespace lakecache::testing
