#include "common/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <utility>

namespace lakecache {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

constexpr char kSecret[] = "wJalrXUtnFEMI-SUPERSECRET";
constexpr char kToken[] = "FQoGZXIvYXdzE-TOKENSECRET";

constexpr char kFullYaml[] = R"(namespaces:
  test:
    mode: cache
    uri: s3://bucket/prefix
    endpoint: http://127.0.0.1:9000
    region: eu-west-1
    path_style: yes
    access_key: AKIDEXAMPLE
    secret_key: wJalrXUtnFEMI-SUPERSECRET
    session_token: FQoGZXIvYXdzE-TOKENSECRET
    metadata_ttl: 5m
    immutable: true
)";

Result<Config> LoadYaml(std::string_view text, const std::vector<std::string>& overrides = {}) {
  return LoadConfigText(text, "lake.yaml", ConfigFormat::kYaml, overrides);
}

// A namespace "test" with the given extra lines (each indented under it).
std::string NamespaceYaml(std::initializer_list<std::string_view> lines) {
  std::string text = "namespaces:\n  test:\n";
  for (std::string_view line : lines) text += "    " + std::string(line) + "\n";
  return text;
}

// The error message of a load that must fail; "" (and a test failure) if it succeeded.
std::string ErrorOf(const Result<Config>& result) {
  EXPECT_FALSE(result.ok());
  if (result.ok()) return "";
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  return result.status().message();
}

