// The `lakecache` binary end to end against s3rver: output formats, exit codes, messages, config
// handling, and that secrets never reach stdout or stderr. Mounts: cli_mount_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "integration/cli_fixture.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::cli_test {
namespace {

using testing::RunCommand;
using testing::RunResult;

class CliTest : public testing::CliFixture {};

TEST_F(CliTest, LsListsOneLevelWithFoldersEndingInSlash) {
  RunResult r = Lc({"ls", "s3://cli/data/", "--path-style"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(" PRE sub/\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("         12 a.txt\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" with space.txt\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("b.txt"), std::string::npos) << r.out;
}

TEST_F(CliTest, LsRecursiveListsEveryKey) {
  RunResult r = Lc({"ls", "-R", "s3://cli/", "--path-style"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* key : {"data/a.txt", "data/sub/b.txt", "data/big.bin", "top.txt"}) {
    EXPECT_NE(r.out.find(std::string(" ") + key + "\n"), std::string::npos) << key << "\n" << r.out;
  }
  EXPECT_EQ(r.out.find("PRE"), std::string::npos) << r.out;
}

TEST_F(CliTest, StatShowsSizeAndEtag) {
  RunResult r = Lc({"stat", "s3://cli/data/a.txt", "--path-style"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("type: file\nsize: 12\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("etag: "), std::string::npos) << r.out;
  RunResult dir = Lc({"stat", "s3://cli/data", "--path-style"});
  ASSERT_EQ(dir.exit_code, 0) << dir.err;
  EXPECT_NE(dir.out.find("type: directory"), std::string::npos) << dir.out;
}

TEST_F(CliTest, CatWritesObjectAndInclusiveRange) {
  RunResult all = Lc({"cat", "s3://cli/data/a.txt", "--path-style"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(all.out, "hello world\n");
  RunResult part = Lc({"cat", "s3://cli/data/a.txt", "--range", "6-10", "--path-style"});
  ASSERT_EQ(part.exit_code, 0) << part.err;
  EXPECT_EQ(part.out, "world");
  RunResult tail = Lc({"cat", "s3://cli/data/a.txt", "--range", "6-", "--path-style"});
  EXPECT_EQ(tail.out, "world\n");
}

TEST_F(CliTest, CatOfMultiChunkObjectIsExact) {
  RunResult r = Lc({"cat", "s3://cli/data/big.bin", "--path-style"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out.size(), 5u * 1024 * 1024 + 3);
  for (size_t i = 0; i < r.out.size(); i += 4099) {
    ASSERT_EQ(static_cast<unsigned char>(r.out[i]), i % 251) << "at " << i;
  }
}

TEST_F(CliTest, MissingKeyExitsTwoWithClearMessage) {
  RunResult r = Lc({"cat", "s3://cli/data/nope.txt", "--path-style"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("s3://cli/data/nope.txt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not found"), std::string::npos) << r.err;
  RunResult ls = Lc({"ls", "s3://cli/nothing-here/", "--path-style"});
  EXPECT_EQ(ls.exit_code, 2) << ls.out;
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Lc({"ls"}).exit_code, 2);
  EXPECT_EQ(Lc({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(Lc({"cat", "s3://cli/data/a.txt", "--range", "9-2", "--path-style"}).exit_code, 2);
  RunResult bad_uri = Lc({"ls", "gs://bucket/x"});
  EXPECT_EQ(bad_uri.exit_code, 2);
  EXPECT_NE(bad_uri.err.find("unsupported URI scheme 'gs'"), std::string::npos) << bad_uri.err;
}

// A mistyped command is named, with the nearest one there is, where CLI11 would say only that a
// subcommand is required.
TEST_F(CliTest, MistypedCommandIsNamedWithTheNearestOne) {
  RunResult top = Lc({"mout", "s3://cli/data", "/mnt/x"});
  EXPECT_EQ(top.exit_code, 2);
  EXPECT_NE(top.err.find("lakecache: error: unknown command 'mout'; did you mean 'mount'? "
                         "(`lakecache --help` lists the commands)\n"),
            std::string::npos)
      << top.err;
  EXPECT_EQ(top.err.find("subcommand is required"), std::string::npos) << top.err;

  RunResult nested = Lc({"cluster", "upp", "--dir", scratch_->path()});
  EXPECT_EQ(nested.exit_code, 2);
  EXPECT_NE(nested.err.find("unknown command 'cluster upp'; did you mean 'cluster up'? "
                            "(`lakecache cluster --help` lists the commands)"),
            std::string::npos)
      << nested.err;

  RunResult far = Lc({"frobnicate"});
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_NE(far.err.find("unknown command 'frobnicate' (`lakecache --help` lists the commands)"),
            std::string::npos)
      << far.err;
  // No command at all is not a mistyped one.
  RunResult none = Lc({"--log-level", "info"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.err.find("unknown command"), std::string::npos) << none.err;
}

// A local store is opened at the file's folder; `stat` still names the whole path.
TEST_F(CliTest, StatOfALocalFileShowsItsWholeUri) {
  std::string dir = Folder("local");
  ASSERT_TRUE(testing::WriteFile(dir + "/x.txt", "local\n").ok());
  RunResult file = Lc({"stat", "file://" + dir + "/x.txt"});
  ASSERT_EQ(file.exit_code, 0) << file.err;
  EXPECT_TRUE(file.out.starts_with("uri: file://" + dir + "/x.txt\ntype: file\nsize: 6\n"))
      << file.out;
  RunResult folder = Lc({"stat", "file://" + dir});
  ASSERT_EQ(folder.exit_code, 0) << folder.err;
  EXPECT_EQ(folder.out, "uri: file://" + dir + "\ntype: directory\n");
  RunResult missing = Lc({"stat", "file://" + dir + "/nope"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("file://" + dir + "/nope: no such key or prefix"), std::string::npos)
      << missing.err;
}

TEST_F(CliTest, UnreachableEndpointExitsOneAfterRetries) {
  int port = testing::FreeLoopbackPort();
  RunResult r = Lc({"ls", "s3://cli/", "--path-style", "--endpoint",
                    "http://127.0.0.1:" + std::to_string(port)});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << r.err;
}

// An endpoint that accepts connections and never answers (a proxy that drops requests, a
// half-open load balancer): `ls` gives up within its default --timeout of 30 s, naming the
// endpoint and what it waited for (it used to wait 151 s: five attempts of curl's 30 s stall
// limit, and say nothing meanwhile).
TEST_F(CliTest, LsAtAnEndpointThatNeverAnswersFailsWithinTheDefaultTimeoutNamingIt) {
  auto silent = testing::SilentListener::Start();
  ASSERT_TRUE(silent.ok()) << silent.status().ToString();
  std::string endpoint = "http://" + (*silent)->address();
  auto start = Clock::now();
  RunResult r = Lc({"ls", "s3://cli/", "--endpoint", endpoint}, {}, std::chrono::seconds(120));
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("no answer from " + endpoint + " within 30s while listing s3://cli/"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--timeout"), std::string::npos) << r.err;
  EXPECT_LT(took, 90.0) << r.err;
  std::cout << "ls of an endpoint that never answers failed after " << took << " s\n";
}

// The same bound, set by --timeout, for `stat` and `cat` of the store, and for the admin commands
// and `cluster status` at a master that never answers.
TEST_F(CliTest, EveryCommandAtAPeerThatNeverAnswersEndsWithinItsTimeout) {
  auto silent = testing::SilentListener::Start();
  ASSERT_TRUE(silent.ok()) << silent.status().ToString();
  std::string endpoint = "http://" + (*silent)->address();
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"stat", "s3://cli/data/a.txt"}, {"cat", "s3://cli/data/a.txt"}}) {
    std::vector<std::string> argv = {"--timeout", "2s", "--endpoint", endpoint};
    argv.insert(argv.end(), args.begin(), args.end());
    RunResult r = Lc(argv, {}, std::chrono::seconds(60));
    EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("no answer from " + endpoint +
                         " within 2s while asking for "
                         "s3://cli/data/a.txt"),
              std::string::npos)
        << args[0] << ": " << r.err;
  }
  std::string master = (*silent)->address();
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"report", "--master", master},
                                             {"stat", "/ns/a.txt", "--master", master},
                                             {"load", "/ns/a.txt", "--master", master},
                                             {"cluster", "status", "--master", master}}) {
    std::vector<std::string> argv = {"--timeout", "2s"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunResult r = Lc(argv, {}, std::chrono::seconds(60));
    EXPECT_NE(r.exit_code, 0) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(master), std::string::npos) << args[0] << ": " << r.err;
  }
  RunResult zero = Lc({"--timeout", "0s", "ls", "s3://cli/"});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("--timeout '0s'"), std::string::npos) << zero.err;
}

TEST_F(CliTest, HelpAndVersion) {
  RunResult help = Lc({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("ls"), std::string::npos);
  for (const char* cmd : {"ls", "stat", "cat", "config"}) {
    RunResult h = Lc({cmd, "--help"});
    EXPECT_EQ(h.exit_code, 0) << cmd;
    EXPECT_EQ(h.out.find(kSecret), std::string::npos) << cmd;
  }
  RunResult version = Lc({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.out.find("lakecache "), std::string::npos);
}

TEST_F(CliTest, ConfigNamespaceSuppliesEndpointAndCredentials) {
  std::string secret_file = WriteConfig("secret", std::string(kSecret) + "\n");
  std::string cfg = WriteConfig("lake.yaml",
                                "namespaces:\n"
                                "  data:\n"
                                "    uri: s3://cli/data\n"
                                "    endpoint: " +
                                    server_->endpoint() +
                                    "\n"
                                    "    path_style: true\n"
                                    "    access_key: S3RVER\n"
                                    "    secret_key_file: " +
                                    secret_file + "\n");
  // No credentials or endpoint in the environment: everything comes from the config.
  RunResult r = RunCommand({LAKECACHE_BINARY, "cat", "s3://cli/data/sub/b.txt", "--config", cfg},
                           {"-AWS_ACCESS_KEY_ID", "-AWS_SECRET_ACCESS_KEY", "-AWS_ENDPOINT_URL"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "bee");
}

TEST_F(CliTest, ConfigShowRedactsSecrets) {
  const std::string secret = "sk-very-secret-123";
  std::string cfg = WriteConfig("show.yaml",
                                "namespaces:\n"
                                "  ds:\n"
                                "    uri: s3://bucket/ds\n"
                                "    endpoint: http://127.0.0.1:9\n"
                                "    access_key: AKIDSHOW\n"
                                "    secret_key: " +
                                    secret + "\n");
  RunResult r = Lc({"config", "show", "--config", cfg, "-o", "namespaces.ds.metadata_ttl=5m"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find(secret), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("<redacted>"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("AKIDSHOW"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("5m"), std::string::npos) << r.out;
}

TEST_F(CliTest, MalformedConfigNamesFileAndKey) {
  std::string cfg =
      WriteConfig("bad.yaml", "namespaces:\n  ds:\n    uri: s3://b/p\n    metadata_ttl: soon\n");
  RunResult r = Lc({"config", "show", "--config", cfg});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.yaml"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("namespaces.ds.metadata_ttl"), std::string::npos) << r.err;
}

TEST_F(CliTest, SecretOverrideOnCommandLineIsRefused) {
  std::string cfg = WriteConfig("o.yaml", "namespaces:\n  ds:\n    uri: s3://b/p\n");
  RunResult r = Lc({"config", "show", "--config", cfg, "-o", "namespaces.ds.secret_key=abc123xyz"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find("abc123xyz"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ps"), std::string::npos) << r.err;
}

TEST_F(CliTest, LocalDirectoryThroughFileUri) {
  std::string dir = server_->dir() + "/local";
  ASSERT_EQ(RunCommand({"mkdir", "-p", dir + "/x"}).exit_code, 0);
  ASSERT_TRUE(testing::WriteFile(dir + "/x/f.txt", "local bytes").ok());
  RunResult ls = Lc({"ls", "file://" + dir + "/"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find(" PRE x/\n"), std::string::npos) << ls.out;
  RunResult cat = Lc({"cat", "file://" + dir + "/x/f.txt", "--range", "0-4"});
  ASSERT_EQ(cat.exit_code, 0) << cat.err;
  EXPECT_EQ(cat.out, "local");
}

// Every usage or configuration error exits 2, before anything is mounted; runtime failures exit 1.
TEST_F(CliTest, MountUsageAndConfigErrorsExitTwo) {
  std::string mnt = Mountpoint();
  auto mount = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"mount", "s3://cli/data", mnt};
    args.insert(args.end(), extra.begin(), extra.end());
    RunResult r = Lc(args, {}, std::chrono::seconds(30));
    EXPECT_FALSE(testing::IsMounted(mnt)) << testing::JoinArgv(args);
    return r;
  };
  struct Case {
    std::vector<std::string> extra;
    std::string message;
  };
  const Case cases[] = {
      {{"--mem-cache", "0"}, "--mem-cache: must be more than 0"},
      {{"--mem-cache", "10XB"}, "--mem-cache: invalid size unit in '10XB'"},
      {{"--cache-size", "1GiB"}, "--cache-size: needs --cache-dir"},
      {{"-o", "namespaces.other.x=1"},
       "-o namespaces.other.x: this mount has one namespace, 'cli': set its keys as "
       "namespaces.cli.KEY"},
      {{"-o", "file_mode=0999"}, "-o file_mode=0999: '0999' is not an octal mode"},
      {{"-o", "uid=me"}, "-o uid=me: 'me' is not a number"},
      {{"--config", scratch_->path()}, scratch_->path() + ": is a folder, not a config file"},
  };
  for (const Case& c : cases) {
    RunResult r = mount(c.extra);
    EXPECT_EQ(r.exit_code, 2) << testing::JoinArgv(c.extra) << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << testing::JoinArgv(c.extra) << "\n"
                                                        << r.err;
  }
  // A config path that is a folder is the same error for every command.
  RunResult show = Lc({"config", "show", "--config", scratch_->path()});
  EXPECT_EQ(show.exit_code, 2) << show.err;
  EXPECT_NE(show.err.find("is a folder, not a config file"), std::string::npos) << show.err;
  // So is a mountpoint that holds files (mounting would hide them).
  ASSERT_TRUE(testing::WriteFile(mnt + "/keep.txt", "mine").ok());
  RunResult full = mount({});
  EXPECT_EQ(full.exit_code, 2) << full.err;
  EXPECT_NE(full.err.find(mnt + " is not empty"), std::string::npos) << full.err;
}

TEST_F(CliTest, MountWithoutMountpointSaysTheMountpointIsMissing) {
  RunResult r = Lc({"mount", "s3://cli/data", "--endpoint", server_->endpoint()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("the MOUNTPOINT is missing: `lakecache mount s3://cli/data MOUNTPOINT`"),
            std::string::npos)
      << r.err;
  RunResult none = Lc({"mount"});
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_NE(none.err.find("the MOUNTPOINT is missing"), std::string::npos) << none.err;
}

TEST_F(CliTest, MountHelpListsEveryMountOptionAndNamesThePositionals) {
  RunResult r = Lc({"mount", "--help"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* part :
       {"URI", "MOUNTPOINT", "allow_other", "uid=N", "gid=N", "file_mode=MODE", "dir_mode=MODE",
        "default_permissions", "ro ", "KEY=VALUE", "--cache-dir", "--background"}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << part << " not in:\n" << r.out;
  }
  EXPECT_EQ(r.out.find("args"), std::string::npos) << r.out;
}

TEST_F(CliTest, UmountOfAFolderThatIsNoMountSaysItIsNotALakecacheMount) {
  std::string folder = Folder("plain");
  RunResult r = Lc({"umount", folder});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(folder + " is not a lakecache mount (nothing is mounted there)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("Invalid argument"), std::string::npos) << r.err;
  RunResult proc = Lc({"umount", "/proc"});
  EXPECT_EQ(proc.exit_code, 2) << proc.err;
  EXPECT_NE(proc.err.find("/proc is not a lakecache mount (a proc mount)"), std::string::npos)
      << proc.err;
}

// docs/configuration.md: an IP or localhost endpoint means path-style, from the command line too.
TEST_F(CliTest, IpEndpointMeansPathStyleWithoutTheFlag) {
  RunResult flag = Lc({"ls", "s3://cli/data/", "--endpoint", server_->endpoint()});
  EXPECT_EQ(flag.exit_code, 0) << flag.err;
  EXPECT_NE(flag.out.find(" a.txt\n"), std::string::npos) << flag.out;
  RunResult env = Lc({"cat", "s3://cli/data/a.txt"});  // AWS_ENDPOINT_URL alone
  EXPECT_EQ(env.exit_code, 0) << env.err;
  EXPECT_EQ(env.out, "hello world\n");
}

// This process's wall clock jumped (libfaketime, Debian's faketime; the system clock is left
// alone): s3rver refuses the signature as RequestTimeTooSkewed, and the store signs again with the
// time of its Date header, once, and from then on.
TEST_F(CliTest, AClockHoursOffIsCorrectedFromTheStoresDate) {
  const char* lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
  ASSERT_TRUE(std::filesystem::exists(lib))
      << "faketime is not installed (scripts/install-deps.sh)";
  std::string big(kBigSize, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i % 251);
  for (const char* offset : {"+2h", "-3h"}) {
    std::vector<std::string> env = {std::string("LD_PRELOAD=") + lib,
                                    std::string("FAKETIME=") + offset,
                                    "FAKETIME_DONT_FAKE_MONOTONIC=1"};
    RunResult ls = Lc({"ls", "s3://cli/data/", "--path-style"}, env);
    EXPECT_EQ(ls.exit_code, 0) << offset << ": " << ls.err;
    EXPECT_NE(ls.out.find(" a.txt\n"), std::string::npos) << ls.out;
    EXPECT_NE(ls.err.find("this host's clock is"), std::string::npos) << offset << ": " << ls.err;
    RunResult cat = Lc({"cat", "s3://cli/data/big.bin", "--path-style"}, env);
    EXPECT_EQ(cat.exit_code, 0) << offset << ": " << cat.err;
    EXPECT_TRUE(cat.out == big) << offset << ": " << cat.out.size() << " bytes";
  }
}

TEST_F(CliTest, UnresolvedVirtualHostedNameSaysToUsePathStyle) {
  std::string cfg = BucketConfig("    path_style: false\n");
  RunResult r = Lc({"ls", "s3://cli/data/", "--config", cfg});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("Could not resolve host"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("addressed virtual-hosted, as cli.127.0.0.1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--path-style, or path_style: true in the config"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find(kSecret), std::string::npos);
}

}  // namespace
}  // namespace lakecache::cli_test
