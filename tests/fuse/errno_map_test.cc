// StatusToErrno, the one map from a Status to the errno the kernel gets: every StatusCode as
// docs/semantics.md ("Errors") lists it, and a refusal's own errno. A code added to status.h
// without a row in kErrnoOf fails EveryStatusCodeHasARow.
#include "common/errno_map.h"

#include <array>
#include <cerrno>
#include <cstddef>
#include <string_view>
#include <utility>

#include <gtest/gtest.h>

namespace lakecache {
namespace {

// kRefused's row: the errno the Status carries.
constexpr int kItsOwnErrno = -1;

struct Row {
  StatusCode code;
  int err;
};

constexpr Row kErrnoOf[] = {
    {StatusCode::kOk, 0},
    {StatusCode::kInvalidArgument, EINVAL},
    {StatusCode::kNotFound, ENOENT},
    {StatusCode::kAccessDenied, EACCES},  // 403
    {StatusCode::kUnavailable, EIO},
    {StatusCode::kDeadlineExceeded, ETIMEDOUT},
    {StatusCode::kIoError, EIO},
    {StatusCode::kNoSpace, ENOSPC},
    {StatusCode::kCorruption, EIO},
    {StatusCode::kPreconditionFailed, EIO},  // the object changed under an open file
    {StatusCode::kUnimplemented, ENOSYS},
    {StatusCode::kInternal, EIO},
    // Not in the doc's list: a cluster call without valid credentials, refused as a 403 is.
    {StatusCode::kUnauthenticated, EACCES},
    {StatusCode::kRefused, kItsOwnErrno},
};

// Whether `Code` is an enumerator of StatusCode: compilers spell an enumerator by its name in
// __PRETTY_FUNCTION__ and any other value as a cast, "(lakecache::StatusCode)14" (magic_enum's
// technique, for GCC and clang). It finds codes StatusCodeName does not name yet.
template <StatusCode Code>
constexpr bool IsEnumerator() {
  std::string_view function = __PRETTY_FUNCTION__;
  size_t at = function.rfind("Code = ");
  return at != std::string_view::npos && function[at + 7] != '(';
}

constexpr size_t kCodesSearched = 64;

template <size_t... I>
constexpr std::array<bool, sizeof...(I)> Enumerators(std::index_sequence<I...>) {
  return {IsEnumerator<static_cast<StatusCode>(I)>()...};
}
constexpr std::array<bool, kCodesSearched> kIsEnumerator =
    Enumerators(std::make_index_sequence<kCodesSearched>());
static_assert(kIsEnumerator[0] && kIsEnumerator[static_cast<size_t>(StatusCode::kRefused)]);

const Row* RowOf(StatusCode code) {
  for (const Row& row : kErrnoOf) {
    if (row.code == code) return &row;
  }
  return nullptr;
}

TEST(ErrnoMapTest, EveryStatusCodeHasARow) {
  ASSERT_FALSE(kIsEnumerator.back())
      << "StatusCode grew past " << kCodesSearched << " values: raise kCodesSearched";
  size_t codes = 0;
  for (size_t value = 0; value < kCodesSearched; ++value) {
    if (!kIsEnumerator[value]) continue;
    ++codes;
    auto code = static_cast<StatusCode>(value);
    EXPECT_NE(RowOf(code), nullptr)
        << "StatusCode " << value << " (" << StatusCodeName(code)
        << ") has no errno decided: add it to src/common/errno_map.cc, docs/semantics.md "
           "(\"Errors\") and kErrnoOf";
    EXPECT_NE(StatusCodeName(code), "Unknown") << "StatusCode " << value;
  }
  EXPECT_EQ(codes, std::size(kErrnoOf));
}

TEST(ErrnoMapTest, EachCodeMapsToTheErrnoTheDocNames) {
  for (const Row& row : kErrnoOf) {
    if (row.err == kItsOwnErrno) continue;
    EXPECT_EQ(StatusToErrno(Status(row.code, "what failed")), row.err) << StatusCodeName(row.code);
  }
  EXPECT_EQ(StatusToErrno(Status::Ok()), 0);
}

TEST(ErrnoMapTest, ARefusalAnswersTheErrnoTheContractNamesForIt) {
  // The "Errors" list, and EBUSY, which "Writes" names for a second open for writing.
  for (int err :
       {EPERM, EINVAL, EBADF, EROFS, EXDEV, EEXIST, ENOTEMPTY, EISDIR, ENOTDIR, EFBIG, EBUSY}) {
    EXPECT_EQ(StatusToErrno(Status::Refused(err, "refused")), err) << err;
  }
}

}  // namespace
}  // namespace lakecache
