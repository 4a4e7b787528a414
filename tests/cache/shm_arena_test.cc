// ShmArena (a worker's shared memory) and ShmReader (a mount's view of it), in one process: the
// reader maps the descriptors afresh, as a mount does after receiving them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "cache/memory_tier.h"
#include "cache/shm_arena.h"
#include "cache/shm_reader.h"

namespace lakecache {
namespace {

BlockKey Key(uint64_t i) { return BlockKey{ContentId{0x1234, 0x5678}, i}; }

// The bytes of block i: every byte says which block it is.
BlockRef Bytes(uint64_t i, size_t size) {
  std::shared_ptr<Block> b = Block::Allocate(size);
  for (size_t j = 0; j < size; ++j) b->mutable_data()[j] = static_cast<char>(i * 31 + j % 251);
  return b;
}

bool Holds(const Block& b, uint64_t i) {
  for (size_t j = 0; j < b.size(); ++j) {
    if (b.data()[j] != static_cast<char>(i * 31 + j % 251)) return false;
  }
  return true;
}

// What a worker sends a mount for one session (duplicated: the reader owns its descriptors).
ShmFds SessionFds(ShmArena& arena, uint64_t* session) {
  Result<ShmArena::Session> s = arena.OpenSession();
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  *session = s->id;
  ShmFds fds;
  fds.index = ::dup(arena.index_fd());
  fds.anchors = ::dup(s->anchor_fd);
  for (int fd : arena.arena_fds()) fds.arenas.push_back(::dup(fd));
  return fds;
}

TEST(ShmArenaTest, PublishedBlocksAreFoundInPlaceUntilUnpublished) {
  auto arena = ShmArena::Create({.capacity_bytes = 1 << 20});
  ASSERT_TRUE(arena.ok());
  uint64_t session = 0;
  auto reader = ShmReader::Map(SessionFds(**arena, &session));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  BlockRef published = (*arena)->Publish(Key(1), *Bytes(1, 100000));
  ASSERT_NE(published, nullptr);
  BlockRef found = (*reader)->Find(Key(1));
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->size(), 100000u);
  EXPECT_TRUE(Holds(*found, 1));
  EXPECT_TRUE(found->foreign());
  EXPECT_EQ((*reader)->Find(Key(2)), nullptr);
  (*arena)->Unpublish(*published);
  EXPECT_EQ((*reader)->Find(Key(1)), nullptr);
  EXPECT_FALSE((*reader)->Contains(Key(1)));
  EXPECT_TRUE(Holds(*found, 1));  // a view found earlier still reads its bytes
}

TEST(ShmArenaTest, AnchoredMemoryIsNotReusedUntilTheReaderLetsGo) {
  // Room for one block: the next block needs the anchored one's memory.
  auto arena = ShmArena::Create({.capacity_bytes = 64 << 10});
  ASSERT_TRUE(arena.ok());
  uint64_t session = 0;
  auto reader = ShmReader::Map(SessionFds(**arena, &session));
  ASSERT_TRUE(reader.ok());
  BlockRef first = (*arena)->Publish(Key(1), *Bytes(1, 64 << 10));
  ASSERT_NE(first, nullptr);
  BlockRef view = (*reader)->Find(Key(1));
  ASSERT_NE(view, nullptr);
  (*arena)->Unpublish(*first);
  first.reset();  // the worker lets go; the mount still reads
  EXPECT_EQ((*arena)->Stats().deferred_bytes, 64u << 10);
  EXPECT_EQ((*arena)->Publish(Key(2), *Bytes(2, 64 << 10)), nullptr);  // no room: kept private
  EXPECT_TRUE(Holds(*view, 1));
  view.reset();
  BlockRef second = (*arena)->Publish(Key(2), *Bytes(2, 64 << 10));
  ASSERT_NE(second, nullptr);
  EXPECT_EQ((*arena)->Stats().deferred_bytes, 0u);
}

TEST(ShmArenaTest, AClosedSessionReleasesItsAnchors) {
  auto arena = ShmArena::Create({.capacity_bytes = 64 << 10});
  ASSERT_TRUE(arena.ok());
  uint64_t session = 0;
  auto reader = ShmReader::Map(SessionFds(**arena, &session));
  ASSERT_TRUE(reader.ok());
  BlockRef first = (*arena)->Publish(Key(1), *Bytes(1, 64 << 10));
  BlockRef view = (*reader)->Find(Key(1));  // held by a mount that then dies
  ASSERT_NE(view, nullptr);
  (*arena)->Unpublish(*first);
  first.reset();
  EXPECT_EQ((*arena)->Publish(Key(2), *Bytes(2, 64 << 10)), nullptr);
  (*arena)->CloseSession(session);
  EXPECT_EQ((*arena)->Stats().deferred_bytes, 0u);
  EXPECT_NE((*arena)->Publish(Key(2), *Bytes(2, 64 << 10)), nullptr);
}

TEST(ShmArenaTest, ABlockFilledInPlaceIsPublishedWithoutACopy) {
  auto arena = ShmArena::Create({.capacity_bytes = 128 << 10});
  ASSERT_TRUE(arena.ok());
  uint64_t session = 0;
  auto reader = ShmReader::Map(SessionFds(**arena, &session));
  ASSERT_TRUE(reader.ok());
  std::shared_ptr<Block> fresh = (*arena)->NewBlock(64 << 10);
  ASSERT_NE(fresh, nullptr);
  ASSERT_GE(fresh->fd(), 0);
  EXPECT_EQ((*arena)->Stats().fresh_bytes, 64u << 10);
  EXPECT_EQ((*reader)->Find(Key(1)), nullptr);  // not published while it is filled
  std::memcpy(fresh->mutable_data(), Bytes(1, 64 << 10)->data(), 64 << 10);
  BlockRef block = fresh;
  BlockRef published = (*arena)->Publish(Key(1), block);
  EXPECT_EQ(published, block);  // the same bytes, not a copy
  EXPECT_EQ((*arena)->Stats().fresh_bytes, 0u);
  EXPECT_EQ((*arena)->Stats().published_blocks, 1u);
  BlockRef found = (*reader)->Find(Key(1));
  ASSERT_NE(found, nullptr);
  EXPECT_TRUE(Holds(*found, 1));
  EXPECT_EQ((*arena)->NewBlock(128 << 10), nullptr);  // the other half is all that is left
  (*arena)->Unpublish(*published);
  fresh.reset();
  block.reset();
  published.reset();
  EXPECT_EQ((*arena)->Stats().deferred_bytes, 64u << 10);  // the reader's view anchors it
  found.reset();
  // A block never published returns its memory when dropped.
  std::shared_ptr<Block> unused = (*arena)->NewBlock(128 << 10);
  ASSERT_NE(unused, nullptr);
  EXPECT_EQ((*arena)->Stats().published_blocks, 0u);
  unused.reset();
  EXPECT_EQ((*arena)->Stats().fresh_bytes, 0u);
  EXPECT_NE((*arena)->NewBlock(128 << 10), nullptr);
}

TEST(ShmArenaTest, AMemoryTierKeepsABlockFetchedIntoItsArenaWhereItLies) {
  auto arena = ShmArena::Create({.capacity_bytes = 1 << 20});
  ASSERT_TRUE(arena.ok());
  auto tier = MemoryTier::Create(512 << 10, "lru", 0, *arena);
  ASSERT_TRUE(tier.ok());
  std::shared_ptr<Block> fresh = (*tier)->NewBlock(100000);
  ASSERT_NE(fresh, nullptr);
  std::memcpy(fresh->mutable_data(), Bytes(3, 100000)->data(), 100000);
  BlockRequest request;
  request.key = Key(3);
  request.length = 100000;
  ASSERT_TRUE((*tier)->Insert(request, fresh));
  BlockRef held = (*tier)->SharedCopy(Key(3));
  EXPECT_EQ(held.get(), fresh.get());
  EXPECT_TRUE(Holds(*held, 3));
}

TEST(ShmArenaTest, ReaderRefusesSegmentsThatCanBeResized) {
  auto arena = ShmArena::Create({.capacity_bytes = 1 << 20});
  ASSERT_TRUE(arena.ok());
  uint64_t session = 0;
  ShmFds fds = SessionFds(**arena, &session);
  ::close(fds.arenas[0]);
  fds.arenas[0] = ::memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_EQ(::ftruncate(fds.arenas[0], 1 << 20), 0);
  auto reader = ShmReader::Map(std::move(fds));
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().message().find("not sealed"), std::string::npos)
      << reader.status().message();
}

