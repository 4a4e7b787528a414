#include "fs/held_inodes.h"

#include <malloc.h>
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

// 48 bytes. A name longer than the inline bytes is on the heap, its
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
      if (!n.empty()) std::memcpy(bytes, n.data(), n.size());
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

// The entries, dense in chunks of kChunk (no capacity beyond the last chunk), and an index of
// 4-byte slots by inode number (open addressing, linear probing, deletion by backward shift)
// grown at 3/4 full and shrunk below 1/4: with the 48-byte entries, at most 64 bytes per held
// entry once the table is past its first chunk. A slot holds an entry's position in its low
// log2(slots) bits (enough: there are fewer entries than slots) and bits of its number's hash in
// the rest, so that a probe reads the entry only when those match (a table of millions of
// entries is far larger than the processor's caches: each entry read is a miss). An erased entry's
// place is taken by the last one. Entry pointers last until the next Insert or Erase.
class HeldInodes::Table {
 public:
  Table() { Reindex(kMinSlots); }
  ~Table() {
    for (size_t i = 0; i < count_; ++i) At(i).FreeName();
  }

  Entry* Find(uint64_t ino) {
    size_t slot = SlotOf(ino, HashOf(ino));
    return index_[slot] == kEmpty ? nullptr : &At(PosOf(index_[slot]));
  }
  const Entry* Find(uint64_t ino) const { return const_cast<Table*>(this)->Find(ino); }

  // REQUIRES: no entry has e.ino. Returns the stored entry.
  Entry* Insert(const Entry& e) {
    if ((count_ + 1) * 4 > index_.size() * 3) Reindex(index_.size() * 2);
    if (count_ == chunks_.size() * kChunk) chunks_.push_back(std::make_unique<Entry[]>(kChunk));
    const uint64_t hash = HashOf(e.ino);
    index_[SlotOf(e.ino, hash)] = SlotValue(count_, hash);
    At(count_) = e;
    return &At(count_++);
  }

  // Frees the entry's name and its place.
  void Erase(Entry* e) {
    e->FreeName();
    const uint64_t ino = e->ino;
    size_t hole = SlotOf(ino, HashOf(ino));
    const uint32_t pos = PosOf(index_[hole]);
    const size_t last = count_ - 1;
    if (pos != last) {
      const uint64_t moved = HashOf(At(last).ino);
      index_[SlotOf(At(last).ino, moved)] = SlotValue(pos, moved);
      At(pos) = At(last);  // the name moves with it
    }
    At(last).name_len = 0;
    --count_;
    if (chunks_.size() > 1 && count_ + 2 * kChunk <= chunks_.size() * kChunk) chunks_.pop_back();
    index_[hole] = kEmpty;
    for (size_t i = (hole + 1) & Mask(); index_[i] != kEmpty; i = (i + 1) & Mask()) {
      size_t home = HashOf(At(PosOf(index_[i])).ino) & Mask();
      // Move the slot back into the hole unless its home lies in (hole, i].
      bool stays = hole < i ? (home > hole && home <= i) : (home > hole || home <= i);
      if (stays) continue;
      index_[hole] = index_[i];
      index_[i] = kEmpty;
      hole = i;
    }
    if (index_.size() > kMinSlots && count_ * 4 < index_.size()) {
      Reindex(index_.size() / 2);
      // The kernel forgot many inodes: give the chunks freed since the last shrink back to the
      // system (they are below malloc's mmap threshold, so free() keeps them).
      ::malloc_trim(0);
    }
  }

  size_t size() const { return count_; }
  const Entry& EntryAt(size_t pos) const { return const_cast<Table*>(this)->At(pos); }
  size_t bytes() const { return chunks_.size() * kChunk * sizeof(Entry) + index_.size() * 4; }

 private:
  static constexpr size_t kMinSlots = 1024;
  static constexpr size_t kChunk = 1024;
  static constexpr uint32_t kEmpty = UINT32_MAX;  // never a position: count_ < slots - 1
  static uint64_t HashOf(uint64_t ino) { return XXH3_64bits(&ino, 8); }
  size_t Mask() const { return index_.size() - 1; }
  uint32_t PosOf(uint32_t slot) const { return slot & pos_mask_; }
  // The hash bits a slot keeps: the top ones, which the slot's place does not depend on.
  uint32_t TagOf(uint64_t hash) const { return static_cast<uint32_t>(hash >> 32) & ~pos_mask_; }
  uint32_t SlotValue(size_t pos, uint64_t hash) const {
    return static_cast<uint32_t>(pos) | TagOf(hash);
  }
  Entry& At(size_t pos) { return chunks_[pos / kChunk][pos % kChunk]; }

  // The slot that holds `ino`'s position, or the empty one where it would go.
  size_t SlotOf(uint64_t ino, uint64_t hash) {
    const uint32_t tag = TagOf(hash);
    size_t i = hash & Mask();
    while (index_[i] != kEmpty &&
           ((index_[i] & ~pos_mask_) != tag || At(PosOf(index_[i])).ino != ino)) {
      i = (i + 1) & Mask();
    }
    return i;
  }

