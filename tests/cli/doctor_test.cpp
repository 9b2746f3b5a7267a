// `vapipe doctor`'s checks: each against this machine, and the judgements against machines we do not
// have (a GPU, an old driver, missing plugins), made up as probe results.
#include "cli/doctor.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <zmq.h>

#include <cstdlib>
#include <set>

#include <nlohmann/json.hpp>

namespace vapipe::cli {
namespace {

// gtest without gmock: says what the text was when the part is missing.
::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

GpuRuntime gpu_machine(int driver_version, int runtime_version, int gpu_count = 1) {
  GpuRuntime g;
  g.built_with_cuda = true;
  g.driver_version = driver_version;
  g.runtime_version = runtime_version;
  for (int i = 0; i < gpu_count; ++i) {
    GpuDevice d;
    d.index = i;
    d.name = "NVIDIA H200";
    d.pci_bus_id = "00000000:1" + std::to_string(i) + ":00.0";
    d.compute_major = 9;
    d.compute_minor = 0;
    d.total_bytes = 140ull << 30;
    d.free_bytes = 139ull << 30;
    g.devices.push_back(d);
  }
  return g;
}

TorchRuntimeInfo cuda_torch(int cuda_version, bool sees_gpu) {
  TorchRuntimeInfo t;
  t.version = "2.11.0";
  t.built_with_cuda = true;
  t.cuda_version = cuda_version;
  t.cuda_available = sees_gpu;
  t.cuda_device_count = sees_gpu ? 1 : 0;
  t.has_cudnn = true;
  t.cudnn_version = 91900;
  return t;
}

// --- CUDA driver and runtime ---

TEST(DoctorCuda, DriverForTheSameOrNewerCudaIsOk) {
  CheckResult r = check_cuda(gpu_machine(13000, 13000));
  EXPECT_EQ(r.status, CheckStatus::kOk) << r.detail;
  EXPECT_TRUE(Contains(r.detail, "driver supports CUDA 13.0"));
  EXPECT_TRUE(r.fix.empty());
  EXPECT_EQ(check_cuda(gpu_machine(13010, 12080)).status, CheckStatus::kOk);
}

TEST(DoctorCuda, DriverOfAnOlderMajorVersionFails) {
  CheckResult r = check_cuda(gpu_machine(12040, 13000));
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_TRUE(Contains(r.detail, "12.4"));
  EXPECT_TRUE(Contains(r.fix, "CUDA 13.0 or newer"));
}

TEST(DoctorCuda, DriverOfAnOlderMinorVersionWarns) {
  CheckResult r = check_cuda(gpu_machine(13000, 13010));
  EXPECT_EQ(r.status, CheckStatus::kWarn);
  EXPECT_TRUE(Contains(r.fix, "13.1"));
}

TEST(DoctorCuda, NoDriverOrNoToolkitOnlyWarns) {
  GpuRuntime no_driver = gpu_machine(0, 13000, 0);
  EXPECT_EQ(check_cuda(no_driver).status, CheckStatus::kWarn);
  EXPECT_TRUE(Contains(check_cuda(no_driver).fix, "NVIDIA driver"));
  GpuRuntime no_toolkit;  // what the stub build reports
  EXPECT_EQ(check_cuda(no_toolkit).status, CheckStatus::kWarn);
  EXPECT_TRUE(Contains(check_cuda(no_toolkit).fix, "CUDA toolkit"));
}

TEST(DoctorCuda, ThisMachineNeverFailsWithoutAGpu) {
  GpuRuntime gpus = probe_gpus(/*with_memory=*/false);
  if (!gpus.devices.empty()) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_EQ(check_cuda(gpus).status, CheckStatus::kWarn);
}

// --- GPUs ---

TEST(DoctorGpus, ThisMachineIsWarnWithoutAGpuAndNeverFail) {
  GpuRuntime gpus = probe_gpus(/*with_memory=*/true);
  std::vector<CheckResult> results = check_gpus(gpus);
  for (const CheckResult& r : results) EXPECT_NE(r.status, CheckStatus::kFail) << r.name << ": " << r.detail;
  if (gpus.devices.empty()) {
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].name, "gpu");
    EXPECT_EQ(results[0].status, CheckStatus::kWarn);
    EXPECT_TRUE(Contains(results[0].detail, "runs on CPU"));
    EXPECT_FALSE(results[0].fix.empty());
  } else {
    ASSERT_EQ(results.size(), gpus.devices.size());
    EXPECT_EQ(results[0].name, "gpu:0");
    EXPECT_TRUE(Contains(results[0].detail, gpus.devices[0].name));
  }
}

