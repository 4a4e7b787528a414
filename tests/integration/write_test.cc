// Writes through a real FUSE mount (`lakecache mount --config`, foreground) to s3rver and to
// OpenStack Swift with s3api (which verifies signatures, Content-MD5 and multipart uploads): every
// case runs on both unless it says why not. What the contract of docs/semantics.md "Writes"
// promises: objects appear at close, multipart parts grow, flags guard overwrites and deletes,
// refusals carry their errno, failures give EIO and leave no object, leftover uploads are aborted,
// the write budget makes writers wait without losing bytes, and written files read back from the
// cache. The store is reached through a CountingProxy, which counts GETs, can refuse connections
// (the store down) and can answer part uploads with 503 SlowDown.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "integration/cli_fixture.h"
#include "support/counting_proxy.h"
#include "support/store_options.h"
#include "support/test_data.h"
#include "support/test_servers.h"
#include "ufs/s3_store.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::write_test {
namespace {

namespace fs = std::filesystem;
using testing::ChildProcess;
using testing::CountingProxy;
using testing::MakeBytes;
using testing::ReadWholeFile;
using testing::RunCommand;
using testing::RunResult;
using testing::S3Server;

constexpr char kWriteBucket[] = "lc-writes";
constexpr uint64_t kMiB = 1 << 20;

S3Server& Server(const std::string& kind) { return testing::SharedS3Server(kind, {kWriteBucket}); }

// errno of a failed call, 0 when it succeeded.
int ErrnoOf(bool ok) { return ok ? 0 : errno; }

// Writes `content` to `path` (created, truncated) in `chunk`-byte writes and closes it; the
// errno of the first call that failed, or 0.
int WriteFileInChunks(const std::string& path, const std::string& content, size_t chunk,
                      int flags = O_CREAT | O_WRONLY | O_TRUNC) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  for (size_t at = 0; at < content.size();) {
    ssize_t n = ::write(fd, content.data() + at, std::min(chunk, content.size() - at));
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return err;
    }
    at += static_cast<size_t>(n);
  }
  return ErrnoOf(::close(fd) == 0);
}

class WriteTest : public testing::CliFixture, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    ASSERT_TRUE(CanMount())
        << "writes are tested through real FUSE mounts: needs root and /dev/fuse";
    server_ = &Server(GetParam());
    auto proxy = CountingProxy::Start(server_->endpoint());
    ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
    proxy_ = std::move(*proxy);
    S3StoreOptions options = testing::StoreOptionsFor(*server_, kWriteBucket);
    auto store = S3Store::Create(std::move(options));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    // Every case writes under a prefix of its own.
    prefix_ = std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
    for (char& c : prefix_) {
      if (c == '/') c = '-';
    }
  }

  bool swift() const { return GetParam() == "swift"; }

  // A config of namespace "w" over the bucket's prefix, through the proxy, and `extra` lines of
  // the namespace; `top` lines after the namespaces (cache, client).
  std::string Config(const std::string& extra = "", const std::string& top = "") {
    return WriteConfig("lake-" + std::to_string(configs_++) + ".yaml",
                       "namespaces:\n  w:\n    uri: s3://" + std::string(kWriteBucket) + "/" +
                           prefix_ + "/\n    endpoint: " + proxy_->endpoint() +
                           "\n    access_key: " + server_->access_key() + "\n    secret_key: " +
                           server_->secret_key() + "\n    metadata_ttl: 1m\n" + extra + top);
  }

  // Mounts `config` (plus `args`) in the foreground; "" on failure (recorded).
  std::string MountConfig(const std::string& config, std::vector<std::string> args = {},
                          const std::vector<std::string>& env = {}) {
    std::string mnt = Mountpoint();
    std::vector<std::string> argv = {"mount", mnt, "--config", config};
    argv.insert(argv.end(), args.begin(), args.end());
    ChildProcess* child = Start(argv, "mount-" + std::to_string(mounts_++) + ".log", env);
    if (child == nullptr) return "";
    bool mounted = WaitFor([&] { return testing::IsMounted(mnt) || !child->Running(); },
                           std::chrono::seconds(30));
    if (!mounted || !testing::IsMounted(mnt)) {
      ADD_FAILURE() << "not mounted at " << mnt << "\n" << child->LogTail();
      return "";
    }
    last_mount_ = child;
    return mnt + "/w";
  }

  std::string Key(const std::string& path) const { return prefix_ + "/" + path; }

  // The object's bytes in the store, or "<absent>".
  std::string Object(const std::string& path) {
    auto head = store_->Head(Key(path), {});
    if (!head.ok()) return "<absent>";
    std::string buf(head->size + 1, '\0');
    auto n = store_->Read(Key(path), 0, buf, ReadOptions{});
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    buf.resize(n.ok() ? *n : 0);
    return buf;
  }

  bool Exists(const std::string& path) { return store_->Head(Key(path), {}).ok(); }

  // The multipart uploads pending under this case's prefix (Swift; s3rver cannot list them).
  size_t PendingUploads() {
    auto pending = store_->ListMultipartUploads(prefix_ + "/", {});
    EXPECT_TRUE(pending.ok()) << pending.status().ToString();
    return pending.ok() ? pending->size() : 0;
  }

  size_t PendingUploadsOrZero() { return swift() ? PendingUploads() : 0; }

  static std::string Sh(const std::string& script) {
    RunResult r = RunCommand({"sh", "-c", script}, {}, std::chrono::seconds(300));
    EXPECT_EQ(r.exit_code, 0) << script << "\n" << r.out << r.err;
    return r.out;
  }

  S3Server* server_ = nullptr;
  std::unique_ptr<CountingProxy> proxy_;
  std::unique_ptr<S3Store> store_;
  std::string prefix_;
  ChildProcess* last_mount_ = nullptr;
  int configs_ = 0;
  int mounts_ = 0;
};