  void Reindex(size_t slots) {
    index_.assign(slots, kEmpty);
    pos_mask_ = static_cast<uint32_t>(slots - 1);  // slots is a power of two, at most 2^32
    for (size_t pos = 0; pos < count_; ++pos) {
      const uint64_t hash = HashOf(At(pos).ino);
      index_[SlotOf(At(pos).ino, hash)] = SlotValue(pos, hash);
    }
  }

  std::vector<std::unique_ptr<Entry[]>> chunks_;
  std::vector<uint32_t> index_;
  uint32_t pos_mask_ = 0;
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
  return FreeNumberLocked(ns, path);
}

uint64_t HeldInodes::NumberOfChild(uint64_t parent, uint32_t ns, std::string_view path) const {
  ReaderMutexLock lock(&mu_);
  if (uint64_t held = FindChildLocked(parent, ns, path); held != 0) return held;
  if (!IsParentLocked(parent, ns, path)) {
    if (uint64_t held = FindLocked(ns, path); held != 0) return held;
  }
  return FreeNumberLocked(ns, path);
}

uint64_t HeldInodes::FreeNumberLocked(uint32_t ns, std::string_view path) const {
  uint64_t number = HomeOf(ns, path);
  while (table_->Find(number) != nullptr)
    number = std::max<uint64_t>((number + 1) & kNumberMask, 2);
  return number;
}

uint64_t HeldInodes::FindChildLocked(uint64_t parent, uint32_t ns, std::string_view path) const {
  if (!aside_.empty()) {
    if (auto it = aside_.find(AsideKey(ns, path)); it != aside_.end()) return it->second;
  }
  uint64_t home = HomeOf(ns, path);
  const Entry* e = table_->Find(home);
  return e != nullptr && e->ns == ns && e->parent == parent && e->name() == BaseName(path) ? home
                                                                                           : 0;
}

bool HeldInodes::IsParentLocked(uint64_t parent, uint32_t ns, std::string_view path) const {
  if (path.empty()) return parent == kRootIno;
  const Entry* p = table_->Find(parent);
  return p != nullptr && p->is_dir != 0 && p->ns == ns && p->name() == BaseName(DirName(path));
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

uint64_t HeldInodes::Acquire(uint32_t ns, std::string_view path, bool is_dir, bool* changed) {
  WriterMutexLock lock(&mu_);
  return AcquireLocked(ns, path, is_dir, 1, changed);
}

uint64_t HeldInodes::AcquireLocked(uint32_t ns, std::string_view path, bool is_dir, uint32_t count,
                                   bool* changed) {
  if (uint64_t held = FindLocked(ns, path); held != 0)
    return HoldLocked(held, is_dir, count, changed);
  // Its parent first (held by it from now on): a namespace root's is the mount's root.
  uint64_t parent = path.empty() ? kRootIno : AcquireLocked(ns, DirName(path), true, 0);
  if (changed != nullptr) *changed = true;
  return InsertLocked(parent, ns, path, is_dir, count);
}

uint64_t HeldInodes::HoldLocked(uint64_t held, bool is_dir, uint32_t count, bool* changed) {
  if (changed != nullptr) *changed = false;
  if (held == kRootIno) return held;
  Entry* e = table_->Find(held);
  if (changed != nullptr) *changed = (e->is_dir != 0) != is_dir;
  e->lookups += count;
  e->is_dir = is_dir ? 1 : 0;
  return held;
}

uint64_t HeldInodes::AcquireChild(uint64_t parent, uint32_t ns, std::string_view path, bool is_dir,
                                  bool* changed) {
  WriterMutexLock lock(&mu_);
  if (!IsParentLocked(parent, ns, path)) return AcquireLocked(ns, path, is_dir, 1, changed);
  if (uint64_t held = FindChildLocked(parent, ns, path); held != 0) {
    return HoldLocked(held, is_dir, 1, changed);
  }
  *changed = true;
  return InsertLocked(parent, ns, path, is_dir, 1);
}

uint64_t HeldInodes::InsertLocked(uint64_t parent, uint32_t ns, std::string_view path, bool is_dir,
                                  uint32_t count) {
  table_->Find(parent)->children++;
  Entry e;
  e.ino = FreeNumberLocked(ns, path);
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

std::vector<HeldInodes::Releasable> HeldInodes::FilesToRelease(size_t n) const {
  std::vector<Releasable> out;
  // A writer's lock, for the cursor: the scan is short (n files, or 8n + 1024 entries when most
  // are folders or restored).
  WriterMutexLock lock(&mu_);
  const size_t count = table_->size();
  const size_t scan = std::min(count, 8 * n + 1024);
  for (size_t seen = 0; seen < scan && out.size() < n; ++seen) {
    if (release_cursor_ >= count) release_cursor_ = 0;
    const Entry& e = table_->EntryAt(release_cursor_++);
    if (e.is_dir != 0 || e.lookups >= kRestoredLookups || e.ino == kRootIno) continue;
    out.push_back({e.parent, std::string(e.name())});
  }
  return out;
}

size_t HeldInodes::size() const {
  ReaderMutexLock lock(&mu_);
  return table_->size();
}

size_t HeldInodes::bytes() const {
  ReaderMutexLock lock(&mu_);
  return table_->bytes();
}

size_t HeldInodes::bytes_per_entry() const {
  ReaderMutexLock lock(&mu_);
  return table_->bytes() / std::max<size_t>(table_->size(), 1);
}

}  // namespace lakecache
