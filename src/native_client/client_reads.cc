#include "native_client/client.h"

#include <sched.h>

#include <chrono>

using lcn::Cqe;
using lcn::Fail;
using lcn::Piece;
using lcn::Sqe;
namespace wire = lakecache::native;

namespace lcn {

// What a read's -errno means for the reader.
std::string ReadError(int64_t result) {
  int err = static_cast<int>(-result);
  if (err == ENOBUFS) {
    return "read: the views this process holds fill the mount's budget for it; release some "
           "(lc_release)";
  }
  if (err == ESTALE) return "read: the object changed since the file was opened; open it again";
  if (err == EPROTO) return "read: the mount's server answered outside its memory";
  return std::string("read: ") + std::strerror(err);
}

// The pieces of one read: split where blocks end, so they run in parallel.

}  // namespace lcn

namespace {

// One attempt of lc_client::Run within one session: what is in flight, and where submission goes
// on.
struct Attempt {
  lc_client& c;
  std::vector<lc_file*>& files;
  std::vector<Piece>& pieces;
  std::vector<uint8_t>& in_ring;  // per piece: submitted and not completed
  size_t cursor = 0;
  size_t in_flight = 0;
  std::vector<size_t> copied;  // pieces copied in this session (checked once it is over)

  // Submits what fits; pieces of files not open in this session end with ESTALE.
  void SubmitMore() {
    bool any = false;
    for (; cursor < pieces.size(); ++cursor) {
      Piece& p = pieces[cursor];
      if (p.done || in_ring[cursor]) continue;
      lc_file* f = files[p.read];
      if (f == nullptr || f->session != c.session) {
        p.done = true;
        p.result = -ESTALE;
        continue;
      }
      if (in_flight + 1 >= c.ring.cq_entries / 2) break;
      Sqe e;
      e.op = wire::kRead;
      e.user_data = cursor + 1;
      e.file_id = f->id;
      e.offset = p.offset;
      e.length = p.length;
      if (!wire::SubmitRequest(c.ring, &c.rs, e)) break;
      in_ring[cursor] = 1;
      ++in_flight;
      any = true;
    }
    if (any) c.Kick();
  }

  // The next completion, sleeping on the eventfd when there is none; false when there is none yet
  // (call again) or, with *ended, when the session ended.
  bool Next(Cqe* out, bool* ended) {
    // A memory hit comes back within microseconds: look for a while (kPatience) before sleeping.
    constexpr auto kPatience = std::chrono::microseconds(50);
    auto until = std::chrono::steady_clock::now() + kPatience;
    do {
      if (wire::TakeCompletion(c.ring, &c.rs, out)) return true;
      ::sched_yield();  // the server (or anyone) may need this core
    } while (std::chrono::steady_clock::now() < until);
    c.ring.header()->reader_waiting.store(1, std::memory_order_seq_cst);
    if (wire::TakeCompletion(c.ring, &c.rs, out)) {
      c.ring.header()->reader_waiting.store(0, std::memory_order_relaxed);
      return true;
    }
    pollfd p[2] = {{c.complete, POLLIN, 0}, {c.sock, POLLIN, 0}};
    int ready = ::poll(p, 2, 1000);
    c.ring.header()->reader_waiting.store(0, std::memory_order_relaxed);
    if (ready > 0 && p[0].revents != 0) {
      uint64_t count;
      (void)!::read(c.complete, &count, sizeof(count));
    }
    if (ready > 0 && p[1].revents != 0 && c.PumpSocket(false, 0, nullptr) < 0) *ended = true;
    if (wire::RequestsWaiting(c.ring, c.rs)) c.Kick();
    return false;
  }

  // The mapping a completion names (arenas arrive on the socket before their first completion).
  lcn::Mapping MappingOf(uint32_t arena) {
    if (arena == wire::kStagingArena) return c.staging;
    auto it = c.arenas.find(arena);
    if (it == c.arenas.end() && c.PumpSocket(false, 0, nullptr) >= 0) it = c.arenas.find(arena);
    return it != c.arenas.end() ? it->second : lcn::Mapping{};
  }

