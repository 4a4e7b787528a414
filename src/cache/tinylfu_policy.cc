#include "cache/tinylfu_policy.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace lakecache {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
// A window of at least this many blocks absorbs several readers' sequential streams.
constexpr uint64_t kMinWindowBlocks = 4;
// The dataset estimate is refreshed this often (in accesses), so the staleness horizon keeps up
// with a scan that is still growing the set of distinct blocks.
constexpr uint64_t kEstimateEvery = 128;
constexpr uint64_t kMinHalvingPeriod = 256;
// A block leaving the window must be this much more frequent than the CLOCK victim (see Beats).
constexpr uint32_t kAdmissionMargin = 2;
constexpr uint64_t kMinSketchWidth = 1024;
constexpr uint64_t kMaxSketchWidth = uint64_t{1} << 24;  // 32 MiB of counters: 4M-block datasets

// splitmix64's finalizer: a bijective 64-bit mix.
uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

// Count-min sketch of 4-bit saturating counters, kRows rows of `width` (a power of two) counters,
// sixteen to a 64-bit word. Increment and Estimate are lock-free; Halve and GrowTo have one writer
// (the policy mutex) and may race with increments, which only makes counts a little less exact.
class TinyLfuPolicy::FrequencySketch {
 public:
  explicit FrequencySketch(uint64_t width) {
    tables_.push_back(std::make_unique<Table>(width));
    current_.store(tables_.back().get(), std::memory_order_release);
  }

  // Conservative update: only the counters at the minimum grow, which keeps collisions from
  // inflating counts of other blocks.
  void Increment(uint64_t hash) {
    Table* t = current_.load(std::memory_order_acquire);
    const uint32_t min = t->Estimate(hash);
    if (min >= 15) return;
    for (int r = 0; r < kRows; ++r) {
      auto [word, shift] = t->Locate(hash, r);
      uint64_t old = word->load(std::memory_order_relaxed);
      do {
        if (((old >> shift) & 0xF) > min) break;
      } while (!word->compare_exchange_weak(old, old + (uint64_t{1} << shift),
                                            std::memory_order_relaxed));
    }
  }

  uint32_t Estimate(uint64_t hash) const {
    return current_.load(std::memory_order_acquire)->Estimate(hash);
  }

  void Halve() {
    for (auto& w : current_.load(std::memory_order_relaxed)->words) {
      w.store((w.load(std::memory_order_relaxed) >> 1) & 0x7777777777777777ull,
              std::memory_order_relaxed);
    }
  }

  // Doubling keeps every estimate: counter i of the new row is counter (i mod old width) of the old
  // one, because a column is the low bits of the row hash.
  void GrowTo(uint64_t width) {
    const Table& old = *current_.load(std::memory_order_relaxed);
    if (width <= old.mask + 1) return;
    auto grown = std::make_unique<Table>(width);
    for (int r = 0; r < kRows; ++r) {
      for (uint64_t j = 0; j < grown->row_words; ++j) {
        grown->words[r * grown->row_words + j].store(
            old.words[r * old.row_words + j % old.row_words].load(std::memory_order_relaxed),
            std::memory_order_relaxed);
      }
    }
    tables_.push_back(std::move(grown));
    current_.store(tables_.back().get(), std::memory_order_release);
  }

 private:
  static constexpr int kRows = 4;
  struct Table {
    explicit Table(uint64_t width)
        : mask(width - 1), row_words(width / 16), words(kRows * width / 16) {}
    std::pair<std::atomic<uint64_t>*, int> Locate(uint64_t hash, int row) {
      const uint64_t col = Mix64(hash + (row + 1) * kGolden) & mask;
      return {&words[row * row_words + col / 16], static_cast<int>(col % 16) * 4};
    }
    uint32_t Estimate(uint64_t hash) {
      uint32_t min = 15;
      for (int r = 0; r < kRows; ++r) {
        auto [word, shift] = Locate(hash, r);
        min = std::min(
            min, static_cast<uint32_t>((word->load(std::memory_order_relaxed) >> shift) & 0xF));
      }
      return min;
    }
    const uint64_t mask;
    const uint64_t row_words;
    std::vector<std::atomic<uint64_t>> words;
  };