TEST(DoctorGpus, OneLinePerGpuWithComputeCapabilityAndMemory) {
  GpuRuntime gpus = gpu_machine(13000, 13000, 2);
  gpus.devices[1].free_bytes = 100ull << 20;  // another process holds the rest
  std::vector<CheckResult> results = check_gpus(gpus);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].name, "gpu:0");
  EXPECT_EQ(results[0].status, CheckStatus::kOk);
  EXPECT_TRUE(Contains(results[0].detail, "NVIDIA H200, compute capability 9.0, 139.0 GiB free of 140.0 GiB"));
  EXPECT_EQ(results[1].name, "gpu:1");
  EXPECT_EQ(results[1].status, CheckStatus::kWarn);
  EXPECT_TRUE(Contains(results[1].detail, "0.1 GiB free"));
  EXPECT_TRUE(Contains(results[1].fix, "nvidia-smi"));
}

// --- LibTorch ---

TEST(DoctorLibTorch, ThisMachinesLibTorchAnswersEveryQuery) {
  TorchRuntimeInfo torch = torch_runtime_info();
  // The header's version is the one CMake's find_package(Torch) found (major.minor: a package's
  // version may carry a suffix such as +cu130).
  const std::string found_by_cmake = VAPIPE_TEST_TORCH_VERSION;
  const std::string major_minor = found_by_cmake.substr(0, found_by_cmake.find('.', found_by_cmake.find('.') + 1));
  ASSERT_FALSE(major_minor.empty());
  EXPECT_EQ(torch.version.rfind(major_minor + ".", 0), 0u) << torch.version << " vs " << found_by_cmake;
  // A CPU-only LibTorch throws for CUDA and cuDNN versions: the probe must not ask it.
  EXPECT_TRUE(torch.error.empty()) << torch.error;
  if (!torch.built_with_cuda) {
    EXPECT_EQ(torch.cuda_version, 0);
    EXPECT_FALSE(torch.cuda_available);
  } else {
    EXPECT_GE(torch.cuda_version, 10000);
  }
  CheckResult r = check_libtorch(torch, probe_gpus(/*with_memory=*/false));
  EXPECT_TRUE(Contains(r.detail, "LibTorch " + torch.version));
  EXPECT_NE(r.status, CheckStatus::kFail) << r.detail;
}

TEST(DoctorLibTorch, APluginThatDoesNotLoadFailsSayingWhy) {
  TorchRuntimeInfo missing;  // as torch_runtime_info() answers when the plugin is not found
  missing.error = "LibTorch's plugin libvapipe_torch.so is not installed beside vapipe (looked at /opt/bin/...)";
  CheckResult r = check_libtorch(missing, GpuRuntime{});
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_TRUE(Contains(r.detail, "LibTorch is not loaded: LibTorch's plugin libvapipe_torch.so is not installed"));
  EXPECT_TRUE(Contains(r.fix, "VAPIPE_TORCH_PLUGIN"));
}

TEST(DoctorLibTorch, CudaNewerThanTheDriverFails) {
  CheckResult r = check_libtorch(cuda_torch(13000, false), gpu_machine(12040, 12040));
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_TRUE(Contains(r.detail, "CUDA 13.0"));
  EXPECT_TRUE(Contains(r.fix, "upgrade the NVIDIA driver"));
}

