// WalkTree and FlatTreeWalk: the folders a flat listing builds are those of one listing per folder,
// files are handed out as the listing goes (each folder's in its listing's order), and a walk of a
// large tree holds a page and the folders being listed, not the tree.
#include "jobs/tree_walk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "jobs/flat_tree_walk.h"
#include "support/test_servers.h"
#include "ufs/synthetic_store.h"

namespace lakecache {
namespace {

// Keeps what a walk hands out, and checks each folder's files against its listing.
class CheckingVisitor : public TreeVisitor {
 public:
  Status OnFile(TreeFile file) override {
    if (stop_after_ > 0 && files_ == stop_after_) return Status::Unavailable("stopped");
    ++files_;
    EXPECT_EQ(file.index, names_[file.folder].size()) << file.path;
    names_[file.folder].push_back(file.entry.name);
    if (keep_paths_) paths_.push_back(file.path);
    return Status::Ok();
  }

  void OnFolder(uint64_t folder, const std::string& dir,
                std::shared_ptr<const DirListing> listing) override {
    std::vector<std::string> expected;
    for (const DirEntry& e : listing->ToEntries()) {
      if (!e.is_dir) expected.push_back(e.name);
    }
    EXPECT_EQ(names_[folder], expected) << "folder '" << dir << "'";
    names_.erase(folder);
    dirs_.push_back(dir);
  }