  std::atomic<Table*> current_;
  // Every table ever used: a hit may still be counting in a replaced one, so they live until the
  // policy does (at most as much memory again as the current table, since each one doubles).
  std::vector<std::unique_ptr<Table>> tables_;
};

// HyperLogLog (4096 registers, ~1.6% error) of the blocks read in the current and the previous
// halving period, so the estimate follows the dataset being read now. Add is lock-free; Rotate has
// one writer (the policy mutex).
class TinyLfuPolicy::DistinctCounter {
 public:
  void Add(uint64_t hash) {
    const uint64_t h = Mix64(hash ^ 0xD6E8FEB86659FD93ull);
    const uint64_t rest = h << kBits;
    const auto rank = static_cast<uint8_t>(rest == 0 ? 64 - kBits + 1 : std::countl_zero(rest) + 1);
    std::atomic<uint8_t>& reg = regs_[current_.load(std::memory_order_relaxed)][h >> (64 - kBits)];
    uint8_t old = reg.load(std::memory_order_relaxed);
    while (rank > old && !reg.compare_exchange_weak(old, rank, std::memory_order_relaxed)) {
    }
  }

  // Of the union of both periods.
  uint64_t Estimate() const {
    double sum = 0;
    size_t zeros = 0;
    for (size_t j = 0; j < kRegisters; ++j) {
      const int r = std::max(regs_[0][j].load(std::memory_order_relaxed),
                             regs_[1][j].load(std::memory_order_relaxed));
      sum += std::ldexp(1.0, -r);
      zeros += r == 0;
    }
    const double m = kRegisters;
    double estimate = 0.7213 / (1 + 1.079 / m) * m * m / sum;
    if (estimate <= 2.5 * m && zeros > 0) estimate = m * std::log(m / zeros);  // linear counting
    return static_cast<uint64_t>(std::llround(estimate));
  }

  // Forgets the older period.
  void Rotate() {
    const int next = 1 - current_.load(std::memory_order_relaxed);
    for (auto& reg : regs_[next]) reg.store(0, std::memory_order_relaxed);
    current_.store(next, std::memory_order_relaxed);
  }

 private:
  static constexpr int kBits = 12;
  static constexpr size_t kRegisters = size_t{1} << kBits;
  std::array<std::array<std::atomic<uint8_t>, kRegisters>, 2> regs_{};
  std::atomic<int> current_{0};
};

TinyLfuPolicy::TinyLfuPolicy(uint64_t capacity_bytes, uint64_t seed, Admission admission)
    : capacity_(capacity_bytes),
      seed_(Mix64(seed + kGolden)),
      windowed_(admission == Admission::kAfterWindow),
      sketch_(std::make_unique<FrequencySketch>(kMinSketchWidth)),
      distinct_(std::make_unique<DistinctCounter>()),
      hand_(main_.end()) {}

TinyLfuPolicy::~TinyLfuPolicy() = default;

void TinyLfuPolicy::OnHit(const BlockKey& key) {
  const uint64_t hash = Hash(key);
  const uint64_t now = CountAccess(hash);
  IndexShard& shard = ShardOf(hash);
  MutexLock lock(&shard.mu);
  auto it = shard.map.find(key);
  if (it == shard.map.end()) return;
  it->second->ref.store(true, std::memory_order_relaxed);
  it->second->last.store(now, std::memory_order_relaxed);
}

bool TinyLfuPolicy::OnMiss(const BlockKey& key, uint64_t bytes, std::vector<BlockKey>* evict) {
  const uint64_t hash = Hash(key);
  const uint64_t now = CountAccess(hash);
  MutexLock lock(&mu_);
  if (Entry* e = Find(key, hash)) {  // the caller broke the REQUIRES: count it as a hit
    e->ref.store(true, std::memory_order_relaxed);
    e->last.store(now, std::memory_order_relaxed);
    return true;
  }
  if (bytes <= capacity_) NoteBlockSize(bytes);
  Maintain(now);
  if (bytes > capacity_) return false;
  Entry* e = Create(key, hash, bytes, now);
  AddToWindow(e);
  return DrainWindow(e, now, evict);
}