TEST(DoctorLibTorch, CudaBuildThatSeesTheGpuIsOk) {
  CheckResult r = check_libtorch(cuda_torch(12080, true), gpu_machine(13000, 13000));
  EXPECT_EQ(r.status, CheckStatus::kOk) << r.detail;
  EXPECT_TRUE(Contains(r.detail, "LibTorch 2.11.0, CUDA 12.8, cuDNN 9.19.0, sees 1 GPU(s)"));
}

TEST(DoctorLibTorch, CudaBuildBlindToListedGpusFails) {
  EXPECT_EQ(check_libtorch(cuda_torch(13000, false), gpu_machine(13000, 13000)).status, CheckStatus::kFail);
}

TEST(DoctorLibTorch, CpuBuildIsOkWithoutGpuAndWarnsWithOne) {
  TorchRuntimeInfo cpu;
  cpu.version = "1.13.0";
  EXPECT_EQ(check_libtorch(cpu, GpuRuntime{}).status, CheckStatus::kOk);
  CheckResult r = check_libtorch(cpu, gpu_machine(13000, 13000));
  EXPECT_EQ(r.status, CheckStatus::kWarn);
  EXPECT_TRUE(Contains(r.fix, "LibTorch built with CUDA"));
}

TEST(DoctorLibTorch, CudnnVersionsOfBothEncodings) {
  EXPECT_EQ(cudnn_version_string(91900), "9.19.0");
  EXPECT_EQ(cudnn_version_string(8907), "8.9.7");
  EXPECT_EQ(cudnn_version_string(0), "none");
}

// --- GStreamer and NVDEC ---

TEST(DoctorGstreamer, ThisMachineHasTheCpuDecodingElements) {
  CheckResult r = check_gstreamer();
  EXPECT_EQ(r.status, CheckStatus::kOk) << r.detail << "; " << r.fix;
  EXPECT_TRUE(Contains(r.detail, "GStreamer " VAPIPE_TEST_GST_VERSION));
}

TEST(DoctorGstreamer, MissingElementsFailNamingTheDebianPackage) {
  auto all_but = [](std::set<std::string> absent) {
    return [absent](const std::string& factory) { return absent.count(factory) == 0; };
  };
  CheckResult r = check_gstreamer("1.22.0", all_but({"h264parse", "qtdemux"}));
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_TRUE(Contains(r.detail, "h264parse (gstreamer1.0-plugins-bad)"));
  EXPECT_EQ(r.fix, "apt-get install gstreamer1.0-plugins-bad gstreamer1.0-plugins-good");

  r = check_gstreamer("1.22.0", all_but({"avdec_h264", "openh264dec", "nvh264dec"}));
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_EQ(r.fix, "apt-get install gstreamer1.0-libav");

  // Where NVDEC decodes H.264, jobs run without a CPU decoder: a warning, with the same fix.
  r = check_gstreamer("1.22.0", all_but({"avdec_h264", "openh264dec"}));
  EXPECT_EQ(r.status, CheckStatus::kWarn) << r.detail;
  EXPECT_TRUE(Contains(r.detail, "no CPU H.264 decoder: NVDEC decodes H.264 here (nvh264dec)")) << r.detail;
  EXPECT_EQ(r.fix, "apt-get install gstreamer1.0-libav");
  // Anything else missing as well still fails.
  r = check_gstreamer("1.22.0", all_but({"avdec_h264", "openh264dec", "qtdemux"}));
  EXPECT_EQ(r.status, CheckStatus::kFail);

  r = check_gstreamer("1.22.0", all_but({"avdec_h264"}));
  EXPECT_EQ(r.status, CheckStatus::kOk);
  EXPECT_TRUE(Contains(r.detail, "H.264 decoder openh264dec"));
}