  void Complete(const Cqe& cqe) {
    if (cqe.user_data == 0 || cqe.user_data > pieces.size() || !in_ring[cqe.user_data - 1]) {
      return;  // not a read of this call
    }
    size_t index = cqe.user_data - 1;
    Piece& p = pieces[index];
    --in_flight;
    in_ring[index] = 0;
    if (cqe.result == -ENOBUFS && in_flight > 0) {
      // The session's staging area or anchors are full: run it again once others are done.
      cursor = std::min(cursor, index);
      return;
    }
    p.done = true;
    p.result = cqe.result;
    if (cqe.result < 0) return;
    lcn::Mapping m = MappingOf(cqe.arena_id);
    uint64_t n = static_cast<uint64_t>(cqe.result);
    if (m.data == nullptr || cqe.arena_offset > m.bytes || n > m.bytes - cqe.arena_offset ||
        n > p.length) {
      c.Release(cqe.anchor);
      p.result = -EPROTO;
    } else if (p.dst != nullptr) {
      lcn::Populate(m, cqe.arena_offset, n);
      std::memcpy(p.dst, m.data + cqe.arena_offset, n);
      c.Release(cqe.anchor);
      copied.push_back(index);
    } else {
      lcn::Populate(m, cqe.arena_offset, n);
      p.view = m.data + cqe.arena_offset;
      p.anchor = cqe.anchor;
      p.session = c.session;
      ++c.views;
    }
  }

  // Whether the session still lives. A copy made from a co-located worker's memory is right only
  // if the server's anchor held throughout it: the server hangs up when it dies, before its
  // worker can reuse the memory. Pieces copied in a session that ended are run again.
  bool Outlived() {
    pollfd p{c.sock, POLLRDHUP, 0};
    if (::poll(&p, 1, 0) == 0 || (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0) return true;
    for (size_t index : copied) pieces[index].done = false;
    return false;
  }

  // True when every piece is done; false when the session ended first.
  bool RunToEnd() {
    SubmitMore();
    bool ended = false;
    while (!ended) {
      if (in_flight == 0) {
        if (cursor >= pieces.size()) return Outlived();
        SubmitMore();
        if (in_flight == 0) {  // the ring is full of releases the server has not taken yet
          c.Kick();
          if (c.Ended()) return false;
          std::this_thread::yield();
        }
        continue;
      }
      Cqe cqe;
      if (!Next(&cqe, &ended)) continue;
      Complete(cqe);
      SubmitMore();
    }
    for (size_t index : copied) pieces[index].done = false;  // made while the session died
    return false;
  }
};

}  // namespace

int lc_client::Run(std::vector<lc_file*>& pfiles, std::vector<Piece>& pieces) {
  std::vector<uint8_t> in_ring(pieces.size(), 0);
  for (int restarts = 0;; ++restarts) {
    if (EnsureAttached() != 0) return -1;
    Attempt attempt{*this, pfiles, pieces, in_ring, 0, 0, {}};
    if (attempt.RunToEnd()) return 0;
    // The session ended under us: attach again (the files open again) and run what is not done.
    // Views of the old session stay mapped.
    if (restarts >= 3) return Fail(ECONNRESET, "the mount's server keeps going away");
    Drop(true);
    std::fill(in_ring.begin(), in_ring.end(), 0);
  }
}

void lc_client::Split(const lc_file* f, size_t read, uint64_t offset, uint64_t length, char* dst,
                      std::vector<Piece>* pieces) const {
  if (offset >= f->size) return;
  length = std::min(length, f->size - offset);
  uint64_t step = f->block_size > 0 ? f->block_size : max_read;
  while (length > 0) {
    uint64_t block_end = (offset / step + 1) * step;
    uint64_t n = std::min({length, block_end - offset, uint64_t{max_read}});
    Piece p;
    p.read = read;
    p.offset = offset;
    p.length = n;
    p.dst = dst;
    pieces->push_back(p);
    offset += n;
    length -= n;
    if (dst != nullptr) dst += n;
  }
}
