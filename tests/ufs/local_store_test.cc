#include "ufs/local_store.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sys/wait.h>

#include "ufs/list_model.h"

namespace lakecache {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

class LocalStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "lakecache-local-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    store_ = std::make_unique<LocalStore>(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void Put(const std::string& key, std::string_view data = "x") {
    Status st = store_->Put(key, data, {}).status();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  ListPage List(const std::string& prefix, const std::string& delimiter, int max_keys = 1000,
                const std::string& token = "") {
    ListRequest req{prefix, delimiter, token, max_keys};
    Result<ListPage> page = store_->List(req, {});
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    return page.ok() ? *page : ListPage{};
  }

  // Every entry of a listing, page by page; checks each page's size and truncation.
  std::vector<std::string> ListAllPages(const std::string& prefix, const std::string& delimiter,
                                        int max_keys) {
    std::vector<std::string> entries;
    std::string token;
    for (int pages = 0; pages < 100; ++pages) {
      ListPage page = List(prefix, delimiter, max_keys, token);
      size_t count = page.objects.size() + page.common_prefixes.size();
      EXPECT_LE(count, static_cast<size_t>(max_keys));
      for (const ObjectInfo& o : page.objects) entries.push_back(o.key);
      for (const std::string& p : page.common_prefixes) entries.push_back(p);
      if (!page.truncated) break;
      EXPECT_EQ(count, static_cast<size_t>(max_keys));
      EXPECT_FALSE(page.next_token.empty());
      token = page.next_token;
    }
    std::sort(entries.begin(), entries.end());
    return entries;
  }

  std::string ReadString(const std::string& key, uint64_t offset, size_t len) {
    std::string buf(len, '\0');
    Result<size_t> n = store_->Read(key, offset, buf, {});
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    buf.resize(n.ok() ? *n : 0);
    return buf;
  }

  std::string root_;
  std::unique_ptr<LocalStore> store_;
};

using list_model::Keys;
using list_model::ModelPage;

using Strings = std::vector<std::string>;

TEST_F(LocalStoreTest, DescribeIsFileUri) { EXPECT_EQ(store_->Describe(), "file://" + root_); }

TEST_F(LocalStoreTest, RecursiveListIsInByteOrderOfWholeKeys) {
  // '-' and '.' sort before '/', so a per-directory walk would get these wrong.
  for (const char* key : {"b", "a0", "a/c", "a/b/c", "a-b", "a.txt"}) Put(key);
  ListPage page = List("", "");
  EXPECT_EQ(Keys(page), (Strings{"a-b", "a.txt", "a/b/c", "a/c", "a0", "b"}));
  EXPECT_TRUE(page.common_prefixes.empty());
  EXPECT_FALSE(page.truncated);
  EXPECT_TRUE(page.next_token.empty());
}

TEST_F(LocalStoreTest, DelimiterGroupsCommonPrefixes) {
  for (const char* key : {"a/1", "a/2/x", "a/2/y", "a/3", "b", "c/d/e"}) Put(key);
  ListPage top = List("", "/");
  EXPECT_EQ(Keys(top), Strings{"b"});
  EXPECT_EQ(top.common_prefixes, (Strings{"a/", "c/"}));
  ListPage nested = List("a/", "/");
  EXPECT_EQ(Keys(nested), (Strings{"a/1", "a/3"}));
  EXPECT_EQ(nested.common_prefixes, Strings{"a/2/"});
  ListPage deeper = List("c/d/", "/");
  EXPECT_EQ(Keys(deeper), Strings{"c/d/e"});
  EXPECT_TRUE(deeper.common_prefixes.empty());
}

TEST_F(LocalStoreTest, PrefixMayEndMidName) {
  for (const char* key : {"logs/app.log", "logs/apple/x", "logs/b.log", "logsx"}) Put(key);
  EXPECT_EQ(Keys(List("logs/ap", "")), (Strings{"logs/app.log", "logs/apple/x"}));
  ListPage grouped = List("logs/ap", "/");
  EXPECT_EQ(Keys(grouped), Strings{"logs/app.log"});
  EXPECT_EQ(grouped.common_prefixes, Strings{"logs/apple/"});
  EXPECT_EQ(Keys(List("logs", "")),
            (Strings{"logs/app.log", "logs/apple/x", "logs/b.log", "logsx"}));
  EXPECT_TRUE(List("nothing/here/", "/").objects.empty());
}

TEST_F(LocalStoreTest, OtherDelimitersGroupOnTheKeyString) {
  for (const char* key : {"x-1", "x-2", "y", "z/w-1"}) Put(key);
  ListPage page = List("", "-");
  EXPECT_EQ(Keys(page), Strings{"y"});
  EXPECT_EQ(page.common_prefixes, (Strings{"x-", "z/w-"}));
}

TEST_F(LocalStoreTest, PaginatesWithContinuationToken) {
  Strings keys = {"a", "b/1", "b/2", "b/c/3", "d", "e/f/g/h", "z"};
  for (const std::string& key : keys) Put(key);
  EXPECT_EQ(ListAllPages("", "", 2), keys);
  EXPECT_EQ(ListAllPages("b/", "", 2), (Strings{"b/1", "b/2", "b/c/3"}));
  ListPage first = List("", "", 2);
  EXPECT_EQ(Keys(first), (Strings{"a", "b/1"}));
  EXPECT_TRUE(first.truncated);
}

