// The Status <-> gRPC mapping (rpc/grpc_util.h): every code crosses the wire unchanged, so what a
// failure means (retryable, the peer's) is decided once, where it is born.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "rpc/grpc_util.h"

namespace lakecache::rpc {
namespace {

// Every StatusCode: the enum counts up from kOk, and StatusCodeName knows each one (-Wswitch
// keeps it complete), so a code added later is covered here without touching this test.
std::vector<StatusCode> AllCodes() {
  std::vector<StatusCode> codes;
  for (int c = 0; StatusCodeName(static_cast<StatusCode>(c)) != "Unknown"; ++c) {
    codes.push_back(static_cast<StatusCode>(c));
  }
  return codes;
}

TEST(GrpcStatusTest, EveryStatusCodeRoundTrips) {
  std::vector<StatusCode> codes = AllCodes();
  ASSERT_GT(codes.size(), static_cast<size_t>(StatusCode::kInternal));
  for (StatusCode code : codes) {
    Status sent(code, "s3://bucket/key: what happened");
    Status got = FromGrpcStatus(ToGrpcStatus(sent), "worker 127.0.0.1:7001");
    EXPECT_EQ(got.code(), code) << StatusCodeName(code) << " came back as "
                                << StatusCodeName(got.code());
    EXPECT_EQ(got.retryable(), sent.retryable()) << StatusCodeName(code);
    EXPECT_EQ(got.peer_failed(), sent.peer_failed()) << StatusCodeName(code);
    if (code != StatusCode::kOk) {
      EXPECT_EQ(got.message(), "worker 127.0.0.1:7001: s3://bucket/key: what happened");
    }
  }
}

TEST(GrpcStatusTest, EveryStatusCodeHasAGrpcCodeOfItsOwn) {
  std::set<grpc::StatusCode> seen;
  for (StatusCode code : AllCodes()) {
    grpc::StatusCode wire = ToGrpcStatus(Status(code, "x")).error_code();
    EXPECT_TRUE(seen.insert(wire).second)
        << StatusCodeName(code) << " shares gRPC code " << wire << " with another code";
  }
}

TEST(GrpcStatusTest, IoErrorAndCorruptionStayApart) {
  EXPECT_EQ(FromGrpcStatus(ToGrpcStatus(Status::IoError("disk")), "w").code(),
            StatusCode::kIoError);
  EXPECT_EQ(FromGrpcStatus(ToGrpcStatus(Status::Corruption("checksum")), "w").code(),
            StatusCode::kCorruption);
}

// Codes gRPC gives a call itself, not sent by our servers.
TEST(GrpcStatusTest, APeerThatWentAwayMidCallFailedAsThePeer) {
  for (grpc::StatusCode code : {grpc::StatusCode::CANCELLED, grpc::StatusCode::ABORTED}) {
    Status s = FromGrpcStatus(grpc::Status(code, "gone"), "worker w");
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << code;
    EXPECT_TRUE(s.peer_failed()) << code;
  }
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no"), "m").code(),
            StatusCode::kUnauthenticated);
}

TEST(GrpcStatusTest, AnswersAboutTheRequestAreNotPeerFailures) {
  for (StatusCode code : {StatusCode::kNotFound, StatusCode::kAccessDenied,
                          StatusCode::kPreconditionFailed, StatusCode::kInvalidArgument}) {
    EXPECT_FALSE(FromGrpcStatus(ToGrpcStatus(Status(code, "x")), "w").peer_failed())
        << StatusCodeName(code);
  }
  for (StatusCode code : {StatusCode::kUnavailable, StatusCode::kDeadlineExceeded,
                          StatusCode::kIoError, StatusCode::kCorruption, StatusCode::kInternal}) {
    EXPECT_TRUE(FromGrpcStatus(ToGrpcStatus(Status(code, "x")), "w").peer_failed())
        << StatusCodeName(code);
  }
}

}  // namespace
}  // namespace lakecache::rpc
