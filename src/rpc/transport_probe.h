// What a gRPC server at HOST:PORT speaks, told by a short exchange of its own: TLS or plain text.
// For a client whose call failed without an answer, so that one of the other kind (a plain-text
// client at a cluster with credentials, a client with credentials at a plain-text cluster) is told
// at once what to pass instead of "Socket closed", or a wait that runs out.
//
// The probe speaks what its client speaks, so that a server of the same kind sees nothing amiss
// (and logs nothing: rpc/client_transport_check.h). In plain text it sends HTTP/2's client preface
// and reads the answer: a plain-text gRPC server sends its SETTINGS frame, a TLS server closes
// the connection on bytes that are no TLS record, and is then asked to start a TLS handshake. Over
// TLS it starts a handshake (no certificate checked: only whether the server speaks TLS), which a
// plain-text server answers with its SETTINGS frame. Stateless and thread-safe; each probe is
// bounded by its timeout.
#pragma once

#include <chrono>
#include <string>

namespace lakecache::rpc {

// What a channel or a server speaks.
enum class Transport { kPlainText, kTls };

enum class ProbeResult {
  kPlainText,    // a plain-text HTTP/2 (gRPC) server
  kTls,          // a TLS server
  kUnreachable,  // no connection (refused, no route, not resolved)
  kSilent,       // connected, and nothing came back in time
  kOther,        // something else answered
};

// What the server at `address` speaks, asked first in `first`.
ProbeResult ProbeServer(const std::string& address, Transport first,
                        std::chrono::milliseconds timeout);

// For a client speaking `client` whose calls to `address` failed: when the server there speaks
// the other, what it speaks and what to pass ("serves TLS: pass --credentials DIR ..."), to follow
// the server's name; empty otherwise (it speaks the same, or could not be told).
std::string TransportMismatch(const std::string& address, Transport client,
                              std::chrono::milliseconds timeout);

}  // namespace lakecache::rpc
