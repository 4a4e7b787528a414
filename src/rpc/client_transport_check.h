// ClientTransportCheck: a server's log line for each client that calls it in the other transport,
// "a plain-text client at 10.0.0.7 called this TLS server: it needs --credentials ...", in place of
// gRPC core's "Handshake failed ... wrong version number", which names no client.
//
// It looks at the first bytes of every connection the server accepts (a peek: gRPC still reads
// them), which its listening socket holds back until the client has sent some (TCP_DEFER_ACCEPT):
// a TLS record (0x16 0x03) at a plain-text server, HTTP/2's "PRI * HTTP/2.0" at a TLS one. One
// line per client address every ten minutes at most. It hooks into gRPC through a socket mutator,
// whose struct gRPC's public headers leave opaque: client_transport_check.cc spells it out as gRPC
// 1.51 (and every release since 1.27) defines it; the integration tests pin it. Thread-safe.
#pragma once

#include <grpcpp/server_builder.h>

#include "rpc/transport_probe.h"

namespace lakecache::rpc {

// Makes the server `builder` builds check its clients' first bytes against `server`, what it
// speaks.
void AddClientTransportCheck(grpc::ServerBuilder& builder, Transport server);

// The log line for a connection from `peer` whose first bytes are `first` at a server speaking
// `server`; empty when they match it (or are too few to tell).
std::string ClientTransportMismatch(std::string_view first, Transport server,
                                    const std::string& peer);

}  // namespace lakecache::rpc
