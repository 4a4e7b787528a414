#include "rpc/advertise.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace lakecache::rpc {
namespace {

// Why `host` is no host a client can dial, or "" when it is one.
std::string HostProblem(const std::string& host) {
  if (host.empty()) return "the host is missing";
  if (host.front() == '[') {
    in6_addr v6;
    std::string inner =
        host.size() >= 2 && host.back() == ']' ? host.substr(1, host.size() - 2) : "";
    if (::inet_pton(AF_INET6, inner.c_str(), &v6) != 1) return "'" + host + "' is no IPv6 address";
    if (IN6_IS_ADDR_UNSPECIFIED(&v6)) return "[::] is a wildcard, not an address to dial";
    return "";
  }
  if (host.find(':') != std::string::npos) {
    return "an IPv6 address goes in brackets, e.g. [fd00::1]:7000";
  }
  if (host == "0.0.0.0") return "0.0.0.0 is a wildcard, not an address to dial";
  bool name = host.size() <= 253 && std::all_of(host.begin(), host.end(), [](unsigned char c) {
                return std::isalnum(c) || c == '-' || c == '.' || c == '_';
              });
  return name ? "" : "'" + host + "' is no host name or IPv4 address";
}

}  // namespace

std::string HostOf(const std::string& host_port) {
  size_t colon = host_port.rfind(':');
  return colon == std::string::npos ? host_port : host_port.substr(0, colon);
}

std::string PortOf(const std::string& host_port) {
  size_t colon = host_port.rfind(':');
  return colon == std::string::npos ? "" : host_port.substr(colon + 1);
}

Status CheckAdvertiseAddress(std::string_view flag, const std::string& address,
                             bool bound_port_ok) {
  std::string problem;
  if (address.rfind(':') == std::string::npos || address.back() == ']') {
    problem = "the port is missing";
  } else {
    problem = HostProblem(HostOf(address));
  }
  if (problem.empty()) {
    std::string port = PortOf(address);
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535 ||
        (value == 0 && !bound_port_ok)) {
      problem = "the port must be a number from 1 to 65535";
    }
  }
  if (problem.empty()) return Status::Ok();
  return Status::InvalidArgument(std::string(flag) + ": '" + address +
                                 "' is not HOST:PORT that clients can dial (" + problem +
                                 "; e.g. 10.0.0.5:7001, node-3.example.com:7001, [fd00::5]:7001)");
}

std::string AdvertisedAddress(const std::string& advertise, const std::string& bound,
                              const std::string& fallback) {
  if (advertise.empty()) return fallback;
  std::string port = PortOf(advertise);
  return HostOf(advertise) + ":" + (port == "0" ? PortOf(bound) : port);
}

}  // namespace lakecache::rpc