void TinyLfuPolicy::Restore(const BlockKey& key, uint64_t bytes, std::vector<BlockKey>* evict) {
  const uint64_t hash = Hash(key);
  MutexLock lock(&mu_);
  if (Find(key, hash) != nullptr) return;
  if (bytes > capacity_) {
    evict->push_back(key);  // the tier holds it, but it can never fit
    return;
  }
  NoteBlockSize(bytes);
  // Restored blocks were admitted before the restart: they skip the admission test.
  while (UsedLocked() + bytes > capacity_) {
    Entry* v = main_.empty() ? window_.back() : ClockVictim();
    evict->push_back(v->key);
    Unlink(v);
    Destroy(v);
  }
  AddToMain(Create(key, hash, bytes, now_.load(std::memory_order_relaxed)));
}

void TinyLfuPolicy::Remove(const BlockKey& key) {
  const uint64_t hash = Hash(key);
  MutexLock lock(&mu_);
  Entry* e = Find(key, hash);
  if (e == nullptr) return;
  Unlink(e);
  Destroy(e);
}

uint64_t TinyLfuPolicy::used_bytes() const {
  MutexLock lock(&mu_);
  return UsedLocked();
}

uint64_t TinyLfuPolicy::estimated_dataset_blocks() const {
  MutexLock lock(&mu_);
  return dataset_blocks_;
}

uint64_t TinyLfuPolicy::Hash(const BlockKey& key) const {
  uint64_t h = Mix64(key.content.hi ^ seed_);
  h = Mix64(h ^ key.content.lo);
  return Mix64(h ^ key.index);
}

uint64_t TinyLfuPolicy::CountAccess(uint64_t hash) {
  sketch_->Increment(hash);
  distinct_->Add(hash);
  return now_.fetch_add(1, std::memory_order_relaxed) + 1;
}

TinyLfuPolicy::Entry* TinyLfuPolicy::Find(const BlockKey& key, uint64_t hash) {
  IndexShard& shard = ShardOf(hash);
  MutexLock lock(&shard.mu);
  auto it = shard.map.find(key);
  return it == shard.map.end() ? nullptr : it->second.get();
}

TinyLfuPolicy::Entry* TinyLfuPolicy::Create(const BlockKey& key, uint64_t hash, uint64_t bytes,
                                            uint64_t now) {
  IndexShard& shard = ShardOf(hash);
  MutexLock lock(&shard.mu);
  auto& slot = shard.map[key];
  slot = std::make_unique<Entry>(key, hash, bytes, now);
  return slot.get();
}

void TinyLfuPolicy::Destroy(Entry* e) {
  IndexShard& shard = ShardOf(e->hash);
  MutexLock lock(&shard.mu);
  shard.map.erase(e->key);
}

void TinyLfuPolicy::NoteBlockSize(uint64_t bytes) {
  if (bytes <= max_block_bytes_) return;
  max_block_bytes_ = bytes;
  // No window: DrainWindow then tests each new block as soon as it is added.
  window_capacity_ =
      windowed_
          ? std::min(std::max(capacity_ / 100, kMinWindowBlocks * max_block_bytes_), capacity_ / 2)
          : 0;
}

uint64_t TinyLfuPolicy::CapacityBlocks() const {
  return max_block_bytes_ == 0 ? 0 : capacity_ / max_block_bytes_;
}

