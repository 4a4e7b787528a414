#include "rpc/block_frame.h"

#include <gtest/gtest.h>

namespace lakecache::rpc {
namespace {

BlockReadRequest SampleRequest() {
  BlockReadRequest r;
  r.block.set_ns("lake");
  r.block.set_key("data/part-00001.bin");
  r.block.set_etag("\"9b2cf535f27731c974343645a3985328\"");
  r.block.set_object_size(123456789);
  r.block.set_block_size(4 << 20);
  r.block.set_index(29);
  r.offset = 4096;
  r.length = (4 << 20) - 4096;
  return r;
}

std::span<const char> Header(const std::string& frame) {
  return std::span<const char>(frame).first(kFrameHeaderBytes);
}

TEST(BlockFrameTest, RequestRoundTrips) {
  BlockReadRequest sent = SampleRequest();
  std::string frame = EncodeReadRequest(sent);
  Result<size_t> body = FrameBodyBytes(Header(frame), FrameKind::kReadRequest);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  EXPECT_EQ(frame.size(), kFrameHeaderBytes + *body);
  Result<BlockReadRequest> got = DecodeReadRequest(frame);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->block.SerializeAsString(), sent.block.SerializeAsString());
  EXPECT_EQ(got->offset, sent.offset);
  EXPECT_EQ(got->length, sent.length);
}

TEST(BlockFrameTest, ReplyHeadersRoundTripWithEveryStatusCode) {
  std::string ok = EncodeReplyHeader(Status::Ok(), 4 << 20);
  EXPECT_EQ(ok.size(), kFrameHeaderBytes);
  Result<BlockReplyHeader> got = DecodeReplyHeader(ok, 4 << 20);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->status.ok());
  EXPECT_EQ(got->data_length, 4u << 20);
  for (int c = 1; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    Status sent(static_cast<StatusCode>(c), "worker says no");
    std::string frame = EncodeReplyHeader(sent, 99);  // an error carries no data
    ASSERT_EQ(*FrameBodyBytes(Header(frame), FrameKind::kReadReply), sent.message().size());
    Result<BlockReplyHeader> error = DecodeReplyHeader(frame, 0);
    ASSERT_TRUE(error.ok()) << error.status().ToString();
    EXPECT_EQ(error->status.code(), sent.code());
    EXPECT_EQ(error->status.message(), "worker says no");
    EXPECT_EQ(error->data_length, 0u);
  }
}

TEST(BlockFrameTest, LongErrorMessagesAreCut) {
  std::string frame = EncodeReplyHeader(Status::NotFound(std::string(100000, 'x')), 0);
  Result<BlockReplyHeader> got = DecodeReplyHeader(frame, 0);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->status.message().size(), kMaxReplyMessageBytes);
}

// Decoding `frame` fails with InvalidArgument whose message contains `what`.
void ExpectRefused(const Result<BlockReadRequest>& got, const std::string& what) {
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find(what), std::string::npos) << got.status().message();
}

TEST(BlockFrameTest, MalformedRequestsAreRefused) {
  std::string good = EncodeReadRequest(SampleRequest());
  ExpectRefused(DecodeReadRequest(std::string_view(good).substr(0, 10)), "truncated header");
  ExpectRefused(DecodeReadRequest(std::string_view(good).substr(0, good.size() - 1)),
                "truncated body");
  ExpectRefused(DecodeReadRequest(good + "x"), "bytes past the body");
  std::string bad = good;
  bad[0] = 'G';  // e.g. an HTTP client: "GET /"
  ExpectRefused(DecodeReadRequest(bad), "bad magic");
  bad = good;
  bad[4] = 7;
  ExpectRefused(DecodeReadRequest(bad), "unknown version 7");
  bad = good;
  bad[5] = static_cast<char>(FrameKind::kReadReply);
  ExpectRefused(DecodeReadRequest(bad), "unexpected frame kind");
  bad = good;
  bad[14] = 1;  // a requester id of 64 KiB
  ExpectRefused(DecodeReadRequest(bad), "requester id of 65536 bytes");
  bad = good;
  bad[7] = static_cast<char>(0x80);
  ExpectRefused(DecodeReadRequest(bad), "unknown flags 128");
  bad = good;
  bad[7] = kReadForReplica;  // and no requester
  ExpectRefused(DecodeReadRequest(bad), "without the requester");
  bad = good;
  bad[8] = bad[9] = bad[10] = bad[11] = '\xff';  // a 4 GiB body
  ExpectRefused(DecodeReadRequest(bad), "at most");
  EXPECT_FALSE(FrameBodyBytes(Header(bad), FrameKind::kReadRequest).ok());
  bad = good;
  bad.replace(kFrameHeaderBytes, 4, "\xff\xff\xff\xff");  // not a BlockId any more
  ExpectRefused(DecodeReadRequest(bad), "unparsable block id");
}

