// How many times slower this build runs than a plain one: 1, or more under a sanitizer
// (tests/CMakeLists.txt sets it for LAKECACHE_SANITIZE). Tests whose outcome depends on timing,
// such as a heartbeat timeout that must not expire under load, stretch their durations by it.
#pragma once

#ifndef LAKECACHE_TEST_SLOWDOWN
#define LAKECACHE_TEST_SLOWDOWN 1
#endif

namespace lakecache::testing {

inline constexpr int kSlowdown = LAKECACHE_TEST_SLOWDOWN;

// Whether this build runs under AddressSanitizer, whose shadow memory and quarantine of freed
// blocks (256 MiB) count in every process's resident set: memory bounds hold in plain builds only.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace lakecache::testing
