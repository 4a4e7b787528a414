// HeldInodes: numbers that are functions of paths, entries that follow the kernel's lookups.
#include "fs/held_inodes.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

namespace lakecache {
namespace {

constexpr uint32_t kNs = 1;

TEST(HeldInodesTest, FilesToReleaseNamesHeldFilesByFolderInTurn) {
  HeldInodes inodes(kNs);
  const uint64_t dir = inodes.Acquire(kNs, "d", true);
  for (int i = 0; i < 10; ++i) inodes.Acquire(kNs, "d/f" + std::to_string(i), false);
  inodes.Restore(inodes.NumberOf(kNs, "d/kept"), kNs, "d/kept", false);
  std::map<std::string, int> named;
  for (int call = 0; call < 5; ++call) {
    for (const HeldInodes::Releasable& f : inodes.FilesToRelease(4)) {
      EXPECT_EQ(f.parent, dir);
      named[f.name]++;
    }
  }
  // 20 names, each file twice: never the folder, the root or the restored file (its count is
  // unknown, so the kernel's forget could not free it).
  ASSERT_EQ(named.size(), 10u);
  for (const auto& [name, times] : named) {
    EXPECT_TRUE(name.starts_with("f")) << name;
    EXPECT_EQ(times, 2) << name;
  }
  HeldInodes folders_only(kNs);
  folders_only.Acquire(kNs, "a/b", true);
  EXPECT_TRUE(folders_only.FilesToRelease(8).empty());
  // Among many folders a call looks at 8n + 1024 entries at most, and the calls go round.
  HeldInodes mostly_folders(kNs);
  for (int i = 0; i < 5000; ++i) mostly_folders.Acquire(kNs, "f" + std::to_string(i), true);
  mostly_folders.Acquire(kNs, "f4999/file", false);
  size_t calls = 0, found = 0;
  for (; calls < 10 && found == 0; ++calls) found = mostly_folders.FilesToRelease(1).size();
  EXPECT_EQ(found, 1u);
  EXPECT_GE(calls, 4u) << "a call should not have looked at all 5,002 entries";
}

TEST(HeldInodesTest, ANumberIsThePathsWhetherHeldOrNot) {
  HeldInodes inodes(kNs);
  uint64_t before = inodes.NumberOf(kNs, "a/b.bin");
  EXPECT_GT(before, HeldInodes::kRootIno);
  EXPECT_LT(before, 1ull << HeldInodes::kNumberBits);
  uint64_t ino = inodes.Acquire(kNs, "a/b.bin", false);
  EXPECT_EQ(ino, before);
  EXPECT_TRUE(inodes.Forget(ino, 1));
  EXPECT_EQ(inodes.size(), 1u);  // the root alone: "a" went with its last child
  EXPECT_EQ(inodes.Acquire(kNs, "a/b.bin", false), before);
  EXPECT_NE(inodes.NumberOf(kNs, "a/c.bin"), before);
  EXPECT_NE(inodes.NumberOf(2, "a/b.bin"), before);  // another namespace
  EXPECT_EQ(inodes.NumberOf(kNs, ""), HeldInodes::kRootIno);
}

TEST(HeldInodesTest, EntriesSpellTheirPathsThroughTheirParents) {
  HeldInodes inodes(kNs);
  std::string long_name(300, 'n');  // beyond the inline bytes
  uint64_t ino = inodes.Acquire(kNs, "x/y/" + long_name, false);
  EXPECT_EQ(inodes.size(), 4u);  // the root, x, x/y and the file
  std::optional<HeldInodes::Info> info = inodes.Get(ino);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->ns, kNs);
  EXPECT_EQ(info->path, "x/y/" + long_name);
  EXPECT_FALSE(info->is_dir);
  std::optional<HeldInodes::Info> parent = inodes.Get(inodes.NumberOf(kNs, "x/y"));
  ASSERT_TRUE(parent.has_value());
  EXPECT_EQ(parent->path, "x/y");
  EXPECT_TRUE(parent->is_dir);
  EXPECT_FALSE(inodes.Get(inodes.NumberOf(kNs, "x/z")).has_value());
}

TEST(HeldInodesTest, AnEntryGoesWhenItsLookupsAreForgottenAndNoChildHoldsIt) {
  HeldInodes inodes(kNs);
  uint64_t dir = inodes.Acquire(kNs, "d", true);
  uint64_t file = inodes.Acquire(kNs, "d/f", false);
  EXPECT_EQ(inodes.Acquire(kNs, "d/f", false), file);  // two lookups
  EXPECT_FALSE(inodes.Forget(dir, 1));                 // its child holds it
  EXPECT_TRUE(inodes.Get(dir).has_value());
  EXPECT_FALSE(inodes.Forget(file, 1));
  EXPECT_TRUE(inodes.Forget(file, 1));
  EXPECT_FALSE(inodes.Get(dir).has_value());
  EXPECT_EQ(inodes.size(), 1u);
  EXPECT_FALSE(inodes.Forget(12345, 1));  // unknown: ignored
  EXPECT_FALSE(inodes.Forget(HeldInodes::kRootIno, 100));
  EXPECT_TRUE(inodes.Get(HeldInodes::kRootIno).has_value());
}

TEST(HeldInodesTest, NamespacesOfAMultiNamespaceMountHaveRootsBelowInodeOne) {
  HeldInodes inodes(0);
  uint64_t root2 = inodes.Acquire(2, "", true);
  uint64_t f2 = inodes.Acquire(2, "f", false);
  uint64_t f3 = inodes.Acquire(3, "f", false);
  EXPECT_NE(root2, HeldInodes::kRootIno);
  EXPECT_NE(f2, f3);
  EXPECT_EQ(inodes.Get(f3)->ns, 3u);
  EXPECT_EQ(inodes.Get(f3)->path, "f");
  EXPECT_EQ(inodes.Get(root2)->path, "");
  EXPECT_TRUE(inodes.Forget(f2, 1));
  EXPECT_TRUE(inodes.Forget(root2, 1));  // (2, "") was looked up once and is forgotten now
  EXPECT_FALSE(inodes.Get(root2).has_value());
}

TEST(HeldInodesTest, ARenameKeepsTheNumberUnderTheNewPath) {
  HeldInodes inodes(kNs);
  uint64_t ino = inodes.Acquire(kNs, "a/old", false);
  EXPECT_EQ(inodes.Move(kNs, "a/old", "b/new"), ino);
  EXPECT_EQ(inodes.Get(ino)->path, "b/new");
  EXPECT_EQ(inodes.NumberOf(kNs, "b/new"), ino);
  EXPECT_NE(inodes.NumberOf(kNs, "a/old"), ino);
  EXPECT_FALSE(inodes.Get(inodes.NumberOf(kNs, "a")).has_value());  // "a" held nothing more
  EXPECT_EQ(inodes.Move(kNs, "a/old", "c"), 0u);
  EXPECT_TRUE(inodes.Forget(ino, 1));
  EXPECT_EQ(inodes.size(), 1u);
  EXPECT_NE(inodes.NumberOf(kNs, "b/new"), 0u);
}

TEST(HeldInodesTest, MemoryFollowsWhatIsHeld) {
  HeldInodes inodes(kNs);
  std::vector<uint64_t> held;
  for (int d = 0; d < 100; ++d) {
    for (int f = 0; f < 1000; ++f) {
      held.push_back(
          inodes.Acquire(kNs, "d" + std::to_string(d) + "/f" + std::to_string(f), false));
    }
  }
  EXPECT_EQ(inodes.size(), 1u + 100 + 100000);
  EXPECT_LE(inodes.bytes_per_entry(), 64u);
  for (size_t i = 0; i < held.size(); ++i) {
    ASSERT_EQ(inodes.Get(held[i])->path,
              "d" + std::to_string(i / 1000) + "/f" + std::to_string(i % 1000));
  }
  // Forgotten in an order unlike the one they came in (every 7th, then the rest): the memory
  // per entry stays bounded as the table shrinks, and the entries left are intact.
  for (size_t round = 0; round < 7; ++round) {
    for (size_t i = round; i < held.size(); i += 7) inodes.Forget(held[i], 1);
    if (inodes.size() > 8192) {
      EXPECT_LE(inodes.bytes_per_entry(), 64u) << inodes.size();
    }
    for (size_t i = round + 1; i < held.size() && round < 6; i += 7 * 1103) {
      ASSERT_EQ(inodes.Get(held[i])->path,
                "d" + std::to_string(i / 1000) + "/f" + std::to_string(i % 1000));
    }
  }
  EXPECT_EQ(inodes.size(), 1u);
  EXPECT_LE(inodes.bytes_per_entry(), 3 * 1024 * 48u + 4096u) << "back to the first chunks";
}

TEST(HeldInodesTest, AnEntryOfAHeldFolderIsTheEntryItsPathWouldBe) {
  HeldInodes inodes(kNs);
  uint64_t dir = inodes.Acquire(kNs, "a/b", true);
  bool changed = false;
  uint64_t file = inodes.AcquireChild(dir, kNs, "a/b/f", false, &changed);
  EXPECT_TRUE(changed) << "a new entry";
  EXPECT_EQ(file, inodes.NumberOf(kNs, "a/b/f"));
  EXPECT_EQ(inodes.Get(file)->path, "a/b/f");
  EXPECT_EQ(inodes.Acquire(kNs, "a/b/f", false), file);
  EXPECT_EQ(inodes.AcquireChild(dir, kNs, "a/b/f", false, &changed), file);
  EXPECT_FALSE(changed) << "held already, the same type";
  EXPECT_EQ(inodes.AcquireChild(dir, kNs, "a/b/f", true, &changed), file);
  EXPECT_TRUE(changed) << "a file turned folder";
  // Four lookups: the entry goes with the fourth forget, and its folders with the folder's.
  EXPECT_FALSE(inodes.Forget(file, 3));
  EXPECT_TRUE(inodes.Forget(file, 1));
  EXPECT_TRUE(inodes.Forget(dir, 1));
  EXPECT_EQ(inodes.size(), 1u);
  // At a namespace's root, whose entry is inode 1 here.
  uint64_t top = inodes.AcquireChild(HeldInodes::kRootIno, kNs, "top", false, &changed);
  EXPECT_EQ(top, inodes.NumberOf(kNs, "top"));
  EXPECT_EQ(inodes.NumberOfChild(HeldInodes::kRootIno, kNs, "top"), top);
  EXPECT_EQ(inodes.NumberOfChild(HeldInodes::kRootIno, kNs, "other"),
            inodes.NumberOf(kNs, "other"));
}

TEST(HeldInodesTest, AFolderRenamedSinceItWasListedGivesItsEntriesByTheirPaths) {
  HeldInodes inodes(kNs);
  uint64_t dir = inodes.Acquire(kNs, "old", true);
  ASSERT_EQ(inodes.Move(kNs, "old", "new"), dir);
  // A listing of "old", opened before the rename, hands out its entries: the held folder is
  // "new" now, so they are made below "old", as a lookup of their paths would.
  bool changed = false;
  uint64_t file = inodes.AcquireChild(dir, kNs, "old/f", false, &changed);
  EXPECT_TRUE(changed);
  EXPECT_EQ(inodes.Get(file)->path, "old/f");
  EXPECT_EQ(file, inodes.NumberOf(kNs, "old/f"));
  EXPECT_NE(inodes.NumberOfChild(dir, kNs, "new/g"), 0u);
  EXPECT_EQ(inodes.NumberOfChild(dir, kNs, "old/f"), file);
}

// Many entries made and forgotten in a shuffled order, checked against a map of what is held:
// the index's tags and backward shifts never lose or confuse an entry.
TEST(HeldInodesTest, ManyEntriesMadeAndForgottenInAnyOrderStayFindable) {
  HeldInodes inodes(kNs);
  std::mt19937_64 random(41);
  std::map<std::string, uint64_t> held;
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 20000; ++i) {
      std::string path = "d" + std::to_string(random() % 50) + "/f" + std::to_string(random());
      uint64_t ino = inodes.Acquire(kNs, path, false);
      auto [it, added] = held.emplace(path, ino);
      ASSERT_EQ(it->second, ino) << path;
      if (!added) inodes.Forget(ino, 1);  // one lookup each
    }
    // Forget about half, picked at random.
    for (auto it = held.begin(); it != held.end();) {
      if (random() % 2 == 0) {
        ASSERT_TRUE(inodes.Forget(it->second, 1)) << it->first;
        it = held.erase(it);
      } else {
        ++it;
      }
    }
    for (const auto& [path, ino] : held) {
      ASSERT_EQ(inodes.NumberOf(kNs, path), ino) << path;
      ASSERT_EQ(inodes.Get(ino)->path, path);
    }
  }
}

}  // namespace
}  // namespace lakecache
