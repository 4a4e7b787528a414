#include "fs/held_inodes.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

namespace lakecache {
namespace {

constexpr uint64_t kNumberMask = (1ull << HeldInodes::kNumberBits) - 1;
constexpr uint8_t kHeapName = 0xff;

std::string_view DirName(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

std::string_view BaseName(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string HeldInodes::AsideKey(uint32_t ns, std::string_view path) {
  std::string key(reinterpret_cast<const char*>(&ns), sizeof(ns));
  key += path;
  return key;
}

uint64_t HeldInodes::HomeOf(uint32_t ns, std::string_view path) const {
  uint64_t home = XXH3_64bits_withSeed(path.data(), path.size(), ns) & kNumberMask;
  return home <= kRootIno ? home + 2 : home;
}

// 48 bytes: the table's slots are these. A name longer than the inline bytes is on the heap, its
// pointer and length in those bytes.
struct HeldInodes::Entry {
  uint64_t ino = 0;  // 0: a free slot
  uint64_t parent = 0;
  uint32_t lookups = 0;
  uint32_t children = 0;  // held entries whose parent this is
  uint16_t ns = 0;
  uint8_t is_dir = 0;
  uint8_t name_len = 0;  // kHeapName: on the heap
  char bytes[kInlineName];

  std::string_view name() const {
    if (name_len != kHeapName) return std::string_view(bytes, name_len);
    const char* data;
    uint32_t len;
    std::memcpy(&data, bytes, sizeof(data));
    std::memcpy(&len, bytes + sizeof(data), sizeof(len));
    return std::string_view(data, len);
  }
  void SetName(std::string_view n) {
    FreeName();
    if (n.size() <= sizeof(bytes)) {
      std::memcpy(bytes, n.data(), n.size());
      name_len = static_cast<uint8_t>(n.size());
      return;
    }
    char* data = new char[n.size()];
    std::memcpy(data, n.data(), n.size());
    auto len = static_cast<uint32_t>(n.size());
    std::memcpy(bytes, &data, sizeof(data));
    std::memcpy(bytes + sizeof(data), &len, sizeof(len));
    name_len = kHeapName;
  }
  void FreeName() {
    if (name_len == kHeapName) delete[] name().data();
    name_len = 0;
  }
};
static_assert(sizeof(HeldInodes::Entry) <= 48);

// Open addressing by inode number (linear probing, deletion by backward shift), grown at 3/4 full
// and shrunk at 1/8, so that its memory follows what is held.
class HeldInodes::Table {
 public:
  Table() : slots_(kMinSlots) {}
  ~Table() {
    for (Entry& e : slots_) e.FreeName();
  }

  Entry* Find(uint64_t ino) {
    for (size_t i = Home(ino);; i = (i + 1) & Mask()) {
      if (slots_[i].ino == ino) return &slots_[i];
      if (slots_[i].ino == 0) return nullptr;
    }
  }
  const Entry* Find(uint64_t ino) const { return const_cast<Table*>(this)->Find(ino); }

  // REQUIRES: no entry has e.ino. Returns the stored entry.
  Entry* Insert(const Entry& e) {
    if ((count_ + 1) * 4 > slots_.size() * 3) Resize(slots_.size() * 2);
    size_t i = Home(e.ino);
    while (slots_[i].ino != 0) i = (i + 1) & Mask();
    slots_[i] = e;
    ++count_;
    return &slots_[i];
  }

  // Frees the entry's name and its slot.
  void Erase(Entry* e) {
    e->FreeName();
    size_t hole = static_cast<size_t>(e - slots_.data());
    slots_[hole].ino = 0;
    --count_;
    for (size_t i = (hole + 1) & Mask(); slots_[i].ino != 0; i = (i + 1) & Mask()) {
      size_t home = Home(slots_[i].ino);
      // Move the entry back into the hole unless its home lies in (hole, i].
      bool stays = hole < i ? (home > hole && home <= i) : (home > hole || home <= i);
      if (stays) continue;
      slots_[hole] = slots_[i];
      slots_[i].ino = 0;
      slots_[i].name_len = 0;
      hole = i;
    }
    if (slots_.size() > kMinSlots && count_ * 8 < slots_.size()) Resize(slots_.size() / 2);
  }

  size_t size() const { return count_; }
  size_t slots() const { return slots_.size(); }

 private:
  static constexpr size_t kMinSlots = 1024;
  size_t Mask() const { return slots_.size() - 1; }
  size_t Home(uint64_t ino) const { return static_cast<size_t>(XXH3_64bits(&ino, 8)) & Mask(); }

  void Resize(size_t slots) {
    std::vector<Entry> old(slots);
    old.swap(slots_);
    for (const Entry& e : old) {
      if (e.ino == 0) continue;
      size_t i = Home(e.ino);
      while (slots_[i].ino != 0) i = (i + 1) & Mask();
      slots_[i] = e;  // the name moves with it
    }
  }

  std::vector<Entry> slots_;
  size_t count_ = 0;
};

HeldInodes::HeldInodes(uint32_t root_ns) : root_ns_(root_ns), table_(std::make_unique<Table>()) {
  Entry root;
  root.ino = kRootIno;
  root.ns = static_cast<uint16_t>(root_ns);
  root.is_dir = 1;
  root.lookups = 1;  // never forgotten
  table_->Insert(root);
}

HeldInodes::~HeldInodes() = default;

uint64_t HeldInodes::NumberOf(uint32_t ns, std::string_view path) const {
  ReaderMutexLock lock(&mu_);
  if (uint64_t held = FindLocked(ns, path); held != 0) return held;
  uint64_t number = HomeOf(ns, path);
  while (table_->Find(number) != nullptr)
    number = std::max<uint64_t>((number + 1) & kNumberMask, 2);
  return number;
}

uint64_t HeldInodes::FindLocked(uint32_t ns, std::string_view path) const {
  if (ns == root_ns_ && path.empty()) return kRootIno;
  if (!aside_.empty()) {
    if (auto it = aside_.find(AsideKey(ns, path)); it != aside_.end()) return it->second;
  }
  uint64_t home = HomeOf(ns, path);
  const Entry* e = table_->Find(home);
  if (e == nullptr || e->ns != ns || e->name() != BaseName(path)) return 0;
  // The same name in the same namespace: the same parent too?
  uint64_t parent = path.empty() ? kRootIno : FindLocked(ns, DirName(path));
  return parent != 0 && e->parent == parent ? home : 0;
}

uint64_t HeldInodes::Acquire(uint32_t ns, std::string_view path, bool is_dir) {
  WriterMutexLock lock(&mu_);
  return AcquireLocked(ns, path, is_dir, 1);
}

uint64_t HeldInodes::AcquireLocked(uint32_t ns, std::string_view path, bool is_dir,
                                   uint32_t count) {
  if (uint64_t held = FindLocked(ns, path); held != 0) {
    Entry* e = table_->Find(held);
    if (held != kRootIno) {
      e->lookups += count;
      e->is_dir = is_dir ? 1 : 0;
    }
    return held;
  }
  // Its parent first (held by it from now on): a namespace root's is the mount's root.
  uint64_t parent = path.empty() ? kRootIno : AcquireLocked(ns, DirName(path), true, 0);
  table_->Find(parent)->children++;
  Entry e;
  e.ino = HomeOf(ns, path);
  while (table_->Find(e.ino) != nullptr) e.ino = std::max<uint64_t>((e.ino + 1) & kNumberMask, 2);
  if (e.ino != HomeOf(ns, path)) aside_[AsideKey(ns, path)] = e.ino;
  e.parent = parent;
  e.lookups = count;
  e.ns = static_cast<uint16_t>(ns);
  e.is_dir = is_dir ? 1 : 0;
  table_->Insert(e)->SetName(BaseName(path));
  return e.ino;
}

void HeldInodes::Restore(uint64_t ino, uint32_t ns, std::string_view path, bool is_dir) {
  WriterMutexLock lock(&mu_);
  if (ino <= kRootIno) return;
  if (uint64_t held = FindLocked(ns, path); held != 0) {
    Entry* e = table_->Find(held);
    if (held == ino) {
      e->lookups = kRestoredLookups;
      e->is_dir = is_dir ? 1 : 0;
    }
    return;  // held under another number already: the first record wins
  }
  if (table_->Find(ino) != nullptr) return;  // the number is another path's
  uint64_t parent = path.empty() ? kRootIno : AcquireLocked(ns, DirName(path), true, 0);
  table_->Find(parent)->children++;
  Entry e;
  e.ino = ino;
  e.parent = parent;
  e.lookups = kRestoredLookups;
  e.ns = static_cast<uint16_t>(ns);
  e.is_dir = is_dir ? 1 : 0;
  if (ino != HomeOf(ns, path)) aside_[AsideKey(ns, path)] = ino;
  table_->Insert(e)->SetName(BaseName(path));
}

bool HeldInodes::Forget(uint64_t ino, uint64_t count) {
  WriterMutexLock lock(&mu_);
  Entry* e = ino == kRootIno ? nullptr : table_->Find(ino);
  if (e == nullptr) return false;
  e->lookups -= static_cast<uint32_t>(std::min<uint64_t>(count, e->lookups));
  if (e->lookups != 0 || e->children != 0) return false;
  ReleaseLocked(ino);
  return true;
}

void HeldInodes::ReleaseLocked(uint64_t ino) {
  // Up the chain: each parent that nothing holds any more goes too.
  while (ino != kRootIno) {
    Entry* e = table_->Find(ino);
    if (e == nullptr || e->lookups != 0 || e->children != 0) return;
    uint64_t parent = e->parent;
    if (!aside_.empty()) {
      std::string path;
      if (SpellLocked(ino, &path)) {
        if (auto it = aside_.find(AsideKey(e->ns, path)); it != aside_.end() && it->second == ino)
          aside_.erase(it);
      }
    }
    table_->Erase(e);
    Entry* p = table_->Find(parent);
    if (p == nullptr) return;
    --p->children;
    ino = parent;
  }
}

uint64_t HeldInodes::Move(uint32_t ns, std::string_view from, std::string_view to) {
  WriterMutexLock lock(&mu_);
  uint64_t ino = FindLocked(ns, from);
  if (ino == 0 || ino == kRootIno) return 0;
  uint64_t parent = to.empty() ? kRootIno : AcquireLocked(ns, DirName(to), true, 0);
  table_->Find(parent)->children++;
  Entry* e = table_->Find(ino);
  uint64_t old_parent = e->parent;
  e->parent = parent;
  e->SetName(BaseName(to));
  aside_.erase(AsideKey(ns, from));
  aside_[AsideKey(ns, to)] = ino;  // found by its new path, whatever its hash
  Entry* old = table_->Find(old_parent);
  --old->children;
  ReleaseLocked(old_parent);
  return ino;
}

bool HeldInodes::SpellLocked(uint64_t ino, std::string* path) const {
  std::vector<std::string_view> names;
  for (const Entry* e = table_->Find(ino); e != nullptr && e->ino != kRootIno;
       e = table_->Find(e->parent)) {
    if (e->name().empty() && e->parent == kRootIno) break;  // a namespace's root
    names.push_back(e->name());
    if (names.size() > 4096) return false;  // a loop: never made, never followed
  }
  path->clear();
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    if (!path->empty()) path->push_back('/');
    path->append(*it);
  }
  return true;
}

std::optional<HeldInodes::Info> HeldInodes::Get(uint64_t ino) const {
  ReaderMutexLock lock(&mu_);
  const Entry* e = table_->Find(ino);
  if (e == nullptr) return std::nullopt;
  Info info;
  info.ns = e->ns;
  info.is_dir = e->is_dir != 0;
  if (!SpellLocked(ino, &info.path)) return std::nullopt;
  return info;
}

size_t HeldInodes::size() const {
  ReaderMutexLock lock(&mu_);
  return table_->size();
}

size_t HeldInodes::bytes_per_entry() const {
  ReaderMutexLock lock(&mu_);
  return table_->slots() * sizeof(Entry) / std::max<size_t>(table_->size(), 1);
}

}  // namespace lakecache
