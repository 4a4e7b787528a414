#include "common/credentials.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>

namespace lakecache {
namespace {

using MaybeCredentials = std::optional<Credentials>;

std::string Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::string GetEnv(const EnvLookup& env, const char* name) {
  const char* value = env(name);
  return value == nullptr ? std::string() : std::string(value);
}

// nullopt when the file does not exist. Messages name the path, never the content.
Result<std::optional<std::string>> ReadFileIfExists(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    int err = errno;
    if (err == ENOENT) return std::optional<std::string>();
    return Status::IoError("cannot open '" + path + "': " + std::strerror(err));
  }
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  int err = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (err != 0) return Status::IoError("cannot read '" + path + "': " + std::strerror(err));
  return std::optional<std::string>(std::move(text));
}

// The trimmed content of an access_key_file / secret_key_file; `key` names it in messages.
Result<std::string> ReadKeyFile(const std::string& key, const std::string& path) {
  LC_ASSIGN_OR_RETURN(std::optional<std::string> text, ReadFileIfExists(path));
  if (!text) return Status::NotFound(key + ": '" + path + "' does not exist");
  std::string value = Trim(*text);
  if (value.empty()) return Status::InvalidArgument(key + ": '" + path + "' is empty");
  return value;
}

Result<MaybeCredentials> FromConfig(const NamespaceConfig& ns) {
  std::string prefix = "namespaces." + ns.name;
  std::string id = ns.access_key;
  if (!ns.access_key_file.empty()) {
    LC_ASSIGN_OR_RETURN(id, ReadKeyFile(prefix + ".access_key_file", ns.access_key_file));
  }
  std::string secret = ns.secret_key.Reveal();
  if (!ns.secret_key_file.empty()) {
    LC_ASSIGN_OR_RETURN(secret, ReadKeyFile(prefix + ".secret_key_file", ns.secret_key_file));
  }
  if (id.empty() && secret.empty()) {
    if (!ns.session_token.empty()) {
      return Status::InvalidArgument(prefix +
                                     ".session_token: set without access_key and secret_key");
    }
    return MaybeCredentials();
  }
  if (id.empty() || secret.empty()) {
    return Status::InvalidArgument(prefix + (id.empty() ? ".access_key" : ".secret_key") +
                                   ": missing: access_key and secret_key go together");
  }
  return MaybeCredentials(Credentials{id, Secret(secret), ns.session_token, "config"});
}

struct EnvNames {
  const char* id;
  const char* secret;
  const char* token;
};
constexpr EnvNames kAwsEnv = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"};
constexpr EnvNames kOssEnv = {"OSS_ACCESS_KEY_ID", "OSS_ACCESS_KEY_SECRET", "OSS_SESSION_TOKEN"};

// Half a key pair is an error rather than anonymous access: it is almost always a typo.
Result<MaybeCredentials> FromEnvNames(const EnvLookup& env, const EnvNames& names) {
  std::string id = GetEnv(env, names.id);
  std::string secret = GetEnv(env, names.secret);
  if (id.empty() && secret.empty()) return MaybeCredentials();
  if (id.empty() || secret.empty()) {
    return Status::InvalidArgument(std::string(id.empty() ? names.secret : names.id) +
                                   " is set but " + (id.empty() ? names.id : names.secret) +
                                   " is not");
  }
  Secret token(GetEnv(env, names.token));
  return MaybeCredentials(Credentials{id, Secret(secret), token, "environment"});
}

Result<MaybeCredentials> FromEnvironment(const NamespaceConfig& ns, const EnvLookup& env) {
  if (ns.location.scheme == UriScheme::kOss) {
    LC_ASSIGN_OR_RETURN(MaybeCredentials oss, FromEnvNames(env, kOssEnv));
    if (oss) return oss;
  }
  return FromEnvNames(env, kAwsEnv);
}

using IniProfile = std::map<std::string, std::string>;

// The AWS tools own this file and tolerate lines they do not understand, so do we.
std::map<std::string, IniProfile> ParseIni(std::string_view text) {
  std::map<std::string, IniProfile> profiles;
  IniProfile* current = nullptr;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string line = Trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      current = &profiles[Trim(std::string_view(line).substr(1, line.size() - 2))];
      continue;
    }
    size_t eq = line.find('=');
    if (current == nullptr || eq == std::string::npos) continue;
    (*current)[Trim(std::string_view(line).substr(0, eq))] =
        Trim(std::string_view(line).substr(eq + 1));
  }
  return profiles;
}

Credentials Anonymous() {
  Credentials c;
  c.source = "none";
  return c;
}

std::string SharedFilePath(const EnvLookup& env) {
  std::string path = GetEnv(env, "AWS_SHARED_CREDENTIALS_FILE");
  if (!path.empty()) return path;
  std::string home = GetEnv(env, "HOME");
  return home.empty() ? std::string() : home + "/.aws/credentials";
}

// A missing file or profile means anonymous access, unless AWS_PROFILE asked for that profile.
Result<Credentials> FromSharedFile(const EnvLookup& env) {
  std::string path = SharedFilePath(env);
  std::string named = GetEnv(env, "AWS_PROFILE");
  std::string profile = named.empty() ? "default" : named;
  std::optional<std::string> text;
  if (!path.empty()) {
    LC_ASSIGN_OR_RETURN(text, ReadFileIfExists(path));
  }
  std::map<std::string, IniProfile> profiles = text ? ParseIni(*text) : decltype(profiles)();
  auto it = profiles.find(profile);
  if (it == profiles.end()) {
    if (named.empty()) return Anonymous();
    return Status::NotFound("AWS_PROFILE '" + profile +
                            "' is not in the shared credentials file '" + path + "'");
  }
  std::string where = "shared credentials file '" + path + "', profile " + profile;
  const IniProfile& p = it->second;
  std::string id = p.count("aws_access_key_id") ? p.at("aws_access_key_id") : "";
  std::string secret = p.count("aws_secret_access_key") ? p.at("aws_secret_access_key") : "";
  if (id.empty() && secret.empty()) {
    if (named.empty()) return Anonymous();
    return Status::InvalidArgument(where + ": no aws_access_key_id");
  }
  if (id.empty() || secret.empty()) {
    return Status::InvalidArgument(where + ": " +
                                   (id.empty() ? "aws_access_key_id" : "aws_secret_access_key") +
                                   " is missing");
  }
  std::string token = p.count("aws_session_token") ? p.at("aws_session_token") : "";
  return Credentials{id, Secret(secret), Secret(token),
                     "shared credentials file (profile " + profile + ")"};
}

}  // namespace

const char* ProcessEnv(const char* name) { return std::getenv(name); }

Result<Credentials> ResolveCredentials(const NamespaceConfig& ns, const EnvLookup& env) {
  LC_ASSIGN_OR_RETURN(MaybeCredentials from_config, FromConfig(ns));
  if (from_config) return *std::move(from_config);
  LC_ASSIGN_OR_RETURN(MaybeCredentials from_env, FromEnvironment(ns, env));
  if (from_env) return *std::move(from_env);
  return FromSharedFile(env);
}

}  // namespace lakecache