TEST_P(WriteTest, CheckpointShowsAtCloseInGrowingParts) {
  // Parts of 8, 16 and 32 MiB, four of each size (the step is 1,000 parts unless told): a
  // 240 MiB file is 13 parts, where parts of one size would be 30 (8 MiB) or 5 (51 MiB).
  std::string mnt = MountConfig(Config(), {"-o", "upload_parts_per_step=4"});
  ASSERT_FALSE(mnt.empty());
  std::string content = MakeBytes(1, 240 * kMiB);
  int fd = ::open((mnt + "/ckpt.bin").c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  for (size_t at = 0; at < content.size(); at += kMiB) {
    ASSERT_EQ(::write(fd, content.data() + at, kMiB), static_cast<ssize_t>(kMiB)) << at;
    if (at == 100 * kMiB) {
      EXPECT_FALSE(Exists("ckpt.bin")) << "visible before close";
      struct stat st;
      ASSERT_EQ(::fstat(fd, &st), 0);
      EXPECT_EQ(st.st_size, static_cast<off_t>(at + kMiB));
    }
  }
  EXPECT_FALSE(Exists("ckpt.bin")) << "visible before close";
  ASSERT_EQ(::close(fd), 0) << std::strerror(errno);
  auto head = store_->Head(Key("ckpt.bin"), {});
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->size, content.size());
  // Swift's multipart ETag counts the parts; s3rver's is a plain MD5.
  if (swift()) {
    EXPECT_TRUE(head->etag.ends_with("-13")) << head->etag;
  }
  EXPECT_TRUE(Object("ckpt.bin") == content);
  EXPECT_EQ(PendingUploadsOrZero(), 0u);
}

