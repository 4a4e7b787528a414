// The request/reply stream of the wire ceiling (wire_ceiling.cc): a sender holding one file in
// memory and clients asking it for ranges over loopback TCP. A request is a WireRequest; the reply
// is the byte count (uint64, host order: both ends are on one host) and then the bytes, at most
// the length asked and never past the end of the file. Nothing is allocated per request on either
// side: the sender writes from its buffer, a client receives into the caller's.
//
// Thread safety: a WireConnection is used by one thread at a time; WirePool and ServeWire may be
// used from many threads at once.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace lakecache::bench {

struct WireRequest {
  uint64_t offset;
  uint64_t length;
};

// Listens on 127.0.0.1:port (0: a free one); the socket, or -1 with a message on stderr.
int ListenLoopback(uint16_t port, uint16_t* bound);

// Accepts connections on `listen_fd` forever, a thread for each, answering its requests from
// data[0, size). REQUIRES: data outlives the process's threads.
void ServeWire(int listen_fd, const char* data, size_t size);

class WireConnection {
 public:
  WireConnection() = default;
  ~WireConnection();
  WireConnection(const WireConnection&) = delete;
  WireConnection& operator=(const WireConnection&) = delete;

  // Connects to HOST:PORT (IPv4) with TCP_NODELAY, as our gRPC channels are; false with a
  // message on stderr when it cannot.
  bool Connect(const std::string& host_port);

  // Asks for [offset, offset + length) and receives the reply into out[0, length); the bytes
  // received (fewer only at the end of the file), or -1 when the stream failed.
  int64_t Fetch(uint64_t offset, uint64_t length, char* out);

 private:
  int fd_ = -1;
};

// `count` connections to one sender; each Fetch borrows one that no other thread is using, waiting
// for one when all are busy.
class WirePool {
 public:
  bool Open(const std::string& host_port, unsigned count);
  int64_t Fetch(uint64_t offset, uint64_t length, char* out);
  // The most connections that were busy at once: how many reads were in flight together.
  size_t PeakBusy();

 private:
  std::vector<std::unique_ptr<WireConnection>> connections_;
  std::mutex mu_;
  std::condition_variable freed_;
  std::vector<WireConnection*> idle_;  // GUARDED_BY(mu_)
  size_t peak_busy_ = 0;               // GUARDED_BY(mu_)
};

}  // namespace lakecache::bench
