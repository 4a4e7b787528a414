// Keepalive pings on our gRPC connections: how often our channels ping an idle connection, and
// what every server of ours accepts. 10 s, or LAKECACHE_KEEPALIVE_INTERVAL (a duration, e.g. "2s")
// in the process's environment, read once. Clients and servers of one cluster must agree: a
// server answers a client that pings more often than every half interval with GOAWAY ("Too many
// pings"). Thread-safe.
#pragma once

#include <chrono>

namespace grpc {
class ServerBuilder;
}  // namespace grpc

namespace lakecache::rpc {

inline constexpr char kKeepaliveEnv[] = "LAKECACHE_KEEPALIVE_INTERVAL";
inline constexpr std::chrono::milliseconds kDefaultKeepalive{10000};

std::chrono::milliseconds KeepaliveInterval();

// Makes a server accept the pings of our channels, between calls too.
void AcceptKeepalivePings(grpc::ServerBuilder& builder);

}  // namespace lakecache::rpc