TEST(DoctorNvdec, NamesEveryDecoderAndNeverFails) {
  CheckResult r = check_nvdec();
  EXPECT_NE(r.status, CheckStatus::kFail);
  for (const char* decoder : {"nvh264dec", "nvh265dec", "nvvp9dec", "nvav1dec"}) {
    EXPECT_TRUE(Contains(r.detail, decoder));
  }
  EXPECT_TRUE(Contains(r.detail, "gstreamer-cuda-1.0"));
  if (probe_gpus(/*with_memory=*/false).devices.empty()) {
    EXPECT_EQ(r.status, CheckStatus::kWarn);
    EXPECT_TRUE(Contains(r.fix, "libnvcuvid"));
  }
}

// --- disk, ZeroMQ, model ---

TEST(DoctorDisk, ReportsANonzeroFreeFigure) {
  for (const char* path : {"/tmp", "/dev/shm"}) {
    CheckResult r = check_disk(path, "test", /*min_free_bytes=*/1, "free space");
    EXPECT_EQ(r.name, std::string("disk:") + path);
    EXPECT_EQ(r.status, CheckStatus::kOk) << r.detail;
    EXPECT_GT(std::strtod(r.detail.c_str(), nullptr), 0.0) << r.detail;
    EXPECT_TRUE(Contains(r.detail, " GiB free on "));
  }
}

// A shell's 1,024 (soft and hard) holds about 40 cameras per lane: a warning with the fix; with a hard
// limit of 524,288 (systemd's default for services) the soft one is raised and there is room.
TEST(DoctorOpenFiles, AHardLimitTooLowForALaneOfCamerasWarnsWithTheFix) {
  CheckResult r = check_open_files(OpenFileLimit{1024, 1024, 1024});
  EXPECT_EQ(r.name, "open-files");
  EXPECT_EQ(r.status, CheckStatus::kWarn);
  EXPECT_TRUE(Contains(r.detail, "up to 1024 per process")) << r.detail;
  EXPECT_TRUE(Contains(r.detail, "room for about 40 cameras per lane")) << r.detail;
  EXPECT_TRUE(Contains(r.fix, "LimitNOFILE=")) << r.fix;
  r = check_open_files(OpenFileLimit{1024, 524288, 1024});
  EXPECT_EQ(r.status, CheckStatus::kOk) << r.detail;
  EXPECT_TRUE(Contains(r.detail, "raises its soft limit, 1024, to the hard one")) << r.detail;
  EXPECT_EQ(check_open_files(OpenFileLimit{1024, UINT64_MAX, 1024}).status, CheckStatus::kOk);
}

TEST(DoctorThreads, APidsLimitTooLowForALaneOfCamerasWarnsWithTheFix) {
  CheckResult r = check_threads(TaskLimit{768, 24, "cgroup pids.max (/sys/fs/cgroup/pids.max)"});
  EXPECT_EQ(r.name, "threads");
  EXPECT_EQ(r.status, CheckStatus::kWarn);
  EXPECT_TRUE(Contains(r.detail, "744 more may start (cgroup pids.max (/sys/fs/cgroup/pids.max): 768, 24 in use)"))
      << r.detail;
  EXPECT_TRUE(Contains(r.detail, "room for about 54 cameras")) << r.detail;
  EXPECT_TRUE(Contains(r.fix, "--pids-limit")) << r.fix;
  r = check_threads(TaskLimit{1024, 24, "cgroup pids.max (/sys/fs/cgroup/pids.max)"});
  EXPECT_EQ(r.status, CheckStatus::kOk) << r.detail;  // 80 cameras: a lane of 64 fits
  EXPECT_TRUE(Contains(r.detail, "room for about 80 cameras")) << r.detail;
  r = check_threads(TaskLimit{192729, 79, "kernel.threads-max"});
  EXPECT_EQ(r.status, CheckStatus::kOk) << r.detail;
  EXPECT_TRUE(Contains(r.detail, "room for about 19245 cameras")) << r.detail;
  EXPECT_EQ(check_threads(TaskLimit{}).status, CheckStatus::kOk);
}

