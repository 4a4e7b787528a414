// ListAll (ufs/object_store.cc) over a fake store that serves hand-made pages.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ufs/object_store.h"

namespace lakecache {
namespace {

using Strings = std::vector<std::string>;

// Serves pages keyed by the request's continuation token and records the requests.
class PagedFakeStore : public ObjectStore {
 public:
  std::string Describe() const override { return "fake://bucket"; }

  Result<ListPage> List(const ListRequest& request, const IoOptions&) override {
    requests.push_back(request);
    if (!error.ok()) return error;
    auto it = pages.find(request.continuation_token);
    if (it == pages.end())
      return Status::Internal("no page for '" + request.continuation_token + "'");
    return it->second;
  }
  Result<ObjectInfo> Head(std::string_view, const IoOptions&) override {
    return Status::Unimplemented("Head");
  }
  Result<ReadReply> ReadRaw(std::string_view, uint64_t, std::span<const std::span<char>>,
                            const ReadOptions&) override {
    return Status::Unimplemented("Read");
  }

  std::map<std::string, ListPage> pages;  // by continuation token; "" is the first page
  std::vector<ListRequest> requests;
  Status error;
};

ObjectInfo Obj(std::string key) { return ObjectInfo{std::move(key), 1, "etag", 0}; }

ListPage Page(std::vector<ObjectInfo> objects, Strings prefixes, std::string next_token) {
  bool truncated = !next_token.empty();
  return ListPage{std::move(objects), std::move(prefixes), std::move(next_token), truncated};
}

Strings Keys(const ListResult& result) {
  Strings keys;
  for (const ObjectInfo& o : result.objects) keys.push_back(o.key);
  return keys;
}

TEST(ListAllTest, MergesPagesAndDropsRepeatedEntries) {
  PagedFakeStore store;
  store.pages[""] = Page({Obj("d/x1"), Obj("d/x3")}, {"d/a/", "d/b/"}, "t1");
  store.pages["t1"] = Page({Obj("d/x2"), Obj("d/x3")}, {"d/b/", "d/c/"}, "t2");
  store.pages["t2"] = Page({}, {"d/c/", "d/a/"}, "");
  Result<ListResult> result = ListAll(store, "d/", "/", {});
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(Keys(*result), (Strings{"d/x1", "d/x2", "d/x3"}));
  EXPECT_EQ(result->common_prefixes, (Strings{"d/a/", "d/b/", "d/c/"}));
}

TEST(ListAllTest, SendsPrefixDelimiterAndEachToken) {
  PagedFakeStore store;
  store.pages[""] = Page({Obj("p/1")}, {}, "t1");
  store.pages["t1"] = Page({Obj("p/2")}, {}, "");
  ASSERT_TRUE(ListAll(store, "p/", "/", {}).ok());
  ASSERT_EQ(store.requests.size(), 2u);
  EXPECT_EQ(store.requests[0].prefix, "p/");
  EXPECT_EQ(store.requests[0].delimiter, "/");
  EXPECT_EQ(store.requests[0].continuation_token, "");
  EXPECT_EQ(store.requests[1].continuation_token, "t1");
}

TEST(ListAllTest, TruncatedPageWithoutTokenIsAnError) {
  PagedFakeStore store;
  store.pages[""] = ListPage{{Obj("a")}, {}, "", /*truncated=*/true};
  Result<ListResult> result = ListAll(store, "", "", {});
  EXPECT_EQ(result.status().code(), StatusCode::kInternal);
  EXPECT_NE(result.status().message().find("fake://bucket"), std::string::npos);
  EXPECT_EQ(store.requests.size(), 1u);
}

TEST(ListAllTest, RepeatedTokenIsAnErrorNotALoop) {
  PagedFakeStore store;
  store.pages[""] = Page({Obj("a")}, {}, "t1");
  store.pages["t1"] = Page({Obj("b")}, {}, "t1");
  EXPECT_EQ(ListAll(store, "", "", {}).status().code(), StatusCode::kInternal);
  EXPECT_EQ(store.requests.size(), 2u);
}

TEST(ListAllTest, PropagatesListErrors) {
  PagedFakeStore store;
  store.error = Status::AccessDenied("fake://bucket: HTTP 403 AccessDenied: Access Denied");
  EXPECT_EQ(ListAll(store, "", "/", {}).status().code(), StatusCode::kAccessDenied);
}

}  // namespace
}  // namespace lakecache