TEST_P(WriteTest, ShellToolsWriteFilesAndTrees) {
  std::string mnt = MountConfig(Config());
  ASSERT_FALSE(mnt.empty());
  Sh("echo hello > '" + mnt + "/greeting.txt' && touch '" + mnt + "/empty'");
  EXPECT_EQ(Object("greeting.txt"), "hello\n");
  // A file closed with nothing written is made at its release, which the kernel sends after
  // `touch` returned: a moment later (docs/semantics.md).
  EXPECT_TRUE(WaitFor([&] { return Exists("empty"); }, std::chrono::seconds(30)));
  EXPECT_EQ(Object("empty"), "");
  // touch, then a redirect: an empty object is replaced without allow_overwrite.
  Sh("echo again > '" + mnt + "/empty'");
  EXPECT_EQ(Object("empty"), "again\n");
  // A tree of 2,000 small files in 20 folders, copied in by cp -r and unpacked by tar.
  std::string src = Folder("src") + "/tree";
  for (int i = 0; i < 2000; ++i) {
    std::string dir = src + "/d" + std::to_string(i % 20);
    fs::create_directories(dir);
    std::ofstream(dir + "/f" + std::to_string(i) + ".bin", std::ios::binary)
        << MakeBytes(100 + i, 100 + (i * 37) % 9000);
  }
  Sh("cp -r '" + src + "' '" + mnt + "/copied' && diff -r '" + src + "' '" + mnt + "/copied'");
  EXPECT_EQ(Object("copied/d7/f1507.bin"), MakeBytes(1607, 100 + (1507 * 37) % 9000));
  std::string tar = Folder("tar") + "/tree.tar";
  Sh("tar -cf '" + tar + "' -C '" + src + "' d1 d2 && mkdir '" + mnt + "/untarred' && tar -xf '" +
     tar + "' -C '" + mnt + "/untarred' && diff -r '" + src + "/d1' '" + mnt + "/untarred/d1'");
  // cp -p keeps modes and times where it can: accepted, not kept.
  Sh("cp -p '" + src + "/d3/f3.bin' '" + mnt + "/kept.bin' && cmp '" + src + "/d3/f3.bin' '" + mnt +
     "/kept.bin'");
  // mkdir makes a folder that lasts (its marker object); rmdir removes an empty one.
  ASSERT_EQ(ErrnoOf(::mkdir((mnt + "/made").c_str(), 0755) == 0), 0);
  EXPECT_TRUE(Exists("made/"));
  EXPECT_EQ(ErrnoOf(::rmdir((mnt + "/copied").c_str()) == 0), ENOTEMPTY);
  EXPECT_EQ(ErrnoOf(::rmdir((mnt + "/made").c_str()) == 0), 0);
  EXPECT_FALSE(Exists("made/"));
}

// `touch f` returns before the kernel releases its handle, so the redirect's open comes while the
// touched file is still open in the mount: it takes the unused file over (docs/semantics.md).
TEST_P(WriteTest, TouchThenWriteWorksAtOnceFromTheShellAndPython) {
  std::string mnt = MountConfig(Config());
  ASSERT_FALSE(mnt.empty());
  constexpr int kRounds = 20;
  std::string script;
  for (int i = 0; i < kRounds; ++i) {
    std::string f = "'" + mnt + "/sh-" + std::to_string(i) + "'";
    script += "touch " + f + " && echo x" + std::to_string(i) + " > " + f + " && ";
  }
  Sh(script + "true");
  std::string python =
      "import sys\n"
      "from pathlib import Path\n"
      "for i in range(" +
      std::to_string(kRounds) +
      "):\n"
      "    p = Path(sys.argv[1]) / f'py-{i}'\n"
      "    p.touch()\n"
      "    p.write_text(f'y{i}')\n"
      "    assert p.read_text() == f'y{i}', p.read_text()\n";
  RunResult r = RunCommand({"/usr/bin/python3", "-c", python, mnt}, {}, std::chrono::seconds(120));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (int i = 0; i < kRounds; ++i) {
    EXPECT_EQ(Object("sh-" + std::to_string(i)), "x" + std::to_string(i) + "\n");
    EXPECT_EQ(Object("py-" + std::to_string(i)), "y" + std::to_string(i));
  }
  // A touched file nobody writes again is still made, empty, at its release.
  Sh("touch '" + mnt + "/only-touched'");
  EXPECT_TRUE(WaitFor([&] { return Exists("only-touched"); }, std::chrono::seconds(30)));
  EXPECT_EQ(Object("only-touched"), "");
}

