#include "common/scoped_fd.h"

#include <fcntl.h>

#include <gtest/gtest.h>

namespace lakecache {
namespace {

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(ScopedFdTest, ClosesWhatItHoldsWhenItGoes) {
  int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  { ScopedFd owned(fd); }
  EXPECT_FALSE(IsOpen(fd));
}

TEST(ScopedFdTest, AMoveHandsTheDescriptorOverAndReleaseGivesItUp) {
  ScopedFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  int fd = a.get();
  ScopedFd b = std::move(a);
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(b.get(), fd);
  int raw = b.release();
  EXPECT_FALSE(b.valid());
  EXPECT_TRUE(IsOpen(raw));
  EXPECT_EQ(ScopedFd(raw).Close(), 0);
  EXPECT_FALSE(IsOpen(raw));
}

TEST(ScopedFdTest, ResetClosesTheOldOne) {
  ScopedFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  int old = a.get();
  int next = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // opened first: never `old` again
  a.reset(next);
  EXPECT_FALSE(IsOpen(old));
  EXPECT_EQ(a.get(), next);
  EXPECT_EQ(ScopedFd().Close(), 0);
}

}  // namespace
}  // namespace lakecache