void TinyLfuPolicy::Maintain(uint64_t now) {
  if (now >= next_estimate_) {
    next_estimate_ = now + kEstimateEvery;
    dataset_blocks_ = std::max(distinct_->Estimate(), CapacityBlocks());
    stale_ticks_ = 3 * dataset_blocks_;
    // Four counters per distinct block (8 bytes of sketch) keep collisions from faking the "+1"
    // margin: at two, shuffled epochs lost ~5% of their hits (bench/cache_policy).
    sketch_->GrowTo(
        std::min(std::bit_ceil(std::max(4 * dataset_blocks_, kMinSketchWidth)), kMaxSketchWidth));
  }
  // Halving ages the counts, so a block read in many past epochs cannot outweigh current ones.
  const uint64_t period = std::max({10 * CapacityBlocks(), 2 * dataset_blocks_, kMinHalvingPeriod});
  if (now - last_halving_ >= period) {
    sketch_->Halve();
    distinct_->Rotate();
    last_halving_ = now;
  }
}

bool TinyLfuPolicy::DrainWindow(const Entry* fresh, uint64_t now, std::vector<BlockKey>* evict) {
  bool fresh_admitted = true;
  while (!window_.empty() && (window_bytes_ > window_capacity_ || UsedLocked() > capacity_)) {
    Entry* c = window_.back();
    Unlink(c);
    if (Promote(c, now, evict)) continue;
    if (c == fresh) {
      fresh_admitted = false;  // the tier never stored it: nothing to evict
    } else {
      evict->push_back(c->key);
    }
    Destroy(c);
  }
  return fresh_admitted;
}

bool TinyLfuPolicy::Promote(Entry* c, uint64_t now, std::vector<BlockKey>* evict) {
  while (UsedLocked() + c->bytes > capacity_) {
    Entry* v = ClockVictim();
    if (v == nullptr || !Beats(*c, *v, now)) return false;
    evict->push_back(v->key);
    Unlink(v);
    Destroy(v);
  }
  AddToMain(c);
  return true;
}

// In an epoch workload every block has the same count but for two offsets of one: c was counted in
// this epoch and v, often, not yet; and a halving in mid-epoch rounds the blocks read before it and
// those read after it differently. A margin below 2 lets these offsets swap blocks in and out for
// nothing (margin 0: 0.72 x C/D in the research notes; margin 1: 0.80 x C/D in long shuffled runs
// at C/D = 0.1 in bench/cache_policy; margin 2: >= 0.96 x C/D, and Zipf hit ratios within 0.4%).
bool TinyLfuPolicy::Beats(const Entry& c, const Entry& v, uint64_t now) const {
  const uint64_t last = v.last.load(std::memory_order_relaxed);
  if (now > last && now - last > stale_ticks_) return true;
  return sketch_->Estimate(c.hash) > sketch_->Estimate(v.hash) + kAdmissionMargin;
}

TinyLfuPolicy::Entry* TinyLfuPolicy::ClockVictim() {
  if (main_.empty()) return nullptr;
  // Two turns clear every reference bit, unless hits keep setting them; then take what is there.
  for (size_t i = 0, n = 2 * main_.size(); i < n; ++i) {
    if (!(*hand_)->ref.exchange(false, std::memory_order_relaxed)) break;
    AdvanceHand();
  }
  return *hand_;
}

void TinyLfuPolicy::AddToWindow(Entry* e) {
  e->in_window = true;
  e->pos = window_.insert(window_.begin(), e);
  window_bytes_ += e->bytes;
}

void TinyLfuPolicy::AddToMain(Entry* e) {
  e->in_window = false;
  e->pos = main_.insert(hand_, e);
  if (hand_ == main_.end()) hand_ = main_.begin();
  main_bytes_ += e->bytes;
}

void TinyLfuPolicy::Unlink(Entry* e) {
  if (e->in_window) {
    window_.erase(e->pos);
    window_bytes_ -= e->bytes;
    return;
  }
  if (hand_ == e->pos) {
    hand_ = main_.erase(e->pos);
    if (hand_ == main_.end()) hand_ = main_.begin();
  } else {
    main_.erase(e->pos);
  }
  main_bytes_ -= e->bytes;
}

void TinyLfuPolicy::AdvanceHand() {
  if (++hand_ == main_.end()) hand_ = main_.begin();
}

}  // namespace lakecache