TEST_P(WriteTest, OverwriteDeleteAndRenameNeedTheirFlags) {
  ASSERT_TRUE(server_->PutObjects(kWriteBucket, {{Key("data.bin"), "precious"}}).ok());
  {
    std::string mnt = MountConfig(Config());
    ASSERT_FALSE(mnt.empty());
    const std::string file = mnt + "/data.bin";
    EXPECT_EQ(WriteFileInChunks(file, "clobbered", 4), EPERM);
    EXPECT_EQ(ErrnoOf(::unlink(file.c_str()) == 0), EPERM);
    EXPECT_EQ(ErrnoOf(::rename(file.c_str(), (mnt + "/moved.bin").c_str()) == 0), EPERM);
    EXPECT_EQ(ErrnoOf(::truncate(file.c_str(), 0) == 0), EPERM);
    EXPECT_EQ(Object("data.bin"), "precious");
    std::string log = ReadAll(last_mount_->log_path());
    EXPECT_NE(log.find("needs namespaces.w.allow_overwrite: true"), std::string::npos) << log;
    EXPECT_NE(log.find("needs namespaces.w.allow_delete: true"), std::string::npos) << log;
    StopAll();
  }
  std::string mnt = MountConfig(Config("    allow_overwrite: true\n    allow_delete: true\n"));
  ASSERT_FALSE(mnt.empty());
  const std::string file = mnt + "/data.bin";
  EXPECT_EQ(WriteFileInChunks(file, "replaced", 3), 0);
  EXPECT_EQ(Object("data.bin"), "replaced");
  EXPECT_EQ(ErrnoOf(::rename(file.c_str(), (mnt + "/moved.bin").c_str()) == 0), 0);
  EXPECT_EQ(Object("moved.bin"), "replaced");
  EXPECT_FALSE(Exists("data.bin"));
  EXPECT_EQ(testing::ReadWholeFile(mnt + "/moved.bin").bytes, "replaced");
  EXPECT_EQ(WriteFileInChunks(mnt + "/other.bin", "other", 5), 0);
  EXPECT_EQ(ErrnoOf(::syscall(SYS_renameat2, AT_FDCWD, (mnt + "/other.bin").c_str(), AT_FDCWD,
                              (mnt + "/moved.bin").c_str(), RENAME_NOREPLACE) == 0),
            EEXIST);
  EXPECT_EQ(ErrnoOf(::rename((mnt + "/other.bin").c_str(), (mnt + "/moved.bin").c_str()) == 0), 0);
  EXPECT_EQ(Object("moved.bin"), "other");
  EXPECT_EQ(ErrnoOf(::unlink((mnt + "/moved.bin").c_str()) == 0), 0);
  EXPECT_FALSE(Exists("moved.bin"));
  struct stat st;
  EXPECT_EQ(ErrnoOf(::stat((mnt + "/moved.bin").c_str(), &st) == 0), ENOENT);
  // Folders are not renamed: mv copies them (EXDEV).
  ASSERT_EQ(::mkdir((mnt + "/folder").c_str(), 0755), 0);
  EXPECT_EQ(ErrnoOf(::rename((mnt + "/folder").c_str(), (mnt + "/folder2").c_str()) == 0), EXDEV);
}

