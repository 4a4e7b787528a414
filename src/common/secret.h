// Secret: a string that never shows itself.
//
// Holds credentials (secret keys, session tokens). Formatting, streaming or ToString() yields
// "<redacted>"; only Reveal() gives the bytes, for the one place that signs requests.
#pragma once

#include <ostream>
#include <string>

namespace lakecache {

class Secret {
 public:
  Secret() = default;
  explicit Secret(std::string value) : value_(std::move(value)) {}

  bool empty() const { return value_.empty(); }
  const std::string& Reveal() const { return value_; }
  std::string ToString() const { return value_.empty() ? "" : "<redacted>"; }
  bool operator==(const Secret& other) const = default;

 private:
  std::string value_;
};

inline std::ostream& operator<<(std::ostream& os, const Secret& s) { return os << s.ToString(); }

}  // namespace lakecache