TEST_F(LocalStoreTest, PaginatesOverCommonPrefixesWithoutRepeats) {
  for (const char* key : {"a/1", "a/2", "b", "c/1", "c/2/3", "d", "e/x/y", "f"}) Put(key);
  EXPECT_EQ(ListAllPages("", "/", 2), (Strings{"a/", "b", "c/", "d", "e/", "f"}));
  EXPECT_EQ(ListAllPages("", "/", 1), (Strings{"a/", "b", "c/", "d", "e/", "f"}));
  ListPage last = List("", "/", 2, "d");  // the token is the last entry returned
  EXPECT_EQ(last.common_prefixes, Strings{"e/"});
  EXPECT_EQ(Keys(last), Strings{"f"});
  EXPECT_FALSE(last.truncated);
}

TEST_F(LocalStoreTest, MatchesAFlatModelOfS3Listing) {
  std::mt19937 rng(1234);
  // Directory and file names kept apart so that no key lies below another; '-', '.' and ' ' sort
  // before '/', '0' after it.
  const Strings dirs = {"a", "ab", "a b", "-"};
  const Strings files = {"a-b", "a.b", "a0", "b", "-x", "ab-"};
  std::set<std::string> keys;
  for (int i = 0; i < 60; ++i) {
    std::string key;
    for (int depth = rng() % 4; depth > 0; --depth) key += dirs[rng() % dirs.size()] + "/";
    key += files[rng() % files.size()];
    if (keys.insert(key).second) Put(key);
  }
  ASSERT_GE(keys.size(), 40u) << "too few keys to exercise the walk";
  const Strings prefixes = {"", "a", "a/", "a-", "ab/", "a b/a", "a/ab/", "-/-", "zz", "a/a/a/"};
  list_model::ExpectListingsMatchTheModel(*store_, keys, prefixes, {"", "/", "-", "b"},
                                          {1, 2, 3, 1000});
}

TEST_F(LocalStoreTest, PagesHoldAtMostAThousandEntries) {
  for (int i = 0; i < 1005; ++i) std::ofstream(root_ + "/k" + std::to_string(10000 + i)) << "x";
  ListPage page = List("", "", 5000);
  EXPECT_EQ(page.objects.size(), 1000u);
  EXPECT_TRUE(page.truncated);
  EXPECT_EQ(List("", "", 5000, page.next_token).objects.size(), 5u);
}

TEST_F(LocalStoreTest, DirectoriesAreNotObjects) {
  std::filesystem::create_directories(root_ + "/empty/sub");
  Put("full/x");
  ListPage page = List("", "/");
  EXPECT_EQ(page.common_prefixes, Strings{"full/"});
  EXPECT_TRUE(page.objects.empty());
  EXPECT_EQ(store_->Head("empty", {}).status().code(), StatusCode::kNotFound);
  std::string buf(4, '\0');
  EXPECT_EQ(store_->Read("full", 0, buf, {}).status().code(), StatusCode::kNotFound);
}

TEST_F(LocalStoreTest, HeadReportsSizeMtimeAndChangingEtag) {
  Put("obj", "hello");
  Result<ObjectInfo> before = store_->Head("obj", {});
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(before->key, "obj");
  EXPECT_EQ(before->size, 5u);
  EXPECT_GT(before->mtime, 0);
  EXPECT_FALSE(before->etag.empty());
  Put("obj", "HELLO");
  Result<ObjectInfo> after = store_->Head("obj", {});
  ASSERT_TRUE(after.ok());
  EXPECT_NE(after->etag, before->etag);
  EXPECT_EQ(List("", "").objects.at(0).etag, after->etag);
}

TEST_F(LocalStoreTest, RangedReadsStopAtTheEnd) {
  Put("digits", "0123456789");
  EXPECT_EQ(ReadString("digits", 0, 10), "0123456789");
  EXPECT_EQ(ReadString("digits", 0, 4), "0123");
  EXPECT_EQ(ReadString("digits", 5, 10), "56789");
  EXPECT_EQ(ReadString("digits", 9, 1), "9");
  EXPECT_EQ(ReadString("digits", 10, 5), "");
  EXPECT_EQ(ReadString("digits", 1000, 5), "");
  EXPECT_EQ(ReadString("digits", 3, 0), "");
}

TEST_F(LocalStoreTest, ZeroByteObject) {
  Put("empty", "");
  Result<ObjectInfo> info = store_->Head("empty", {});
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, 0u);
  EXPECT_EQ(ReadString("empty", 0, 16), "");
  EXPECT_EQ(Keys(List("", "")), Strings{"empty"});
}

