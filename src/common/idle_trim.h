// Idle trims: process-wide hooks that give back what a daemon holds only in case it is needed again
// (pooled block mappings, idle connections to the object store), once it has sat unused for a
// while. Without them a pool keeps the high-water mark of the last burst until the next one
// touches it, however long that takes.
//
// A daemon runs them every 30 s (cli/main.cc, with malloc_trim); tests call RunIdleTrims. A trim
// runs under the registry's lock: it must be quick, and must not register or unregister one.
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>

namespace lakecache {

// Keeps `trim` registered for the object's life; unregistering waits for a run in progress.
class IdleTrim {
 public:
  IdleTrim() = default;
  explicit IdleTrim(std::function<void()> trim);
  ~IdleTrim();
  IdleTrim(const IdleTrim&) = delete;
  IdleTrim& operator=(const IdleTrim&) = delete;

 private:
  uint64_t id_ = 0;
};

// Runs every registered trim once.
void RunIdleTrims();

}  // namespace lakecache
