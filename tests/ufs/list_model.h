// S3's listing rules over a flat sorted key set: what a store's List must agree with (prefix,
// delimiter grouping, max_keys over keys and common prefixes, a token naming the last entry).
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ufs/object_store.h"

namespace lakecache::list_model {

inline ListPage ModelPage(const std::set<std::string>& keys, const ListRequest& req) {
  ListPage page;
  std::string after = req.continuation_token;
  for (const std::string& key : keys) {
    if (!key.starts_with(req.prefix)) continue;
    size_t pos =
        req.delimiter.empty() ? std::string::npos : key.find(req.delimiter, req.prefix.size());
    std::string entry = pos == std::string::npos ? key : key.substr(0, pos + req.delimiter.size());
    if (entry <= after) continue;
    if (page.objects.size() + page.common_prefixes.size() == static_cast<size_t>(req.max_keys)) {
      page.truncated = true;
      page.next_token = after;
      break;
    }
    if (pos == std::string::npos) {
      page.objects.push_back(ObjectInfo{key, 0, "", 0});
    } else {
      page.common_prefixes.push_back(entry);
    }
    after = entry;
  }
  return page;
}

inline std::vector<std::string> Keys(const ListPage& page) {
  std::vector<std::string> keys;
  for (const ObjectInfo& o : page.objects) keys.push_back(o.key);
  return keys;
}

// Lists every page of every (prefix, delimiter, max_keys) combination from `store` and checks
// each page against the model's.
inline void ExpectListingsMatchTheModel(ObjectStore& store, const std::set<std::string>& keys,
                                        const std::vector<std::string>& prefixes,
                                        const std::vector<std::string>& delimiters,
                                        const std::vector<int>& page_sizes) {
  for (const std::string& prefix : prefixes) {
    for (const std::string& delimiter : delimiters) {
      for (int max_keys : page_sizes) {
        ListRequest req{prefix, delimiter, "", max_keys};
        for (size_t pages = 0; pages <= keys.size(); ++pages) {
          ListPage want = ModelPage(keys, req);
          Result<ListPage> got = store.List(req, {});
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          SCOPED_TRACE("prefix '" + prefix + "' delimiter '" + delimiter + "' token '" +
                       req.continuation_token + "' max " + std::to_string(max_keys));
          ASSERT_EQ(Keys(*got), Keys(want));
          ASSERT_EQ(got->common_prefixes, want.common_prefixes);
          ASSERT_EQ(got->truncated, want.truncated);
          ASSERT_EQ(got->next_token, want.next_token);
          if (!want.truncated) break;
          req.continuation_token = want.next_token;
        }
      }
    }
  }
}

}  // namespace lakecache::list_model
