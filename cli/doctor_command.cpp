// `vapipe doctor`: checks what vapipe needs from this machine (CUDA, GPUs, LibTorch, GStreamer and
// NVDEC, ZeroMQ, free space, the shipped model) and says, for each finding, what to install or set.
// A missing GPU is only a warning: vapipe runs on CPU. Exit status 1 when some check failed.
#include <cstdint>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>

#include <gst/gst.h>
#include <nlohmann/json.hpp>
#include <zmq.h>

#include "cli/commands.h"
#include "cli/doctor.h"
#include "pipeline/supervisor.h"
#include "stages/ingest/stream_reader.h"

#ifdef VAPIPE_HAVE_GST_CUDA
// From gstreamer-cuda-1.0 (gst/cuda/gstcudaloader.h). Declared here because that header includes
// the CUDA toolkit's cuda.h, which a machine without the toolkit lacks; the C ABI is all we need.
extern "C" gboolean gst_cuda_load_library(void);
#endif

namespace vapipe::cli {
namespace {

CheckResult ok(std::string name, std::string detail) {
  return {std::move(name), CheckStatus::kOk, std::move(detail), ""};
}
CheckResult warn(std::string name, std::string detail, std::string fix) {
  return {std::move(name), CheckStatus::kWarn, std::move(detail), std::move(fix)};
}
CheckResult fail(std::string name, std::string detail, std::string fix) {
  return {std::move(name), CheckStatus::kFail, std::move(detail), std::move(fix)};
}

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

// Below this much free memory a GPU cannot hold a model and its batches.
constexpr uint64_t kMinFreeGpuBytes = 1ull << 30;

int cuda_major(int version) { return version / 1000; }

std::string join(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// RAII for GStreamer object references.
struct GstObjectUnref {
  void operator()(gpointer p) const {
    if (p) gst_object_unref(p);
  }
};

bool gst_has_element(const std::string& factory) {
  std::unique_ptr<GstElementFactory, GstObjectUnref> found(gst_element_factory_find(factory.c_str()));
  return found != nullptr;
}

// Creating a hardware decoder and taking it to READY opens the device: a factory that merely exists
// (a stale registry cache) proves nothing.
Status create_and_ready(const char* factory) {
  std::unique_ptr<GstElement, GstObjectUnref> element(gst_element_factory_make(factory, nullptr));
  if (!element) return Unavailable(std::string(factory) + " cannot be created");
  gst_object_ref_sink(element.get());
  const GstStateChangeReturn ready = gst_element_set_state(element.get(), GST_STATE_READY);
  gst_element_set_state(element.get(), GST_STATE_NULL);
  if (ready == GST_STATE_CHANGE_FAILURE) return Unavailable(std::string(factory) + " fails to open the GPU (state READY)");
  return Status::Ok();
}

Result<uint64_t> free_bytes(const std::string& path) {
  struct statvfs fs {};
  if (statvfs(path.c_str(), &fs) != 0) return NotFound("cannot read the free space of " + path + ": " + std::strerror(errno));
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

}  // namespace

const char* check_status_name(CheckStatus status) {
  switch (status) {
    case CheckStatus::kOk: return "OK";
    case CheckStatus::kWarn: return "WARN";
    case CheckStatus::kFail: return "FAIL";
  }
  return "?";
}

std::string cudnn_version_string(long version) {
  if (version <= 0) return "none";
  // cuDNN 9 changed the encoding: 91900 is 9.19.0, where 8907 was 8.9.7.
  const long major_unit = version >= 10000 ? 10000 : 1000;
  return std::to_string(version / major_unit) + "." + std::to_string(version % major_unit / 100) + "." +
         std::to_string(version % 100);
}

CheckResult check_cuda(const GpuRuntime& gpus) {
  const std::string name = "cuda";
  if (!gpus.built_with_cuda) {
    return warn(name, "vapipe was built without the CUDA toolkit: GPU preprocessing is unavailable; vapipe runs on CPU",
                "install the CUDA toolkit (nvcc in /usr/local/cuda) and rebuild vapipe in a fresh build folder");
  }
  const std::string runtime = cuda_version_string(gpus.runtime_version);
  if (gpus.driver_version == 0) {
    return warn(name, "no NVIDIA driver (vapipe was built with CUDA runtime " + runtime + "); vapipe runs on CPU",
                "install an NVIDIA driver for CUDA " + runtime + " or newer (nvidia-smi should then list the GPUs)");
  }
  const std::string driver = cuda_version_string(gpus.driver_version);
  const std::string found = "driver supports CUDA " + driver + ", vapipe was built with CUDA runtime " + runtime;
  if (cuda_major(gpus.driver_version) < cuda_major(gpus.runtime_version)) {
    return fail(name, found + ": the driver is too old for it, so no GPU can be used",
                "upgrade the NVIDIA driver to one for CUDA " + runtime + " or newer, or rebuild vapipe with a CUDA " +
                    std::to_string(cuda_major(gpus.driver_version)) + " toolkit");
  }
  if (gpus.driver_version < gpus.runtime_version) {
    // Same major version: CUDA's minor-version compatibility runs it, without PTX JIT.
    return warn(name, found + ": runs through minor-version compatibility (no PTX JIT)",
                "upgrade the NVIDIA driver to one for CUDA " + runtime + " or newer");
  }
  return ok(name, found);
}

std::vector<CheckResult> check_gpus(const GpuRuntime& gpus) {
  if (gpus.devices.empty()) {
    std::string fix = "check nvidia-smi and CUDA_VISIBLE_DEVICES";
    if (!gpus.built_with_cuda) {
      fix = "to use a GPU: rebuild vapipe with the CUDA toolkit on a machine with an NVIDIA GPU";
    } else if (gpus.driver_version == 0) {
      fix = "to use a GPU: install the NVIDIA driver and check that nvidia-smi lists the GPU";
    }
    const std::string why = gpus.error.empty() ? "none found" : gpus.error;
    return {warn("gpu", "no usable GPU (" + why + "); vapipe runs on CPU", fix)};
  }
  std::vector<CheckResult> results;
  for (const GpuDevice& d : gpus.devices) {
    const std::string name = "gpu:" + std::to_string(d.index);
    const std::string detail = d.name + ", compute capability " + std::to_string(d.compute_major) + "." +
                               std::to_string(d.compute_minor) + ", " + gib(d.free_bytes) + " free of " +
                               gib(d.total_bytes) + (d.pci_bus_id.empty() ? "" : ", PCI " + d.pci_bus_id);
    if (d.free_bytes < kMinFreeGpuBytes) {
      results.push_back(warn(name, detail + ": almost no free memory",
                             "other processes hold this GPU's memory: see nvidia-smi, or choose another GPU"));
    } else {
      results.push_back(ok(name, detail));
    }
  }
  return results;
}

CheckResult check_libtorch(const TorchRuntimeInfo& torch, const GpuRuntime& gpus) {
  const std::string name = "libtorch";
  if (torch.version.empty()) {  // its plugin did not load (stages/infer/torch_plugin.h): nothing can classify
    return fail(name, "LibTorch is not loaded: " + torch.error,
                "install libvapipe_torch.so with vapipe (cmake --install puts it in lib/vapipe/), or name it in "
                "VAPIPE_TORCH_PLUGIN");
  }
  std::string found = "LibTorch " + torch.version;
  if (!torch.built_with_cuda) {
    found += ", CPU only";
  } else {
    found += ", CUDA " + cuda_version_string(torch.cuda_version) + ", " +
             (torch.has_cudnn ? "cuDNN " + cudnn_version_string(torch.cudnn_version) : std::string("no cuDNN")) +
             ", sees " + std::to_string(torch.cuda_device_count) + " GPU(s)";
  }
  if (!torch.error.empty()) {
    return warn(name, found + "; a query failed: " + torch.error,
                "reinstall LibTorch (the one CMake's find_package(Torch) found) and rebuild vapipe");
  }
  const size_t gpu_count = gpus.devices.size();
  if (!torch.built_with_cuda) {
    if (gpu_count == 0) return ok(name, found + "; inference runs on CPU");
    return warn(name, found + ": this machine has " + std::to_string(gpu_count) + " GPU(s), but inference runs on CPU",
                "install a LibTorch built with CUDA (pytorch.org, cxx11 ABI) and rebuild vapipe with "
                "-DCMAKE_PREFIX_PATH=/path/to/libtorch");
  }
  // A driver runs programs built for its CUDA major version or older, not newer.
  if (gpus.driver_version > 0 && cuda_major(torch.cuda_version) > cuda_major(gpus.driver_version)) {
    return fail(name, found + "; LibTorch's CUDA " + cuda_version_string(torch.cuda_version) +
                          " needs a newer driver than this one (CUDA " + cuda_version_string(gpus.driver_version) + ")",
                "upgrade the NVIDIA driver to one for CUDA " + cuda_version_string(torch.cuda_version) +
                    " or newer, or use a LibTorch built for CUDA " + std::to_string(cuda_major(gpus.driver_version)));
  }
  if (!torch.cuda_available && gpu_count > 0) {
    return fail(name, found + ", though the CUDA runtime lists " + std::to_string(gpu_count) + ": inference would run on CPU",
                "check CUDA_VISIBLE_DEVICES, and that LibTorch's plugin links libtorch_cuda.so (ldd libvapipe_torch.so, beside vapipe)");
  }
  if (!torch.cuda_available) return ok(name, found + "; no GPU, so inference runs on CPU");
  return ok(name, found);
}

CheckResult check_gstreamer(const std::string& gst_version, const ElementLookup& has_element) {
  struct Needed {
    const char* factory;
    const char* package;  // Debian's
  };
  // What the ingest stage builds (stream_reader.cpp), and what the shipped demo's streams need.
  static const Needed kNeeded[] = {
      {"uridecodebin", "gstreamer1.0-plugins-base"}, {"videoconvert", "gstreamer1.0-plugins-base"},
      {"appsink", "gstreamer1.0-plugins-base"},      {"capsfilter", "libgstreamer1.0-0"},
      {"videotestsrc", "gstreamer1.0-plugins-base"}, {"qtdemux", "gstreamer1.0-plugins-good"},
      {"matroskademux", "gstreamer1.0-plugins-good"}, {"h264parse", "gstreamer1.0-plugins-bad"},
  };
  // Either H.264 decoder will do; uridecodebin picks the one with the highest rank.
  static const Needed kH264Decoders[] = {{"avdec_h264", "gstreamer1.0-libav"}, {"openh264dec", "gstreamer1.0-plugins-bad"}};

  std::vector<std::string> present, missing;
  std::set<std::string> packages;
  for (const Needed& n : kNeeded) {
    if (has_element(n.factory)) {
      present.push_back(n.factory);
    } else {
      missing.push_back(std::string(n.factory) + " (" + n.package + ")");
      packages.insert(n.package);
    }
  }
  std::string decoder;
  for (const Needed& d : kH264Decoders) {
    if (decoder.empty() && has_element(d.factory)) decoder = d.factory;
  }
  if (decoder.empty()) {
    missing.push_back(std::string("an H.264 decoder: ") + kH264Decoders[0].factory + " (" + kH264Decoders[0].package +
                      ") or " + kH264Decoders[1].factory);
    packages.insert(kH264Decoders[0].package);
  }
  const std::string name = "gstreamer";
  const std::string version = "GStreamer " + gst_version;
  // Only the CPU H.264 decoder missing, on a machine where NVDEC decodes H.264: jobs run (seen on the
  // H200 with a GStreamer carried without one), but nothing NVDEC refuses can fall back.
  if (missing.size() == 1 && decoder.empty() && has_element("nvh264dec")) {
    return warn(name, version + "; no CPU H.264 decoder: NVDEC decodes H.264 here (nvh264dec), but a stream it "
                                "refuses (4:4:4, 10 bits) or a job with ingest.decoder: cpu cannot be decoded",
                "apt-get install " + std::string(kH264Decoders[0].package));
  }
  if (!missing.empty()) {
    return fail(name, version + "; missing for CPU decoding: " + join(missing),
                "apt-get install " + join(std::vector<std::string>(packages.begin(), packages.end()), " "));
  }
  return ok(name, version + "; CPU decoding elements present: " + join(present) + ", H.264 decoder " + decoder);
}

CheckResult check_gstreamer() {
  if (!ensure_gstreamer()) {
    return fail("gstreamer", "GStreamer failed to initialise (see the log line above)",
                "apt-get install libgstreamer1.0-0 gstreamer1.0-plugins-base; unset GST_PLUGIN_PATH if it is set");
  }
  gchar* version = gst_version_string();  // "GStreamer 1.22.0"
  std::string text = version;
  g_free(version);
  const std::string prefix = "GStreamer ";
  if (text.rfind(prefix, 0) == 0) text.erase(0, prefix.size());
  return check_gstreamer(text, gst_has_element);
}

CheckResult check_nvdec() {
  const std::string name = "nvdec";
  const std::string fix =
      "install gstreamer1.0-plugins-bad and the NVIDIA driver's libnvcuvid, then delete "
      "~/.cache/gstreamer-1.0/registry.*.bin so that GStreamer looks for the decoders again";
  if (!ensure_gstreamer()) return warn(name, "GStreamer failed to initialise", fix);

  std::string gst_cuda = "gstreamer-cuda-1.0 not found at build time";
#ifdef VAPIPE_HAVE_GST_CUDA
  gst_cuda = std::string("gstreamer-cuda-1.0 ") + VAPIPE_GST_CUDA_VERSION + " linked, libcuda " +
             (gst_cuda_load_library() ? "loads" : "does not load");
#endif

  std::unique_ptr<GstPlugin, GstObjectUnref> nvcodec(gst_registry_find_plugin(gst_registry_get(), "nvcodec"));
  std::vector<std::string> present, missing;
  for (const char* factory : {"nvh264dec", "nvh265dec", "nvvp9dec", "nvav1dec"}) {
    (gst_has_element(factory) ? present : missing).push_back(factory);
  }
  std::string found = std::string("nvcodec plugin ") + (nvcodec ? "present" : "missing") + "; decoders present: " +
                      (present.empty() ? "none" : join(present)) +
                      (missing.empty() ? "" : "; missing: " + join(missing)) + "; " + gst_cuda;
  const Status h264 = create_and_ready("nvh264dec");
  if (!h264.ok()) return warn(name, found + "; " + h264.message() + ": streams decode on CPU", fix);
  return ok(name, found + "; nvh264dec opens the GPU");
}

CheckResult check_disk(const std::string& path, const std::string& purpose, uint64_t min_free_bytes,
                       const std::string& fix_when_low) {
  const std::string name = "disk:" + path;
  auto free_space = free_bytes(path);
  if (!free_space.ok()) return fail(name, free_space.status().message() + " (" + purpose + ")", fix_when_low);
  const std::string found = gib(free_space.value()) + " free on " + path + " (" + purpose + ")";
  if (free_space.value() < min_free_bytes) return warn(name, found + ", less than " + gib(min_free_bytes), fix_when_low);
  return ok(name, found);
}

CheckResult check_zeromq() {
  int major = 0, minor = 0, patch = 0;
  zmq_version(&major, &minor, &patch);
  const std::string found =
      "libzmq " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  if (!zmq_has("curve")) {
    return warn("zeromq", found + " without CURVE: the bus cannot be encrypted across hosts",
                "install a libzmq built with libsodium (Debian's libzmq5 is)");
  }
  return ok("zeromq", found + ", CURVE encryption available");
}

CheckResult check_open_files(const OpenFileLimit& limit) {
  const uint64_t usable = std::min<uint64_t>(limit.hard, 1u << 20);  // what raise_open_file_limit reaches
  const uint64_t cameras = usable > kOpenFilesPerProcess ? (usable - kOpenFilesPerProcess) / kOpenFilesPerNetworkStream : 0;
  const std::string found = "up to " + std::to_string(usable) + " per process (vapipe raises its soft limit, " +
                            std::to_string(limit.soft) + ", to the hard one): room for about " +
                            std::to_string(cameras) + " cameras per lane";
  if (usable < open_files_needed(64, 0)) {
    return warn("open-files", found,
                "raise the hard limit of open files: LimitNOFILE=65536 in the systemd unit, --ulimit nofile=65536 "
                "for docker, or nofile in /etc/security/limits.conf");
  }
  return ok("open-files", found);
}

CheckResult check_open_files() { return check_open_files(open_file_limit()); }

CheckResult check_threads(const TaskLimit& limit) {
  if (limit.max == 0) return ok("threads", "no limit on the threads vapipe may start was found");
  const uint64_t room = limit.room();
  const uint64_t cameras = room > kThreadsPerJob ? (room - kThreadsPerJob) / kThreadsPerNetworkStream : 0;
  const std::string found = std::to_string(room) + " more may start (" + limit.where + ": " +
                            std::to_string(limit.max) + ", " + std::to_string(limit.in_use) +
                            " in use): room for about " + std::to_string(cameras) + " cameras";
  if (room < threads_needed(64, 0, 0, 1, kThreadsPerJob)) {
    return warn("threads", found,
                "raise the limit on threads: docker run --pids-limit=16384 (or -1), podPidsLimit in the kubelet's "
                "config, TasksMax= in the systemd unit");
  }
  return ok("threads", found);
}

CheckResult check_threads() { return check_threads(task_limit()); }

CheckResult check_model(const Result<Config>& config) {
  const std::string name = "model";
  const std::string fix = "run vapipe from its build tree, or install it (cmake --install) so that "
                          "share/vapipe/configs and share/vapipe/models exist; in a checkout: git checkout -- models";
  if (!config.ok()) return fail(name, "the demo config does not load: " + config.status().message(), fix);
  const Config& c = config.value();
  std::error_code ec;
  for (const std::string& path : {c.infer.model, c.infer.labels}) {
    if (!std::filesystem::is_regular_file(path, ec)) return fail(name, "the demo's " + path + " does not exist", fix);
  }
  return ok(name, "the demo config loads; model " + c.infer.model + " (" +
                      std::to_string(std::filesystem::file_size(c.infer.model, ec) / 1024) + " KiB), labels " +
                      c.infer.labels);
}

std::vector<CheckResult> run_all_checks() {
  std::vector<CheckResult> checks;
  const GpuRuntime gpus = probe_gpus(/*with_memory=*/true);
  checks.push_back(check_cuda(gpus));
  for (CheckResult& gpu : check_gpus(gpus)) checks.push_back(std::move(gpu));
  checks.push_back(check_libtorch(torch_runtime_info(), gpus));
  checks.push_back(check_gstreamer());
  checks.push_back(check_nvdec());
  checks.push_back(check_zeromq());
  checks.push_back(check_disk("/tmp", "each job's sockets", kMinFreeDiskBytes, "free space on /tmp"));
  checks.push_back(check_disk("/dev/shm", "the shared memory pools of frames", kMinFreeDiskBytes,
                              "free space in /dev/shm or enlarge it (mount -o remount,size=4G /dev/shm; "
                              "in Docker: docker run --shm-size=4g)"));
  checks.push_back(check_open_files());
  checks.push_back(check_threads());
  checks.push_back(check_model(load_demo_config()));
  return checks;
}

bool any_failed(const std::vector<CheckResult>& checks) {
  for (const CheckResult& c : checks) {
    if (c.status == CheckStatus::kFail) return true;
  }
  return false;
}

std::string format_check_line(const CheckResult& check) {
  char head[64];
  std::snprintf(head, sizeof head, "%-4s  %-13s  ", check_status_name(check.status), check.name.c_str());
  return head + check.detail + (check.fix.empty() ? "" : "; fix: " + check.fix);
}

std::string checks_json(const std::vector<CheckResult>& checks) {
  nlohmann::json list = nlohmann::json::array();
  for (const CheckResult& c : checks) {
    list.push_back({{"name", c.name}, {"status", check_status_name(c.status)}, {"detail", c.detail}, {"fix", c.fix}});
  }
  return nlohmann::json{{"vapipe_version", VAPIPE_VERSION}, {"ok", !any_failed(checks)}, {"checks", list}}.dump();
}

int doctor_command(const std::vector<std::string>& args) {
  bool json = false;
  for (const std::string& arg : args) {
    if (arg == "--json") {
      json = true;
    } else {
      std::fprintf(stderr, "vapipe doctor: unexpected argument '%s'\nusage: vapipe doctor [--json]\n", arg.c_str());
      return kExitUsage;
    }
  }
  const std::vector<CheckResult> checks = run_all_checks();
  if (json) {
    std::printf("%s\n", checks_json(checks).c_str());
  } else {
    int counts[3] = {0, 0, 0};
    for (const CheckResult& c : checks) {
      std::printf("%s\n", format_check_line(c).c_str());
      ++counts[static_cast<int>(c.status)];
    }
    std::printf("%zu checks: %d OK, %d WARN, %d FAIL\n", checks.size(), counts[0], counts[1], counts[2]);
  }
  return any_failed(checks) ? 1 : 0;
}

}  // namespace vapipe::cli
