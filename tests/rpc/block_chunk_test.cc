#include "rpc/block_chunk.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "rpc/lakecache.pb.h"

namespace lakecache::rpc {
namespace {

BlockRef FilledBlock(size_t size) {
  std::shared_ptr<Block> block = Block::Allocate(size);
  for (size_t i = 0; i < size; ++i) block->mutable_data()[i] = static_cast<char>(i * 7 + 3);
  return block;
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  grpc::Slice slice;
  EXPECT_TRUE(buffer.DumpToSingleSlice(&slice).ok());
  return std::string(reinterpret_cast<const char*>(slice.begin()), slice.size());
}

grpc::ByteBuffer Buffer(const std::string& bytes) {
  grpc::Slice slice(bytes.data(), bytes.size());
  return grpc::ByteBuffer(&slice, 1);
}

TEST(BlockChunkTest, MessagesAreWhatProtobufWritesAndCopyBack) {
  for (size_t size : {size_t{1}, size_t{127}, size_t{128}, size_t{300000}}) {
    BlockRef block = FilledBlock(size + 10);
    grpc::ByteBuffer message = ChunkMessage(block, block->data() + 10, size);
    ReadBlockChunk typed;
    typed.set_data(block->data() + 10, size);
    EXPECT_EQ(Flatten(message), typed.SerializeAsString()) << size;
    std::string dst(size + 5, '\0');
    size_t got = 5;  // appended after what is there
    ASSERT_TRUE(CopyChunk(message, std::span<char>(dst), &got).ok()) << size;
    EXPECT_EQ(got, size + 5);
    EXPECT_EQ(0, std::memcmp(dst.data() + 5, block->data() + 10, size)) << size;
  }
}

TEST(BlockChunkTest, TheMessageKeepsItsBlockAlive) {
  BlockRef block = FilledBlock(1000);
  std::weak_ptr<const Block> weak = block;
  grpc::ByteBuffer message = ChunkMessage(block, block->data(), 1000);
  block.reset();
  EXPECT_FALSE(weak.expired());
  message.Clear();
  EXPECT_TRUE(weak.expired());
}

TEST(BlockChunkTest, MalformedChunksAreRefused) {
  ReadBlockChunk typed;
  typed.set_data(std::string(200, 'x'));
  std::string good = typed.SerializeAsString();
  std::string dst(200, '\0');
  auto copy = [&](const std::string& bytes, size_t room = 200) {
    size_t got = 0;
    return CopyChunk(Buffer(bytes), std::span<char>(dst.data(), room), &got);
  };
  EXPECT_TRUE(copy(good).ok());
  EXPECT_TRUE(copy("").ok());  // an empty chunk
  EXPECT_NE(copy(good, 199).message().find("past the requested range"), std::string::npos);
  EXPECT_NE(copy(good.substr(0, 50)).message().find("truncated"), std::string::npos);
  EXPECT_NE(copy(good.substr(0, 2)).message().find("truncated"), std::string::npos);
  EXPECT_NE(copy("\x12\x01x").message().find("unexpected field"), std::string::npos);
  EXPECT_NE(copy(good + "\x0a").message().find("bytes past"), std::string::npos);
  EXPECT_NE(copy("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01").message().find("overlong"),
            std::string::npos);
}

}  // namespace
}  // namespace lakecache::rpc
