#include "common/object_uri.h"

#include <gtest/gtest.h>

namespace lakecache {
namespace {

TEST(ObjectUriTest, S3BucketAndPrefix) {
  Result<ObjectUri> uri = ParseObjectUri("s3://bucket/prefix/sub");
  ASSERT_TRUE(uri.ok()) << uri.status().ToString();
  EXPECT_EQ(uri->scheme, UriScheme::kS3);
  EXPECT_EQ(uri->bucket, "bucket");
  EXPECT_EQ(uri->key, "prefix/sub");
  EXPECT_EQ(uri->endpoint_host, "");
  EXPECT_EQ(uri->ToString(), "s3://bucket/prefix/sub");
}

// Found by fuzz/key_path_fuzz: "s3://bucket//x" gave key "/x", which object_uri.h says never
// happens (namespace prefixes drop the slash, CLI paths did not).
TEST(ObjectUriTest, KeyNeverStartsWithASlash) {
  for (const char* text : {"s3://bucket//x/y", "oss://bucket.host///x/y", "s3://b:///x/y"}) {
    Result<ObjectUri> uri = ParseObjectUri(text);
    ASSERT_TRUE(uri.ok()) << text;
    EXPECT_EQ(uri->key, "x/y") << text;
    Result<ObjectUri> again = ParseObjectUri(uri->ToString());
    ASSERT_TRUE(again.ok()) << uri->ToString();
    EXPECT_EQ(again->key, "x/y") << uri->ToString();
  }
}

TEST(ObjectUriTest, S3BucketOnlyAndS3a) {
  Result<ObjectUri> uri = ParseObjectUri("s3://bucket");
  ASSERT_TRUE(uri.ok());
  EXPECT_EQ(uri->key, "");
  EXPECT_EQ(uri->ToString(), "s3://bucket");
  Result<ObjectUri> s3a = ParseObjectUri("s3a://bucket/x");
  ASSERT_TRUE(s3a.ok());
  EXPECT_EQ(s3a->scheme, UriScheme::kS3);
}

TEST(ObjectUriTest, OssWithoutEndpoint) {
  Result<ObjectUri> uri = ParseObjectUri("oss://bucket/dir");
  ASSERT_TRUE(uri.ok());
  EXPECT_EQ(uri->scheme, UriScheme::kOss);
  EXPECT_EQ(uri->bucket, "bucket");
  EXPECT_EQ(uri->key, "dir");
  EXPECT_EQ(uri->endpoint_host, "");
}

TEST(ObjectUriTest, OssJindoStyleEndpointInHost) {
  Result<ObjectUri> uri = ParseObjectUri("oss://bucket.oss-cn-hangzhou.aliyuncs.com/dir/");
  ASSERT_TRUE(uri.ok());
  EXPECT_EQ(uri->bucket, "bucket");
  EXPECT_EQ(uri->endpoint_host, "oss-cn-hangzhou.aliyuncs.com");
  EXPECT_EQ(uri->key, "dir/");
  EXPECT_EQ(uri->ToString(), "oss://bucket/dir/");
}

TEST(ObjectUriTest, FileAbsolutePathWithoutTrailingSlash) {
  Result<ObjectUri> uri = ParseObjectUri("file:///data/sets/");
  ASSERT_TRUE(uri.ok());
  EXPECT_EQ(uri->scheme, UriScheme::kFile);
  EXPECT_EQ(uri->bucket, "");
  EXPECT_EQ(uri->key, "/data/sets");
  EXPECT_EQ(uri->ToString(), "file:///data/sets");
}

TEST(ObjectUriTest, Errors) {
  EXPECT_FALSE(ParseObjectUri("bucket/prefix").ok());
  EXPECT_FALSE(ParseObjectUri("file://relative/dir").ok());
  EXPECT_FALSE(ParseObjectUri("s3:///key").ok());
  Result<ObjectUri> gs = ParseObjectUri("gs://bucket/x");
  ASSERT_FALSE(gs.ok());
  EXPECT_EQ(gs.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(gs.status().message().find("'gs'"), std::string::npos);
}

TEST(ObjectUriTest, SchemeNames) {
  EXPECT_EQ(UriSchemeName(UriScheme::kS3), "s3");
  EXPECT_EQ(UriSchemeName(UriScheme::kOss), "oss");
  EXPECT_EQ(UriSchemeName(UriScheme::kFile), "file");
  EXPECT_EQ(UriSchemeName(UriScheme::kSynthetic), "synthetic");
}

TEST(ObjectUriTest, SyntheticKeepsItsSpecAsTheBucket) {
  Result<ObjectUri> uri = ParseObjectUri("synthetic://1M,fanout=100/d001");
  ASSERT_TRUE(uri.ok()) << uri.status().ToString();
  EXPECT_EQ(uri->scheme, UriScheme::kSynthetic);
  EXPECT_EQ(uri->bucket, "1M,fanout=100");
  EXPECT_EQ(uri->key, "d001");
  EXPECT_EQ(uri->ToString(), "synthetic://1M,fanout=100/d001");
}

}  // namespace
}  // namespace lakecache