TEST(ShmArenaTest, ReaderRefusesAForeignIndex) {
  ShmFds fds;
  fds.index = ::memfd_create("index", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(::ftruncate(fds.index, 4096), 0);
  ASSERT_EQ(::fcntl(fds.index, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  fds.anchors = ::dup(fds.index);
  auto reader = ShmReader::Map(std::move(fds));
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().message().find("another format"), std::string::npos)
      << reader.status().message();
}

// A memory tier of 8 blocks in shared memory, so memory is reused all the time, while 8 readers
// find blocks in place and check every byte: never a byte of another block.
TEST(ShmArenaTest, EightReadersOfAnEightBlockTierNeverSeeAnotherBlocksBytes) {
  constexpr size_t kSize = 16 << 10;
  constexpr uint64_t kBlocks = 64;
  auto arena = ShmArena::Create({.capacity_bytes = 8 * kSize});
  ASSERT_TRUE(arena.ok());
  auto tier = MemoryTier::Create(8 * kSize, "lru", 0, *arena);
  ASSERT_TRUE(tier.ok());
  std::vector<BlockRef> sources;
  for (uint64_t i = 0; i < kBlocks; ++i) sources.push_back(Bytes(i, kSize));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> found{0}, wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 8; ++t) {
    uint64_t session = 0;
    auto reader = ShmReader::Map(SessionFds(**arena, &session));
    ASSERT_TRUE(reader.ok());
    readers.emplace_back([&, r = *reader, t] {
      std::mt19937_64 rng(t);
      while (!stop.load()) {
        uint64_t i = rng() % kBlocks;
        if (BlockRef b = r->Find(Key(i))) {
          found.fetch_add(1);
          if (b->size() != kSize || !Holds(*b, i)) wrong.fetch_add(1);
        }
      }
    });
  }
  std::mt19937_64 rng(99);
  for (int n = 0; n < 20000; ++n) {  // the worker: blocks come and go
    uint64_t i = rng() % kBlocks;
    BlockRequest req;
    req.key = Key(i);
    req.length = kSize;
    (*tier)->Insert(req, sources[i]);
  }
  stop.store(true);
  for (auto& r : readers) r.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(found.load(), 0u);
  (*arena)->Reclaim();  // the readers have let go of everything
  EXPECT_EQ((*arena)->Stats().deferred_bytes, 0u);
}

// /proc/sys/vm/nr_hugepages, read or written; -1 when it cannot be.
long ReservedHugePages(long set = -1) {
  if (set >= 0) {
    FILE* f = std::fopen("/proc/sys/vm/nr_hugepages", "w");
    if (f == nullptr) return -1;
    std::fprintf(f, "%ld\n", set);
    if (std::fclose(f) != 0) return -1;
  }
  FILE* f = std::fopen("/proc/sys/vm/nr_hugepages", "r");
  long n = -1;
  if (f == nullptr || std::fscanf(f, "%ld", &n) != 1) n = -1;
  if (f != nullptr) std::fclose(f);
  return n;
}

void PublishAndReadBack(ShmArena& arena) {
  uint64_t session = 0;
  auto reader = ShmReader::Map(SessionFds(arena, &session));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  BlockRef published = arena.Publish(Key(7), *Bytes(7, 3 << 20));  // kept, as a tier keeps it
  ASSERT_NE(published, nullptr);
  BlockRef found = (*reader)->Find(Key(7));
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->size(), 3u << 20);
  EXPECT_TRUE(Holds(*found, 7));
}