TEST(DoctorDisk, WarnsBelowTheThresholdAndFailsForAMissingPath) {
  CheckResult r = check_disk("/tmp", "test", /*min_free_bytes=*/1ull << 62, "free space on /tmp");
  EXPECT_EQ(r.status, CheckStatus::kWarn);
  EXPECT_EQ(r.fix, "free space on /tmp");
  r = check_disk("/no/such/folder", "test", 1, "create it");
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_TRUE(Contains(r.detail, "/no/such/folder"));
}

TEST(DoctorZeromq, ReportsTheLinkedLibzmqAndItsCurveSupport) {
  CheckResult r = check_zeromq();
  // The version pkg-config reported at build time is the library loaded now.
  EXPECT_TRUE(Contains(r.detail, "libzmq " VAPIPE_TEST_LIBZMQ_VERSION));
  EXPECT_EQ(r.status, zmq_has("curve") ? CheckStatus::kOk : CheckStatus::kWarn);
}

TEST(DoctorModel, TheShippedDemoModelIsFound) {
  CheckResult r = check_model(load_demo_config());
  EXPECT_EQ(r.status, CheckStatus::kOk) << r.detail;
  EXPECT_TRUE(Contains(r.detail, "pattern_cnn.pt"));
}

TEST(DoctorModel, AMissingModelOrABadConfigFails) {
  auto config = load_config_string("streams:\n  - id: a\n    uri: test://ball\ninfer:\n  model: gone.pt\n  labels: gone.txt\n",
                                   "job.yaml", "/nonexistent");
  ASSERT_TRUE(config.ok()) << config.status().message();
  CheckResult r = check_model(config);
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_TRUE(Contains(r.detail, "/nonexistent/gone.pt"));
  EXPECT_EQ(check_model(Result<Config>(NotFound("no demo"))).status, CheckStatus::kFail);
}

// --- output ---

TEST(DoctorOutput, LinesCarryTheFixOnlyWhenNotOk) {
  EXPECT_EQ(format_check_line({"zeromq", CheckStatus::kOk, "libzmq 4.3.4", ""}), "OK    zeromq         libzmq 4.3.4");
  EXPECT_EQ(format_check_line({"gpu", CheckStatus::kWarn, "no GPU", "install one"}),
            "WARN  gpu            no GPU; fix: install one");
}

TEST(DoctorOutput, JsonParsesAndListsEveryCheck) {
  const std::vector<CheckResult> checks = run_all_checks();
  const nlohmann::json j = nlohmann::json::parse(checks_json(checks));
  ASSERT_TRUE(j["checks"].is_array());
  ASSERT_EQ(j["checks"].size(), checks.size());
  std::set<std::string> names;
  bool failed = false;
  for (const auto& c : j["checks"]) {
    const std::string status = c.at("status");
    EXPECT_TRUE(status == "OK" || status == "WARN" || status == "FAIL") << status;
    EXPECT_EQ(c.at("fix").get<std::string>().empty(), status == "OK") << c.dump();
    EXPECT_FALSE(c.at("detail").get<std::string>().empty()) << c.dump();
    failed = failed || status == "FAIL";
    names.insert(c.at("name").get<std::string>());
  }
  EXPECT_EQ(j.at("ok").get<bool>(), !failed);
  for (const char* name : {"cuda", "libtorch", "gstreamer", "nvdec", "zeromq", "disk:/tmp", "disk:/dev/shm", "model"}) {
    EXPECT_EQ(names.count(name), 1u) << name;
  }
  EXPECT_TRUE(names.count("gpu") == 1 || names.count("gpu:0") == 1);
  EXPECT_EQ(j.at("vapipe_version").get<std::string>().empty(), false);
}

}  // namespace
}  // namespace vapipe::cli
