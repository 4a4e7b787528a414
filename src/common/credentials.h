// Credentials for an object store, and where they come from.
//
// Resolution order, first found wins: the namespace's config (access_key/secret_key, or the *_file
// keys), the environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN; for oss://
// namespaces OSS_ACCESS_KEY_ID / OSS_ACCESS_KEY_SECRET / OSS_SESSION_TOKEN first), then the shared
// credentials file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, profile AWS_PROFILE or
// "default"). Nothing found means anonymous (unsigned) requests. Thread-safe; reads files each
// call.
#pragma once

#include <functional>
#include <string>

#include "common/config.h"
#include "common/result.h"
#include "common/secret.h"

namespace lakecache {

struct Credentials {
  std::string access_key_id;  // empty: anonymous
  Secret secret_access_key;
  Secret session_token;
  std::string
      source;  // "config", "environment", "shared credentials file (profile default)", "none"

  bool anonymous() const { return access_key_id.empty(); }
};

// Looks up an environment variable; returns nullptr when unset. Injectable for tests.
using EnvLookup = std::function<const char*(const char*)>;

const char* ProcessEnv(const char* name);

Result<Credentials> ResolveCredentials(const NamespaceConfig& ns,
                                       const EnvLookup& env = ProcessEnv);

}  // namespace lakecache
