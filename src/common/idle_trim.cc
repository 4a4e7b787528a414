#include "common/idle_trim.h"

#include <map>

#include "common/mutex.h"

namespace lakecache {
namespace {

struct Registry {
  Mutex mu;
  uint64_t next GUARDED_BY(mu) = 1;
  std::map<uint64_t, std::function<void()>> trims GUARDED_BY(mu);
};

Registry& TheRegistry() {
  static auto* registry = new Registry();  // never destroyed: pools may outlive static teardown
  return *registry;
}

}  // namespace

IdleTrim::IdleTrim(std::function<void()> trim) {
  Registry& r = TheRegistry();
  MutexLock lock(&r.mu);
  id_ = r.next++;
  r.trims.emplace(id_, std::move(trim));
}

IdleTrim::~IdleTrim() {
  if (id_ == 0) return;
  Registry& r = TheRegistry();
  MutexLock lock(&r.mu);
  r.trims.erase(id_);
}

void RunIdleTrims() {
  Registry& r = TheRegistry();
  MutexLock lock(&r.mu);
  for (auto& [id, trim] : r.trims) trim();
}

}  // namespace lakecache