TEST_F(LocalStoreTest, KeysWithSpacesUnicodeAndEscapes) {
  Strings keys = {"100%/x%20y", "a+b", "dir with space/file name.txt", "ünï/日本.txt"};
  for (const std::string& key : keys) Put(key, key);
  EXPECT_EQ(Keys(List("", "")), keys);
  for (const std::string& key : keys) {
    EXPECT_EQ(ReadString(key, 0, 100), key);
    EXPECT_TRUE(store_->Head(key, {}).ok()) << key;
  }
  EXPECT_EQ(List("", "/").common_prefixes, (Strings{"100%/", "dir with space/", "ünï/"}));
}

TEST_F(LocalStoreTest, MissingKeyIsNotFoundNamingTheFile) {
  Result<ObjectInfo> head = store_->Head("missing/key", {});
  EXPECT_EQ(head.status().code(), StatusCode::kNotFound);
  EXPECT_NE(head.status().message().find("file://" + root_ + "/missing/key"), std::string::npos);
  EXPECT_NE(head.status().message().find("No such file or directory"), std::string::npos);
  std::string buf(4, '\0');
  EXPECT_EQ(store_->Read("missing", 0, buf, {}).status().code(), StatusCode::kNotFound);
}

TEST_F(LocalStoreTest, MissingRootIsNotFound) {
  LocalStore missing(root_ + "/nope");
  EXPECT_EQ(missing.List({}, {}).status().code(), StatusCode::kNotFound);
}

TEST_F(LocalStoreTest, KeysThatLeaveTheRootAreRejected) {
  std::string buf(4, '\0');
  EXPECT_EQ(store_->Head("../etc/passwd", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Read("a/../../x", 0, buf, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Put("..", "x", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Delete("a/..", {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Head("a//b", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Head("/abs", {}).status().code(), StatusCode::kInvalidArgument);
  ListRequest req;
  req.prefix = "../";
  EXPECT_EQ(store_->List(req, {}).status().code(), StatusCode::kInvalidArgument);
  Put("..x/..y");  // ".." only as a whole segment is special
  EXPECT_EQ(ReadString("..x/..y", 0, 1), "x");
}

TEST_F(LocalStoreTest, ReadsAtOffsetsAboveFourGiB) {
  const uint64_t size = 5 * kGiB;
  const uint64_t offset = 4 * kGiB + 123;
  {
    int fd = ::open((root_ + "/big").c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);  // sparse: costs no disk
    ASSERT_EQ(::pwrite(fd, "hello", 5, static_cast<off_t>(offset)), 5);
    ::close(fd);
  }
  Result<ObjectInfo> info = store_->Head("big", {});
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, size);
  EXPECT_EQ(ReadString("big", offset, 5), "hello");
  EXPECT_EQ(ReadString("big", offset - 1, 7), std::string("\0hello\0", 7));
  EXPECT_EQ(ReadString("big", size - 2, 10), std::string(2, '\0'));
  EXPECT_EQ(ReadString("big", size, 10), "");
}

TEST_F(LocalStoreTest, PutCreatesParentsAndDeleteRemoves) {
  Put("x/y/z", "data");
  EXPECT_EQ(ReadString("x/y/z", 0, 10), "data");
  EXPECT_EQ(List("", "/").common_prefixes, Strings{"x/"});
  ASSERT_TRUE(store_->Delete("x/y/z", {}).ok());
  EXPECT_EQ(store_->Head("x/y/z", {}).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(List("", "/").common_prefixes.empty());  // the emptied directories hide
  EXPECT_TRUE(store_->Delete("x/y/z", {}).ok());       // deleting again succeeds, as on S3
  EXPECT_TRUE(store_->Delete("never/was", {}).ok());
}

TEST_F(LocalStoreTest, PutLeavesNoTemporaryFiles) {
  Put("k", "v");
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root_))
    files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST_F(LocalStoreTest, PutBelowAnObjectIsRejected) {
  Put("a", "file");
  EXPECT_EQ(store_->Put("a/b", "x", {}).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(LocalStoreTest, IfMatchChecksTheEtag) {
  Put("k", "v1");
  ReadOptions opts;
  opts.if_match = store_->Head("k", {})->etag;
  std::string buf(4, '\0');
  EXPECT_TRUE(store_->Read("k", 0, buf, opts).ok());
  Put("k", "v2");
  EXPECT_EQ(store_->Read("k", 0, buf, opts).status().code(), StatusCode::kPreconditionFailed);
}

TEST_F(LocalStoreTest, PassedDeadlineFailsTheCall) {
  Put("k");
  IoOptions past{Clock::now() - std::chrono::seconds(1)};
  EXPECT_EQ(store_->Head("k", past).status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(store_->List({}, past).status().code(), StatusCode::kDeadlineExceeded);
}

TEST_F(LocalStoreTest, UnreadableFileIsAccessDenied) {
  Put("secret", "s");
  ASSERT_EQ(::chmod((root_ + "/secret").c_str(), 0), 0);
  // Root reads any file, so the read runs in a child that drops to an unprivileged user first.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    std::string buf(4, '\0');
    StatusCode code = store_->Read("secret", 0, buf, {}).status().code();
    ::_exit(code == StatusCode::kAccessDenied ? 0 : 1);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "1: wrong status code, 3: could not drop privileges";
}

}  // namespace
}  // namespace lakecache
