// How many times slower this build runs than a plain one: 1, or more under a sanitizer
// (tests/CMakeLists.txt sets it for LAKECACHE_SANITIZE). Tests whose outcome depends on timing,
// such as a heartbeat timeout that must not expire under load, stretch their durations by it.
#pragma once

#ifndef LAKECACHE_TEST_SLOWDOWN
#define LAKECACHE_TEST_SLOWDOWN 1
#endif

namespace lakecache::testing {

inline constexpr int kSlowdown = LAKECACHE_TEST_SLOWDOWN;

}  // namespace lakecache::testing
