// The node memory a process maps (client.h: MapArena): one mapping per arena for all its clients.
// A reader that runs one client per thread would otherwise map (and populate, and unmap at exit)
// every arena once per thread.
#include <map>

#include "native_client/client.h"

namespace lcn {
namespace {

constexpr uint64_t kChunk = 4ull << 20;  // populated at a time

struct Arena {
  Mapping m;
  dev_t dev = 0;
  ino_t ino = 0;
  int clients = 0;
  std::vector<uint8_t> populated;  // by kChunk
};

struct Arenas {
  std::mutex mu;
  std::map<std::pair<dev_t, ino_t>, Arena> by_file;
  std::map<const char*, std::pair<dev_t, ino_t>> by_data;
};

Arenas& Registry() {
  static auto* arenas = new Arenas;  // never destroyed: clients may outlive static destruction
  return *arenas;
}

}  // namespace

void LockArenas() { Registry().mu.lock(); }
void UnlockArenas() { Registry().mu.unlock(); }
void ArenasAfterFork() {
  Arenas& r = Registry();
  new (&r.mu) std::mutex();
  for (auto& [key, a] : r.by_file) std::fill(a.populated.begin(), a.populated.end(), 0);
}

Mapping MapArena(int fd, size_t bytes) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return {};
  Arenas& r = Registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto key = std::make_pair(st.st_dev, st.st_ino);
  if (auto it = r.by_file.find(key); it != r.by_file.end() && it->second.m.bytes == bytes) {
    ++it->second.clients;
    return it->second.m;
  }
  void* data = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return {};
  Mapping m{static_cast<const char*>(data), bytes, true};
  if (r.by_file.contains(key)) {
    // The same file again at another size (it cannot be: arenas are sealed): keep it apart.
    m.shared = false;
    return m;
  }
  Arena& a = r.by_file[key];
  a.m = m;
  a.clients = 1;
  a.populated.assign(bytes / kChunk + 1, 0);
  r.by_data[m.data] = key;
  return m;
}

void UnmapArena(const Mapping& m) {
  if (!m.shared) {
    ::munmap(const_cast<char*>(m.data), m.bytes);
    return;
  }
  Arenas& r = Registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto at = r.by_data.find(m.data);
  if (at == r.by_data.end()) return;
  auto it = r.by_file.find(at->second);
  if (--it->second.clients > 0) return;
  ::munmap(const_cast<char*>(m.data), m.bytes);
  r.by_file.erase(it);
  r.by_data.erase(at);
}

void Populate(const Mapping& m, uint64_t offset, uint64_t length) {
  if (length == 0 || !m.shared) return;
  std::vector<std::pair<uint64_t, uint64_t>> todo;  // populated outside the lock
  {
    Arenas& r = Registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto at = r.by_data.find(m.data);
    if (at == r.by_data.end()) return;
    std::vector<uint8_t>& done = r.by_file[at->second].populated;
    for (uint64_t chunk = offset / kChunk;
         chunk <= (offset + length - 1) / kChunk && chunk < done.size(); ++chunk) {
      if (done[chunk]) continue;
      done[chunk] = 1;
      uint64_t from = chunk * kChunk;
      todo.emplace_back(from, std::min(kChunk, m.bytes - from));
    }
  }
#ifdef MADV_POPULATE_READ
  for (auto [from, n] : todo)
    (void)::madvise(const_cast<char*>(m.data) + from, n, MADV_POPULATE_READ);
#endif
}

}  // namespace lcn
