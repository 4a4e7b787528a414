#include "worker/holder_book.h"

#include <gtest/gtest.h>

#include <map>

namespace lakecache {
namespace holder_book_test {

BlockKey Key(uint64_t index) { return BlockKey{ContentId{1, 2}, index}; }

// Hosts that ask for a block at once are sent to one another: each new holder has sent nothing
// yet, so each asker reads from the one before it (which passes the block on as it lands), and
// the owner's link carries it once.
TEST(HolderBookTest, AskersThatArriveTogetherFormAChain) {
  HolderBook book;
  EXPECT_EQ(book.Route(Key(0), "a"), std::nullopt) << "the first is served by the owner";
  EXPECT_EQ(book.Route(Key(0), "b"), "a");
  EXPECT_EQ(book.Route(Key(0), "c"), "b");
  EXPECT_EQ(book.Route(Key(0), "d"), "c");
  EXPECT_EQ(book.Holders(Key(0)), (std::vector<std::string>{"a", "b", "c", "d"}));
}

// Askers go to whichever of the owner and the block's holders was sent the fewest lately, so
// the askers each worker serves even out over the blocks, whichever host asks first.
TEST(HolderBookTest, AskersGoToTheOneSentTheFewestLately) {
  HolderBook book;
  std::map<std::string, int> sent;
  // Thirty blocks, each asked for by a, b and c in an order that rotates: a first, then b...
  const std::vector<std::string> hosts = {"a", "b", "c"};
  for (uint64_t block = 0; block < 30; ++block) {
    for (size_t i = 0; i < hosts.size(); ++i) {
      ++sent[book.Route(Key(block), hosts[(block + i) % hosts.size()]).value_or("owner")];
    }
  }
  // The owner alone has a block at first: it serves each block's first asker; the 60 other asks
  // are shared evenly.
  EXPECT_EQ(sent, (std::map<std::string, int>{{"owner", 30}, {"a", 20}, {"b", 20}, {"c", 20}}));
}

TEST(HolderBookTest, AHolderThatAsksAgainIsServedByTheOwnerNotByOneAfterIt) {
  HolderBook book;
  EXPECT_EQ(book.Route(Key(0), "a"), std::nullopt);
  EXPECT_EQ(book.Route(Key(0), "b"), "a");
  // a evicted its copy while b fetches from it: sent to b, it would wait on itself.
  EXPECT_EQ(book.Route(Key(0), "a"), std::nullopt);
  EXPECT_EQ(book.Route(Key(0), "c"), "b") << "the one sent the fewest";
}

TEST(HolderBookTest, ADroppedHolderIsNotRoutedTo) {
  HolderBook book;
  book.Route(Key(0), "a");
  book.Drop(Key(0), "a");
  EXPECT_EQ(book.Route(Key(0), "b"), std::nullopt)
      << "the holder that did not have it is forgotten: the owner serves";
  book.Route(Key(1), "b");
  book.DropWorker("b");
  EXPECT_EQ(book.Holders(Key(0)), std::vector<std::string>{});
  EXPECT_TRUE(book.Holders(Key(1)).empty());
  EXPECT_EQ(book.Route(Key(1), "c"), std::nullopt);
}

TEST(HolderBookTest, ItsSizeIsBounded) {
  HolderBookOptions options;
  options.max_blocks = 3;
  options.max_holders = 2;
  HolderBook book(options);
  for (uint64_t i = 0; i < 5; ++i) book.Route(Key(i), "a");
  EXPECT_EQ(book.blocks(), 3u);
  EXPECT_TRUE(book.Holders(Key(0)).empty()) << "the least recently routed went first";
  EXPECT_EQ(book.Holders(Key(4)), (std::vector<std::string>{"a"}));
  book.Route(Key(4), "b");
  book.Route(Key(4), "c");
  EXPECT_EQ(book.Holders(Key(4)), (std::vector<std::string>{"b", "c"}));
}

TEST(HolderBookTest, KeepsTheDigestTheOwnerGaveABlock) {
  HolderBook book;
  EXPECT_EQ(book.Digest(Key(0)), std::nullopt);
  book.SetDigest(Key(0), 0xfeed);
  EXPECT_EQ(book.Digest(Key(0)), 0xfeedu);
  book.Route(Key(0), "a");
  EXPECT_EQ(book.Digest(Key(0)), 0xfeedu) << "routing keeps it";
}

}  // namespace holder_book_test
}  // namespace lakecache
