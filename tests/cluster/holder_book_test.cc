#include "worker/holder_book.h"

#include <gtest/gtest.h>

namespace lakecache {
namespace holder_book_test {

BlockKey Key(uint64_t index) { return BlockKey{ContentId{1, 2}, index}; }

using std::chrono::milliseconds;

// Hosts that ask for a block at once form a chain: each reads it from the one before, so the
// owner's link carries it once.
TEST(HolderBookTest, AskersThatArriveTogetherFormAChain) {
  HolderBook book;
  const std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(book.Route(Key(0), "a", t0), std::nullopt) << "the first is served by the owner";
  EXPECT_EQ(book.Route(Key(0), "b", t0 + milliseconds(5)), "a");
  EXPECT_EQ(book.Route(Key(0), "c", t0 + milliseconds(9)), "b");
  EXPECT_EQ(book.Route(Key(0), "d", t0 + milliseconds(12)), "c");
  EXPECT_EQ(book.Holders(Key(0)), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(book.Route(Key(1), "d", t0), std::nullopt) << "each block has its own chain";
}

// Once the last fetch is over, askers go round the owner and the holders.
TEST(HolderBookTest, AChainGrowsToItsLimitAndTheNextAskerStartsAnotherAtTheOwner) {
  HolderBookOptions options;
  options.max_chain = 3;
  HolderBook book(options);
  const std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  std::vector<std::string> from;
  for (const char* asker : {"a", "b", "c", "d", "e", "f", "g"}) {
    from.push_back(book.Route(Key(0), asker, t0).value_or("owner"));
  }
  EXPECT_EQ(from, (std::vector<std::string>{"owner", "a", "b", "owner", "d", "e", "owner"}));
}

TEST(HolderBookTest, LaterAskersGoRoundTheOwnerAndTheHolders) {
  HolderBookOptions options;
  options.in_flight = milliseconds(100);
  HolderBook book(options);
  const std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  book.Route(Key(0), "a", t0);
  book.Route(Key(0), "b", t0 + milliseconds(1));
  std::vector<std::string> from;
  std::chrono::steady_clock::time_point t = t0 + milliseconds(500);
  for (const char* asker : {"x", "y", "z", "w", "v", "u"}) {
    std::optional<std::string> got = book.Route(Key(0), asker, t);
    from.push_back(got.value_or("owner"));
    t += milliseconds(200);  // each one's fetch is over before the next asks
  }
  // The owner and the holders other than the asker take turns (the owner's came with the first
  // asker, "a"); each asker joins the holders, so the owner's turn comes ever more rarely.
  EXPECT_EQ(from, (std::vector<std::string>{"a", "b", "x", "y", "z", "w"}));
}

TEST(HolderBookTest, AHolderThatAsksAgainIsServedByTheOwnerNotByOneAfterIt) {
  HolderBook book;
  const std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(book.Route(Key(0), "a", t0), std::nullopt);
  EXPECT_EQ(book.Route(Key(0), "b", t0 + milliseconds(1)), "a");
  // a evicted its copy while b fetches from it: sent to b, it would wait on itself.
  EXPECT_EQ(book.Route(Key(0), "a", t0 + milliseconds(2)), std::nullopt);
  EXPECT_EQ(book.Route(Key(0), "c", t0 + milliseconds(3)), "a") << "the chain goes on from it";
}

TEST(HolderBookTest, ADroppedHolderIsNotRoutedTo) {
  HolderBook book;
  const std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  book.Route(Key(0), "a", t0);
  book.Drop(Key(0), "a");
  EXPECT_EQ(book.Route(Key(0), "b", t0 + milliseconds(1)), std::nullopt)
      << "the tail that did not have it is forgotten: the owner serves";
  book.Route(Key(1), "b", t0);
  book.DropWorker("b");
  EXPECT_TRUE(book.Holders(Key(0)).empty());
  EXPECT_TRUE(book.Holders(Key(1)).empty());
  EXPECT_EQ(book.Route(Key(1), "c", t0 + milliseconds(1)), std::nullopt);
}

TEST(HolderBookTest, ItsSizeIsBounded) {
  HolderBookOptions options;
  options.max_blocks = 3;
  options.max_holders = 2;
  HolderBook book(options);
  const std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < 5; ++i) book.Route(Key(i), "a", t0);
  EXPECT_EQ(book.blocks(), 3u);
  EXPECT_TRUE(book.Holders(Key(0)).empty()) << "the least recently routed went first";
  EXPECT_EQ(book.Holders(Key(4)), (std::vector<std::string>{"a"}));
  book.Route(Key(4), "b", t0);
  book.Route(Key(4), "c", t0);
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
