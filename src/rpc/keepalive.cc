#include "rpc/keepalive.h"

#include <grpcpp/server_builder.h>

#include <cstdio>
#include <cstdlib>

#include "common/units.h"

namespace lakecache::rpc {

std::chrono::milliseconds KeepaliveInterval() {
  static const std::chrono::milliseconds interval = [] {
    const char* text = std::getenv(kKeepaliveEnv);
    if (text == nullptr || *text == '\0') return kDefaultKeepalive;
    Result<Duration> parsed = ParseDuration(text);
    auto ms = parsed.ok() ? std::chrono::duration_cast<std::chrono::milliseconds>(*parsed)
                          : std::chrono::milliseconds(0);
    if (ms < std::chrono::milliseconds(100)) {
      std::fprintf(stderr,
                   "lakecache: warning: %s=%s is not a duration of 100ms or more; using %llds\n",
                   kKeepaliveEnv, text, static_cast<long long>(kDefaultKeepalive.count() / 1000));
      return kDefaultKeepalive;
    }
    return ms;
  }();
  return interval;
}

void AcceptKeepalivePings(grpc::ServerBuilder& builder) {
  // gRPC's defaults take one ping per 5 minutes without calls and answer a third early one with
  // GOAWAY ("Too many pings"), which turned healthy idle peers unreachable. Half the interval
  // leaves room for timer jitter.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             static_cast<int>(KeepaliveInterval().count() / 2));
}

}  // namespace lakecache::rpc