// A worker reading to keep a replica names itself; the owner answers with the block's digest, or
// with the worker to read it from instead.
TEST(BlockFrameTest, ReplicaReadsRoundTripWithTheirRequesterDigestAndRedirect) {
  BlockReadRequest sent = SampleRequest();
  sent.flags = kReadForReplica | kReadNoRedirect;
  sent.requester = "a1b2c3";
  Result<BlockReadRequest> got = DecodeReadRequest(EncodeReadRequest(sent));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->flags, sent.flags);
  EXPECT_EQ(got->requester, "a1b2c3");
  EXPECT_EQ(got->block.SerializeAsString(), sent.block.SerializeAsString());
  EXPECT_EQ(got->length, sent.length);
  // A mount asking its host's worker to place a block where the mount maps it.
  sent.flags = kReadAsReplica | kReadPlaceOnly;
  sent.requester.clear();
  got = DecodeReadRequest(EncodeReadRequest(sent));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->flags, sent.flags);

  Result<BlockReplyHeader> data =
      DecodeReplyHeader(EncodeReplyHeader(Status::Ok(), 4096, 0x0123456789abcdefull), 4096);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(data->data_length, 4096u);
  EXPECT_EQ(data->digest, 0x0123456789abcdefull);
  EXPECT_TRUE(data->redirect.empty());

  std::string frame = EncodeReplyHeader(Status::Ok(), 4096, 42, "worker-9");
  Result<BlockReplyHeader> moved = DecodeReplyHeader(frame, 4096);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->redirect, "worker-9");
  EXPECT_EQ(moved->data_length, 0u) << "a redirect carries no data";
  EXPECT_EQ(moved->digest, 42u);
  EXPECT_EQ(frame.size(), kFrameHeaderBytes + 8);

  Result<BlockReplyHeader> error =
      DecodeReplyHeader(EncodeReplyHeader(Status::NotFound("gone"), 0, 42, "worker-9"), 0);
  ASSERT_TRUE(error.ok());
  EXPECT_EQ(error->status.code(), StatusCode::kNotFound);
  EXPECT_FALSE(error->digest.has_value()) << "an error says nothing else";
  EXPECT_TRUE(error->redirect.empty());
}

TEST(BlockFrameTest, MalformedRepliesAreRefused) {
  std::string ok = EncodeReplyHeader(Status::Ok(), 1000);
  Result<BlockReplyHeader> more = DecodeReplyHeader(ok, 999);  // more than was asked for
  ASSERT_FALSE(more.ok());
  EXPECT_NE(more.status().message().find("1000 data bytes"), std::string::npos);
  std::string bad = ok;
  bad[6] = 40;
  EXPECT_FALSE(DecodeReplyHeader(bad, 1000).ok());  // unknown status code
  std::string error = EncodeReplyHeader(Status::NotFound("gone"), 0);
  bad = error;
  bad[16] = 5;  // data after an error
  EXPECT_FALSE(DecodeReplyHeader(bad, 1000).ok());
  EXPECT_FALSE(DecodeReplyHeader(error.substr(0, error.size() - 1), 0).ok());
  EXPECT_FALSE(DecodeReplyHeader(EncodeReadRequest(SampleRequest()), 1000).ok());
  EXPECT_FALSE(FrameBodyBytes(Header(ok), FrameKind::kReadRequest).ok());
  bad = ok;
  bad[24] = 1;  // a digest without its flag
  EXPECT_FALSE(DecodeReplyHeader(bad, 1000).ok());
  bad = error;
  bad[7] = kReplyDigest;  // flags in an error
  EXPECT_FALSE(DecodeReplyHeader(bad, 1000).ok());
  std::string moved = EncodeReplyHeader(Status::Ok(), 0, std::nullopt, "w");
  bad = moved;
  bad[16] = 5;  // data after a redirect
  EXPECT_FALSE(DecodeReplyHeader(bad, 1000).ok());
  bad = ok;
  bad[7] = kReplyRedirect;  // naming no worker
  bad[16] = 0;
  bad[17] = 0;
  EXPECT_FALSE(DecodeReplyHeader(bad, 1000).ok());
  bad = ok;
  bad[12] = 1;  // field 12 is a request's
  EXPECT_FALSE(DecodeReplyHeader(bad, 1000).ok());
}

}  // namespace
}  // namespace lakecache::rpc