TEST_P(WriteTest, AFileWrittenOnlyByAChildIsCommittedAtTheLastClose) {
  std::string mnt = MountConfig(Config());
  ASSERT_FALSE(mnt.empty());
  // The shell opens the file, hands it to a child and closes its own descriptor first: its close
  // must not commit the file (it wrote nothing); the child's bytes are stored at the last close.
  // The child writes only once the shell, after its close, says go through a FIFO.
  Sh("go='" + scratch_->path() + "/go'; rm -f \"$go\"; mkfifo \"$go\"; exec 3>'" + mnt +
     "/handed.txt'; (read line <\"$go\"; echo from the child >&3) & exec 3>&-; echo >\"$go\"; "
     "wait");
  // The last close returns before its release commits: wait for the whole object (s3rver shows
  // one while it arrives).
  EXPECT_TRUE(WaitFor(
      [&] {
        auto head = store_->Head(Key("handed.txt"), {});
        return head.ok() && head->size == 15;
      },
      std::chrono::seconds(10)));
  EXPECT_EQ(Object("handed.txt"), "from the child\n");
  // While a file is being written, a second writer is refused and a reader sees no torn bytes.
  int fd = ::open((mnt + "/busy.bin").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "abc", 3), 3);
  EXPECT_EQ(WriteFileInChunks(mnt + "/busy.bin", "other", 5, O_WRONLY | O_TRUNC), EBUSY);
  ASSERT_EQ(::close(fd), 0);
  EXPECT_EQ(Object("busy.bin"), "abc");
}

TEST_P(WriteTest, RandomWritesAppendsAndTruncationAreRefused) {
  ASSERT_TRUE(server_->PutObjects(kWriteBucket, {{Key("old.bin"), "old bytes"}}).ok());
  std::string mnt = MountConfig(Config("    allow_overwrite: true\n    allow_delete: true\n"));
  ASSERT_FALSE(mnt.empty());
  const std::string file = mnt + "/new.bin";
  int fd = ::open(file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "abcd", 4), 4);
  EXPECT_EQ(ErrnoOf(::pwrite(fd, "x", 1, 100) == 1), EINVAL);  // a hole
  EXPECT_EQ(ErrnoOf(::pwrite(fd, "x", 1, 0) == 1), EINVAL);    // in place
  EXPECT_EQ(ErrnoOf(::ftruncate(fd, 2) == 0), EINVAL);
  EXPECT_EQ(ErrnoOf(::ftruncate(fd, 4) == 0), 0);  // the size written: nothing changes
  EXPECT_EQ(::write(fd, "ef", 2), 2);
  EXPECT_EQ(::close(fd), 0);
  EXPECT_EQ(Object("new.bin"), "abcdef");
  // An existing object is replaced whole or not at all.
  const std::string old = mnt + "/old.bin";
  EXPECT_EQ(WriteFileInChunks(old, "more", 4, O_WRONLY | O_APPEND), EPERM);
  EXPECT_EQ(WriteFileInChunks(old, "more", 4, O_WRONLY), EPERM);
  EXPECT_EQ(ErrnoOf(::truncate(old.c_str(), 3) == 0), EINVAL);
  // O_RDWR without O_TRUNC reads it; a write through that handle is EBADF.
  fd = ::open(old.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  char buf[16] = {};
  EXPECT_EQ(::read(fd, buf, sizeof(buf)), 9);
  EXPECT_EQ(ErrnoOf(::write(fd, "x", 1) == 1), EBADF);
  ::close(fd);
  EXPECT_EQ(Object("old.bin"), "old bytes");
  // chmod, chown and utimes are accepted and not kept.
  EXPECT_EQ(ErrnoOf(::chmod(old.c_str(), 0600) == 0), 0);
  EXPECT_EQ(ErrnoOf(::chown(old.c_str(), 0, 0) == 0), 0);
  EXPECT_EQ(ErrnoOf(::utimes(old.c_str(), nullptr) == 0), 0);
  EXPECT_EQ(ErrnoOf(::symlink("x", (mnt + "/link").c_str()) == 0), EPERM);
  // Truncation to 0 with allow_overwrite replaces it with an empty object.
  EXPECT_EQ(ErrnoOf(::truncate(old.c_str(), 0) == 0), 0);
  EXPECT_EQ(Object("old.bin"), "");
}

