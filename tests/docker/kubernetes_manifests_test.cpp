// The Kubernetes manifests in docker/kubernetes/ cannot be applied here (no cluster), so their parts
// are checked against each other and against vapipe's own rules: each job config they carry loads as
// `vapipe validate` would load it, and the ports, probes and arguments agree with that config.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "pipeline/config.h"

namespace vapipe {
namespace {

std::vector<YAML::Node> manifest(const std::string& name) {
  return YAML::LoadAllFromFile(std::string(VAPIPE_SOURCE_DIR) + "/docker/kubernetes/" + name);
}

YAML::Node of_kind(const std::vector<YAML::Node>& docs, const std::string& kind) {
  for (const YAML::Node& d : docs) {
    if (d["kind"].as<std::string>() == kind) return d;
  }
  ADD_FAILURE() << "no " << kind;
  return YAML::Node();
}

Config job_config(const std::vector<YAML::Node>& docs, const std::string& source) {
  const std::string text = of_kind(docs, "ConfigMap")["data"]["job.yaml"].as<std::string>();
  auto config = load_config_string(text, source, "/etc/vapipe");
  EXPECT_TRUE(config.ok()) << config.status().message();
  return config.ok() ? *config : Config{};
}

std::vector<std::string> args_of(const YAML::Node& workload) {
  return workload["spec"]["template"]["spec"]["containers"][0]["args"].as<std::vector<std::string>>();
}

TEST(KubernetesManifests, TheCameraDeploymentServesWhatItsConfigBindsAndProbesHealth) {
  const auto docs = manifest("cameras.yaml");
  // The config's ${VARS} (camera passwords) must come from the container's environment: set just
  // those, and the config must load.
  std::vector<std::string> env_names;
  for (const YAML::Node& e : of_kind(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]) {
    env_names.push_back(e["name"].as<std::string>());
    ::setenv(env_names.back().c_str(), "from-the-pod", 1);
  }
  const Config c = job_config(docs, "cameras.yaml#job.yaml");
  for (const std::string& name : env_names) ::unsetenv(name.c_str());
  EXPECT_EQ(c.streams.at(0).uri, "rtsp://viewer:from-the-pod@10.0.0.21/stream1");
  EXPECT_EQ(c.job.mode, JobMode::kLive);
  EXPECT_TRUE(c.ingest.reconnect);
  std::string host;
  int metrics_port = 0;
  ASSERT_TRUE(split_host_port(c.publish.metrics_address, &host, &metrics_port).ok());
  EXPECT_EQ(host, "0.0.0.0");  // reachable from outside the pod
  EXPECT_EQ(c.publish.endpoint, "tcp://0.0.0.0:5560");

  const YAML::Node deployment = of_kind(docs, "Deployment");
  const YAML::Node container = deployment["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(args_of(deployment), (std::vector<std::string>{"run", "/etc/vapipe/job.yaml"}));
  std::vector<int> ports;
  for (const YAML::Node& p : container["ports"]) ports.push_back(p["containerPort"].as<int>());
  EXPECT_NE(std::find(ports.begin(), ports.end(), metrics_port), ports.end());
  EXPECT_NE(std::find(ports.begin(), ports.end(), 5560), ports.end());
  EXPECT_EQ(container["livenessProbe"]["httpGet"]["path"].as<std::string>(), "/healthz");
  EXPECT_EQ(deployment["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"].as<std::string>(),
            std::to_string(metrics_port));
  // The pools between the stage processes live in /dev/shm: it must be a memory volume.
  bool shm = false;
  for (const YAML::Node& m : container["volumeMounts"]) shm = shm || m["mountPath"].as<std::string>() == "/dev/shm";
  EXPECT_TRUE(shm);
  EXPECT_EQ(deployment["spec"]["replicas"].as<int>(), 1);
}

TEST(KubernetesManifests, TheArchiveJobResumesFromItsResultsFile) {
  const auto docs = manifest("archive-job.yaml");
  const Config c = job_config(docs, "archive-job.yaml#job.yaml");
  EXPECT_EQ(c.job.mode, JobMode::kArchive);
  EXPECT_FALSE(c.publish.jsonl_path.empty());  // --resume needs it
  const YAML::Node job = of_kind(docs, "Job");
  EXPECT_EQ(args_of(job), (std::vector<std::string>{"run", "/etc/vapipe/job.yaml", "--resume"}));
  EXPECT_EQ(job["spec"]["template"]["spec"]["restartPolicy"].as<std::string>(), "OnFailure");
  EXPECT_EQ(c.publish.jsonl_path.rfind("/data/", 0), 0u) << "the results file must be on the persistent volume";
}

}  // namespace
}  // namespace vapipe
