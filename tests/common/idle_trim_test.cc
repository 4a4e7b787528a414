#include "common/idle_trim.h"

#include <gtest/gtest.h>

#include <memory>

namespace lakecache {
namespace {

TEST(IdleTrimTest, RunsEveryRegisteredTrimUntilItsOwnerGoes) {
  int a = 0, b = 0;
  IdleTrim first([&] { ++a; });
  auto second = std::make_unique<IdleTrim>([&] { ++b; });
  RunIdleTrims();
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 1);
  second.reset();
  RunIdleTrims();
  EXPECT_EQ(a, 2);
  EXPECT_EQ(b, 1);
}

}  // namespace
}  // namespace lakecache
