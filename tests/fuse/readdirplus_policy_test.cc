// ReaddirplusPolicy: which entries of a readdirplus reply go with their attributes, as listings
// and lookups of files come. The walkers are told by their counts: a find sends bare entries
// and no lookup follows; a stat walk looks up every bare entry it was sent.
#include "fuse/readdirplus_policy.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace lakecache {
namespace {

using Policy = ReaddirplusPolicy;
constexpr uint64_t kFolder = 1000;  // entries per folder of these walks

// Lists a folder of kFolder entries from its start as the policy says; the bare entries.
uint64_t List(Policy& p) {
  const bool whole = p.Whole(0);
  uint64_t bare = 0;
  for (uint64_t i = 0; i < kFolder; ++i) bare += p.WithAttributes(i, whole) ? 0 : 1;
  p.SentBare(bare);
  return bare;
}

// A stat walker: lists `folders` folders and looks up each bare entry after its listing.
uint64_t StatWalk(Policy& p, int folders) {
  uint64_t lookups = 0;
  for (int f = 0; f < folders; ++f) {
    uint64_t bare = List(p);
    for (uint64_t i = 0; i < bare; ++i) p.LookedUpFile();
    lookups += bare;
  }
  return lookups;
}

TEST(ReaddirplusPolicyTest, ModesAreParsedAndAnythingElseIsRefusedWithTheModesNamed) {
  EXPECT_EQ(*ParseReaddirplusMode("adaptive"), ReaddirplusMode::kAdaptive);
  EXPECT_EQ(*ParseReaddirplusMode("always"), ReaddirplusMode::kAlways);
  EXPECT_EQ(*ParseReaddirplusMode("never"), ReaddirplusMode::kNever);
  Result<ReaddirplusMode> bad = ParseReaddirplusMode("auto");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "readdirplus is adaptive, always or never, not 'auto'");
}

TEST(ReaddirplusPolicyTest, AlwaysGivesEveryEntryWhateverCame) {
  Policy p(ReaddirplusMode::kAlways);
  for (int f = 0; f < 10; ++f) EXPECT_EQ(List(p), 0u);
}

TEST(ReaddirplusPolicyTest, AFindGetsTheFirstEntriesOfEachFolderAndTheRestBare) {
  Policy p;
  for (int f = 0; f < 50; ++f) {
    EXPECT_EQ(List(p), kFolder - Policy::kFirstEntries) << "folder " << f;
  }
  // A small folder comes whole.
  for (uint64_t i = 0; i < Policy::kFirstEntries; ++i) EXPECT_TRUE(p.WithAttributes(i, false));
}

TEST(ReaddirplusPolicyTest, AStatWalkTurnsItToWholeFoldersAndAFindTurnsItBack) {
  Policy p;
  // Two folders' bare entries looked up close the first window: whole folders from then on,
  // bare only for the probes.
  StatWalk(p, 2);
  EXPECT_TRUE(p.Whole(0));
  uint64_t probes = 0;
  for (uint64_t i = Policy::kFirstEntries; i < kFolder; ++i) probes += i % Policy::kSample == 0;
  for (int f = 0; f < 100; ++f) {
    EXPECT_EQ(StatWalk(p, 1), probes) << "folder " << f << " of a stat walk in whole mode";
  }
  // A find: the probes are not looked up, and within two windows the folders come bare again.
  const int folders_per_window = static_cast<int>(Policy::kWindow / probes) + 1;
  for (int f = 0; f < 2 * folders_per_window; ++f) List(p);
  EXPECT_FALSE(p.Whole(0));
  EXPECT_EQ(List(p), kFolder - Policy::kFirstEntries);
}

TEST(ReaddirplusPolicyTest, LookupsOfAFewListedFilesLeaveFoldersBare) {
  Policy p;
  for (int f = 0; f < 20; ++f) {
    uint64_t bare = List(p);
    for (uint64_t i = 0; i < bare / (2 * Policy::kLookupRatio); ++i) p.LookedUpFile();
  }
  EXPECT_FALSE(p.Whole(0));
}

TEST(ReaddirplusPolicyTest, AReplyFromPastAFoldersStartIsWhole) {
  Policy p;  // the kernel asks readdirplus from there only after a lookup in the folder
  EXPECT_FALSE(p.Whole(0));
  EXPECT_TRUE(p.Whole(500));
  EXPECT_TRUE(p.WithAttributes(501, p.Whole(500)));
  EXPECT_FALSE(p.WithAttributes(512, p.Whole(500)));  // a probe
}

}  // namespace
}  // namespace lakecache
