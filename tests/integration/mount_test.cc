// A real FUSE mount (`lakecache mount`, foreground, owned by the test) over s3rver (and once over
// Swift): what the kernel shows, the bytes it reads, consistency after changes in the bucket, reads
// with the store gone or restarting, read-only errors, permissions, signals and start-up errors.
// Needs root and /dev/fuse (setpriv, drop_caches). Every mount is unmounted in TearDown, falling
// back to a lazy fusermount3, so a failing case leaves no stale mount behind.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/fuse_mounts.h"
#include "support/test_data.h"
#include "support/test_servers.h"
#include "support/wait_for.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::mount_test {
namespace {

namespace fs = std::filesystem;
using testing::ChildProcess;
using testing::FileBytes;
using testing::IsMounted;
using testing::MakeBytes;
using testing::ReadWholeFile;
using testing::RunCommand;
using testing::RunResult;
using testing::TempDir;
using Clock = std::chrono::steady_clock;
using Objects = std::vector<std::pair<std::string, std::string>>;

constexpr char kTreeBucket[] = "tree";
constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBlock = 4 * kMiB;  // the default cache block size
constexpr char kNineMiB[] = "big/nine.bin";
constexpr uint64_t kNineMiBSize = 9 * kMiB + 12345;
constexpr auto kMountTimeout = std::chrono::seconds(20);

// ~35 objects: nested folders, empty files, sizes around page, MiB and 4 MiB block edges, a 9 MiB
// object over three blocks, names with spaces, unicode and punctuation, and "dir/" markers.
// Every folder holds a file of its own: s3rver's delimiter listing skips a folder that holds only
// folders (its walk stops one level below the prefix), so FolderOnlyFolders() has those, for Swift.
const Objects& Tree() {
  static const Objects* tree = [] {
    auto* t = new Objects;
    uint64_t seed = 1;
    auto add = [&](const std::string& key, size_t size) {
      t->push_back({key, MakeBytes(seed++, size)});
    };
    add("README.md", 200);
    add("empty.txt", 0);
    add("data/manifest.json", 300);
    const size_t train_sizes[] = {1, 4095, 4096, 4097, 65536, 131073, kMiB - 1, kMiB, kMiB + 1};
    for (size_t i = 0; i < std::size(train_sizes); ++i) {
      add("data/train/part-0000" + std::to_string(i) + ".bin", train_sizes[i]);
    }
    add("data/train/empty-shard.bin", 0);
    add("data/val/part-00000.bin", kBlock - 1);
    add("data/val/part-00001.bin", kBlock);
    add("data/val/part-00002.bin", kBlock + 1);
    add(kNineMiB, kNineMiBSize);
    add("dir with space/file name.txt", 321);
    add("dir with space/another file.bin", 70000);
    add("unicode/日本語.txt", 1000);
    add("unicode/café ñ.bin", 5000);
    add("unicode/émoji 🚀.txt", 77);
    add("deep/top.txt", 11);
    add("deep/a/sibling.txt", 13);
    add("deep/a/b/leaf.txt", 12);
    add("special/a+b (1)=c.txt", 99);
    add("special/semi;colon,comma.txt", 98);
    for (int i = 0; i < 5; ++i)
      add("images/cat-000" + std::to_string(i) + ".jpg", 20000 + 7919 * i);
    add("markers/note.txt", 4);
    t->push_back({"markers/empty/", ""});
    t->push_back({"markers/with-marker/", ""});
    add("markers/with-marker/inside.txt", 5);
    return t;
  }();
  return *tree;
}

// Folders that hold only folders (or only a marker), which s3rver does not list.
Objects FoldersOfFolders() {
  return {{"only/folders/here/leaf.bin", MakeBytes(900, 5000)},
          {"only/marker/inside/", ""},
          {"deep/a/b/c/d/e/leaf.txt", MakeBytes(901, 10)}};
}

// What `find -printf '%y %P\n'` should print for `objects`: "f KEY" per file, "d PATH" per folder
// (markers and every implied parent).
std::set<std::string> ExpectedFind(const Objects& objects) {
  std::set<std::string> out;
  for (const auto& [key, content] : objects) {
    bool marker = key.ends_with('/');
    std::string path = marker ? key.substr(0, key.size() - 1) : key;
    out.insert((marker ? "d " : "f ") + path);
    for (size_t slash = path.find('/'); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      out.insert("d " + path.substr(0, slash));
    }
  }
  return out;
}

// errno of `ok` being false, 0 when it succeeded.
int ErrnoOf(bool ok) { return ok ? 0 : errno; }

// How `got` differs from `want`, for messages; "" when equal.
std::string Mismatch(const std::string& want, const FileBytes& got) {
  if (got.error != 0) return std::string("read failed: ") + std::strerror(got.error);
  if (got.bytes == want) return "";
  size_t at = 0;
  while (at < std::min(want.size(), got.bytes.size()) && want[at] == got.bytes[at]) ++at;
  return "got " + std::to_string(got.bytes.size()) + " bytes, want " + std::to_string(want.size()) +
         "; first difference at byte " + std::to_string(at);
}

const std::string& ContentOf(const std::string& key) {
  for (const auto& [k, content] : Tree()) {
    if (k == key) return content;
  }
  ADD_FAILURE() << "no key " << key << " in the tree";
  static const std::string none;
  return none;
}

class MountTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = testing::S3rver::Start({.buckets = {kTreeBucket}});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value().release();
    Status put = server_->PutObjects(kTreeBucket, Tree());
    if (!put.ok()) TearDownTestSuite();
    ASSERT_TRUE(put.ok()) << put.ToString();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(::geteuid() == 0 && fs::exists("/dev/fuse"))
        << "mount tests need root and /dev/fuse (the kernel FUSE module)";
    ASSERT_NE(server_, nullptr) << "the suite's s3rver did not start or take the tree";
    scratch_ = std::make_unique<TempDir>("lakecache-mount");
    // Mountpoints live here; user nobody must be able to reach them (NonRootUser... case).
    fs::permissions(scratch_->path(), fs::perms::owner_all | fs::perms::group_read |
                                          fs::perms::group_exec | fs::perms::others_read |
                                          fs::perms::others_exec);
  }

  void TearDown() override {
    for (const std::string& path : mountpoints_) {
      Status unmounted = testing::UnmountForTest(path);
      EXPECT_TRUE(unmounted.ok()) << unmounted.ToString();
    }
    for (auto& process : processes_) process->Stop();
    for (const std::string& path : mountpoints_) {
      EXPECT_FALSE(IsMounted(path)) << "stale mount at " << path;
    }
    processes_.clear();
    scratch_.reset();
  }

  // A fresh empty folder for a mount; TearDown unmounts whatever is mounted there.
  std::string NewMountpoint(const std::string& name = "mnt") {
    std::string path = scratch_->path() + "/" + name + "-" + std::to_string(mountpoints_.size());
    fs::create_directory(path);
    mountpoints_.push_back(path);
    return path;
  }

  // Credentials of `access_key`/`secret_key` (s3rver's by default) in the environment only.
  static std::vector<std::string> MountEnv(const std::string& access_key = "S3RVER",
                                           const std::string& secret_key = "S3RVER") {
    return {"AWS_ACCESS_KEY_ID=" + access_key, "AWS_SECRET_ACCESS_KEY=" + secret_key,
            "-AWS_ENDPOINT_URL", "-AWS_SESSION_TOKEN", "-AWS_PROFILE"};
  }

  // `lakecache mount s3://BUCKET MOUNTPOINT` against `endpoint` with `extra` flags, as argv.
  static std::vector<std::string> QuickMountArgv(const std::string& endpoint,
                                                 const std::string& bucket,
                                                 const std::string& mountpoint,
                                                 const std::vector<std::string>& extra = {},
                                                 const std::string& log_level = "info") {
    std::vector<std::string> argv = {LAKECACHE_BINARY, "mount",       "s3://" + bucket,
                                     mountpoint,       "--endpoint",  endpoint,
                                     "--path-style",   "--log-level", log_level};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  // Starts `argv` (a foreground mount of `mountpoint`) and waits until /proc/mounts lists it.
  // Returns the mount process (owned by the fixture) or nullptr after recording a failure.
  ChildProcess* StartMount(const std::vector<std::string>& argv, const std::string& mountpoint,
                           const std::vector<std::string>& env = MountEnv()) {
    std::string log = scratch_->path() + "/mount-" + std::to_string(processes_.size()) + ".log";
    auto started = ChildProcess::Start(argv, log, env);
    if (!started.ok()) {
      ADD_FAILURE() << started.status().ToString();
      return nullptr;
    }
    processes_.push_back(std::move(started).value());
    ChildProcess* process = processes_.back().get();
    auto deadline = Clock::now() + kMountTimeout;
    while (!IsMounted(mountpoint)) {
      if (!process->Running() || Clock::now() > deadline) {
        ADD_FAILURE() << "not mounted at " << mountpoint << ": " << testing::JoinArgv(argv) << "\n"
                      << process->LogTail();
        return nullptr;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return process;
  }

  // The tree bucket of the suite's server at a fresh mountpoint; "" after a failure.
  std::string MountTree(const std::vector<std::string>& extra = {}) {
    std::string mnt = NewMountpoint();
    if (StartMount(QuickMountArgv(server_->endpoint(), kTreeBucket, mnt, extra), mnt) == nullptr) {
      return "";
    }
    return mnt;
  }

  // A config file with one namespace per (name, bucket) of `endpoint`, each with `ttl`.
  std::string WriteConfig(const std::string& endpoint,
                          const std::vector<std::pair<std::string, std::string>>& namespaces,
                          const std::string& ttl) {
    std::string secret_file = scratch_->path() + "/secret";
    EXPECT_TRUE(testing::WriteFile(secret_file, "S3RVER\n").ok());
    std::string text = "namespaces:\n";
    for (const auto& [name, bucket] : namespaces) {
      text +=
          "  " + name + ":\n    uri: s3://" + bucket + "\n    endpoint: " + endpoint +
          "\n    path_style: true\n    access_key: S3RVER\n    secret_key_file: " + secret_file +
          "\n    metadata_ttl: " + ttl + "\n";
    }
    std::string path = scratch_->path() + "/lake.yaml";
    EXPECT_TRUE(testing::WriteFile(path, text).ok());
    return path;
  }

  // `find` under `mnt` lists exactly `objects` (and their folders), and every file reads back.
  void ExpectTreeAt(const std::string& mnt, const Objects& objects) {
    RunResult find = RunCommand({"find", mnt, "-mindepth", "1", "-printf", "%y %P\\n"}, {},
                                std::chrono::seconds(60));
    ASSERT_EQ(find.exit_code, 0) << find.err;
    EXPECT_EQ(find.err, "");
    std::set<std::string> found;
    std::istringstream lines(find.out);
    for (std::string line; std::getline(lines, line);) {
      EXPECT_TRUE(found.insert(line).second) << "listed twice: " << line;
    }
    EXPECT_EQ(found, ExpectedFind(objects));
    for (const auto& [key, content] : objects) {
      if (key.ends_with('/')) continue;
      EXPECT_EQ(Mismatch(content, ReadWholeFile(mnt + "/" + key)), "") << key;
    }
  }

  void ReplaceUnderAReader(testing::S3Server& server, const std::string& bucket);

  static inline testing::S3rver* server_ = nullptr;
  std::unique_ptr<TempDir> scratch_;
  std::vector<std::string> mountpoints_;
  std::vector<std::unique_ptr<ChildProcess>> processes_;
};

TEST_F(MountTest, FindMatchesBucketListingAndEveryFileHashMatches) {
  std::string mnt = MountTree();
  ASSERT_FALSE(mnt.empty());
  ExpectTreeAt(mnt, Tree());
  // The same through sha256sum, a reader that is not this process.
  RunResult sha = RunCommand({"sha256sum", mnt + "/" + kNineMiB});
  ASSERT_EQ(sha.exit_code, 0) << sha.err;
  std::string copy = scratch_->path() + "/nine.copy";
  ASSERT_TRUE(testing::WriteFile(copy, ContentOf(kNineMiB)).ok());
  RunResult want = RunCommand({"sha256sum", copy});
  EXPECT_EQ(sha.out.substr(0, 64), want.out.substr(0, 64));
}

// Swift lists folders that hold only folders, which s3rver does not (see Tree()), and checks
// signatures.
TEST_F(MountTest, FindOnSwiftShowsFoldersThatHoldOnlyFolders) {
  auto started = testing::SwiftS3::Start({.buckets = {kTreeBucket}});
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<testing::SwiftS3> swift = std::move(started).value();
  Objects objects = Tree();
  for (auto& extra : FoldersOfFolders()) objects.push_back(extra);
  ASSERT_TRUE(swift->PutObjects(kTreeBucket, objects).ok());
  std::string mnt = NewMountpoint();
  ASSERT_NE(StartMount(QuickMountArgv(swift->endpoint(), kTreeBucket, mnt), mnt,
                       MountEnv(swift->access_key(), swift->secret_key())),
            nullptr);
  ExpectTreeAt(mnt, objects);
}

TEST_F(MountTest, PreadAtBlockBoundariesPastEofAndZeroLength) {
  std::string mnt = MountTree();
  ASSERT_FALSE(mnt.empty());
  const std::string& want = ContentOf(kNineMiB);
  struct Case {
    uint64_t offset;
    size_t length;
  };
  const Case cases[] = {
      {kBlock - 1, 2},
      {kBlock, 4096},
      {2 * kBlock + 1, 100000},
      {kBlock - 5, kBlock + 10},  // spans blocks 0, 1 and 2
      {0, 3 * kMiB},
      {kNineMiBSize - 10, 100},  // short at EOF
      {kNineMiBSize, 100},
      {kNineMiBSize + 4096, 100},
      {7 * kMiB, 0},
  };
  // Buffered (page cache, kernel-aligned requests) and O_DIRECT (the exact offsets reach us).
  for (int flags : {O_RDONLY, O_RDONLY | O_DIRECT}) {
    int fd = ::open((mnt + "/" + kNineMiB).c_str(), flags | O_CLOEXEC);
    ASSERT_GE(fd, 0) << "open flags " << flags << ": " << std::strerror(errno);
    for (const Case& c : cases) {
      std::string buf(c.length + 1, '\0');
      ssize_t n = ::pread(fd, buf.data(), c.length, static_cast<off_t>(c.offset));
      uint64_t expected =
          c.offset >= want.size() ? 0 : std::min<uint64_t>(c.length, want.size() - c.offset);
      ASSERT_EQ(n, static_cast<ssize_t>(expected))
          << "pread " << c.length << " at " << c.offset << " flags " << flags << ": "
          << (n < 0 ? std::strerror(errno) : "");
      if (expected > 0) {
        EXPECT_TRUE(std::memcmp(buf.data(), want.data() + c.offset, expected) == 0)
            << "bytes differ: pread " << c.length << " at " << c.offset << " flags " << flags;
      }
    }
    ::close(fd);
  }
}

// The kernel starts a FUSE mount's read-ahead at 128 KiB (eight READ requests per MiB read); the
// mount raises it to client.kernel_read_ahead (1 MiB) at the first open, so a sequential reader's
// READs are 1 MiB; 0 leaves the kernel's.
TEST_F(MountTest, ReadAheadIsRaisedAtTheFirstOpenAsConfigured) {
  for (auto [setting, want_kb] :
       {std::pair<std::string, int>{"", 1024}, {"256KiB", 256}, {"0", 128}}) {
    std::vector<std::string> extra;
    if (!setting.empty()) extra = {"-o", "client.kernel_read_ahead=" + setting};
    std::string mnt = MountTree(extra);
    ASSERT_FALSE(mnt.empty());
    struct stat st {};
    ASSERT_EQ(::stat(mnt.c_str(), &st), 0) << std::strerror(errno);
    const std::string sysfs = "/sys/class/bdi/" + std::to_string(major(st.st_dev)) + ":" +
                              std::to_string(minor(st.st_dev)) + "/read_ahead_kb";
    testing::FileBytes read = testing::ReadWholeFile(mnt + "/" + kNineMiB);
    ASSERT_EQ(read.error, 0) << std::strerror(read.error);
    EXPECT_TRUE(read.bytes == ContentOf(kNineMiB));
    std::ifstream in(sysfs);
    int kb = -1;
    in >> kb;
    EXPECT_EQ(kb, want_kb) << sysfs << " with '" << setting << "'";
  }
}

TEST_F(MountTest, EightConcurrentReadersGetCorrectBytes) {
  std::string mnt = MountTree();
  ASSERT_FALSE(mnt.empty());
  std::vector<std::string> keys;
  for (const auto& [key, content] : Tree()) {
    if (content.size() > 0) keys.push_back(key);
  }
  std::mutex mu;
  std::vector<std::string> failures;  // GUARDED_BY(mu)
  auto reader = [&](int id) {
    std::mt19937_64 rng(static_cast<uint64_t>(id) + 100);
    for (int i = 0; i < 150; ++i) {
      // Half the readers share the 9 MiB file; the others pick any file each time.
      const std::string& key = id < 4 ? std::string(kNineMiB) : keys[rng() % keys.size()];
      const std::string& want = ContentOf(key);
      uint64_t offset = rng() % want.size();
      size_t length = 1 + rng() % (300 * 1024);
      std::string buf(length, '\0');
      int fd = ::open((mnt + "/" + key).c_str(), O_RDONLY | O_CLOEXEC);
      ssize_t n = fd < 0 ? -1 : ::pread(fd, buf.data(), length, static_cast<off_t>(offset));
      int err = errno;
      if (fd >= 0) ::close(fd);
      size_t expected = std::min<uint64_t>(length, want.size() - offset);
      if (n != static_cast<ssize_t>(expected) ||
          std::memcmp(buf.data(), want.data() + offset, expected) != 0) {
        std::lock_guard lock(mu);
        failures.push_back("reader " + std::to_string(id) + ": " + key + " at " +
                           std::to_string(offset) + "+" + std::to_string(length) + ": got " +
                           std::to_string(n) +
                           (n < 0 ? std::string(" ") + std::strerror(err) : ""));
      }
    }
  };
  std::vector<std::thread> threads;
  for (int id = 0; id < 8; ++id) threads.emplace_back(reader, id);
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(failures.empty()) << failures.size() << " bad reads, first: " << failures.front();
}

TEST_F(MountTest, ReplacedObjectShowsNewContentAfterTtlNotBefore) {
  constexpr char kBucket[] = "replaced";
  // Long enough to observe the old state within it on a busy host; the new state must not show
  // before it ran out, which holds however slow the host.
  constexpr auto kTtl = std::chrono::seconds(10) * testing::kSlowdown;
  ASSERT_TRUE(server_->CreateBucket(kBucket).ok());
  const std::string v1 = "version one\n", v2 = "version two, which is longer\n";
  ASSERT_TRUE(server_->PutObjects(kBucket, {{"d/f.txt", v1}, {"d/gone.txt", "soon gone"}}).ok());
  std::string mnt = NewMountpoint();
  ASSERT_NE(
      StartMount(QuickMountArgv(server_->endpoint(), kBucket, mnt,
                                {"-o", std::string("namespaces.") + kBucket +
                                           ".metadata_ttl=" + std::to_string(kTtl.count()) + "s"}),
                 mnt),
      nullptr);
  const std::string file = mnt + "/d/f.txt", gone = mnt + "/d/gone.txt";
  auto listed = Clock::now();  // the folder's listing is fetched by the first read
  EXPECT_EQ(Mismatch(v1, ReadWholeFile(file)), "");
  EXPECT_EQ(Mismatch("soon gone", ReadWholeFile(gone)), "");

  ASSERT_TRUE(server_->PutObjects(kBucket, {{"d/f.txt", v2}}).ok());
  std::vector<std::string> del = server_->SignedCurl();
  del.insert(del.end(),
             {"-X", "DELETE", "-w", "%{http_code}", server_->ObjectUrl(kBucket, "d/gone.txt")});
  RunResult deleted = RunCommand(del);
  ASSERT_EQ(deleted.out, "204") << deleted.err;
  FileBytes before = ReadWholeFile(file);
  struct stat st;
  int gone_errno = ErrnoOf(::stat(gone.c_str(), &st) == 0);
  ASSERT_LT(Clock::now() - listed, kTtl) << "too slow to observe the state within the TTL";
  EXPECT_EQ(Mismatch(v1, before), "") << "a change showed before the TTL ran out";
  EXPECT_EQ(gone_errno, 0) << "a deletion showed before the TTL ran out";

  // Each change shows once the TTL ran out (the listing was fetched after `listed`), not before.
  EXPECT_TRUE(testing::WaitFor([&] { return Mismatch(v2, ReadWholeFile(file)).empty(); }))
      << "the new version did not show after the TTL";
  EXPECT_GE(Clock::now() - listed, kTtl) << "the new version showed before the TTL ran out";
  EXPECT_TRUE(testing::WaitFor([&] { return ErrnoOf(::stat(gone.c_str(), &st) == 0) == ENOENT; }))
      << "the deletion did not show after the TTL";
  EXPECT_GE(Clock::now() - listed, kTtl) << "the deletion showed before the TTL ran out";
  ASSERT_EQ(::stat(file.c_str(), &st), 0) << std::strerror(errno);
  EXPECT_EQ(static_cast<size_t>(st.st_size), v2.size());
  EXPECT_EQ(ReadWholeFile(gone).error, ENOENT);
  EXPECT_FALSE(fs::exists(gone));
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(mnt + "/d")) names.insert(e.path().filename());
  EXPECT_EQ(names, std::set<std::string>{"f.txt"});
}

// An object replaced under an open file, then put back: the open file reads its version or gets
// EIO, never bytes of the other version, and nothing of the new version is cached under the old
// one's key (a remount on the same cache dir reads the old version whole).
void MountTest::ReplaceUnderAReader(testing::S3Server& server, const std::string& bucket) {
  const std::string a(8 * kMiB, 'A'), b(8 * kMiB, 'B');
  ASSERT_TRUE(server.CreateBucket(bucket).ok());
  ASSERT_TRUE(server.PutObjects(bucket, {{"chg/f3.bin", a}}).ok());
  std::string cache = scratch_->path() + "/cache-" + bucket;
  fs::create_directory(cache);
  ChildProcess* daemon = nullptr;  // the last mount's process
  auto mount = [&] {
    std::string mnt = NewMountpoint();
    std::vector<std::string> extra = {"--cache-dir",  cache,
                                      "--read-ahead", "0",
                                      "-o",           "namespaces." + bucket + ".metadata_ttl=3s"};
    daemon = StartMount(QuickMountArgv(server.endpoint(), bucket, mnt, extra), mnt,
                        MountEnv(server.access_key(), server.secret_key()));
    return daemon == nullptr ? std::string() : mnt;
  };
  std::string mnt = mount();
  ASSERT_FALSE(mnt.empty());
  const std::string file = mnt + "/chg/f3.bin";
  int fd = ::open(file.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  std::string buf(kMiB, '\0');
  ASSERT_EQ(::pread(fd, buf.data(), kMiB, 0), static_cast<ssize_t>(kMiB));
  EXPECT_EQ(buf, a.substr(0, kMiB));

  ASSERT_TRUE(server.PutObjects(bucket, {{"chg/f3.bin", b}}).ok());
  int failed = 0;
  for (uint64_t off = kMiB; off < a.size(); off += kMiB) {
    ssize_t n = ::pread(fd, buf.data(), kMiB, static_cast<off_t>(off));
    if (n < 0) {
      EXPECT_EQ(errno, EIO) << "at " << off << ": " << std::strerror(errno);
      ++failed;
      continue;
    }
    EXPECT_EQ(std::string(buf.data(), static_cast<size_t>(n)), a.substr(off, n))
        << "an open file read bytes of another version at " << off;
  }
  ::close(fd);
  EXPECT_EQ(failed, 4) << "the second block (4 MiB) is not cached: its 4 reads fail";
  // The folder was listed again: a fresh open reads the new version whole, within the TTL.
  EXPECT_EQ(Mismatch(b, ReadWholeFile(file)), "");

  ASSERT_TRUE(server.PutObjects(bucket, {{"chg/f3.bin", a}}).ok());  // the first ETag again
  ASSERT_TRUE(testing::UnmountForTest(mnt).ok());
  // The cache dir is the old mount's until its process has exited (it holds the dir's lock).
  auto deadline = Clock::now() + kMountTimeout;
  while (daemon->Running() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(daemon->Running()) << "the first mount did not exit after its unmount";
  mnt = mount();
  ASSERT_FALSE(mnt.empty());
  EXPECT_EQ(Mismatch(a, ReadWholeFile(mnt + "/chg/f3.bin")), "")
      << "a block of another version was cached under this version's key";
}

// s3rver ignores If-Match: the reply's ETag gives the new bytes away.
TEST_F(MountTest, ObjectReplacedUnderAReaderNeverMixesVersions) {
  ReplaceUnderAReader(*server_, "changing");
}

// Swift answers a stale If-Match with 412.
TEST_F(MountTest, ObjectReplacedUnderAReaderNeverMixesVersionsOnSwift) {
  auto started = testing::SwiftS3::Start({});
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  ReplaceUnderAReader(**started, "changing");
}

TEST_F(MountTest, CachedFilesReadWithStoreStoppedAfterDroppingKernelCaches) {
  auto started = testing::S3rver::Start({.buckets = {kTreeBucket}});
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<testing::S3rver> own = std::move(started).value();
  ASSERT_TRUE(own->PutObjects(kTreeBucket, Tree()).ok());
  std::string mnt = NewMountpoint();
  ASSERT_NE(StartMount(QuickMountArgv(
                           own->endpoint(), kTreeBucket, mnt,
                           {"-o", std::string("namespaces.") + kTreeBucket + ".metadata_ttl=5m"}),
                       mnt),
            nullptr);
  // Lists every folder and reads every file once: all of it is now in the metadata and block
  // caches (a folder never listed could not be listed with the store gone).
  ExpectTreeAt(mnt, Tree());
  ASSERT_FALSE(HasFailure());
  own.reset();  // the store is gone for good
  ::sync();
  std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
  ExpectTreeAt(mnt, Tree());
}

// A mount with -o ro refuses every change, whatever its namespaces allow (writes: write_test.cc).
TEST_F(MountTest, UnknownTopLevelFolderIsEnoentAndWritesAreErofs) {
  ASSERT_TRUE(server_->CreateBucket("second").ok());
  ASSERT_TRUE(server_->PutObjects("second", {{"x.txt", "x"}}).ok());
  std::string cfg =
      WriteConfig(server_->endpoint(), {{"alpha", kTreeBucket}, {"beta", "second"}}, "1m");
  std::string mnt = NewMountpoint();
  ASSERT_NE(StartMount({LAKECACHE_BINARY, "mount", mnt, "--config", cfg, "-o", "ro"}, mnt),
            nullptr);
  RunResult ls = RunCommand({"ls", mnt});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_EQ(ls.out, "alpha\nbeta\n");
  EXPECT_EQ(Mismatch("x", ReadWholeFile(mnt + "/beta/x.txt")), "");
  EXPECT_EQ(Mismatch(ContentOf("README.md"), ReadWholeFile(mnt + "/alpha/README.md")), "");
  struct stat st;
  EXPECT_EQ(ErrnoOf(::stat((mnt + "/nope").c_str(), &st) == 0), ENOENT);
  EXPECT_EQ(ErrnoOf(::stat((mnt + "/alpha/nope").c_str(), &st) == 0), ENOENT);

  auto open_errno = [](const std::string& path, int flags) {
    int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0) ::close(fd);
    return err;
  };
  const std::string file = mnt + "/alpha/README.md";
  EXPECT_EQ(open_errno(mnt + "/alpha/new.txt", O_CREAT | O_WRONLY), EROFS);
  EXPECT_EQ(open_errno(mnt + "/newns", O_CREAT | O_WRONLY), EROFS);
  EXPECT_EQ(open_errno(file, O_WRONLY), EROFS);
  EXPECT_EQ(open_errno(file, O_RDWR), EROFS);
  EXPECT_EQ(open_errno(file, O_RDONLY | O_TRUNC), EROFS);
  EXPECT_EQ(ErrnoOf(::mkdir((mnt + "/alpha/d").c_str(), 0755) == 0), EROFS);
  EXPECT_EQ(ErrnoOf(::rename(file.c_str(), (mnt + "/alpha/moved").c_str()) == 0), EROFS);
  EXPECT_EQ(ErrnoOf(::unlink(file.c_str()) == 0), EROFS);
  EXPECT_EQ(ErrnoOf(::rmdir((mnt + "/alpha/data").c_str()) == 0), EROFS);
  EXPECT_EQ(ErrnoOf(::symlink("x", (mnt + "/alpha/link").c_str()) == 0), EROFS);
  EXPECT_EQ(ErrnoOf(::truncate(file.c_str(), 0) == 0), EROFS);
  EXPECT_EQ(ErrnoOf(::chmod(file.c_str(), 0644) == 0), EROFS);
  EXPECT_EQ(Mismatch(ContentOf("README.md"), ReadWholeFile(file)), "")
      << "changed by a failed write";
}

TEST_F(MountTest, SigtermLeavesNoStaleMount) {
  std::string mnt = NewMountpoint();
  ChildProcess* process = StartMount(QuickMountArgv(server_->endpoint(), kTreeBucket, mnt), mnt);
  ASSERT_NE(process, nullptr);
  EXPECT_EQ(Mismatch(ContentOf("README.md"), ReadWholeFile(mnt + "/README.md")), "");
  ASSERT_EQ(::kill(process->pid(), SIGTERM), 0);
  int status = -1;
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (::waitpid(process->pid(), &status, WNOHANG) == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(WIFEXITED(status)) << "still running or killed: status " << status << "\n"
                                 << process->LogTail();
  EXPECT_EQ(WEXITSTATUS(status), 0) << process->LogTail();
  EXPECT_FALSE(IsMounted(mnt));
  // The folder is an ordinary empty folder again, and can be mounted again.
  struct stat st;
  ASSERT_EQ(::stat(mnt.c_str(), &st), 0) << std::strerror(errno);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_TRUE(fs::is_empty(mnt));
  ASSERT_NE(StartMount(QuickMountArgv(server_->endpoint(), kTreeBucket, mnt), mnt), nullptr);
  EXPECT_EQ(Mismatch(ContentOf("README.md"), ReadWholeFile(mnt + "/README.md")), "");
}

// An s3rver run by hand (the harness picks a new port per start) so that it can be killed and
// restarted on the same port and data folder.
class RestartableS3rver {
 public:
  RestartableS3rver() : port_(testing::FreeLoopbackPort()) {}
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Starts the server and waits until ListBuckets answers 200.
  Status Start(const std::string& bucket) {
    std::vector<std::string> argv = {"node",
                                     "--openssl-legacy-provider",
                                     LAKECACHE_SOURCE_DIR "/node_modules/s3rver/bin/s3rver.js",
                                     "-d",
                                     dir_.path() + "/data",
                                     "-a",
                                     "127.0.0.1",
                                     "-p",
                                     std::to_string(port_),
                                     "--configure-bucket",
                                     bucket};
    LC_ASSIGN_OR_RETURN(process_, ChildProcess::Start(argv, dir_.path() + "/s3rver.log"));
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline) {
      std::vector<std::string> list = Curl();
      list.insert(list.end(), {"-o", "/dev/null", "-w", "%{http_code}", endpoint() + "/"});
      if (RunCommand(list, {}, std::chrono::seconds(5)).out == "200") return Status::Ok();
      if (!process_->Running()) return Status::Unavailable("s3rver exited: " + process_->LogTail());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Status::DeadlineExceeded("s3rver not serving: " + process_->LogTail());
  }

  // Kills it abruptly, like a crash.
  void Kill() {
    ::kill(-process_->pid(), SIGKILL);
    process_->Stop();
  }

  Status Put(const std::string& bucket, const std::string& key, const std::string& content) {
    std::string file = dir_.path() + "/upload";
    LC_RETURN_IF_ERROR(testing::WriteFile(file, content));
    std::vector<std::string> put = Curl();
    put.insert(put.end(), {"-T", file, "-o", "/dev/null", "-w", "%{http_code}",
                           endpoint() + "/" + bucket + "/" + key});
    RunResult r = RunCommand(put);
    return r.out == "200" ? Status::Ok() : Status::Internal("PUT failed: " + r.out + r.err);
  }

 private:
  std::vector<std::string> Curl() const {
    return {"curl",        "-sS",
            "--noproxy",   "*",
            "--aws-sigv4", "aws:amz:us-east-1:s3",
            "--user",      "S3RVER:S3RVER",
            "-H",          "x-amz-content-sha256: UNSIGNED-PAYLOAD"};
  }

  TempDir dir_{"lakecache-s3rver-restart"};
  int port_;
  std::unique_ptr<ChildProcess> process_;
};

TEST_F(MountTest, MountSurvivesS3ServerRestartMidRead) {
  constexpr char kBucket[] = "restart";
  const std::string data = MakeBytes(4242, 40 * kMiB);
  RestartableS3rver s3;
  ASSERT_TRUE(s3.Start(kBucket).ok());
  ASSERT_TRUE(s3.Put(kBucket, "large.bin", data).ok());
  std::string mnt = NewMountpoint();
  ASSERT_NE(StartMount(QuickMountArgv(s3.endpoint(), kBucket, mnt, {}, "debug"), mnt), nullptr);

  std::atomic<uint64_t> progress{0};
  FileBytes got;
  uint64_t failed_at = 0;
  Clock::time_point failed_time{};
  std::thread reader([&] {
    int fd = ::open((mnt + "/large.bin").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return void(got.error = errno);
    std::vector<char> buf(kMiB);
    for (;;) {
      ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n < 0) {
        got.error = errno;
        failed_at = got.bytes.size();
        failed_time = Clock::now();
        break;
      }
      if (n == 0) break;
      got.bytes.append(buf.data(), static_cast<size_t>(n));
      progress = got.bytes.size();
      std::this_thread::sleep_for(std::chrono::milliseconds(30));  // ~33 MiB/s: spans the outage
    }
    ::close(fd);
  });
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (progress < 12 * kMiB && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  s3.Kill();
  auto killed = Clock::now();
  uint64_t read_at_kill = progress;
  Status restarted = s3.Start(kBucket);
  auto serving = Clock::now();
  reader.join();
  auto finished = Clock::now();
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();
  ASSERT_LT(read_at_kill, data.size()) << "the read ended before the server was killed";
  auto ms = [&](Clock::time_point t) {
    return std::to_string(
        std::chrono::duration_cast<std::chrono::milliseconds>(t - killed).count());
  };
  std::string timeline = "killed after " + std::to_string(read_at_kill >> 20) +
                         " MiB read; serving again " + ms(serving) + " ms later; read ended " +
                         ms(finished) + " ms after the kill";
  std::printf("[   INFO   ] %s\n", timeline.c_str());
  EXPECT_EQ(Mismatch(data, got), "") << timeline << "; failed at byte " << failed_at << ", "
                                     << ms(failed_time) << " ms after the kill\nmount log:\n"
                                     << processes_.back()->LogTail(4000);
}

TEST_F(MountTest, NonRootUserReadsAllowOtherMount) {
  const std::string& want = ContentOf("dir with space/file name.txt");
  auto cat_as_nobody = [](const std::string& path) {
    return RunCommand({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", path});
  };
  std::string shared = MountTree({"-o", "allow_other"});
  ASSERT_FALSE(shared.empty());
  RunResult r = cat_as_nobody(shared + "/dir with space/file name.txt");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out == want) << "nobody read " << r.out.size() << " bytes: " << r.err;

  std::string mine = MountTree();
  ASSERT_FALSE(mine.empty());
  RunResult denied = cat_as_nobody(mine + "/dir with space/file name.txt");
  EXPECT_NE(denied.exit_code, 0);
  EXPECT_EQ(denied.out, "");
  EXPECT_NE(denied.err.find("Permission denied"), std::string::npos) << denied.err;
  EXPECT_EQ(Mismatch(want, ReadWholeFile(mine + "/dir with space/file name.txt")), "");  // root may
}

TEST_F(MountTest, StartupErrorsExitNonZeroAndLeaveNothingMounted) {
  auto mount = [&](const std::string& endpoint, const std::string& bucket,
                   const std::string& mountpoint) {
    RunResult r = RunCommand(QuickMountArgv(endpoint, bucket, mountpoint), MountEnv(),
                             std::chrono::seconds(60));
    EXPECT_FALSE(IsMounted(mountpoint)) << mountpoint;
    return r;
  };
  std::string missing = scratch_->path() + "/does-not-exist";
  mountpoints_.push_back(missing);
  RunResult r = mount(server_->endpoint(), kTreeBucket, missing);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;

  std::string full = NewMountpoint("full");
  ASSERT_TRUE(testing::WriteFile(full + "/keep.txt", "mine").ok());
  r = mount(server_->endpoint(), kTreeBucket, full);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("not empty"), std::string::npos) << r.err;

  std::string closed = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  r = mount("http://" + closed, kTreeBucket, NewMountpoint());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(closed), std::string::npos) << r.err;

  r = mount(server_->endpoint(), "no-such-bucket", NewMountpoint());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("no-such-bucket"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace lakecache::mount_test
