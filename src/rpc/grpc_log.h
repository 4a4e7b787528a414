// gRPC core's own log lines (handshakes that failed, ports it could not bind) routed into the
// process's log (spdlog), "grpc: MESSAGE (FILE:LINE)", instead of gRPC's raw format on stderr.
//
// Lines that our code explains better where it knows more are kept at debug level (seen with
// --log-level debug): a TLS handshake with the other transport ("wrong version number"; a server's
// ClientTransportCheck names the client, a client's MasterSet says what to pass), and a port that
// could not be bound (StartServer says which and why). Call once at start, after InitLogging.
#pragma once

#include <string_view>

namespace lakecache::rpc {

void RouteGrpcLogs();

// Whether a gRPC core line from `file` saying `message` is explained by our own messages.
bool ExplainedElsewhere(std::string_view file, std::string_view message);

}  // namespace lakecache::rpc
