// FileSystem without FUSE: a reference-model test (random trees and random lookups, opens and reads
// checked against the files themselves) and cases pinning attributes, inode numbers, keep_cache and
// revalidation.
#include "fs/file_system.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <latch>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cache/block_key.h"
#include "common/object_uri.h"
#include "support/fake_clock.h"
#include "support/test_servers.h"
#include "support/wait_for.h"
#include "ufs/fault_injecting_store.h"
#include "ufs/local_store.h"

namespace lakecache {
namespace {

using std::chrono::seconds;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kBlockSize = 64 * kKiB;
constexpr uint64_t kMaxFileSize = 300 * kKiB;
constexpr uint64_t kRoot = InodeTable::kRootIno;
constexpr auto kTtl = seconds(60);

struct MountSpec {
  bool single_namespace_root = false;
  bool second_namespace = false;  // "other", beside "lake"
  Duration metadata_ttl = kTtl;
  bool immutable = false;
  bool fake_clock = true;    // the metadata caches run on the fixture's clock
  bool fault_store = false;  // "lake" reads its store through the fixture's FaultInjectingStore
  FileSystemOptions options;
};

MountSpec TwoNamespaces() {
  MountSpec spec;
  spec.second_namespace = true;
  return spec;
}

MountSpec QuickForm() {
  MountSpec spec;
  spec.single_namespace_root = true;
  return spec;
}

MountSpec WithTtl(Duration ttl, bool fake_clock = true) {
  MountSpec spec;
  spec.metadata_ttl = ttl;
  spec.fake_clock = fake_clock;
  return spec;
}

MountSpec Immutable() {
  MountSpec spec;
  spec.immutable = true;
  return spec;
}

std::vector<std::string> Components(const std::string& path) {
  std::vector<std::string> out;
  for (size_t start = 0; start < path.size();) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

std::string ParentOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string RandomBytes(std::mt19937_64& rng, uint64_t size) {
  std::string out(size, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

// Bytes [offset, offset + length) of a local file, cut at its end.
std::string ReadLocalFile(const std::string& file, uint64_t offset, uint64_t length) {
  std::ifstream in(file, std::ios::binary);
  EXPECT_TRUE(in.good()) << file;
  in.seekg(0, std::ios::end);
  uint64_t size = static_cast<uint64_t>(in.tellg());
  if (offset >= size) return "";
  std::string out(std::min(length, size - offset), '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  EXPECT_TRUE(in.good()) << file;
  return out;
}

// Namespaces "lake" (and "other") over temp dirs, served by a FileSystem on a 1 MiB memory cache of
// 64 KiB blocks, so that reads cross blocks and blocks get evicted. Paths in tests are relative to
// the mount root: "lake/dir/f" in the multi-namespace form, "dir/f" in the quick form (so files of
// the quick form are written after Mount, which sets the form).
class FileSystemTest : public ::testing::Test {
 protected:
  void Mount(MountSpec spec = {}) {
    spec_ = spec;
    Config config;
    config.namespaces["lake"] = NamespaceFor("lake", lake_dir_.path());
    if (spec.second_namespace) {
      config.namespaces["other"] = NamespaceFor("other", other_dir_.path());
    }
    StoreOptions store_options;
    store_options.retries = false;
    auto table = NamespaceTable::Open(config, store_options, /*probe=*/false);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    if (spec.fault_store) {
      Namespace* ns = (*table)->Find("lake");
      faults_ = std::make_shared<FaultInjectingStore>(ns->store);
      ns->store = faults_;
      ns->meta = std::make_unique<MetadataCache>(ns->store, ns->prefix, MetadataCacheOptions{});
    }
    if (spec.fake_clock) {
      for (const std::string& name : (*table)->names()) {
        Namespace* ns = (*table)->Find(name);
        MetadataCacheOptions meta;
        meta.ttl = ns->config.metadata_ttl;
        meta.immutable = ns->config.immutable;
        meta.clock = &clock_;
        ns->meta = std::make_unique<MetadataCache>(ns->store, ns->prefix, meta);
      }
    }
    lake_ = (*table)->Find("lake");
    CacheConfig cache;
    cache.memory_capacity = 1 << 20;
    auto blocks = BlockStore::Open(cache);
    ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
    spec.options.single_namespace_root = spec.single_namespace_root;
    fs_ = std::make_unique<FileSystem>(
        std::move(*table), std::shared_ptr<BlockStore>(std::move(*blocks)), spec.options);
  }

  NamespaceConfig NamespaceFor(const std::string& name, const std::string& dir) const {
    NamespaceConfig ns = testing::LocalNamespace(name, dir, kBlockSize);
    ns.metadata_ttl = spec_.metadata_ttl;
    ns.immutable = spec_.immutable;
    return ns;
  }

  // The local root folder and the key below it of a mount path.
  std::pair<std::string, std::string> RootAndKey(const std::string& path) const {
    if (spec_.single_namespace_root) return {lake_dir_.path(), path};
    size_t slash = path.find('/');
    bool lake = path.substr(0, slash) == "lake";
    return {lake ? lake_dir_.path() : other_dir_.path(), path.substr(slash + 1)};
  }

  std::string LocalPath(const std::string& path) const {
    auto [root, key] = RootAndKey(path);
    return root + "/" + key;
  }

  // Writes (or atomically replaces, with a new inode and so a new ETag) the file behind a mount
  // path.
  void WriteFile(const std::string& path, const std::string& content) {
    auto [root, key] = RootAndKey(path);
    Status st = LocalStore(root).Put(key, content, {}).status();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  void RemoveFile(const std::string& path) {
    ASSERT_EQ(::unlink(LocalPath(path).c_str()), 0) << LocalPath(path);
  }

  // Looks up every component of `path` from the root; the attributes of the last (the root's for
  // "").
  Result<FileAttr> LookupPath(const std::string& path) {
    LC_ASSIGN_OR_RETURN(FileAttr attr, fs_->GetAttr(kRoot));
    for (const std::string& name : Components(path)) {
      LC_ASSIGN_OR_RETURN(attr, fs_->Lookup(attr.ino, name));
    }
    return attr;
  }

  uint64_t InoOf(const std::string& path) {
    auto attr = LookupPath(path);
    EXPECT_TRUE(attr.ok()) << path << ": " << attr.status().ToString();
    return attr.ok() ? attr->ino : 0;
  }

  // The whole content of an open file, read in one call.
  std::string ReadAll(uint64_t fh, uint64_t size) {
    std::string out(size + 10, '\0');
    auto n = fs_->Read(fh, 0, std::span<char>(out.data(), out.size()));
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    out.resize(n.ok() ? *n : 0);
    return out;
  }

  testing::TempDir lake_dir_{"lakecache-fs-lake"};
  testing::TempDir other_dir_{"lakecache-fs-other"};
  testing::FakeClock clock_;
  MountSpec spec_;
  std::unique_ptr<FileSystem> fs_;
  Namespace* lake_ = nullptr;                    // owned by fs_
  std::shared_ptr<FaultInjectingStore> faults_;  // with MountSpec::fault_store
};

// ---- The reference model ----

// The tree the mount should show: every file with its content, and every folder.
struct Model {
  std::map<std::string, std::string> files;  // mount path -> content
  std::set<std::string> dirs;                // mount paths, "" (the root) included

  std::vector<std::string> Children(const std::string& dir) const {
    std::set<std::string> names;
    auto add = [&](const std::string& path) {
      if (path.empty() || ParentOf(path) != dir) return;
      names.insert(path.substr(dir.empty() ? 0 : dir.size() + 1));
    };
    for (const auto& [path, content] : files) add(path);
    for (const std::string& d : dirs) add(d);
    return {names.begin(), names.end()};
  }
};

// File sizes: block boundaries and their neighbours often, anything up to 300 KiB otherwise.
uint64_t RandomFileSize(std::mt19937_64& rng) {
  static constexpr uint64_t kEdges[] = {0,
                                        1,
                                        kBlockSize - 1,
                                        kBlockSize,
                                        kBlockSize + 1,
                                        2 * kBlockSize,
                                        3 * kBlockSize - 1,
                                        kMaxFileSize};
  if (rng() % 3 == 0) return kEdges[rng() % std::size(kEdges)];
  return rng() % (kMaxFileSize + 1);
}

class FileSystemModelTest : public FileSystemTest {
 protected:
  // Writes a random tree of `files` files under `top`: "" (quick form) or a namespace name.
  void BuildTree(std::mt19937_64& rng, const std::string& top, int files) {
    std::vector<std::string> dirs = {top};
    for (int i = 0; i < 8; ++i) {
      const std::string& parent = dirs[rng() % dirs.size()];
      dirs.push_back((parent.empty() ? "" : parent + "/") + "d" + std::to_string(i));
    }
    for (int i = 0; i < files; ++i) {
      const std::string& dir = dirs[rng() % dirs.size()];
      std::string path = (dir.empty() ? "" : dir + "/") + "f" + std::to_string(i) + ".bin";
      std::string content = RandomBytes(rng, RandomFileSize(rng));
      WriteFile(path, content);
      model_.files[path] = content;
      // Folders exist only where a file lies below them (object stores have no empty folders).
      for (std::string d = ParentOf(path);; d = ParentOf(d)) {
        model_.dirs.insert(d);
        if (d.empty()) break;
      }
    }
  }

  static const std::string& PickDir(std::mt19937_64& rng, const Model& model) {
    auto it = model.dirs.begin();
    std::advance(it, rng() % model.dirs.size());
    return *it;
  }
  static const std::string& PickFile(std::mt19937_64& rng, const Model& model) {
    auto it = model.files.begin();
    std::advance(it, rng() % model.files.size());
    return it->first;
  }

  // Checks `attr` against the model entry at `path` and that `path` keeps its inode number.
  void CheckAttr(const std::string& path, const FileAttr& attr) {
    auto file = model_.files.find(path);
    bool is_dir = file == model_.files.end();
    EXPECT_EQ(attr.is_dir, is_dir) << path;
    // Writable namespaces show the owner's write bit; the multi-namespace root is never written.
    uint32_t dir_mode = path.empty() && !spec_.single_namespace_root ? 0555u : 0755u;
    EXPECT_EQ(attr.mode, is_dir ? (S_IFDIR | dir_mode) : (S_IFREG | 0644u)) << path;
    if (!is_dir) {
      EXPECT_EQ(attr.size, file->second.size()) << path;
    }
    auto [it, inserted] = inos_.try_emplace(path, attr.ino);
    EXPECT_EQ(it->second, attr.ino) << path << ": inode number changed";
  }

  void CheckLookup(const std::string& path) {
    auto attr = LookupPath(path);
    ASSERT_TRUE(attr.ok()) << path << ": " << attr.status().ToString();
    CheckAttr(path, *attr);
    auto again = fs_->GetAttr(attr->ino);
    ASSERT_TRUE(again.ok()) << path << ": " << again.status().ToString();
    CheckAttr(path, *again);
  }

  void CheckMissing(std::mt19937_64& rng) {
    const std::string& dir = PickDir(rng, model_);
    uint64_t parent = InoOf(dir);
    auto attr = fs_->Lookup(parent, "missing-" + std::to_string(rng() % 100));
    ASSERT_FALSE(attr.ok()) << dir;
    EXPECT_EQ(attr.status().code(), StatusCode::kNotFound) << dir;
  }

  void CheckReadDir(const std::string& dir) {
    auto items = fs_->ReadDir(InoOf(dir));
    ASSERT_TRUE(items.ok()) << dir << ": " << items.status().ToString();
    std::vector<std::string> names;
    for (const DirItem& item : *items) {
      names.push_back(item.name);
      CheckAttr(dir.empty() ? item.name : dir + "/" + item.name, item.attr);
    }
    EXPECT_EQ(names, model_.Children(dir)) << "folder '" << dir << "'";
  }

  struct OpenHandle {
    uint64_t fh;
    std::string path;
  };

  void OpenRandom(std::mt19937_64& rng) {
    const std::string& path = PickFile(rng, model_);
    auto attr = LookupPath(path);
    ASSERT_TRUE(attr.ok()) << path << ": " << attr.status().ToString();
    auto opened = fs_->Open(attr->ino);
    ASSERT_TRUE(opened.ok()) << path << ": " << opened.status().ToString();
    handles_.push_back({opened->fh, path});
  }

  void ReleaseRandom(std::mt19937_64& rng) {
    if (handles_.empty()) return;
    size_t i = rng() % handles_.size();
    fs_->Release(handles_[i].fh);
    handles_.erase(handles_.begin() + static_cast<ptrdiff_t>(i));
  }

  static uint64_t RandomOffset(std::mt19937_64& rng, uint64_t size) {
    switch (rng() % 7) {
      case 0:
        return 0;
      case 1: {  // near a block boundary
        uint64_t boundary = (rng() % (size / kBlockSize + 2)) * kBlockSize;
        uint64_t delta = rng() % 5;
        return boundary >= 2 ? boundary + delta - 2 : boundary + delta;
      }
      case 2:  // near the end, either side
        return size + rng() % 5 - std::min<uint64_t>(size, 2);
      case 3:  // past the end
        return size + rng() % (2 * kBlockSize) + 1;
      default:
        return rng() % (size + 1);
    }
  }

  static uint64_t RandomLength(std::mt19937_64& rng) {
    switch (rng() % 6) {
      case 0:
        return 0;
      case 1:
        return 1 + rng() % 3;
      case 2:
        return kBlockSize + rng() % 3 - 1;
      case 3:  // up to a whole file and beyond
        return rng() % (kMaxFileSize + kBlockSize);
      default:
        return 1 + rng() % (3 * kBlockSize);
    }
  }

  void ReadRandom(std::mt19937_64& rng) {
    if (handles_.empty()) OpenRandom(rng);
    if (handles_.empty()) return;
    const OpenHandle& h = handles_[rng() % handles_.size()];
    uint64_t size = model_.files.at(h.path).size();
    uint64_t offset = RandomOffset(rng, size);
    uint64_t length = RandomLength(rng);
    constexpr char kUntouched = '\x5a';
    std::string buf(length, kUntouched);
    auto n = fs_->Read(h.fh, offset, std::span<char>(buf.data(), buf.size()));
    std::string where = h.path + " [" + std::to_string(offset) + ", +" + std::to_string(length) +
                        ") of " + std::to_string(size) + " bytes";
    ASSERT_TRUE(n.ok()) << where << ": " << n.status().ToString();
    std::string expected = ReadLocalFile(LocalPath(h.path), offset, length);
    ASSERT_EQ(*n, expected.size()) << where;
    EXPECT_TRUE(std::memcmp(buf.data(), expected.data(), expected.size()) == 0)
        << where << ": wrong bytes";
    EXPECT_EQ(buf.find_first_not_of(kUntouched, *n), std::string::npos)
        << where << ": wrote past the bytes it returned";
  }

  // `ops` random operations on the tree, each checked against the model.
  void RunModel(std::mt19937_64& rng, int ops) {
    std::vector<std::string> all_paths;
    for (const auto& [path, content] : model_.files) all_paths.push_back(path);
    for (const std::string& d : model_.dirs) all_paths.push_back(d);
    for (int op = 0; op < ops && !HasFailure(); ++op) {
      SCOPED_TRACE("operation " + std::to_string(op));
      switch (rng() % 16) {
        case 0:
        case 1:
        case 2:
          CheckLookup(all_paths[rng() % all_paths.size()]);
          break;
        case 3:
          CheckMissing(rng);
          break;
        case 4:
          CheckReadDir(PickDir(rng, model_));
          break;
        case 5:
        case 6:
          OpenRandom(rng);
          break;
        case 7:
          ReleaseRandom(rng);
          break;
        case 8:  // every listing expires; the tree did not change, so nothing else may
          clock_.Advance(kTtl);
          break;
        default:
          ReadRandom(rng);
          break;
      }
    }
    while (!handles_.empty()) ReleaseRandom(rng);
  }

  void ExpectEviction() {
    BlockStoreStats stats = fs_->blocks().Stats();
    ASSERT_FALSE(stats.tiers.empty());
    EXPECT_GT(stats.tiers[0].evictions + stats.tiers[0].rejected, 0u)
        << "the tree should not fit the 1 MiB cache";
    EXPECT_GT(stats.tiers[0].hits, 0u);
  }

  Model model_;
  std::map<std::string, uint64_t> inos_;  // every inode number seen, by path
  std::vector<OpenHandle> handles_;
};

TEST_F(FileSystemModelTest, RandomOperationsMatchTheFilesQuickForm) {
  constexpr uint64_t kSeed = 20240611;
  std::mt19937_64 rng(kSeed);
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  ASSERT_NO_FATAL_FAILURE(Mount(QuickForm()));
  BuildTree(rng, "", 40);
  RunModel(rng, 4000);
  ExpectEviction();
}

TEST_F(FileSystemModelTest, RandomOperationsMatchTheFilesNamespaceFolders) {
  constexpr uint64_t kSeed = 7;
  std::mt19937_64 rng(kSeed);
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  ASSERT_NO_FATAL_FAILURE(Mount(TwoNamespaces()));
  // Both trees are drawn alike, so the same paths hold different bytes in the two namespaces.
  BuildTree(rng, "lake", 25);
  BuildTree(rng, "other", 25);
  RunModel(rng, 4000);
  ExpectEviction();
}

TEST_F(FileSystemModelTest, ConcurrentReadsReturnTheRightBytes) {
  std::mt19937_64 rng(99);
  ASSERT_NO_FATAL_FAILURE(Mount());
  BuildTree(rng, "lake", 30);
  constexpr int kThreads = 8;
  constexpr int kOpensPerThread = 100;
  constexpr int kReadsPerOpen = 4;
  std::latch start(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 local(1000 + t);
      start.arrive_and_wait();
      for (int i = 0; i < kOpensPerThread; ++i) {
        // Listings expire under the other threads' lookups (one writer: the clock is not a mutex).
        if (t == 0) clock_.Advance(kTtl);
        const std::string& path = PickFile(local, model_);
        const std::string& content = model_.files.at(path);
        auto attr = LookupPath(path);
        if (!attr.ok()) {
          failures.fetch_add(1);
          continue;
        }
        auto opened = fs_->Open(attr->ino);
        if (!opened.ok()) {
          failures.fetch_add(1);
          continue;
        }
        for (int r = 0; r < kReadsPerOpen; ++r) {
          uint64_t offset = RandomOffset(local, content.size());
          std::string buf(RandomLength(local), '\0');
          auto n = fs_->Read(opened->fh, offset, std::span<char>(buf.data(), buf.size()));
          std::string expected = offset >= content.size() ? "" : content.substr(offset, buf.size());
          if (!n.ok() || *n != expected.size() ||
              std::memcmp(buf.data(), expected.data(), expected.size()) != 0) {
            failures.fetch_add(1);
          }
        }
        fs_->Release(opened->fh);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(fs_->blocks().Stats().fetches, 0u);
}

// ---- Namespaces, folders and attributes ----

TEST_F(FileSystemTest, LookupOfUnknownNamespaceIsNotFound) {
  WriteFile("lake/f", "x");
  ASSERT_NO_FATAL_FAILURE(Mount(TwoNamespaces()));
  auto attr = fs_->Lookup(kRoot, "nope");
  ASSERT_FALSE(attr.ok());
  EXPECT_EQ(attr.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(fs_->Lookup(kRoot, "lake").ok());
}

TEST_F(FileSystemTest, ReadDirOfRootListsTheNamespaces) {
  WriteFile("lake/f", "x");
  ASSERT_NO_FATAL_FAILURE(Mount(TwoNamespaces()));
  auto items = fs_->ReadDir(kRoot);
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  ASSERT_EQ(items->size(), 2u);
  EXPECT_EQ((*items)[0].name, "lake");
  EXPECT_EQ((*items)[1].name, "other");
  for (const DirItem& item : *items) {
    EXPECT_TRUE(item.attr.is_dir);
    EXPECT_TRUE(S_ISDIR(item.attr.mode));
    EXPECT_EQ(item.attr.ino, InoOf(item.name)) << item.name;
  }
  // An empty namespace still shows, as an empty folder.
  auto other = fs_->ReadDir(InoOf("other"));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_TRUE(other->empty());
}

TEST_F(FileSystemTest, QuickFormShowsTheNamespaceAtTheRoot) {
  ASSERT_NO_FATAL_FAILURE(Mount(QuickForm()));
  WriteFile("top.txt", "hello");
  WriteFile("dir/inner.txt", "x");
  auto items = fs_->ReadDir(kRoot);
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  ASSERT_EQ(items->size(), 2u);
  EXPECT_EQ((*items)[0].name, "dir");
  EXPECT_EQ((*items)[1].name, "top.txt");
  EXPECT_EQ(fs_->Lookup(kRoot, "lake").status().code(), StatusCode::kNotFound);
}

TEST_F(FileSystemTest, ReadDirShowsChildrenWithTheirAttributes) {
  WriteFile("lake/dir/a.bin", std::string(100, 'a'));
  WriteFile("lake/dir/b.bin", std::string(3 * kBlockSize + 5, 'b'));
  WriteFile("lake/dir/empty", "");
  WriteFile("lake/dir/sub/c", "c");
  MountSpec spec;
  spec.options.uid = 1234;
  spec.options.gid = 5678;
  spec.options.file_mode = 0440;
  spec.options.dir_mode = 0550;
  ASSERT_NO_FATAL_FAILURE(Mount(spec));
  auto items = fs_->ReadDir(InoOf("lake/dir"));
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  ASSERT_EQ(items->size(), 4u);
  const struct {
    const char* name;
    bool is_dir;
    uint64_t size;
  } want[] = {{"a.bin", false, 100},
              {"b.bin", false, 3 * kBlockSize + 5},
              {"empty", false, 0},
              {"sub", true, 0}};
  for (size_t i = 0; i < std::size(want); ++i) {
    const DirItem& item = (*items)[i];
    SCOPED_TRACE(item.name);
    EXPECT_EQ(item.name, want[i].name);
    EXPECT_EQ(item.attr.is_dir, want[i].is_dir);
    EXPECT_EQ(item.attr.size, want[i].size);
    EXPECT_EQ(item.attr.mode, want[i].is_dir ? (S_IFDIR | 0550u) : (S_IFREG | 0440u));
    EXPECT_EQ(item.attr.uid, 1234u);
    EXPECT_EQ(item.attr.gid, 5678u);
    if (!item.attr.is_dir) {
      struct stat st;
      ASSERT_EQ(::stat(LocalPath("lake/dir/" + item.name).c_str(), &st), 0);
      EXPECT_EQ(item.attr.mtime, st.st_mtim.tv_sec);
    }
  }
  auto root = fs_->GetAttr(kRoot);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->mode, S_IFDIR | 0550u);
  EXPECT_EQ(root->ino, kRoot);
}

TEST_F(FileSystemTest, InodeNumbersAreStable) {
  WriteFile("lake/dir/f", "x");
  WriteFile("lake/dir/g", "y");
  WriteFile("other/dir/f", "z");
  ASSERT_NO_FATAL_FAILURE(Mount(TwoNamespaces()));
  uint64_t f = InoOf("lake/dir/f");
  EXPECT_EQ(InoOf("lake/dir/f"), f);
  EXPECT_NE(InoOf("other/dir/f"), f);  // the same path in another namespace is another file
  EXPECT_NE(InoOf("lake/dir/g"), f);
  auto items = fs_->ReadDir(InoOf("lake/dir"));
  ASSERT_TRUE(items.ok());
  ASSERT_EQ(items->size(), 2u);
  EXPECT_EQ((*items)[0].attr.ino, f);
  // ReadDir first, Lookup after: the same number too; and after the listing was refreshed.
  auto other_items = fs_->ReadDir(InoOf("other/dir"));
  ASSERT_TRUE(other_items.ok());
  ASSERT_EQ(other_items->size(), 1u);
  clock_.Advance(kTtl * 2);
  EXPECT_EQ(InoOf("other/dir/f"), (*other_items)[0].attr.ino);
  EXPECT_EQ(InoOf("lake/dir/f"), f);
}

TEST_F(FileSystemTest, ForgottenInodesGiveTheirMemoryBackAndKeepTheirNumbers) {
  for (int i = 0; i < 50; ++i) WriteFile("lake/dir/f" + std::to_string(i), "x");
  ASSERT_NO_FATAL_FAILURE(Mount());
  size_t before = fs_->held_inodes();
  uint64_t dir = InoOf("lake/dir");
  auto items = fs_->ReadDir(dir);  // a listing numbers its entries and holds none of them
  ASSERT_TRUE(items.ok());
  ASSERT_EQ(items->size(), 50u);
  size_t listed = fs_->held_inodes();
  std::vector<uint64_t> files;
  for (int i = 0; i < 50; ++i) files.push_back(InoOf("lake/dir/f" + std::to_string(i)));
  EXPECT_EQ(fs_->held_inodes(), listed + 50);
  for (int i = 0; i < 50; ++i) {
    auto it = std::find_if(items->begin(), items->end(),
                           [&](const DirItem& d) { return d.name == "f" + std::to_string(i); });
    ASSERT_NE(it, items->end());
    EXPECT_EQ(it->attr.ino, files[i]);  // the listing's number is the lookup's
  }
  for (uint64_t ino : files) fs_->Forget(ino, 1);
  EXPECT_EQ(fs_->held_inodes(), listed);
  EXPECT_EQ(fs_->GetAttr(files[7]).status().code(), StatusCode::kNotFound);  // stale now
  EXPECT_EQ(InoOf("lake/dir/f7"), files[7]);                                 // the same number
  fs_->Forget(files[7], 1);
  // The folder was looked up once per InoOf walk above: forgetting them all frees it too.
  fs_->Forget(dir, 1000);
  EXPECT_LE(fs_->held_inodes(), before + 1);
}

TEST_F(FileSystemTest, FoldersAndStaleInodesAreRejectedWhereFilesAreExpected) {
  WriteFile("lake/dir/f", "x");
  ASSERT_NO_FATAL_FAILURE(Mount());
  EXPECT_EQ(fs_->Open(InoOf("lake/dir")).status().posix_errno(), EISDIR);
  EXPECT_EQ(fs_->Open(kRoot).status().posix_errno(), EISDIR);
  EXPECT_EQ(fs_->Lookup(InoOf("lake/dir/f"), "x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fs_->ReadDir(InoOf("lake/dir/f")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fs_->GetAttr(123456).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(fs_->Open(123456).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(fs_->GetAttr(0).status().code(), StatusCode::kNotFound);
}

TEST_F(FileSystemTest, AttrTimeoutFollowsTheNamespaceTtl) {
  WriteFile("lake/f", "x");
  ASSERT_NO_FATAL_FAILURE(Mount(WithTtl(seconds(5))));
  EXPECT_DOUBLE_EQ(fs_->AttrTimeoutSeconds(InoOf("lake/f")), 5.0);
  EXPECT_DOUBLE_EQ(fs_->AttrTimeoutSeconds(kRoot), 5.0);
}

TEST_F(FileSystemTest, ImmutableNamespaceAttrTimeoutIsADay) {
  WriteFile("lake/f", "x");
  ASSERT_NO_FATAL_FAILURE(Mount(Immutable()));
  EXPECT_DOUBLE_EQ(fs_->AttrTimeoutSeconds(InoOf("lake/f")), 86400.0);
}

// ---- Revalidation and keep_cache ----

TEST_F(FileSystemTest, KeepCacheOnlyWhileTheFileIsUnchanged) {
  std::string old_bytes(2 * kBlockSize + 100, 'o');
  WriteFile("lake/f", old_bytes);
  ASSERT_NO_FATAL_FAILURE(Mount());
  uint64_t ino = InoOf("lake/f");

  auto first = fs_->Open(ino);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->keep_cache);
  EXPECT_EQ(ReadAll(first->fh, old_bytes.size()), old_bytes);
  fs_->Release(first->fh);

  auto second = fs_->Open(ino);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->keep_cache);
  fs_->Release(second->fh);

  // The old version's blocks are cached; the new version has the same size but other bytes.
  auto old_entry = lake_->meta->Stat("f");
  ASSERT_TRUE(old_entry.ok());
  BlockKey old_block{MakeContentId("lake", "f", old_entry->etag, kBlockSize), 0};
  EXPECT_TRUE(fs_->blocks().Contains(old_block));
  std::string new_bytes(old_bytes.size(), 'n');
  WriteFile("lake/f", new_bytes);
  clock_.Advance(kTtl);

  auto third = fs_->Open(ino);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_FALSE(third->keep_cache);
  EXPECT_EQ(ReadAll(third->fh, new_bytes.size()), new_bytes);
  fs_->Release(third->fh);

  auto fourth = fs_->Open(ino);
  ASSERT_TRUE(fourth.ok());
  EXPECT_TRUE(fourth->keep_cache);
  fs_->Release(fourth->fh);
}

TEST_F(FileSystemTest, ZeroTtlSeesARewriteAtOnce) {
  WriteFile("lake/f", "version one");
  ASSERT_NO_FATAL_FAILURE(Mount(WithTtl(Duration::zero(), /*fake_clock=*/false)));
  uint64_t ino = InoOf("lake/f");
  auto first = fs_->Open(ino);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(ReadAll(first->fh, 11), "version one");
  fs_->Release(first->fh);

  WriteFile("lake/f", "version two!");
  auto attr = fs_->GetAttr(ino);
  ASSERT_TRUE(attr.ok());
  EXPECT_EQ(attr->size, 12u);
  auto second = fs_->Open(ino);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->keep_cache);
  EXPECT_EQ(ReadAll(second->fh, 12), "version two!");
  fs_->Release(second->fh);
}

TEST_F(FileSystemTest, OpenHandleNeverMixesVersions) {
  std::string old_bytes(3 * kBlockSize, 'o');
  WriteFile("lake/f", old_bytes);
  ASSERT_NO_FATAL_FAILURE(Mount());
  auto opened = fs_->Open(InoOf("lake/f"));
  ASSERT_TRUE(opened.ok());
  std::string buf(10, '\0');
  ASSERT_TRUE(fs_->Read(opened->fh, 0, std::span<char>(buf.data(), buf.size())).ok());

  WriteFile("lake/f", std::string(3 * kBlockSize, 'n'));
  // Block 0 is cached: the old bytes. Block 2 is not: the version the handle pinned is gone.
  auto cached = fs_->Read(opened->fh, 5, std::span<char>(buf.data(), buf.size()));
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  EXPECT_EQ(buf, std::string(10, 'o'));
  auto uncached = fs_->Read(opened->fh, 2 * kBlockSize, std::span<char>(buf.data(), buf.size()));
  ASSERT_FALSE(uncached.ok()) << "read bytes of another version: " << buf;
  EXPECT_EQ(uncached.status().code(), StatusCode::kPreconditionFailed);
  fs_->Release(opened->fh);
}

// The kernel keeps one page cache per file, which an open of a new version drops: the old
// handle's reads would fill it again with the old bytes, read then by the new version's readers.
// So once this mount opened a newer version, the old handle reads nothing, cached or not.
TEST_F(FileSystemTest, AHandleOfAVersionAnOpenSupersededReadsNothing) {
  std::string old_bytes(2 * kBlockSize, 'o');
  WriteFile("lake/f", old_bytes);
  ASSERT_NO_FATAL_FAILURE(Mount());
  uint64_t ino = InoOf("lake/f");
  auto old_handle = fs_->Open(ino);
  ASSERT_TRUE(old_handle.ok());
  EXPECT_EQ(ReadAll(old_handle->fh, old_bytes.size()), old_bytes);  // every block cached

  std::string new_bytes(old_bytes.size(), 'n');
  WriteFile("lake/f", new_bytes);
  clock_.Advance(kTtl);
  auto new_handle = fs_->Open(ino);
  ASSERT_TRUE(new_handle.ok());
  EXPECT_FALSE(new_handle->keep_cache);
  std::string buf(10, '\0');
  auto stale = fs_->Read(old_handle->fh, 0, std::span<char>(buf.data(), buf.size()));
  ASSERT_FALSE(stale.ok()) << "read bytes of a superseded version: " << buf;
  EXPECT_EQ(stale.status().code(), StatusCode::kPreconditionFailed);
  EXPECT_EQ(ReadAll(new_handle->fh, new_bytes.size()), new_bytes);
  fs_->Release(old_handle->fh);
  fs_->Release(new_handle->fh);
}

// The store said the object changed: its folder is listed again at once (within the TTL), so a
// fresh open reads the new version whole.
TEST_F(FileSystemTest, ChangedObjectIsListedAgainAndReopenReadsTheNewVersion) {
  WriteFile("lake/d/f", std::string(3 * kBlockSize, 'o'));
  ASSERT_NO_FATAL_FAILURE(Mount());
  uint64_t ino = InoOf("lake/d/f");
  auto opened = fs_->Open(ino);
  ASSERT_TRUE(opened.ok());
  std::string buf(10, '\0');
  ASSERT_TRUE(fs_->Read(opened->fh, 0, std::span<char>(buf.data(), buf.size())).ok());
  std::string new_bytes(3 * kBlockSize + 5, 'n');
  WriteFile("lake/d/f", new_bytes);
  auto uncached = fs_->Read(opened->fh, 2 * kBlockSize, std::span<char>(buf.data(), buf.size()));
  EXPECT_EQ(uncached.status().code(), StatusCode::kPreconditionFailed);
  fs_->Release(opened->fh);

  auto attr = fs_->GetAttr(ino);  // no clock advance: the TTL has not run out
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_EQ(attr->size, new_bytes.size());
  auto reopened = fs_->Open(ino);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_FALSE(reopened->keep_cache);
  EXPECT_EQ(ReadAll(reopened->fh, new_bytes.size()), new_bytes);
  fs_->Release(reopened->fh);
}

// A server that ignores If-Match sends another version's bytes with its ETag: the demand path and
// the read-ahead path both drop them, cache nothing, and relist the folder.
TEST_F(FileSystemTest, ReplyOfAnotherVersionIsDroppedOnEveryReadPath) {
  std::string bytes(8 * kBlockSize, 'o');
  WriteFile("lake/d/f", bytes);
  MountSpec spec;
  spec.fault_store = true;
  spec.fake_clock = false;
  spec.options.read_ahead_max = 4 * kBlockSize;
  ASSERT_NO_FATAL_FAILURE(Mount(spec));
  auto opened = fs_->Open(InoOf("lake/d/f"));
  ASSERT_TRUE(opened.ok());
  int64_t lists = faults_->Calls(StoreOp::kList);
  faults_->ReplyWithVersion("etag-of-a-newer-version", std::nullopt);
  std::string buf(kBlockSize, '\0');
  for (uint64_t offset : {uint64_t{0}, kBlockSize, 5 * kBlockSize}) {  // demand, read-ahead runs
    auto n = fs_->Read(opened->fh, offset, std::span<char>(buf.data(), buf.size()));
    ASSERT_FALSE(n.ok()) << "read bytes of another version at " << offset;
    EXPECT_EQ(n.status().code(), StatusCode::kPreconditionFailed) << n.status().ToString();
  }
  // Read-ahead ran too (on its pool): more reads than the three demanded.
  EXPECT_TRUE(testing::WaitFor([&] { return faults_->Calls(StoreOp::kRead) > 3; }));
  for (uint64_t index = 0; index < 8; ++index) {
    EXPECT_FALSE(fs_->blocks().Contains(
        BlockKey{MakeContentId("lake", "d/f", lake_->meta->Stat("d/f")->etag, kBlockSize), index}))
        << "block " << index << " cached from a reply of another version";
  }
  EXPECT_GT(faults_->Calls(StoreOp::kList), lists);  // the folder was listed again
  faults_->ClearRules();
  auto n = fs_->Read(opened->fh, 0, std::span<char>(buf.data(), buf.size()));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(buf, bytes.substr(0, kBlockSize));
  fs_->Release(opened->fh);
}

TEST_F(FileSystemTest, MissingFileAfterTtlIsNotFound) {
  WriteFile("lake/dir/f", "x");
  WriteFile("lake/dir/g", "y");
  ASSERT_NO_FATAL_FAILURE(Mount());
  uint64_t ino = InoOf("lake/dir/f");
  RemoveFile("lake/dir/f");
  EXPECT_TRUE(fs_->GetAttr(ino).ok());  // within the TTL the cached listing answers

  clock_.Advance(kTtl);
  auto attr = fs_->GetAttr(ino);
  ASSERT_FALSE(attr.ok());
  EXPECT_EQ(attr.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(fs_->Open(ino).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(LookupPath("lake/dir/f").status().code(), StatusCode::kNotFound);
  auto items = fs_->ReadDir(InoOf("lake/dir"));
  ASSERT_TRUE(items.ok());
  ASSERT_EQ(items->size(), 1u);
  EXPECT_EQ((*items)[0].name, "g");
}

TEST_F(FileSystemTest, RemovedFolderIsNotFoundAfterTtl) {
  WriteFile("lake/keep", "k");
  WriteFile("lake/gone/f", "x");
  ASSERT_NO_FATAL_FAILURE(Mount());
  uint64_t gone = InoOf("lake/gone");
  ASSERT_TRUE(fs_->ReadDir(gone).ok());
  RemoveFile("lake/gone/f");
  // An empty directory of a local store is a folder, as an S3 folder's marker is: it goes too.
  ASSERT_EQ(::rmdir(ParentOf(LocalPath("lake/gone/f")).c_str()), 0);
  clock_.Advance(kTtl);
  EXPECT_EQ(fs_->ReadDir(gone).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(fs_->GetAttr(gone).status().code(), StatusCode::kNotFound);
}

TEST_F(FileSystemTest, FileReplacedByFolderKeepsItsNumberAndChangesType) {
  WriteFile("lake/x", "file");
  ASSERT_NO_FATAL_FAILURE(Mount());
  uint64_t ino = InoOf("lake/x");
  RemoveFile("lake/x");
  WriteFile("lake/x/inner", "now a folder");
  clock_.Advance(kTtl);
  EXPECT_EQ(fs_->GetAttr(ino).status().code(), StatusCode::kNotFound);
  auto again = LookupPath("lake/x");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->ino, ino);
  EXPECT_TRUE(again->is_dir);
  auto attr = fs_->GetAttr(ino);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_TRUE(attr->is_dir);
  EXPECT_TRUE(fs_->ReadDir(ino).ok());
}

}  // namespace
}  // namespace lakecache

namespace lakecache {
namespace {

TEST_F(FileSystemTest, ReadPinnedRepliesFromTheBlockAndMatchesRead) {
  std::string bytes;
  for (uint64_t i = 0; i < 3 * kBlockSize + 100; ++i) bytes += static_cast<char>(i * 31 + i / 7);
  WriteFile("lake/p", bytes);
  MountSpec spec;
  spec.options.read_ahead_max = 0;  // only the handle's own block holds budget
  ASSERT_NO_FATAL_FAILURE(Mount(spec));
  auto opened = fs_->Open(InoOf("lake/p"));
  ASSERT_TRUE(opened.ok());
  std::vector<char> scratch(kBlockSize);
  // Within one block: the bytes come from the pinned block, not the scratch buffer.
  BlockRef pin;
  auto in_block = fs_->ReadPinned(opened->fh, 100, std::span<char>(scratch.data(), 4096), &pin);
  ASSERT_TRUE(in_block.ok()) << in_block.status().ToString();
  ASSERT_NE(pin, nullptr);
  EXPECT_EQ(in_block->data(), pin->data() + 100);
  EXPECT_EQ(std::string(in_block->data(), in_block->size()), bytes.substr(100, 4096));
  // Across a block boundary and at the end: copied, and short only at EOF.
  BlockRef none;
  auto across =
      fs_->ReadPinned(opened->fh, kBlockSize - 10, std::span<char>(scratch.data(), 20), &none);
  ASSERT_TRUE(across.ok());
  EXPECT_EQ(std::string(across->data(), across->size()), bytes.substr(kBlockSize - 10, 20));
  auto tail = fs_->ReadPinned(opened->fh, 3 * kBlockSize + 50,
                              std::span<char>(scratch.data(), 4096), &none);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(std::string(tail->data(), tail->size()), bytes.substr(3 * kBlockSize + 50));
  fs_->Release(opened->fh);
  EXPECT_EQ(fs_->blocks().budget().used(), 0u) << "the handle's pinned block was given back";
}

TEST_F(FileSystemTest, SequentialReaderIsReadAheadAndRandomReaderIsNot) {
  std::string bytes(16 * kBlockSize, 'x');
  WriteFile("lake/s", bytes);
  WriteFile("lake/r", bytes);
  ASSERT_NO_FATAL_FAILURE(Mount());
  auto opened = fs_->Open(InoOf("lake/s"));
  ASSERT_TRUE(opened.ok());
  std::string buf(kBlockSize / 4, '\0');
  for (uint64_t off = 0; off < bytes.size(); off += buf.size()) {
    auto n = fs_->Read(opened->fh, off, std::span<char>(buf.data(), buf.size()));
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_EQ(buf, bytes.substr(off, buf.size()));
    if (off + buf.size() == 2 * kBlockSize) {
      // The stream is sequential by now. On a loaded machine the reader can outrun the prefetch
      // pool, so give the read-ahead it started time to land before reading on.
      EXPECT_TRUE(testing::WaitFor([&] { return fs_->blocks().Stats().prefetches > 0; }));
    }
  }
  fs_->Release(opened->fh);
  BlockStoreStats stats = fs_->blocks().Stats();
  EXPECT_GT(stats.prefetches, 0u);
  EXPECT_EQ(stats.fetches, 16u) << "each block fetched once, by the reader or by read-ahead";

  auto random = fs_->Open(InoOf("lake/r"));
  ASSERT_TRUE(random.ok());
  for (uint64_t block : {9u, 2u, 14u, 5u, 11u}) {
    ASSERT_TRUE(
        fs_->Read(random->fh, block * kBlockSize + 7, std::span<char>(buf.data(), 100)).ok());
  }
  fs_->Release(random->fh);
  BlockStoreStats after = fs_->blocks().Stats();
  EXPECT_EQ(after.prefetches, stats.prefetches) << "nothing prefetched for a random reader";
  EXPECT_EQ(after.fetches, stats.fetches + 5);
}

}  // namespace
}  // namespace lakecache