TEST_P(WriteTest, ReadOnlyNamespaceAndRoMountRefuseWithErofs) {
  for (bool ro_flag : {false, true}) {
    std::string mnt =
        ro_flag ? MountConfig(Config(), {"-o", "ro"}) : MountConfig(Config("    write: false\n"));
    ASSERT_FALSE(mnt.empty());
    EXPECT_EQ(WriteFileInChunks(mnt + "/x.bin", "x", 1), EROFS);
    EXPECT_EQ(ErrnoOf(::mkdir((mnt + "/d").c_str(), 0755) == 0), EROFS);
    EXPECT_FALSE(Exists("x.bin"));
    // `-o ro` mounts "ro"; a mount whose namespaces do not write stays "rw" for its control file
    // (the order hint), refusing every other change itself.
    std::string mounts = ReadAll("/proc/mounts");
    EXPECT_NE(mounts.find(fs::path(mnt).parent_path().string() + " fuse.lakecache " +
                          (ro_flag ? "ro," : "rw,")),
              std::string::npos)
        << mounts;
    StopAll();
  }
}

// The one-Put experiment (-o single_put_max, docs/benchmarks.md "Writes"): a staged
// file within the limit is one Put at close; one that outgrows it, or is fsynced, streams on.
TEST_P(WriteTest, StagedFilesWithinTheOnePutLimitAreExact) {
  std::string top = "cache:\n  disks:\n    - path: " + Folder("cache") + "\n      capacity: 1GiB\n";
  std::string mnt = MountConfig(Config("", top), {"-o", "single_put_max=16MiB"});
  ASSERT_FALSE(mnt.empty());
  std::string small = MakeBytes(30, 10 * kMiB + 1);
  std::string large = MakeBytes(31, 30 * kMiB + 7);
  EXPECT_EQ(WriteFileInChunks(mnt + "/small.bin", small, kMiB), 0);
  EXPECT_EQ(WriteFileInChunks(mnt + "/large.bin", large, kMiB), 0);
  int fd = ::open((mnt + "/synced.bin").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, small.data(), 3 * kMiB), static_cast<ssize_t>(3 * kMiB));
  EXPECT_EQ(::fsync(fd), 0);
  ASSERT_EQ(::write(fd, small.data() + 3 * kMiB, small.size() - 3 * kMiB),
            static_cast<ssize_t>(small.size() - 3 * kMiB));
  ASSERT_EQ(::close(fd), 0);
  EXPECT_TRUE(Object("small.bin") == small);
  EXPECT_TRUE(Object("large.bin") == large);
  EXPECT_TRUE(Object("synced.bin") == small);
  EXPECT_TRUE(ReadWholeFile(mnt + "/small.bin").bytes == small);
  EXPECT_EQ(PendingUploadsOrZero(), 0u);
}

TEST_P(WriteTest, FsyncUploadsAndCloseCommits) {
  std::string mnt = MountConfig(Config());
  ASSERT_FALSE(mnt.empty());
  std::string content = MakeBytes(2, 20 * kMiB + 5);
  int fd = ::open((mnt + "/synced.bin").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, content.data(), 12 * kMiB), static_cast<ssize_t>(12 * kMiB));
  EXPECT_EQ(::fsync(fd), 0) << std::strerror(errno);
  EXPECT_FALSE(Exists("synced.bin")) << "fsync made it visible";
  if (swift()) {
    EXPECT_EQ(PendingUploads(), 1u);
  }
  ASSERT_EQ(::write(fd, content.data() + 12 * kMiB, content.size() - 12 * kMiB),
            static_cast<ssize_t>(content.size() - 12 * kMiB));
  EXPECT_EQ(::fsync(fd), 0);
  ASSERT_EQ(::close(fd), 0);
  EXPECT_TRUE(Object("synced.bin") == content);
  EXPECT_EQ(PendingUploadsOrZero(), 0u);
}

