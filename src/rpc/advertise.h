// The address a server announces (--advertise HOST:PORT, by default POD_IP and the bound port) in
// place of the one it bound: what workers register with the master, and what the master writes
// to its address file and shows in its cluster view. Pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace lakecache::rpc {

// `address` is HOST:PORT that a client can dial: HOST a DNS name, an IPv4 address or an IPv6
// address in brackets, not a wildcard (0.0.0.0, [::]); PORT 1 to 65535, or 0 as well when
// `bound_port_ok` (0: the port the server binds). The error names `flag`.
Status CheckAdvertiseAddress(std::string_view flag, const std::string& address, bool bound_port_ok);

// HOST of HOST:PORT, brackets kept ("[::1]" of "[::1]:7000"); PORT likewise.
std::string HostOf(const std::string& host_port);
std::string PortOf(const std::string& host_port);

// `advertise` with port 0 replaced by `bound`'s port; `fallback` when `advertise` is empty.
std::string AdvertisedAddress(const std::string& advertise, const std::string& bound,
                              const std::string& fallback);

}  // namespace lakecache::rpc