// "HugePages_Free" of /proc/meminfo.
long FreeHugePages() {
  FILE* f = std::fopen("/proc/meminfo", "r");
  char line[256];
  long n = 0;
  while (f != nullptr && std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "HugePages_Free: %ld", &n) == 1) break;
  }
  if (f != nullptr) std::fclose(f);
  return n;
}

TEST(ShmArenaTest, ArenasInReservedHugePagesAreReadInPlace) {
  // Four more 2 MiB pages than whatever is reserved (others' stay theirs), given back at the
  // end. Where they cannot be had (not root, no room), the arena must fall back and still work.
  long before = ReservedHugePages();
  long wanted = before < 0 ? -1 : ReservedHugePages(before + 4);
  struct Restore {
    long n;
    ~Restore() {
      if (n >= 0) ReservedHugePages(n);
    }
  } restore{before};
  bool room = wanted >= before + 4 && FreeHugePages() >= 3;
  auto arena = ShmArena::Create(
      {.capacity_bytes = 5 << 20, .huge_pages = HugePages::kReserved, .name = "huge-test"});
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  EXPECT_EQ((*arena)->Stats().reserved_huge_pages, room);
  struct stat st;
  ASSERT_EQ(::fstat((*arena)->arena_fds().front(), &st), 0);
  EXPECT_EQ(st.st_blksize, room ? 2 << 20 : 4096);
  EXPECT_EQ(st.st_size, room ? 6 << 20 : 5 << 20);  // rounded up to whole huge pages
  PublishAndReadBack(**arena);
}

TEST(ShmArenaTest, TooFewReservedHugePagesGiveOrdinaryMemory) {
  // More than the node has free: the arena is made of ordinary pages and works the same.
  uint64_t more = static_cast<uint64_t>(FreeHugePages() + 8) * (2 << 20);
  auto arena = ShmArena::Create({.capacity_bytes = more, .huge_pages = HugePages::kReserved});
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  EXPECT_FALSE((*arena)->Stats().reserved_huge_pages);
  struct stat st;
  ASSERT_EQ(::fstat((*arena)->arena_fds().front(), &st), 0);
  EXPECT_EQ(st.st_blksize, 4096);
  PublishAndReadBack(**arena);
}

}  // namespace
}  // namespace lakecache
