#include "fs/write_stage.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "support/test_servers.h"

namespace lakecache::write_stage {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

class WriteStageTest : public ::testing::Test {
 protected:
  std::unique_ptr<WriteStage> Open(StageAllowance* allowance) {
    auto stage = WriteStage::Open(dir_.path(), allowance);
    if (stage == nullptr) ADD_FAILURE() << dir_.path() << ": no O_TMPFILE here";
    return stage;
  }

  testing::TempDir dir_{"lakecache-stage"};
};

TEST_F(WriteStageTest, AppendedBytesReadBack) {
  StageAllowance allowance(64 * kMiB);
  auto stage = Open(&allowance);
  ASSERT_NE(stage, nullptr);
  ASSERT_TRUE(stage->Append(std::span<const char>("hello ", 6)));
  ASSERT_TRUE(stage->Append(std::span<const char>("world", 5)));
  EXPECT_EQ(stage->size(), 11u);
  std::string out(11, '\0');
  auto read = stage->Read(0, out);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, 11u);
  EXPECT_EQ(out, "hello world");
  std::string tail(10, '\0');
  read = stage->Read(6, tail);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(tail.substr(0, *read), "world") << "short at the end";
  EXPECT_EQ(*stage->Read(11, tail), 0u);
}

TEST_F(WriteStageTest, StageThatOutgrowsItsAllowanceIsDroppedAndGivesItBack) {
  StageAllowance allowance(4 * kMiB);  // less than one step of the allowance
  auto stage = Open(&allowance);
  ASSERT_NE(stage, nullptr);
  EXPECT_FALSE(stage->Append(std::span<const char>("x", 1)));
  EXPECT_TRUE(stage->dropped());
  EXPECT_FALSE(stage->Append(std::span<const char>("x", 1)));
  char c;
  EXPECT_FALSE(stage->Read(0, std::span<char>(&c, 1)).ok());
  EXPECT_TRUE(allowance.Take(4 * kMiB)) << "nothing kept by the dropped stage";
}

TEST_F(WriteStageTest, DestroyedStageGivesItsAllowanceBack) {
  StageAllowance allowance(16 * kMiB);
  auto stage = Open(&allowance);
  ASSERT_NE(stage, nullptr);
  ASSERT_TRUE(stage->Append(std::span<const char>("x", 1)));
  EXPECT_FALSE(allowance.Take(16 * kMiB)) << "the stage holds some";
  stage.reset();
  EXPECT_TRUE(allowance.Take(16 * kMiB));
}

}  // namespace
}  // namespace lakecache::write_stage
