// The bulk data path's exchange on a BulkConnection (frames: block_frame.h), written once for the
// worker's BulkServer, the client's BulkClient and bench/wire_bench: a client sends one request
// and reads one reply into the caller's buffer; a server reads requests one after another and
// answers each with a reply header and the bytes, sent from wherever they lie (no copy).
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "common/result.h"
#include "rpc/block_frame.h"
#include "rpc/bulk_connection.h"

namespace lakecache::rpc {

// Sends `request` and reads the reply; its data lands in dst (at most dst.size() bytes, else the
// reply is refused). The Result fails on a transport or framing error (kUnavailable or
// kDeadlineExceeded: drop the connection); otherwise it holds the worker's answer, whose status
// may be an error (the connection stays usable then). `progress`, if given, is told how much of
// the data has landed as it does.
Result<BlockReplyHeader> CallRead(BulkConnection& connection, const BlockReadRequest& request,
                                  std::span<char> dst, BulkConnection::Deadline deadline,
                                  ReadProgress* progress = nullptr);

// A ping: a read request with an empty BlockId, which a worker answers at once (OK, no data)
// without looking at its cache, however long its other reads wait on the object store. OK when a
// reply came, whatever it said (a worker that predates pings refuses the empty id: it answered);
// a transport error (kUnavailable / kDeadlineExceeded) otherwise.
Status CallPing(BulkConnection& connection, BulkConnection::Deadline deadline);
// True for the request CallPing sends.
bool IsPing(const BlockReadRequest& request);

// Presents `token` (the client role's) on a new connection: OK, the worker's refusal, or a
// transport error (kUnavailable / kDeadlineExceeded).
Status CallHello(BulkConnection& connection, std::string_view token,
                 BulkConnection::Deadline deadline);

// The token of the hello that must start a connection to a server with credentials; a frame of
// another kind is kInvalidArgument.
Result<std::string> NextHello(BulkConnection& connection, BulkConnection::Deadline deadline);

// The next request on a server's connection. *closed is set when the client hung up cleanly
// between requests; a framing error is kInvalidArgument (close the connection).
Result<BlockReadRequest> NextRequest(BulkConnection& connection, BulkConnection::Deadline deadline,
                                     bool* closed);

// Answers a request: `status`, and when it is OK the `data` bytes. With `fd` (a file that holds
// the same bytes at `fd_offset`) a plain connection sends them with sendfile: then the caller
// keeps the bytes unchanged until the peer has read them (its next request, or its hang-up).
// `digest` and `redirect`: as EncodeReplyHeader's (a redirect sends no data).
Status SendReply(BulkConnection& connection, const Status& status, std::span<const char> data,
                 BulkConnection::Deadline deadline, int fd = -1, uint64_t fd_offset = 0,
                 std::optional<uint64_t> digest = std::nullopt, std::string_view redirect = {});

}  // namespace lakecache::rpc