  uint64_t files_ = 0;
  uint64_t stop_after_ = 0;
  bool keep_paths_ = true;
  std::vector<std::string> paths_;
  std::vector<std::string> dirs_;
  std::map<uint64_t, std::vector<std::string>> names_;  // of folders not listed whole yet
};

TEST(TreeWalkTest, FlatListingBuildsTheSameFoldersAsOneListingPerFolder) {
  testing::TempDir dir;
  for (const char* f : {"r.txt", "d1/a", "d1/d2/b", "d1/d2/d3/c", "d1/e/f", "g/h"}) {
    std::filesystem::path p = std::filesystem::path(dir.path()) / f;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << f;
  }
  Config config;
  config.namespaces["lake"] = testing::LocalNamespace("lake", dir.path(), 64 * 1024);
  auto table = NamespaceTable::Open(config, StoreOptions{}, /*probe=*/false);
  ASSERT_TRUE(table.ok());
  Namespace* ns = (*table)->Find("lake");
  CheckingVisitor visitor;
  auto walked = WalkTree(*ns->meta, "", /*recursive=*/true, /*pin=*/true, visitor);
  ASSERT_TRUE(walked.ok()) << walked.status().ToString();
  EXPECT_EQ(walked->files, 6u);
  EXPECT_EQ(visitor.paths_.size(), 6u);
  EXPECT_EQ(walked->dirs, 6u);  // root, d1, d1/d2, d1/d2/d3, d1/e, g
  // A parent is listed whole after its subfolders.
  EXPECT_EQ(visitor.dirs_, (std::vector<std::string>{"d1/d2/d3", "d1/d2", "d1/e", "d1", "g", ""}));
  EXPECT_TRUE(visitor.names_.empty());
  MetadataCache fresh(ns->store, ns->prefix, MetadataCacheOptions{});
  for (const char* d : {"", "d1", "d1/d2", "d1/d2/d3", "d1/e", "g"}) {
    auto pinned = ns->meta->List(d);
    auto listed = fresh.List(d);
    ASSERT_TRUE(pinned.ok() && listed.ok()) << d;
    ASSERT_EQ((*pinned)->size(), (*listed)->size()) << d;
    for (size_t i = 0; i < (*listed)->size(); ++i) {
      const DirEntry a = (*pinned)->at(i);
      const DirEntry b = (*listed)->at(i);
      EXPECT_EQ(a.name, b.name) << d;
      EXPECT_EQ(a.is_dir, b.is_dir) << d << "/" << a.name;
      EXPECT_EQ(a.size, b.size) << d << "/" << a.name;
      EXPECT_EQ(a.etag, b.etag) << d << "/" << a.name;
    }
  }
}

// Keys no file system can hold: an object shadowed by a folder of its name, markers, names that
// sort between "b" and "b/", names that cannot be file names.
TEST(FlatTreeWalkTest, FilesAreTheListingsFilesInTheirOrder) {
  std::vector<std::string> keys = {"p/a/",     "p/a/b",    "p/a/b-x/y", "p/a/b.txt", "p/a/b/c",
                                   "p/a/d/",   "p/a/e",    "p/top",     "p/z/..",    "p/z/ok",
                                   "p/z/ok.1", "p/z/ok!2", "p/z/ok/"};
  std::sort(keys.begin(), keys.end());
  CheckingVisitor visitor;
  std::map<std::string, std::vector<std::string>> folder_files;
  FlatTreeWalk walk(
      "p/", "ns", [&](TreeFile file) { return visitor.OnFile(std::move(file)); },
      [&](uint64_t id, const std::string& dir, ListResult listed) {
        std::string prefix = dir == "ns" ? "p/" : "p/" + dir.substr(3) + "/";
        folder_files[dir] = visitor.names_[id];
        visitor.OnFolder(
            id, dir, std::make_shared<const DirListing>(DirListing::FromObjects(prefix, listed)));
        return Status::Ok();
      });
  for (const std::string& key : keys) ASSERT_TRUE(walk.Add(ObjectInfo{key, 1, "e", 0}).ok()) << key;
  ASSERT_TRUE(walk.Finish().ok());
  EXPECT_EQ(folder_files["ns/a"], (std::vector<std::string>{"b.txt", "e"}));    // "b" is a folder
  EXPECT_EQ(folder_files["ns/z"], (std::vector<std::string>{"ok!2", "ok.1"}));  // "ok" too
  EXPECT_EQ(folder_files["ns"], (std::vector<std::string>{"top"}));
  EXPECT_EQ(visitor.dirs_, (std::vector<std::string>{"ns/a/b-x", "ns/a/b", "ns/a/d", "ns/a",
                                                     "ns/z/ok", "ns/z", "ns"}));
  EXPECT_EQ(walk.held(), 0u);
}

TEST(FlatTreeWalkTest, AKeyOutOfOrderFailsTheWalk) {
  FlatTreeWalk walk(
      "", "", [](TreeFile) { return Status::Ok(); },
      [](uint64_t, const std::string&, ListResult) { return Status::Ok(); });
  ASSERT_TRUE(walk.Add(ObjectInfo{"b", 1, "e", 0}).ok());
  EXPECT_TRUE(walk.Add(ObjectInfo{"b", 1, "e", 0}).ok());  // a page repeated it
  EXPECT_EQ(walk.Add(ObjectInfo{"a", 1, "e", 0}).code(), StatusCode::kInternal);
}

struct SyntheticTree {
  explicit SyntheticTree(const std::string& spec) {
    auto parsed = SyntheticSpec::Parse(spec);
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    store = std::make_shared<SyntheticStore>(*parsed, "syn");
    meta = std::make_unique<MetadataCache>(store, "", MetadataCacheOptions{});
  }
  std::shared_ptr<SyntheticStore> store;
  std::unique_ptr<MetadataCache> meta;
};

// 200 folders of 1,000 files: the walk holds a page and the folder being listed, never the tree.
TEST(TreeWalkTest, AWalkOfA200kObjectTreeHoldsAPageAndAFolderAtMost) {
  SyntheticTree tree("200k,fanout=1000,size=1KiB-4KiB");
  CheckingVisitor visitor;
  visitor.keep_paths_ = false;
  auto walked = WalkTree(*tree.meta, "", /*recursive=*/true, /*pin=*/true, visitor);
  ASSERT_TRUE(walked.ok()) << walked.status().ToString();
  EXPECT_EQ(walked->files, 200'000u);
  EXPECT_EQ(visitor.files_, 200'000u);
  EXPECT_EQ(walked->dirs, 201u);  // the root and d000..d199
  EXPECT_LE(walked->max_held, 2'000u);
  EXPECT_GE(walked->max_held, 1'000u);
  EXPECT_TRUE(visitor.names_.empty());
  auto d123 = tree.meta->List("d123");  // pinned: no listing
  ASSERT_TRUE(d123.ok());
  EXPECT_EQ((*d123)->size(), 1'000u);
}

// A visitor that stops the walk: the walk returns its error, and the folder it was in is not
// pinned (its listing is not whole).
TEST(TreeWalkTest, AStoppedWalkPinsNoFolderItHadNotListedWhole) {
  SyntheticTree tree("10k,fanout=1000,size=1KiB");
  CheckingVisitor visitor;
  visitor.stop_after_ = 2'500;
  auto walked = WalkTree(*tree.meta, "", /*recursive=*/true, /*pin=*/true, visitor);
  ASSERT_FALSE(walked.ok());
  EXPECT_EQ(walked.status().message(), "stopped");
  EXPECT_EQ(visitor.dirs_, (std::vector<std::string>{"d000", "d001"}));
}

}  // namespace
}  // namespace lakecache
