#include "common/status.h"

#include <gtest/gtest.h>

#include "common/result.h"

namespace lakecache {
namespace {

TEST(StatusTest, OkHasNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, OnlyUnavailableIsRetryable) {
  EXPECT_TRUE(Status::Unavailable("503").retryable());
  EXPECT_FALSE(Status::AccessDenied("403").retryable());
  EXPECT_FALSE(Status::NotFound("404").retryable());
}

TEST(StatusTest, PeerFailedWhenTheOneAskedGaveNoSoundAnswer) {
  EXPECT_TRUE(Status::Unavailable("connection reset").peer_failed());
  EXPECT_TRUE(Status::DeadlineExceeded("no answer in time").peer_failed());
  EXPECT_TRUE(Status::IoError("transfer failed").peer_failed());
  EXPECT_TRUE(Status::Corruption("checksum mismatch").peer_failed());
  EXPECT_TRUE(Status::Internal("unparsable XML").peer_failed());
  EXPECT_FALSE(Status::NotFound("404").peer_failed());
  EXPECT_FALSE(Status::AccessDenied("403").peer_failed());
  EXPECT_FALSE(Status::PreconditionFailed("412").peer_failed());
  EXPECT_FALSE(Status::InvalidArgument("bad range").peer_failed());
  EXPECT_FALSE(Status::Ok().peer_failed());
  // Retryable failures are the peer's; the reverse does not hold (a deadline is not retried).
  EXPECT_TRUE(Status::Unavailable("503").retryable());
  EXPECT_FALSE(Status::DeadlineExceeded("late").retryable());
}

TEST(StatusTest, WithContextPrefixesMessage) {
  Status s = Status::NotFound("no such key").WithContext("s3://b/k");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NotFound: s3://b/k: no such key");
}

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  LC_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(ResultTest, AssignOrReturnPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lakecache
