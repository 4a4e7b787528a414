// MountJournal: what one server records, the next reads back; a torn tail ends the log; opens and
// releases are compacted into a new log the holder is handed (a memfd, or an unnamed file in the
// folder given), and that one reads back the same; a full disk stops the journal, never the mount.
#include "fs/mount_journal.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>

#include "support/resident.h"
#include "support/scoped_tmpfs.h"
#include "support/test_servers.h"

namespace lakecache {
namespace {

int NewMemfd() { return ::memfd_create("journal-test", MFD_CLOEXEC); }

// A hand-over as the holder's: it keeps the new log in *held, closing the one it had.
std::function<Status(int)> KeptIn(int* held) {
  return [held](int fd) {
    ::close(*held);
    *held = fd;
    return Status::Ok();
  };
}

off_t SizeOf(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 ? st.st_size : -1;
}

TEST(MountJournalTest, TheNextServerReadsBackInodesAndOpenFiles) {
  int fd = NewMemfd();
  ASSERT_GE(fd, 0);
  {
    auto journal = MountJournal::Open(::dup(fd));
    ASSERT_TRUE(journal.ok()) << journal.status().ToString();
    (*journal)->AddInode({2, true, "ds", "train"});
    (*journal)->AddInode({3, false, "ds", "train/a.bin"});
    (*journal)->AddOpen({7, 3, "etag-1", 100});
    (*journal)->AddOpen({8, 3, "etag-1", 100});
    (*journal)->AddRelease(7);
  }
  // A server killed while writing leaves half a record: the log ends before it.
  const char torn[] = {40, 0, 0, 0, 1, 2};
  ASSERT_EQ(::pwrite(fd, torn, sizeof(torn), SizeOf(fd)), static_cast<ssize_t>(sizeof(torn)));
  auto next = MountJournal::Open(::dup(fd));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  ASSERT_EQ((*next)->inodes().size(), 2u);
  EXPECT_EQ((*next)->inodes()[1].path, "train/a.bin");
  EXPECT_FALSE((*next)->inodes()[1].is_dir);
  ASSERT_EQ((*next)->open_files().size(), 1u);
  EXPECT_EQ((*next)->open_files()[0].fh, 8u);
  EXPECT_EQ((*next)->open_files()[0].etag, "etag-1");
  EXPECT_EQ((*next)->max_fh(), 8u);
  // It appends over the torn tail.
  (*next)->AddOpen({9, 2, "", 0});
  next->reset();
  auto third = MountJournal::Open(fd);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ((*third)->open_files().size(), 2u);
}

TEST(MountJournalTest, ForgottenInodesAreNotRestored) {
  int fd = NewMemfd();
  ASSERT_GE(fd, 0);
  {
    auto journal = MountJournal::Open(::dup(fd));
    ASSERT_TRUE(journal.ok()) << journal.status().ToString();
    (*journal)->AddInode({2, true, "ds", "train"});
    (*journal)->AddInode({3, false, "ds", "train/a.bin"});
    (*journal)->AddInode({4, false, "ds", "train/b.bin"});
    (*journal)->AddForget(3);
    (*journal)->AddForget(99);                             // never held: ignored
    (*journal)->AddInode({3, true, "ds", "train/a.bin"});  // held again (now a folder)
    (*journal)->AddForget(4);
  }
  auto next = MountJournal::Open(fd);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  ASSERT_EQ((*next)->inodes().size(), 2u);
  EXPECT_EQ((*next)->inodes()[0].ino, 2u);
  EXPECT_EQ((*next)->inodes()[1].ino, 3u);
  EXPECT_TRUE((*next)->inodes()[1].is_dir);
}

TEST(MountJournalTest, OpensAndReleasesAreCompactedIntoAJournalTheHolderKeeps) {
  int held = NewMemfd();  // what the holder keeps: replaced on each compaction
  auto journal = MountJournal::Open(::dup(held));
  ASSERT_TRUE(journal.ok());
  int handed = 0;
  (*journal)->SetCompaction(
      [&](int fd) {
        ::close(held);
        held = fd;
        ++handed;
        return Status::Ok();
      },
      4096);
  for (uint64_t ino = 2; ino < 12; ++ino)
    (*journal)->AddInode({ino, false, "ds", "f" + std::to_string(ino)});
  (*journal)->AddOpen({1, 5, "kept", 10});
  for (uint64_t fh = 2; fh < 3000; ++fh) {
    (*journal)->AddOpen({fh, 2 + fh % 10, "etag", 1000});
    (*journal)->AddRelease(fh);
  }
  (*journal)->AddOpen({5000, 4, "last", 20});
  (*journal)->WaitForCompaction();
  EXPECT_GT((*journal)->compactions(), 0u);
  EXPECT_EQ(static_cast<uint64_t>(handed), (*journal)->compactions());
  journal->reset();
  auto next = MountJournal::Open(held);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ((*next)->inodes().size(), 10u);
  ASSERT_EQ((*next)->open_files().size(), 2u);
  EXPECT_EQ((*next)->open_files()[0].etag, "kept");
  EXPECT_EQ((*next)->open_files()[1].fh, 5000u);
}

TEST(MountJournalTest, ForgettingWhatItHeldCompactsItToWhatIsLeft) {
  int held = NewMemfd();
  auto journal = MountJournal::Open(::dup(held));
  ASSERT_TRUE(journal.ok());
  (*journal)->SetCompaction(KeptIn(&held), 4096);
  for (uint64_t ino = 2; ino < 2002; ++ino) {
    (*journal)->AddInode({ino, false, "ds", "folder/file-" + std::to_string(ino)});
  }
  (*journal)->WaitForCompaction();
  // Nothing was dead: it grew without a compaction past the first (or with none).
  const uint64_t before = (*journal)->compactions();
  EXPECT_LE(before, 1u);
  for (uint64_t ino = 2; ino < 1992; ++ino) (*journal)->AddForget(ino);
  (*journal)->WaitForCompaction();
  EXPECT_GT((*journal)->compactions(), before) << "most of it is forgotten";
  journal->reset();
  auto next = MountJournal::Open(held);
  ASSERT_TRUE(next.ok());
  ASSERT_EQ((*next)->inodes().size(), 10u);
  EXPECT_EQ((*next)->inodes()[0].path, "folder/file-1992");
}

TEST(MountJournalTest, AFailedHandOverKeepsTheOldJournalWhole) {
  int held = NewMemfd();
  auto journal = MountJournal::Open(::dup(held));
  ASSERT_TRUE(journal.ok());
  (*journal)->SetCompaction(
      [](int fd) {
        ::close(fd);
        return Status::Unavailable("the holder is gone");
      },
      1024);
  for (uint64_t fh = 1; fh < 200; ++fh) {
    (*journal)->AddOpen({fh, 2, "e", 1});
    if (fh != 100) (*journal)->AddRelease(fh);
  }
  (*journal)->WaitForCompaction();
  EXPECT_EQ((*journal)->compactions(), 0u);
  journal->reset();
  auto next = MountJournal::Open(held);
  ASSERT_TRUE(next.ok());
  ASSERT_EQ((*next)->open_files().size(), 1u);
  EXPECT_EQ((*next)->open_files()[0].fh, 100u);
}

// A journal on a copy of *held, its compactions writing to `dir`: it holds 2,000 inodes and
// forgets all but 10 (so that it compacts), then holds 2,000 more and is closed. *held is then
// the holder's last log.
void CompactAndGrow(int* held, const std::string& dir) {
  auto journal = MountJournal::Open(::dup(*held));
  ASSERT_TRUE(journal.ok());
  (*journal)->SetCompaction(KeptIn(held), 4096, dir);
  for (uint64_t ino = 2; ino < 2002; ++ino) {
    (*journal)->AddInode({ino, false, "ds", "folder/file-" + std::to_string(ino)});
  }
  for (uint64_t ino = 2; ino < 1992; ++ino) (*journal)->AddForget(ino);
  (*journal)->WaitForCompaction();
  ASSERT_GT((*journal)->compactions(), 0u);
  // Appends go on in the new log, past what the compaction wrote.
  for (uint64_t ino = 5000; ino < 7000; ++ino) {
    (*journal)->AddInode({ino, false, "ds", "more/file-" + std::to_string(ino)});
  }
}  // the journal is closed, its compactions over

// The next server reads back what CompactAndGrow left: the 10 not forgotten, the 2,000 after.
void ExpectCompactedAndGrown(int held) {
  auto next = MountJournal::Open(held);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  ASSERT_EQ((*next)->inodes().size(), 10u + 2000u);
  EXPECT_EQ((*next)->inodes()[0].path, "folder/file-1992");
  EXPECT_EQ((*next)->inodes().back().path, "more/file-6999");
}

TEST(MountJournalTest, CompactedLogsGoToAnUnnamedFileInTheFolderGiven) {
  testing::TempDir dir("journal-dir");
  int held = NewMemfd();
  ASSERT_NO_FATAL_FAILURE(CompactAndGrow(&held, dir.path()));
  // The holder's log is a file of that folder's file system that has no name: nothing is left
  // there when the mount goes, and its pages are the page cache's.
  struct stat st, folder;
  ASSERT_EQ(::fstat(held, &st), 0);
  ASSERT_EQ(::stat(dir.path().c_str(), &folder), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_nlink, 0u);
  EXPECT_EQ(st.st_dev, folder.st_dev);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  ExpectCompactedAndGrown(held);
}

// Appends to a log on disk go through a map of it, and the pages behind leave the process's
// page tables: its RSS does not count the journal (about 60 bytes a held inode, twice that
// before a compaction).
TEST(MountJournalTest, AppendsToALogOnDiskDoNotStayMapped) {
  testing::TempDir dir("journal-mapped");
  int held = NewMemfd();
  ASSERT_NO_FATAL_FAILURE(CompactAndGrow(&held, dir.path()));  // the log is a file of dir now
  auto journal = MountJournal::Open(::dup(held));              // a next server's
  ASSERT_TRUE(journal.ok());
  (*journal)->SetCompaction(KeptIn(&held), 4096, dir.path());
  for (uint64_t ino = 100000; ino < 300000; ++ino) {  // about 12 MB
    (*journal)->AddInode({ino, false, "ds", "grown/file-" + std::to_string(ino)});
  }
  const std::string folder = std::filesystem::canonical(dir.path()).string() + "/";
  EXPECT_LT(testing::MappedResidentKib([&](std::string_view path) {
              return path.starts_with(folder) && path.ends_with(" (deleted)");
            }),
            4096u);
  journal->reset();
  auto next = MountJournal::Open(held);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ((*next)->inodes().back().path, "grown/file-299999");
}

TEST(MountJournalTest, WhenTheDiskIsFullTheLogMovesToMemoryWhole) {
  testing::TempDir dir("journal-full");
  // Room for a compacted log, not for the 1 MiB it grows by after: the log grows past what the
  // disk has room for (when, depends on when the compactions ran), moves to a memfd then, and
  // nothing is lost.
  testing::ScopedTmpfs tmpfs(dir.path(), 512 * 1024);
  ASSERT_MOUNTED(tmpfs);
  int held = NewMemfd();
  ASSERT_NO_FATAL_FAILURE(CompactAndGrow(&held, dir.path()));
  struct stat st, folder;
  ASSERT_EQ(::fstat(held, &st), 0);
  ASSERT_EQ(::stat(dir.path().c_str(), &folder), 0);
  EXPECT_NE(st.st_dev, folder.st_dev) << "the log should have left the full disk";
  ExpectCompactedAndGrown(held);
}

}  // namespace
}  // namespace lakecache
