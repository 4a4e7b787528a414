// --metrics-listen on the daemons (master, worker, mount): whether the address may be served,
// and the registry the daemon's parts feed.
//
// The rules follow those of the gRPC listeners (server_main.h): loopback serves anyone on the
// host. Beyond loopback, a daemon with --credentials DIR needs DIR/metrics.token (`lakecache
// cert` writes one) and every request must present it; one without needs --insecure (warned).
// With credentials and a metrics.token, the token is asked for on loopback as well.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/metrics.h"
#include "common/result.h"
#include "http/http_endpoint.h"

namespace lakecache::cli {

// The file name, in the credentials folder, of the token that reads metrics and the status page.
inline constexpr char kMetricsTokenFile[] = "metrics.token";

// What the endpoint at `listen` checks; an InvalidArgument (exit 2) that says how to fix a
// listen address beyond loopback that may not be served. `command`: "lakecache worker".
Result<HttpEndpointOptions> MetricsEndpointOptions(const std::string& command,
                                                   const std::string& listen,
                                                   const std::string& credentials, bool insecure,
                                                   bool log_file);

// Whether the endpoint of `options` can listen now: a mount checks before it mounts, so that a
// port in use fails the command at once, not once mounted (its server starts the endpoint later).
Status CheckMetricsListen(const HttpEndpointOptions& options);

// A registry with lakecache_build_info, for a daemon given --metrics-listen; null without one
// (metrics off: nothing recorded).
std::unique_ptr<metrics::Registry> MakeMetricsRegistry(const std::string& listen);

// Starts the endpoint; a port still held by a predecessor (a mount's takeover) is retried for up
// to `bind_wait`. Logs where it serves.
Result<std::unique_ptr<HttpEndpoint>> ServeMetrics(
    const HttpEndpointOptions& options, const metrics::Registry* registry,
    std::map<std::string, HttpPage> pages = {},
    std::chrono::milliseconds bind_wait = std::chrono::milliseconds(0));

}  // namespace lakecache::cli
