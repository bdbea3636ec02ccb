// The container and Kubernetes files of deploy/: the manifest's serve command line is one the
// binary takes (doctor passes it, and the server it starts answers the probes' paths), the probes
// and the Service name the container's port, the grace period outlasts the drain; the container's
// runtime packages hold every shared library the binary links.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/server_process.h"
#include "support/test_support.h"

namespace hz {
namespace {

// A loopback port free at the time of the call.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

std::string source(const std::string& rel) { return std::string(HORIZON_SOURCE_DIR) + "/" + rel; }

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

YAML::Node find_kind(const std::vector<YAML::Node>& docs, const std::string& kind) {
  for (const auto& d : docs) {
    if (d["kind"] && d["kind"].as<std::string>() == kind) return d;
  }
  return YAML::Node();
}

// The value after `flag` in args ("" when absent).
std::string flag_value(const std::vector<std::string>& args, const std::string& flag) {
  auto it = std::find(args.begin(), args.end(), flag);
  return it != args.end() && it + 1 != args.end() ? *(it + 1) : "";
}

TEST(DeployFilesTest, KubernetesManifestServesAndProbes) {
  const std::vector<YAML::Node> docs = YAML::LoadAllFromFile(source("deploy/kubernetes/horizon.yaml"));
  const YAML::Node deployment = find_kind(docs, "Deployment");
  const YAML::Node service = find_kind(docs, "Service");
  ASSERT_TRUE(deployment) << "no Deployment";
  ASSERT_TRUE(service) << "no Service";
  const YAML::Node pod = deployment["spec"]["template"]["spec"];
  const YAML::Node c = pod["containers"][0];
  std::vector<std::string> args = c["args"].as<std::vector<std::string>>();
  ASSERT_FALSE(args.empty());
  EXPECT_EQ(args[0], "serve");

  // Ports: the probes and the Service name the port the server listens on.
  const int port = std::stoi(flag_value(args, "--port"));
  ASSERT_EQ(c["ports"][0]["containerPort"].as<int>(), port);
  const std::string port_name = c["ports"][0]["name"].as<std::string>();
  EXPECT_EQ(service["spec"]["ports"][0]["targetPort"].as<std::string>(), port_name);
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"].as<std::string>(), "/health");
  for (const char* probe : {"readinessProbe", "startupProbe"}) {
    EXPECT_EQ(c[probe]["httpGet"]["path"].as<std::string>(), "/ready") << probe;
    EXPECT_EQ(c[probe]["httpGet"]["port"].as<std::string>(), port_name) << probe;
  }
  EXPECT_EQ(flag_value(args, "--host"), "0.0.0.0");  // reachable from the Service
  // SIGTERM drains for --shutdown-grace seconds; Kubernetes kills after the grace period.
  EXPECT_GT(pod["terminationGracePeriodSeconds"].as<int>(), std::stoi(flag_value(args, "--shutdown-grace")));
  // The key comes from a Secret, never from the manifest's text.
  EXPECT_EQ(c["env"][0]["name"].as<std::string>(), "HORIZON_API_KEY");
  EXPECT_TRUE(c["env"][0]["valueFrom"]["secretKeyRef"]);
  EXPECT_EQ(std::find(args.begin(), args.end(), "--api-key"), args.end());
  // The writable paths are volumes (the root file system is read-only).
  EXPECT_TRUE(c["securityContext"]["readOnlyRootFilesystem"].as<bool>());
  const std::string kv_dir = flag_value(args, "--kv-disk-dir");
  bool kv_on_volume = false;
  for (const auto& m : c["volumeMounts"]) kv_on_volume |= kv_dir.rfind(m["mountPath"].as<std::string>() + "/", 0) == 0;
  EXPECT_TRUE(kv_on_volume) << kv_dir;

  // The same command line here: the test model for /models/model.gguf, folders of this machine.
  const std::string dir = test::make_temp_dir("deploy");
  for (auto& a : args) {
    if (a == "/models/model.gguf") a = test::model_path("stories260K.gguf");
    if (a == kv_dir) a = dir + "/kv";
  }
  setenv("HORIZON_API_KEY", "deploy-test-key", 1);
  std::string cmd = std::string(HORIZON_BINARY) + " doctor";
  for (size_t i = 1; i < args.size(); ++i) cmd += " '" + (args[i - 1] == "--port" ? std::to_string(free_port()) : args[i]) + "'";
  std::string out, err;
  EXPECT_EQ(test::run_command(cmd, &out, &err), 0) << cmd << "\n" << out << err;
  // serve with it (loopback, a free port) answers the probes.
  std::vector<std::string> serve_args;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--port" || args[i] == "--host") {
      ++i;
      continue;
    }
    serve_args.push_back(args[i]);
  }
  test::ServerProcess server(serve_args);
  ASSERT_TRUE(server.ok()) << server.log();
  std::string body;
  EXPECT_EQ(test::http_request("GET", server.base_url() + "/health", "", &body), 200) << body;
  EXPECT_EQ(test::http_request("GET", server.base_url() + "/ready", "", &body), 200) << body;
  EXPECT_EQ(test::http_request("GET", server.base_url() + "/v1/models", "", &body), 401) << body;  // the key is required
  EXPECT_EQ(server.terminate(), 0) << server.log();
  unsetenv("HORIZON_API_KEY");
  std::filesystem::remove_all(dir);
}

// Every shared library of the binary comes from a package the runtime stage installs.
TEST(DeployFilesTest, ContainerInstallsTheLibrariesTheBinaryLinks) {
  if (std::system("command -v dpkg >/dev/null 2>&1 && command -v ldd >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "needs dpkg and ldd (a Debian machine)";
  const std::string file = read(source("deploy/container/Containerfile"));
  // The runtime stage: after the last FROM.
  const std::string runtime = file.substr(file.rfind("\nFROM "));
  std::string out, err;
  ASSERT_EQ(test::run_command("(ldd " + std::string(HORIZON_BINARY) + " | awk '/=>/ {print $3}')", &out, &err), 0) << err;
  std::istringstream libs(out);
  std::string lib;
  std::set<std::string> packages;
  while (std::getline(libs, lib)) {
    if (lib.empty()) continue;
    // dpkg knows a file by the path its package installed (/lib or /usr/lib on a merged /usr).
    std::string resolved = std::filesystem::canonical(lib).string();
    for (const std::string& p : {resolved, lib, resolved.rfind("/usr", 0) == 0 ? resolved.substr(4) : "/usr" + resolved}) {
      std::string pkg;
      if (test::run_command("(dpkg -S '" + p + "' 2>/dev/null | head -1 | cut -d: -f1)", &pkg, &err) == 0 && !pkg.empty()) {
        pkg.erase(pkg.find_last_not_of("\n ") + 1);
        packages.insert(pkg);
        break;
      }
    }
  }
  ASSERT_FALSE(packages.empty()) << out;
  // Packages every Debian image has (Essential: yes) need not be listed.
  for (const std::string& pkg : packages) {
    if (pkg == "libc6" || pkg == "libgcc-s1" || pkg == "libtinfo6") continue;
    EXPECT_NE(runtime.find(" " + pkg + " "), std::string::npos) << pkg << " is not installed by the runtime stage";
  }
}

}  // namespace
}  // namespace hz