TEST_P(WriteTest, StoreDownMidUploadFailsTheCloseAndLeavesNoObject) {
  std::string mnt = MountConfig(Config());
  ASSERT_FALSE(mnt.empty());
  int fd = ::open((mnt + "/lost.bin").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  std::string content = MakeBytes(3, 30 * kMiB);
  ASSERT_EQ(::write(fd, content.data(), 17 * kMiB), static_cast<ssize_t>(17 * kMiB));
  proxy_->SetRefusing(true);
  int err = 0;
  for (size_t at = 17 * kMiB; at < content.size() && err == 0; at += kMiB) {
    if (::write(fd, content.data() + at, kMiB) < 0) err = errno;
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  EXPECT_EQ(err, EIO);
  proxy_->SetRefusing(false);
  EXPECT_FALSE(Exists("lost.bin"));
  struct stat st;
  EXPECT_EQ(ErrnoOf(::stat((mnt + "/lost.bin").c_str(), &st) == 0), ENOENT);
  // The upload is aborted once the store answers again (Swift lists them; s3rver cannot).
  if (swift()) {
    EXPECT_TRUE(WaitFor([&] { return PendingUploads() == 0; }, std::chrono::seconds(60)));
  }
  std::string log = ReadAll(last_mount_->log_path());
  EXPECT_NE(log.find("lost.bin: not written to the store"), std::string::npos) << log;
}

TEST_P(WriteTest, ASlowDownStormOnPartsIsRetried) {
  std::string mnt = MountConfig(Config());
  ASSERT_FALSE(mnt.empty());
  proxy_->FailNextParts(3);
  std::string content = MakeBytes(4, 40 * kMiB);
  EXPECT_EQ(WriteFileInChunks(mnt + "/stormy.bin", content, kMiB), 0);
  EXPECT_EQ(proxy_->counts().failed_parts, 3u);
  EXPECT_TRUE(Object("stormy.bin") == content);
}

// The multipart uploads a mount's servers have recorded in the run folder, one line each.
size_t RecordedUploads(const std::string& run_dir) {
  size_t lines = 0;
  for (const auto& entry : fs::directory_iterator(run_dir)) {
    if (entry.path().filename().string().find(".uploads.") == std::string::npos) continue;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) ++lines;
  }
  return lines;
}

TEST_P(WriteTest, AKilledServersUploadIsAbortedByTheNext) {
  std::string mnt = MountConfig(Config());
  ASSERT_FALSE(mnt.empty());
  int fd = ::open((mnt + "/orphan.bin").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  std::string content = MakeBytes(5, 20 * kMiB);
  ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  // The open upload is recorded in the run folder (and, on Swift, listed by the store).
  ASSERT_TRUE(WaitFor([&] { return RecordedUploads(run_dir_) == 1; }, std::chrono::seconds(30)));
  if (swift()) {
    ASSERT_TRUE(WaitFor([&] { return PendingUploads() == 1; }, std::chrono::seconds(30)));
  }
  // The server is the holder's child: SIGKILL it; the holder starts the next one.
  RunResult children = RunCommand({"pgrep", "-P", std::to_string(last_mount_->pid())});
  ASSERT_EQ(children.exit_code, 0) << "no server under the holder";
  pid_t server = static_cast<pid_t>(std::stol(children.out));
  ASSERT_EQ(::kill(server, SIGKILL), 0);
  // The next server takes the dead one's record and aborts its upload (s3rver cannot abort: the
  // mount says so and drops the record; Swift then lists no pending upload).
  EXPECT_TRUE(WaitFor(
      [&] {
        return ReadAll(last_mount_->log_path()).find("aborting 1 upload(s) a previous server") !=
                   std::string::npos &&
               RecordedUploads(run_dir_) == 0;
      },
      std::chrono::seconds(60)))
      << ReadAll(last_mount_->log_path());
  if (swift()) {
    EXPECT_TRUE(WaitFor([&] { return PendingUploads() == 0; }, std::chrono::seconds(60)));
  } else {
    EXPECT_NE(ReadAll(last_mount_->log_path()).find("cannot abort upload"), std::string::npos);
  }
  EXPECT_NE(::close(fd), 0) << "a file its server lost was committed";
  EXPECT_FALSE(Exists("orphan.bin"));
}

TEST_P(WriteTest, WritersBeyondTheBudgetWaitAndLoseNothing) {
  // 40 MiB for everyone, parts of 8 MiB: three writers of 48 MiB each need more than there is.
  std::string mnt =
      MountConfig(Config(), {"-o", "client.write_budget=40MiB", "-o", "client.write_per_file=40MiB",
                             "-o", "client.upload_parts_in_flight=4"});
  ASSERT_FALSE(mnt.empty());
  std::vector<std::string> contents;
  for (int i = 0; i < 3; ++i) contents.push_back(MakeBytes(10 + i, 48 * kMiB + i));
  std::vector<int> errs(3, -1);
  std::vector<std::thread> writers;
  for (int i = 0; i < 3; ++i) {
    writers.emplace_back([&, i] {
      errs[i] = WriteFileInChunks(mnt + "/w" + std::to_string(i), contents[i], 256 * 1024);
    });
  }
  for (std::thread& t : writers) t.join();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(errs[i], 0) << i;
    EXPECT_TRUE(Object("w" + std::to_string(i)) == contents[i]) << i;
  }
}

TEST_P(WriteTest, AWrittenFileReadsBackFromTheCache) {
  for (bool disk : {true, false}) {
    std::string top =
        disk ? "cache:\n  disks:\n    - path: " + Folder("cache") + "\n      capacity: 1GiB\n" : "";
    std::string mnt = MountConfig(Config("", top));
    ASSERT_FALSE(mnt.empty());
    std::string content = MakeBytes(20, 20 * kMiB + 77);
    std::string file = mnt + (disk ? "/staged.bin" : "/unstaged.bin");
    ASSERT_EQ(WriteFileInChunks(file, content, kMiB), 0);
    ::sync();
    std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
    auto before = proxy_->counts();
    EXPECT_TRUE(ReadWholeFile(file).bytes == content);
    uint64_t gets = (proxy_->counts() - before).object_gets;
    // Staged beside the disk tier, the bytes entered the cache at close; without one, they come
    // from the store.
    if (disk) {
      EXPECT_EQ(gets, 0u);
    } else {
      EXPECT_GT(gets, 0u);
    }
    StopAll();
  }
}

TEST_P(WriteTest, TorchSavesAndLoadsACheckpoint) {
  if (RunCommand({"/usr/bin/python3", "-c", "import torch"}).exit_code != 0) {
    GTEST_FAIL() << "python3-torch is missing (scripts/install-deps.sh installs it)";
  }
  std::string mnt = MountConfig(Config("    allow_overwrite: true\n"));
  ASSERT_FALSE(mnt.empty());
  // 1 GiB on Swift, which checks every part's signature and MD5; 256 MiB on s3rver.
  int mib = swift() ? 1024 : 256;
  std::string script =
      "import torch, sys\n"
      "t = torch.arange(" +
      std::to_string(mib) +
      " * 1024 * 256, dtype=torch.float32)\n"
      "torch.save({'step': 7, 'weights': t}, sys.argv[1])\n"
      "back = torch.load(sys.argv[1])\n"
      "assert back['step'] == 7 and torch.equal(back['weights'], t)\n"
      "print('equal')\n";
  RunResult r = RunCommand({"/usr/bin/python3", "-c", script, mnt + "/model.pt"}, {},
                           std::chrono::seconds(300));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "equal\n");
  auto head = store_->Head(Key("model.pt"), {});
  ASSERT_TRUE(head.ok());
  EXPECT_GT(head->size, static_cast<uint64_t>(mib) * kMiB);
}

TEST_P(WriteTest, FioSequentialWriteVerifies) {
  std::string mnt = MountConfig(Config());
  ASSERT_FALSE(mnt.empty());
  RunResult r =
      RunCommand({"fio", "--directory=" + mnt,
                  std::string(LAKECACHE_SOURCE_DIR) + "/tests/integration/write_verify.fio"},
                 {}, std::chrono::seconds(300));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Count(r.out, "err= 0"), 2u) << r.out;
  EXPECT_EQ(r.out.find("verify: bad"), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Servers, WriteTest, ::testing::Values("s3rver", "swift"),
                         [](const auto& param) { return param.param; });

}  // namespace
}  // namespace lakecache::write_test
