// The mount holder's wire (mount_holder.h says what each message means): a SOCK_SEQPACKET Unix
// socket, each message a type line, then KEY=VALUE lines whose values are escaped (\\ and \n:
// common/text_codec.h), with descriptors alongside (SCM_RIGHTS). The holder and its servers may be
// different binaries (a takeover starts a new one), so the format only ever grows.
#pragma once

#include <chrono>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/scoped_fd.h"
#include "common/status.h"

namespace lakecache {

inline constexpr int kHolderProtocol = 1;
// The most descriptors one message carries.
inline constexpr size_t kHolderMaxFds = 64;

struct HolderMessage {
  std::string type;
  std::map<std::string, std::string> fields;
  std::string Get(const std::string& key) const;
};
std::string EncodeHolderMessage(const HolderMessage& message);
Result<HolderMessage> DecodeHolderMessage(std::string_view bytes);

// Sends `message` with `fds` (still the caller's) on the socket `fd`.
Status SendHolderMessage(int fd, const HolderMessage& message, std::span<const int> fds = {});
// One message and its descriptors (null `fds`: closed); kUnavailable when the peer has gone,
// kDeadlineExceeded when none came in `wait` (negative: wait for ever).
Result<HolderMessage> ReceiveHolderMessage(int fd, std::vector<ScopedFd>* fds,
                                           std::chrono::milliseconds wait);
// A socket connected to the holder at `path`; kUnavailable when none answers there.
Result<ScopedFd> ConnectToHolder(const std::string& path);
// The holder's listening socket at `path` (non-blocking; only its uid may connect, by the mode),
// its folder made; kPreconditionFailed when a holder already answers there.
Result<ScopedFd> ListenAsHolder(const std::string& path);

}  // namespace lakecache