void ExpectContains(const std::string& text, std::string_view part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

void ExpectNoSecrets(const std::string& text) {
  EXPECT_EQ(text.find(kSecret), std::string::npos) << text;
  EXPECT_EQ(text.find(kToken), std::string::npos) << text;
}

TEST(ConfigYamlTest, FullExample) {
  Result<Config> config = LoadYaml(kFullYaml);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->source, "lake.yaml");
  ASSERT_EQ(config->namespaces.size(), 1u);
  const NamespaceConfig& ns = config->namespaces.at("test");
  EXPECT_EQ(ns.name, "test");
  EXPECT_EQ(ns.mode, "cache");
  EXPECT_EQ(ns.uri, "s3://bucket/prefix");
  EXPECT_EQ(ns.location.scheme, UriScheme::kS3);
  EXPECT_EQ(ns.location.bucket, "bucket");
  EXPECT_EQ(ns.location.key, "prefix");
  EXPECT_EQ(ns.endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(ns.region, "eu-west-1");
  EXPECT_TRUE(ns.path_style);
  EXPECT_EQ(ns.access_key, "AKIDEXAMPLE");
  EXPECT_EQ(ns.secret_key.Reveal(), kSecret);
  EXPECT_EQ(ns.session_token.Reveal(), kToken);
  EXPECT_EQ(ns.metadata_ttl, minutes(5));
  EXPECT_TRUE(ns.immutable);
}

TEST(ConfigYamlTest, Defaults) {
  Result<Config> config = LoadYaml(NamespaceYaml({"uri: s3://bucket"}));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const NamespaceConfig& ns = config->namespaces.at("test");
  EXPECT_EQ(ns.mode, "cache");
  EXPECT_EQ(ns.endpoint, "");  // AWS
  EXPECT_EQ(ns.region, "us-east-1");
  EXPECT_FALSE(ns.path_style);
  EXPECT_TRUE(ns.access_key.empty());
  EXPECT_TRUE(ns.secret_key.empty());
  EXPECT_EQ(ns.metadata_ttl, seconds(60));
  EXPECT_FALSE(ns.immutable);
}

TEST(ConfigYamlTest, EmptyFileAndEmptyNamespacesHaveNoNamespaces) {
  for (std::string_view text : {"", "# nothing\n", "namespaces:\n", "namespaces: {}\n"}) {
    Result<Config> config = LoadYaml(text);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_TRUE(config->namespaces.empty());
  }
}

TEST(ConfigYamlTest, NamespacesMustBeAMap) {
  ExpectContains(ErrorOf(LoadYaml("namespaces: [a, b]\n")),
                 "lake.yaml: namespaces: expected a map");
  ExpectContains(ErrorOf(LoadYaml("namespaces: x\n")), "lake.yaml: namespaces: expected a map");
  ExpectContains(ErrorOf(LoadYaml("- a\n")), "lake.yaml: (top level): expected a map");
}

TEST(ConfigYamlTest, PathStyleDefaultsOnForIpAndLocalhostEndpoints) {
  auto path_style = [](std::string_view endpoint, std::string_view extra = "") {
    Result<Config> config = LoadYaml(NamespaceYaml(
        {"uri: s3://b", "endpoint: " + std::string(endpoint), extra.empty() ? "" : extra}));
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    return config.ok() && config->namespaces.at("test").path_style;
  };
  EXPECT_TRUE(path_style("http://localhost:9000"));
  EXPECT_TRUE(path_style("http://10.0.0.5:9000/"));
  EXPECT_TRUE(path_style("http://[::1]:9000"));
  EXPECT_FALSE(path_style("https://s3.example.com"));
  EXPECT_FALSE(path_style("http://127.0.0.1:9000", "path_style: false"));
  EXPECT_TRUE(path_style("https://s3.example.com", "path_style: true"));
}

TEST(ConfigYamlTest, OssEndpointComesFromUriHost) {
  Result<Config> config =
      LoadYaml(NamespaceYaml({"uri: oss://bucket.oss-cn-hangzhou.aliyuncs.com/dir"}));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const NamespaceConfig& ns = config->namespaces.at("test");
  EXPECT_EQ(ns.location.scheme, UriScheme::kOss);
  EXPECT_EQ(ns.location.bucket, "bucket");
  EXPECT_EQ(ns.location.key, "dir");
  EXPECT_EQ(ns.endpoint, "https://oss-cn-hangzhou.aliyuncs.com");
  EXPECT_FALSE(ns.path_style);
}

TEST(ConfigYamlTest, OssWithoutEndpointNamesTheKey) {
  ExpectContains(ErrorOf(LoadYaml(NamespaceYaml({"uri: oss://bucket/dir"}))),
                 "lake.yaml: namespaces.test.endpoint: missing");
  Result<Config> explicit_endpoint =
      LoadYaml(NamespaceYaml({"uri: oss://bucket/dir", "endpoint: https://oss.example.com"}));
  EXPECT_TRUE(explicit_endpoint.ok()) << explicit_endpoint.status().ToString();
}

TEST(ConfigYamlErrorTest, UnknownKey) {
  EXPECT_EQ(ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", "metdata_ttl: 5m"}))),
            "lake.yaml: namespaces.test.metdata_ttl: unknown key");
  EXPECT_EQ(ErrorOf(LoadYaml("cache:\n  size: 1GiB\n")), "lake.yaml: cache.size: unknown key");
}

TEST(ConfigYamlErrorTest, BadDuration) {
  std::string msg = ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", "metadata_ttl: 5"})));
  ExpectContains(msg, "lake.yaml: namespaces.test.metadata_ttl: ");
  ExpectContains(msg, "duration");
}

// What docs/configuration.md says a duration may be: parts that add up, spaces allowed, fractions.
TEST(ConfigYamlTest, DurationsTakeCompoundFractionalAndSpacedForms) {
  const std::pair<const char*, Duration> accepted[] = {
      {"1h30m", minutes(90)}, {"1h 30m", minutes(90)},  {"30m1h", minutes(90)},
      {"1.5h", minutes(90)},  {"90m", minutes(90)},     {"5400s", minutes(90)},
      {"30 s", seconds(30)},  {"250ms", Duration(250)}, {"1d", minutes(24 * 60)},
      {"0", Duration(0)}};
  for (const auto& [text, want] : accepted) {
    Result<Config> config =
        LoadYaml(NamespaceYaml({"uri: s3://b", "metadata_ttl: " + std::string(text)}));
    ASSERT_TRUE(config.ok()) << text << ": " << config.status().ToString();
    EXPECT_EQ(config->namespaces.at("test").metadata_ttl, want) << text;
  }
  Result<Config> shown = LoadYaml(NamespaceYaml({"uri: s3://b", "metadata_ttl: 1.5h"}));
  ASSERT_TRUE(shown.ok());
  ExpectContains(RenderConfig(*shown), "metadata_ttl: 1h30m");
  for (const char* text : {"5", "1h30", "5M", "5 minutes", "-1s", "1h-30m", "1.2.3s"}) {
    std::string msg =
        ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", "metadata_ttl: " + std::string(text)})));
    ExpectContains(msg, "namespaces.test.metadata_ttl: invalid duration '" + std::string(text));
  }
}

TEST(ConfigYamlErrorTest, BadBool) {
  ExpectContains(ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", "immutable: maybe"}))),
                 "lake.yaml: namespaces.test.immutable: invalid boolean 'maybe'");
}

TEST(ConfigYamlErrorTest, MissingUri) {
  ExpectContains(ErrorOf(LoadYaml(NamespaceYaml({"region: us-east-1"}))),
                 "lake.yaml: namespaces.test.uri: missing");
}

TEST(ConfigYamlErrorTest, BadScheme) {
  ExpectContains(ErrorOf(LoadYaml(NamespaceYaml({"uri: gs://bucket/x"}))),
                 "lake.yaml: namespaces.test.uri: unsupported URI scheme 'gs'");
}

TEST(ConfigYamlErrorTest, BadModeEndpointAndName) {
  ExpectContains(ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", "mode: through"}))),
                 "lake.yaml: namespaces.test.mode: unsupported mode 'through'");
  ExpectContains(ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", "endpoint: 127.0.0.1:9000"}))),
                 "lake.yaml: namespaces.test.endpoint: invalid endpoint");
  ExpectContains(ErrorOf(LoadYaml("namespaces:\n  'a/b':\n    uri: s3://b\n")),
                 "lake.yaml: namespaces.a/b: invalid namespace name");
  ExpectContains(ErrorOf(LoadYaml("namespaces:\n  '..':\n    uri: s3://b\n")),
                 "invalid namespace name '..'");
}

TEST(ConfigYamlErrorTest, WrongTypesAndDuplicates) {
  ExpectContains(ErrorOf(LoadYaml(NamespaceYaml({"uri: {a: 1}"}))),
                 "lake.yaml: namespaces.test.uri: expected a string, got a map");
  ExpectContains(ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", "uri: s3://c"}))),
                 "lake.yaml: namespaces.test.uri: duplicate key");
  ExpectContains(ErrorOf(LoadYaml("namespaces:\n  test: s3://b\n")),
                 "lake.yaml: namespaces.test: expected a map");
}

TEST(ConfigYamlErrorTest, HalfSpecifiedCredentials) {
  ExpectContains(ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", "access_key: AKID"}))),
                 "lake.yaml: namespaces.test.secret_key: missing");
  ExpectContains(
      ErrorOf(LoadYaml(
          NamespaceYaml({"uri: s3://b", "access_key: A", "access_key_file: /f", "secret_key: S"}))),
      "lake.yaml: namespaces.test.access_key_file: set access_key or access_key_file, not both");
}

TEST(ConfigYamlErrorTest, SyntaxErrorHasLineAndColumn) {
  std::string msg = ErrorOf(LoadYaml("namespaces:\n  test:\n    uri: s3://b: c\n"));
  ExpectContains(msg, "lake.yaml: line 3, column ");
  ExpectContains(msg, "YAML syntax error");
}

TEST(ConfigYamlErrorTest, SecondDocumentIsAnError) {
  ExpectContains(ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b"}) + "---\nnamespaces: {}\n")),
                 "lake.yaml: holds 2 YAML documents");
}

// Found by fuzz/config_fuzz: a ',' where a document starts made yaml-cpp's LoadAll hand out empty
// documents forever, so loading such a file never returned.
TEST(ConfigYamlErrorTest, AStrayCommaIsASyntaxErrorNotAHang) {
  for (const char* text : {",", ", u\n", "namespaces: {}\n...\n,\n", "! ,"}) {
    std::string msg = ErrorOf(LoadYaml(text));
    ExpectContains(msg, "YAML syntax error");
  }
  ExpectContains(ErrorOf(LoadYaml("namespaces: {}\n...\n,\n")), "lake.yaml: line 3, column 1: ");
}

TEST(ConfigYamlErrorTest, SecretValuesNeverInMessages) {
  std::string map_secret = "secret_key: {v: " + std::string(kSecret) + "}";
  std::string msg = ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", map_secret})));
  ExpectContains(msg, "namespaces.test.secret_key");
  ExpectNoSecrets(msg);
  std::string list_token = "session_token: [" + std::string(kToken) + "]";
  msg = ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", list_token})));
  ExpectContains(msg, "namespaces.test.session_token");
  ExpectNoSecrets(msg);
  // Another key's error while secrets are set, and a secret set without its key id.
  ExpectNoSecrets(ErrorOf(LoadYaml(std::string(kFullYaml) + "    bogus: 1\n")));
  ExpectNoSecrets(
      ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", "secret_key: " + std::string(kSecret)}))));
  ExpectNoSecrets(
      ErrorOf(LoadYaml(kFullYaml, {"namespaces.test.secret_key.x=" + std::string(kSecret)})));
}

TEST(ConfigOverrideTest, SetsExistingKey) {
  Result<Config> config = LoadYaml(kFullYaml, {"namespaces.test.metadata_ttl=30s"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->namespaces.at("test").metadata_ttl, seconds(30));
}

TEST(ConfigOverrideTest, CreatesKeysAndNamespaces) {
  Result<Config> config =
      LoadYaml("", {"namespaces.new.uri=s3://b/p", "namespaces.new.immutable = yes"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const NamespaceConfig& ns = config->namespaces.at("new");
  EXPECT_EQ(ns.location.bucket, "b");
  EXPECT_TRUE(ns.immutable);
}

TEST(ConfigOverrideTest, MalformedNamesTheOverride) {
  EXPECT_EQ(ErrorOf(LoadYaml(kFullYaml, {"namespaces.test.metadata_ttl"})),
            "lake.yaml: -o 'namespaces.test.metadata_ttl': malformed override "
            "(expected dotted.key=value)");
  ExpectContains(ErrorOf(LoadYaml(kFullYaml, {"namespaces..x=1"})), "malformed override");
  ExpectContains(ErrorOf(LoadYaml(kFullYaml, {"=1"})), "malformed override");
}

TEST(ConfigOverrideTest, UnknownKeySaysItCameFromOverride) {
  EXPECT_EQ(ErrorOf(LoadYaml(kFullYaml, {"namespaces.test.metdata_ttl=5m"})),
            "lake.yaml: namespaces.test.metdata_ttl (from -o): unknown key");
  EXPECT_EQ(ErrorOf(LoadYaml(kFullYaml, {"cache.size=1GiB"})),
            "lake.yaml: cache.size (from -o): unknown key");
  ExpectContains(ErrorOf(LoadYaml(kFullYaml, {"namespaces.test.metadata_ttl=soon"})),
                 "lake.yaml: namespaces.test.metadata_ttl (from -o): invalid duration");
  ExpectContains(ErrorOf(LoadYaml(kFullYaml, {"namespaces.test.uri.x=1"})),
                 "namespaces.test.uri: it is not a map");
}

TEST(ConfigRenderTest, ShowsEffectiveValuesAndRedactsSecrets) {
  Result<Config> config = LoadYaml(kFullYaml);
  ASSERT_TRUE(config.ok());
  std::string yaml = RenderConfig(*config);
  ExpectNoSecrets(yaml);
  ExpectContains(yaml, "secret_key: <redacted>");
  ExpectContains(yaml, "session_token: <redacted>");
  ExpectContains(yaml, "access_key: AKIDEXAMPLE");
  ExpectContains(yaml, "metadata_ttl: 5m");
  ExpectContains(yaml, "path_style: true");
}

TEST(ConfigRenderTest, OmitsUnsetSecretsAndReloads) {
  Result<Config> config = LoadYaml(NamespaceYaml({"uri: oss://b.oss.example.com/d"}));
  ASSERT_TRUE(config.ok());
  std::string yaml = RenderConfig(*config);
  EXPECT_EQ(yaml.find("secret_key:"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("session_token"), std::string::npos) << yaml;
  ExpectContains(yaml, "region: us-east-1");
  ExpectContains(yaml, "metadata_ttl: 1m");
  Result<Config> reloaded = LoadConfigText(yaml, "rendered", ConfigFormat::kAuto);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString() << "\n" << yaml;
  const NamespaceConfig& ns = reloaded->namespaces.at("test");
  EXPECT_EQ(ns.endpoint, "https://oss.example.com");
  EXPECT_EQ(ns.metadata_ttl, seconds(60));
  EXPECT_EQ(RenderConfig(*reloaded), yaml);
}

TEST(ConfigRenderTest, NoNamespaces) {
  Result<Config> reloaded = LoadYaml(RenderConfig(Config{}));
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString();
  EXPECT_TRUE(reloaded->namespaces.empty());
}

constexpr char kProperties[] = R"(# JindoFS-style config
jfs.namespaces = test, other
jfs.namespaces.test.oss.uri = oss://bucket.oss-cn-hangzhou.aliyuncs.com/dir
jfs.namespaces.test.mode = cache
jfs.namespaces.test.oss.access.key = AKIDOSS
jfs.namespaces.test.oss.access.secret = wJalrXUtnFEMI-SUPERSECRET

! the second namespace uses the s3 keys
jfs.namespaces.other.s3.uri=s3://data/train
jfs.namespaces.other.s3.endpoint=http://127.0.0.1:9000
jfs.namespaces.other.s3.region=cn-north-1
)";

Result<Config> LoadProperties(std::string_view text,
                              const std::vector<std::string>& overrides = {}) {
  return LoadConfigText(text, "lake.properties", ConfigFormat::kProperties, overrides);
}

void ExpectPropertiesExample(const Config& config) {
  ASSERT_EQ(config.namespaces.size(), 2u);
  const NamespaceConfig& test = config.namespaces.at("test");
  EXPECT_EQ(test.location.scheme, UriScheme::kOss);
  EXPECT_EQ(test.location.bucket, "bucket");
  EXPECT_EQ(test.location.key, "dir");
  EXPECT_EQ(test.endpoint, "https://oss-cn-hangzhou.aliyuncs.com");
  EXPECT_FALSE(test.path_style);
  EXPECT_EQ(test.access_key, "AKIDOSS");
  EXPECT_EQ(test.secret_key.Reveal(), kSecret);
  const NamespaceConfig& other = config.namespaces.at("other");
  EXPECT_EQ(other.location.bucket, "data");
  EXPECT_EQ(other.location.key, "train");
  EXPECT_EQ(other.endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(other.region, "cn-north-1");
  EXPECT_TRUE(other.path_style);
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "lc_config_test.XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string Write(const std::string& name, std::string_view content) const {
    std::string file = path_ + "/" + name;
    std::ofstream(file) << content;
    return file;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ConfigPropertiesTest, TwoNamespacesFromFile) {
  TempDir dir;
  std::string path = dir.Write("lake.properties", kProperties);
  Result<Config> config = LoadConfigFile(path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->source, path);
  ExpectPropertiesExample(*config);
}

TEST(ConfigPropertiesTest, DetectedByContent) {
  TempDir dir;
  Result<Config> from_file = LoadConfigFile(dir.Write("lake.conf", kProperties));
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  ExpectPropertiesExample(*from_file);
  Result<Config> from_text = LoadConfigText(kProperties, "x", ConfigFormat::kAuto);
  ASSERT_TRUE(from_text.ok()) << from_text.status().ToString();
  ExpectPropertiesExample(*from_text);
}

TEST(ConfigPropertiesTest, KeysMayPrecedeTheNamespaceList) {
  Result<Config> config = LoadProperties("jfs.namespaces.a.s3.uri = s3://b\njfs.namespaces = a\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->namespaces.at("a").location.bucket, "b");
}

TEST(ConfigPropertiesTest, KeyFilesNameTheFilesOfBothStores) {
  Result<Config> config = LoadProperties(
      "jfs.namespaces = a, b\n"
      "jfs.namespaces.a.oss.uri = oss://bucket.oss-cn-hangzhou.aliyuncs.com/dir\n"
      "jfs.namespaces.a.oss.access.key.file = /etc/lakecache/stores/a/access_key\n"
      "jfs.namespaces.a.oss.access.secret.file = /etc/lakecache/stores/a/secret_key\n"
      "jfs.namespaces.b.s3.uri = s3://data/train\n"
      "jfs.namespaces.b.s3.access.key.file = /k/b/id\n"
      "jfs.namespaces.b.s3.access.secret.file = /k/b/secret\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const NamespaceConfig& a = config->namespaces.at("a");
  EXPECT_EQ(a.access_key_file, "/etc/lakecache/stores/a/access_key");
  EXPECT_EQ(a.secret_key_file, "/etc/lakecache/stores/a/secret_key");
  EXPECT_EQ(config->namespaces.at("b").access_key_file, "/k/b/id");
  EXPECT_EQ(config->namespaces.at("b").secret_key_file, "/k/b/secret");
  // A key and a file of the same key are one setting twice, as in YAML.
  ExpectContains(ErrorOf(LoadProperties("jfs.namespaces = a\njfs.namespaces.a.s3.uri = s3://x\n"
                                        "jfs.namespaces.a.s3.access.key = A\n"
                                        "jfs.namespaces.a.s3.access.key.file = /f\n"
                                        "jfs.namespaces.a.s3.access.secret.file = /g\n")),
                 "line 4: jfs.namespaces.a.s3.access.key.file: set access_key or access_key_file, "
                 "not both");
}

TEST(ConfigPropertiesTest, Errors) {
  EXPECT_EQ(ErrorOf(LoadProperties("jfs.namespaces = a\njfs.namespaces.a.oss.urx = oss://b\n")),
            "lake.properties: line 2: jfs.namespaces.a.oss.urx: unknown key");
  EXPECT_EQ(ErrorOf(LoadProperties("jfs.cache.size = 1G\n")),
            "lake.properties: line 1: jfs.cache.size: unknown key");
  ExpectContains(ErrorOf(LoadProperties("jfs.namespaces = a\njfs.namespaces.a.s3.uri = s3://b\n"
                                        "jfs.namespaces.ghost.s3.uri = s3://c\n")),
                 "lake.properties: line 3: namespace 'ghost' is not listed in jfs.namespaces");
  ExpectContains(
      ErrorOf(LoadProperties("jfs.namespaces = a, b\njfs.namespaces.a.s3.uri = s3://x\n")),
      "lake.properties: line 1: jfs.namespaces: namespace 'b' has no uri");
  ExpectContains(ErrorOf(LoadProperties("jfs.namespaces = a\njfs.namespaces.a.oss.uri = gs://x\n")),
                 "lake.properties: line 2: jfs.namespaces.a.oss.uri: unsupported URI scheme");
  ExpectContains(ErrorOf(LoadProperties("jfs.namespaces = a\njfs.namespaces.a.s3.uri = s3://x\n"
                                        "jfs.namespaces.a.oss.uri = oss://y\n")),
                 "line 3: jfs.namespaces.a.oss.uri: sets the same setting as line 2");
  ExpectContains(
      ErrorOf(LoadProperties("jfs.namespaces = a\njfs.namespaces.a.oss.uri = oss://b/d\n")),
      "lake.properties: line 2: jfs.namespaces.a.oss.uri: missing: oss:// namespaces need "
      "an endpoint");
}

TEST(ConfigPropertiesTest, MalformedLineDoesNotEchoIt) {
  std::string text =
      "jfs.namespaces = a\njfs.namespaces.a.oss.access.secret " + std::string(kSecret) + "\n";
  std::string msg = ErrorOf(LoadProperties(text));
  ExpectContains(msg, "lake.properties: line 2: expected 'key = value'");
  ExpectNoSecrets(msg);
}

TEST(ConfigPropertiesTest, OverridesUseYamlKeys) {
  Result<Config> config = LoadProperties(kProperties, {"namespaces.other.metadata_ttl=10m"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->namespaces.at("other").metadata_ttl, minutes(10));
}

TEST(ConfigFileTest, FolderIsABadArgumentNamingIt) {
  TempDir dir;
  ExpectContains(ErrorOf(LoadConfigFile(dir.path())),
                 dir.path() + ": is a folder, not a config file");
}

TEST(ConfigFileTest, MissingFileIsNotFound) {
  TempDir dir;
  Result<Config> config = LoadConfigFile(dir.path() + "/absent.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kNotFound);
  ExpectContains(config.status().message(), "absent.yaml");
}

TEST(ConfigFileTest, YamlFileErrorsNameThePath) {
  TempDir dir;
  std::string path = dir.Write("lake.yaml", NamespaceYaml({"uri: s3://b", "bogus: 1"}));
  EXPECT_EQ(ErrorOf(LoadConfigFile(path)), path + ": namespaces.test.bogus: unknown key");
}

constexpr char kCacheYaml[] = R"(cache:
  memory: {capacity: 2GiB}
  disks:
    - {path: /var/cache/lakecache, capacity: 100GiB, min_free: 10%}
    - path: /mnt/nvme1/lakecache
      capacity: 1.5TiB
      min_free: 20GiB
  policy: lru
namespaces:
  ns:
    uri: s3://bucket/prefix
    block_size: 8MiB
)";

TEST(ConfigCacheTest, FullExample) {
  Result<Config> config = LoadYaml(kCacheYaml);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const CacheConfig& cache = config->cache;
  EXPECT_EQ(cache.memory_capacity, 2ull << 30);
  EXPECT_EQ(cache.policy, "lru");
  ASSERT_EQ(cache.disks.size(), 2u);
  EXPECT_EQ(cache.disks[0].path, "/var/cache/lakecache");
  EXPECT_EQ(cache.disks[0].capacity, 100ull << 30);
  EXPECT_DOUBLE_EQ(cache.disks[0].min_free_ratio, 0.10);
  EXPECT_EQ(cache.disks[0].min_free_bytes, 0u);
  EXPECT_EQ(cache.disks[1].path, "/mnt/nvme1/lakecache");
  EXPECT_EQ(cache.disks[1].capacity, 3ull << 39);
  EXPECT_EQ(cache.disks[1].min_free_bytes, 20ull << 30);
  EXPECT_EQ(cache.disks[1].min_free_ratio, 0.0);
  EXPECT_EQ(config->namespaces.at("ns").block_size, 8u << 20);
}

TEST(ConfigCacheTest, Defaults) {
  for (std::string_view text : {"", "cache:\n", "cache: {disks: [], memory: {}}\n"}) {
    Result<Config> config = LoadYaml(std::string(text) + NamespaceYaml({"uri: s3://b"}));
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_EQ(config->cache.memory_capacity, 1ull << 30);
    EXPECT_TRUE(config->cache.disks.empty());
    EXPECT_EQ(config->cache.policy, "tinylfu");
    EXPECT_EQ(config->cache.replica_percent, 50u);
    EXPECT_EQ(config->namespaces.at("test").block_size, 4u << 20);
  }
  Result<Config> disk = LoadYaml("cache:\n  disks:\n    - {path: /c, capacity: 1GiB}\n");
  ASSERT_TRUE(disk.ok()) << disk.status().ToString();
  EXPECT_DOUBLE_EQ(disk->cache.disks[0].min_free_ratio, 0.05);
  EXPECT_EQ(disk->cache.disks[0].min_free_bytes, 0u);
}

TEST(ConfigCacheErrorTest, BlockSizeBetween64KiBAnd256MiB) {
  for (std::string_view size : {"64KiB", "256MiB", "1MiB"}) {
    Result<Config> config =
        LoadYaml(NamespaceYaml({"uri: s3://b", "block_size: " + std::string(size)}));
    EXPECT_TRUE(config.ok()) << size << ": " << config.status().ToString();
  }
  EXPECT_EQ(ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", "block_size: 32KiB"}))),
            "lake.yaml: namespaces.test.block_size: block size 32KiB out of range (expected "
            "64KiB to 256MiB)");
  ExpectContains(ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", "block_size: 512MiB"}))),
                 "namespaces.test.block_size: block size 512MiB out of range");
  ExpectContains(ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", "block_size: big"}))),
                 "lake.yaml: namespaces.test.block_size: invalid size 'big'");
}

TEST(ConfigCacheErrorTest, PolicyAndMemory) {
  EXPECT_EQ(ErrorOf(LoadYaml("cache:\n  policy: mru\n")),
            "lake.yaml: cache.policy: unknown eviction policy 'mru' (expected tinylfu or lru)");
  EXPECT_EQ(ErrorOf(LoadYaml("cache:\n  memory: {capacity: 0}\n")),
            "lake.yaml: cache.memory.capacity: must be more than 0");
  ExpectContains(ErrorOf(LoadYaml("cache:\n  memory: {capacity: lots}\n")),
                 "lake.yaml: cache.memory.capacity: invalid size 'lots'");
  EXPECT_EQ(ErrorOf(LoadYaml("cache:\n  memory: {size: 1GiB}\n")),
            "lake.yaml: cache.memory.size: unknown key");
  EXPECT_EQ(ErrorOf(LoadYaml("cache:\n  memory: {huge_pages: yes}\n")),
            "lake.yaml: cache.memory.huge_pages: unknown huge_pages 'yes' (expected auto, hugetlb "
            "or off)");
  Result<Config> huge = LoadYaml("cache:\n  memory: {capacity: 2GiB, huge_pages: hugetlb}\n");
  ASSERT_TRUE(huge.ok()) << huge.status().ToString();
  EXPECT_EQ(huge->cache.huge_pages, "hugetlb");
  EXPECT_EQ(LoadYaml("cache: {}\n")->cache.huge_pages, "auto");
  ExpectContains(ErrorOf(LoadYaml("cache:\n  memory: 1GiB\n")),
                 "lake.yaml: cache.memory: expected a map");
  ExpectContains(ErrorOf(LoadYaml("cache: [a]\n")), "lake.yaml: cache: expected a map");
}

TEST(ConfigCacheTest, ReplicaShareIsAPercentageUpTo90) {
  for (auto [text, percent] : {std::pair{"0%", 0u}, {"25%", 25u}, {"90%", 90u}}) {
    Result<Config> config = LoadYaml("cache:\n  replica_share: " + std::string(text) + "\n");
    ASSERT_TRUE(config.ok()) << text << ": " << config.status().ToString();
    EXPECT_EQ(config->cache.replica_percent, percent) << text;
  }
  for (std::string_view bad : {"91%", "50", "half", "-5%", "12.5%", "%"}) {
    EXPECT_EQ(ErrorOf(LoadYaml("cache:\n  replica_share: \"" + std::string(bad) + "\"\n")),
              "lake.yaml: cache.replica_share: invalid share '" + std::string(bad) +
                  "' (expected a percentage from 0% to 90%)");
  }
}

// The error of a config with one disk entry `disk` (a flow map).
std::string DiskError(std::string_view disk) {
  return ErrorOf(LoadYaml("cache:\n  disks:\n    - " + std::string(disk) + "\n"));
}

TEST(ConfigCacheErrorTest, DiskEntries) {
  EXPECT_EQ(DiskError("{path: cache, capacity: 1GiB}"),
            "lake.yaml: cache.disks.0.path: 'cache' is not an absolute path");
  ExpectContains(DiskError("{capacity: 1GiB}"), "lake.yaml: cache.disks.0.path: missing");
  ExpectContains(DiskError("{path: /c}"), "lake.yaml: cache.disks.0.capacity: missing or 0");
  ExpectContains(DiskError("{path: /c, capacity: 0}"), "cache.disks.0.capacity: missing or 0");
  EXPECT_EQ(DiskError("{path: /c, capacity: 1GiB, size: 1}"),
            "lake.yaml: cache.disks.0.size: unknown key");
  ExpectContains(DiskError("/var/cache"), "lake.yaml: cache.disks.0: expected a map");
  ExpectContains(ErrorOf(LoadYaml("cache:\n  disks: {path: /c}\n")),
                 "lake.yaml: cache.disks: expected a list of cache directories, got a map");
  ExpectContains(ErrorOf(LoadYaml("cache:\n  disks:\n    - {path: /c, capacity: 1G}\n"
                                  "    - {path: /c, capacity: 2G}\n")),
                 "lake.yaml: cache.disks.1.path: '/c' is listed twice");
}

TEST(ConfigCacheErrorTest, MinFreeIsASizeOrAPercentageBelow100) {
  for (std::string_view ok : {"0%", "99.5%", "5 %", "0", "20GiB"}) {
    Result<Config> config = LoadYaml(
        "cache:\n  disks:\n    - {path: /c, capacity: 1G, min_free: " + std::string(ok) + "}\n");
    EXPECT_TRUE(config.ok()) << ok << ": " << config.status().ToString();
  }
  for (std::string_view bad : {"100%", "-5%", "x%", "%", "1e1%", "lots"}) {
    std::string msg = DiskError("{path: /c, capacity: 1G, min_free: '" + std::string(bad) + "'}");
    ExpectContains(msg, "lake.yaml: cache.disks.0.min_free: invalid");
  }
}

TEST(ConfigCacheOverrideTest, SetsMemoryPolicyAndDiskEntries) {
  Result<Config> config =
      LoadYaml(kCacheYaml, {"cache.memory.capacity=512MiB", "cache.policy=tinylfu",
                            "cache.disks.0.capacity=50GiB", "namespaces.ns.block_size=16MiB"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->cache.memory_capacity, 512u << 20);
  EXPECT_EQ(config->cache.policy, "tinylfu");
  EXPECT_EQ(config->cache.disks[0].capacity, 50ull << 30);
  EXPECT_EQ(config->cache.disks[1].capacity, 3ull << 39);
  EXPECT_EQ(config->namespaces.at("ns").block_size, 16u << 20);
}

TEST(ConfigCacheOverrideTest, AppendsDiskEntriesByPosition) {
  Result<Config> config =
      LoadYaml("", {"cache.disks.0.path=/a", "cache.disks.0.capacity=1GiB", "cache.disks.1.path=/b",
                    "cache.disks.1.capacity=2GiB", "cache.disks.1.min_free=1%"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->cache.disks.size(), 2u);
  EXPECT_EQ(config->cache.disks[0].path, "/a");
  EXPECT_EQ(config->cache.disks[1].capacity, 2ull << 30);
  EXPECT_DOUBLE_EQ(config->cache.disks[1].min_free_ratio, 0.01);
  Result<Config> appended =
      LoadYaml(kCacheYaml, {"cache.disks.2.path=/c", "cache.disks.2.capacity=1G"});
  ASSERT_TRUE(appended.ok()) << appended.status().ToString();
  EXPECT_EQ(appended->cache.disks.size(), 3u);
}

TEST(ConfigCacheOverrideTest, BadPositionsAndValuesNameTheKey) {
  EXPECT_EQ(ErrorOf(LoadYaml(kCacheYaml, {"cache.disks.5.capacity=1G"})),
            "lake.yaml: -o cache.disks.5: cache.disks is a list of 2; address an entry by "
            "position, from 0 to 2 (which appends one)");
  ExpectContains(ErrorOf(LoadYaml("", {"cache.disks.first.path=/a"})),
                 "-o cache.disks.first: cache.disks is a list of 0");
  EXPECT_EQ(ErrorOf(LoadYaml("", {"cache.disks.0.path=/a"})),
            "lake.yaml: cache.disks.0.capacity: missing or 0 (the bytes of blocks the directory "
            "may hold, e.g. 100GiB)");
  EXPECT_EQ(ErrorOf(LoadYaml(kCacheYaml, {"cache.disks.0.capacity=huge"})),
            "lake.yaml: cache.disks.0.capacity (from -o): invalid size 'huge' (expected e.g. "
            "4MiB, 512M, 10GiB)");
  ExpectContains(ErrorOf(LoadYaml("", {"cache.policy=arc"})),
                 "lake.yaml: cache.policy (from -o): unknown eviction policy 'arc'");
}

TEST(ConfigCacheRenderTest, ShowsTheCacheSectionAndReloads) {
  Result<Config> config = LoadYaml(kCacheYaml);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  std::string yaml = RenderConfig(*config);
  ExpectContains(yaml, "capacity: 2GiB");
  ExpectContains(yaml, "min_free: 10%");
  ExpectContains(yaml, "min_free: 20GiB");
  ExpectContains(yaml, "policy: lru");
  ExpectContains(yaml, "block_size: 8MiB");
  Result<Config> reloaded = LoadYaml(yaml);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString() << "\n" << yaml;
  EXPECT_EQ(RenderConfig(*reloaded), yaml);
  std::string defaults = RenderConfig(Config{});
  ExpectContains(defaults, "capacity: 1GiB");
  ExpectContains(defaults, "disks: []");
  ExpectContains(defaults, "policy: tinylfu");
}

}  // namespace
}  // namespace lakecache

namespace lakecache {
namespace {

TEST(ConfigClientTest, ReadsTheClientSectionAndDefaults) {
  Result<Config> config =
      LoadYaml("client: {read_ahead_max: 128MiB, memory_budget: 1GiB, prefetch_threads: 8}\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->client.read_ahead_max, 128ull << 20);
  EXPECT_EQ(config->client.memory_budget, 1ull << 30);
  EXPECT_EQ(config->client.prefetch_threads, 8u);
  Result<Config> defaults = LoadYaml("client:\n");
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->client.read_ahead_max, 64ull << 20);
  EXPECT_EQ(defaults->client.memory_budget, 512ull << 20);
  EXPECT_EQ(defaults->client.prefetch_threads, 16u);
  Result<Config> overridden = LoadYaml("", {"client.read_ahead_max=0"});
  ASSERT_TRUE(overridden.ok()) << overridden.status().ToString();
  EXPECT_EQ(overridden->client.read_ahead_max, 0u);
  EXPECT_TRUE(defaults->client.short_circuit);
  EXPECT_FALSE(defaults->client.shm_prefault);
  Result<Config> local = LoadYaml("", {"client.shm_prefault=true", "client.short_circuit=false"});
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  EXPECT_TRUE(local->client.shm_prefault);
  EXPECT_FALSE(local->client.short_circuit);
}

TEST(ConfigClientTest, TransportIsBulkByDefaultOrGrpc) {
  Result<Config> defaults = LoadYaml("client:\n");
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->client.transport, "bulk");
  Result<Config> grpc = LoadYaml("", {"client.transport=grpc"});
  ASSERT_TRUE(grpc.ok()) << grpc.status().ToString();
  EXPECT_EQ(grpc->client.transport, "grpc");
  EXPECT_EQ(ErrorOf(LoadYaml("client:\n  transport: http\n")),
            "lake.yaml: client.transport: unknown transport 'http' (expected bulk or grpc)");
  Result<Config> reloaded = LoadYaml(RenderConfig(*grpc));
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString();
  EXPECT_EQ(reloaded->client.transport, "grpc");
}

TEST(ConfigClientTest, AllowUidsIsAListOfUidsFromTheFileOrOverrides) {
  Result<Config> defaults = LoadYaml("client:\n");
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_TRUE(defaults->client.allow_uids.empty());
  Result<Config> listed = LoadYaml("client:\n  allow_uids: [1000, 65534]\n");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->client.allow_uids, (std::vector<uint32_t>{1000, 65534}));
  Result<Config> overridden = LoadYaml("", {"client.allow_uids.0=1001", "client.allow_uids.1=7"});
  ASSERT_TRUE(overridden.ok()) << overridden.status().ToString();
  EXPECT_EQ(overridden->client.allow_uids, (std::vector<uint32_t>{1001, 7}));
  Result<Config> reloaded = LoadYaml(RenderConfig(*listed));
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString();
  EXPECT_EQ(reloaded->client.allow_uids, listed->client.allow_uids);
  EXPECT_EQ(ErrorOf(LoadYaml("client:\n  allow_uids: [1000, -1]\n")),
            "lake.yaml: client.allow_uids.1: invalid uid '-1' (expected 0 to 4294967294)");
  ExpectContains(ErrorOf(LoadYaml("client:\n  allow_uids: 1000\n")),
                 "lake.yaml: client.allow_uids: expected a list of uids such as [1000, 1001]");
}

TEST(ConfigClientTest, ErrorsNameTheKey) {
  EXPECT_EQ(ErrorOf(LoadYaml("client:\n  memory_budget: 0\n")),
            "lake.yaml: client.memory_budget: must be more than 0");
  ExpectContains(ErrorOf(LoadYaml("client:\n  read_ahead_max: far\n")),
                 "lake.yaml: client.read_ahead_max: invalid size 'far'");
  EXPECT_EQ(ErrorOf(LoadYaml("client:\n  prefetch_threads: 0\n")),
            "lake.yaml: client.prefetch_threads: invalid thread count '0' (expected 1 to 1024)");
  EXPECT_EQ(ErrorOf(LoadYaml("client:\n  readahead: 1MiB\n")),
            "lake.yaml: client.readahead: unknown key");
  ExpectContains(ErrorOf(LoadYaml("client: 5\n")), "lake.yaml: client: expected a map");
}

TEST(ConfigClientTest, RenderShowsTheClientSectionAndReloads) {
  Config config;
  config.client.read_ahead_max = 32ull << 20;
  std::string yaml = RenderConfig(config);
  EXPECT_NE(yaml.find("read_ahead_max: 32MiB"), std::string::npos) << yaml;
  Result<Config> reloaded = LoadYaml(yaml);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString();
  EXPECT_EQ(reloaded->client.read_ahead_max, 32ull << 20);
  EXPECT_EQ(RenderConfig(*reloaded), yaml);
}

TEST(ConfigClusterTest, ReadsHeartbeatsWithDefaultsAndChecksTheirOrder) {
  Result<Config> config = LoadYaml("cluster: {heartbeat_interval: 200ms, heartbeat_timeout: 2s}\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->cluster.heartbeat_interval, std::chrono::milliseconds(200));
  EXPECT_EQ(config->cluster.heartbeat_timeout, std::chrono::seconds(2));
  Result<Config> defaults = LoadYaml("");
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->cluster.heartbeat_interval, std::chrono::seconds(1));
  EXPECT_EQ(defaults->cluster.heartbeat_timeout, std::chrono::seconds(5));
  EXPECT_EQ(ErrorOf(LoadYaml("cluster: {heartbeat_interval: 5s}\n")),
            "lake.yaml: cluster.heartbeat_timeout: must be longer than "
            "cluster.heartbeat_interval (5s)");
  EXPECT_EQ(ErrorOf(LoadYaml("cluster: {heartbeat: 1s}\n")),
            "lake.yaml: cluster.heartbeat: unknown key");
  Result<Config> rendered = LoadConfigText(RenderConfig(*config), "rendered", ConfigFormat::kYaml);
  ASSERT_TRUE(rendered.ok()) << rendered.status().ToString();
  EXPECT_EQ(rendered->cluster.heartbeat_interval, std::chrono::milliseconds(200));
  EXPECT_EQ(rendered->cluster.heartbeat_timeout, std::chrono::seconds(2));
}

TEST(ConfigWriteTest, NamespacesCreateButNeitherOverwriteNorDeleteByDefault) {
  Result<Config> config = LoadYaml(NamespaceYaml({"uri: s3://b"}));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const NamespaceConfig& ns = config->namespaces.at("test");
  EXPECT_TRUE(ns.write);
  EXPECT_FALSE(ns.allow_overwrite);
  EXPECT_FALSE(ns.allow_delete);
}

TEST(ConfigWriteTest, ReadsEachNamespaceWriteKey) {
  Result<Config> read_only = LoadYaml(NamespaceYaml({"uri: s3://b", "write: false"}));
  ASSERT_TRUE(read_only.ok()) << read_only.status().ToString();
  EXPECT_FALSE(read_only->namespaces.at("test").write);
  Result<Config> config =
      LoadYaml(NamespaceYaml({"uri: s3://b", "allow_overwrite: yes", "allow_delete: TRUE"}));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const NamespaceConfig& ns = config->namespaces.at("test");
  EXPECT_TRUE(ns.write);
  EXPECT_TRUE(ns.allow_overwrite);
  EXPECT_TRUE(ns.allow_delete);
}

TEST(ConfigWriteTest, BadNamespaceWriteValuesNameTheKey) {
  EXPECT_EQ(ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", "write: sometimes"}))),
            "lake.yaml: namespaces.test.write: invalid boolean 'sometimes' (expected true, false, "
            "yes or no)");
  ExpectContains(ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", "allow_overwrite: 1"}))),
                 "lake.yaml: namespaces.test.allow_overwrite: invalid boolean '1'");
  EXPECT_EQ(ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", "allow_delete:"}))),
            "lake.yaml: namespaces.test.allow_delete: missing value");
  ExpectContains(ErrorOf(LoadYaml(NamespaceYaml({"uri: s3://b", "allow_delete: [true]"}))),
                 "lake.yaml: namespaces.test.allow_delete: expected a single value, got a list");
}

TEST(ConfigWriteTest, PropertiesSetTheWriteKeys) {
  Result<Config> config = LoadProperties(
      "jfs.namespaces = a, b\n"
      "jfs.namespaces.a.s3.uri = s3://x\n"
      "jfs.namespaces.a.write = false\n"
      "jfs.namespaces.b.s3.uri = s3://y\n"
      "jfs.namespaces.b.allow_overwrite = true\n"
      "jfs.namespaces.b.allow_delete = yes\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const NamespaceConfig& a = config->namespaces.at("a");
  EXPECT_FALSE(a.write);
  EXPECT_FALSE(a.allow_overwrite);
  EXPECT_FALSE(a.allow_delete);
  const NamespaceConfig& b = config->namespaces.at("b");
  EXPECT_TRUE(b.write);
  EXPECT_TRUE(b.allow_overwrite);
  EXPECT_TRUE(b.allow_delete);
  // A JindoFS namespace that says nothing about writes creates objects, as in YAML.
  Result<Config> jindo = LoadProperties(kProperties);
  ASSERT_TRUE(jindo.ok()) << jindo.status().ToString();
  EXPECT_TRUE(jindo->namespaces.at("test").write);
  EXPECT_EQ(ErrorOf(LoadProperties("jfs.namespaces = a\njfs.namespaces.a.s3.uri = s3://x\n"
                                   "jfs.namespaces.a.allow_delete = maybe\n")),
            "lake.properties: line 3: jfs.namespaces.a.allow_delete: invalid boolean 'maybe' "
            "(expected true, false, yes or no)");
}

TEST(ConfigWriteTest, OverridesSetTheWriteKeys) {
  Result<Config> config =
      LoadYaml(kFullYaml, {"namespaces.test.allow_delete=true",
                           "namespaces.test.allow_overwrite = yes", "namespaces.test.write=no"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const NamespaceConfig& ns = config->namespaces.at("test");
  EXPECT_FALSE(ns.write);
  EXPECT_TRUE(ns.allow_overwrite);
  EXPECT_TRUE(ns.allow_delete);
  Result<Config> properties = LoadProperties(kProperties, {"namespaces.other.allow_delete=true"});
  ASSERT_TRUE(properties.ok()) << properties.status().ToString();
  EXPECT_TRUE(properties->namespaces.at("other").allow_delete);
  EXPECT_FALSE(properties->namespaces.at("test").allow_delete);
  ExpectContains(ErrorOf(LoadYaml(kFullYaml, {"namespaces.test.allow_delete=please"})),
                 "lake.yaml: namespaces.test.allow_delete (from -o): invalid boolean 'please'");
}

TEST(ConfigWriteTest, RenderShowsTheWriteKeysAndReloads) {
  Result<Config> config =
      LoadYaml(NamespaceYaml({"uri: s3://b", "allow_overwrite: true", "allow_delete: true"}));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  std::string yaml = RenderConfig(*config);
  ExpectContains(yaml,
                 "block_size: 4MiB\n    write: true\n    allow_overwrite: true\n"
                 "    allow_delete: true\n");
  Result<Config> reloaded = LoadYaml(yaml);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString() << "\n" << yaml;
  const NamespaceConfig& ns = reloaded->namespaces.at("test");
  EXPECT_TRUE(ns.write);
  EXPECT_TRUE(ns.allow_overwrite);
  EXPECT_TRUE(ns.allow_delete);
  EXPECT_EQ(RenderConfig(*reloaded), yaml);
  Result<Config> read_only = LoadYaml(NamespaceYaml({"uri: s3://b", "write: no"}));
  ASSERT_TRUE(read_only.ok()) << read_only.status().ToString();
  Result<Config> read_only_again = LoadYaml(RenderConfig(*read_only));
  ASSERT_TRUE(read_only_again.ok()) << read_only_again.status().ToString();
  EXPECT_FALSE(read_only_again->namespaces.at("test").write);
}

TEST(ConfigClientWriteTest, DefaultsAndEachKey) {
  Result<Config> defaults = LoadYaml("client:\n");
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->client.write_budget, 512ull << 20);
  EXPECT_EQ(defaults->client.write_per_file, 256ull << 20);
  EXPECT_EQ(defaults->client.upload_parts_in_flight, 4u);
  Result<Config> config =
      LoadYaml("client: {write_budget: 2GiB, write_per_file: 1GiB, upload_parts_in_flight: 16}\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->client.write_budget, 2ull << 30);
  EXPECT_EQ(config->client.write_per_file, 1ull << 30);
  EXPECT_EQ(config->client.upload_parts_in_flight, 16u);
}

TEST(ConfigClientWriteTest, BadValuesNameTheKey) {
  EXPECT_EQ(ErrorOf(LoadYaml("client:\n  upload_parts_in_flight: 0\n")),
            "lake.yaml: client.upload_parts_in_flight: invalid part count '0' (expected 1 to 64)");
  ExpectContains(ErrorOf(LoadYaml("client:\n  upload_parts_in_flight: 65\n")),
                 "lake.yaml: client.upload_parts_in_flight: invalid part count '65'");
  ExpectContains(ErrorOf(LoadYaml("client:\n  upload_parts_in_flight: two\n")),
                 "lake.yaml: client.upload_parts_in_flight: invalid part count 'two'");
  ExpectContains(ErrorOf(LoadYaml("client:\n  write_budget: plenty\n")),
                 "lake.yaml: client.write_budget: invalid size 'plenty'");
  ExpectContains(ErrorOf(LoadYaml("client:\n  write_per_file: [1GiB]\n")),
                 "lake.yaml: client.write_per_file: expected a single value, got a list");
}

TEST(ConfigClientWriteTest, PerFileHoldsThePartsInFlightAndOneMore) {
  EXPECT_EQ(ErrorOf(LoadYaml("client:\n  write_per_file: 39MiB\n")),
            "lake.yaml: client.write_per_file: must be at least (upload_parts_in_flight + 1) x "
            "8MiB = 40MiB");
  Result<Config> smallest = LoadYaml("client: {write_per_file: 40MiB}\n");
  EXPECT_TRUE(smallest.ok()) << smallest.status().ToString();
  // 65 x 8MiB = 520MiB is more than the default 256MiB per file.
  EXPECT_EQ(ErrorOf(LoadYaml("client:\n  upload_parts_in_flight: 64\n")),
            "lake.yaml: client.write_per_file: must be at least (upload_parts_in_flight + 1) x "
            "8MiB = 520MiB");
  Result<Config> one = LoadYaml("client: {upload_parts_in_flight: 1, write_per_file: 16MiB}\n");
  EXPECT_TRUE(one.ok()) << one.status().ToString();
}

TEST(ConfigClientWriteTest, BudgetHoldsAtLeastOneFile) {
  EXPECT_EQ(ErrorOf(LoadYaml("client:\n  write_budget: 128MiB\n")),
            "lake.yaml: client.write_budget: must be at least client.write_per_file (256MiB)");
  EXPECT_EQ(ErrorOf(LoadYaml("client: {write_per_file: 1GiB}\n")),
            "lake.yaml: client.write_budget: must be at least client.write_per_file (1GiB)");
  Result<Config> equal = LoadYaml("client: {write_budget: 64MiB, write_per_file: 64MiB}\n");
  EXPECT_TRUE(equal.ok()) << equal.status().ToString();
}

TEST(ConfigClientWriteTest, OverridesSetTheKeysAndAreChecked) {
  Result<Config> config = LoadYaml("", {"client.write_budget=1GiB", "client.write_per_file=512MiB",
                                        "client.upload_parts_in_flight=8"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->client.write_budget, 1ull << 30);
  EXPECT_EQ(config->client.write_per_file, 512ull << 20);
  EXPECT_EQ(config->client.upload_parts_in_flight, 8u);
  EXPECT_EQ(ErrorOf(LoadYaml("", {"client.write_budget=100MiB"})),
            "lake.yaml: client.write_budget (from -o): must be at least client.write_per_file "
            "(256MiB)");
  ExpectContains(ErrorOf(LoadYaml("", {"client.upload_parts_in_flight=100"})),
                 "lake.yaml: client.upload_parts_in_flight (from -o): invalid part count '100'");
}

TEST(ConfigClientWriteTest, RenderShowsTheWriteKeysAndReloads) {
  Config config;
  config.client.write_budget = 3ull << 30;
  config.client.write_per_file = 768ull << 20;
  config.client.upload_parts_in_flight = 6;
  std::string yaml = RenderConfig(config);
  ExpectContains(yaml, "write_budget: 3GiB");
  ExpectContains(yaml, "write_per_file: 768MiB");
  ExpectContains(yaml, "upload_parts_in_flight: 6");
  Result<Config> reloaded = LoadYaml(yaml);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString() << "\n" << yaml;
  EXPECT_EQ(reloaded->client.write_budget, 3ull << 30);
  EXPECT_EQ(reloaded->client.write_per_file, 768ull << 20);
  EXPECT_EQ(reloaded->client.upload_parts_in_flight, 6u);
  EXPECT_EQ(RenderConfig(*reloaded), yaml);
}

}  // namespace
}  // namespace lakecache
