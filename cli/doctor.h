// `vapipe doctor`: environment checks, one small function each, so that tests can call them one by
// one. Where a finding depends on the machine, the probe and the judgement are separate: the
// judgement takes what was probed (GpuRuntime, TorchRuntimeInfo, an element lookup), so tests can
// hand it machines they do not have.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "pipeline/config.h"
#include "pipeline/cuda/gpu_info.h"
#include "pipeline/cgroup.h"
#include "pipeline/open_files.h"
#include "pipeline/status.h"
#include "stages/infer/torch_runtime_info.h"

namespace vapipe::cli {

enum class CheckStatus { kOk, kWarn, kFail };

// "OK", "WARN", "FAIL".
const char* check_status_name(CheckStatus status);

struct CheckResult {
  std::string name;    // stable, for programs: "cuda", "gpu:0", "disk:/dev/shm", ...
  CheckStatus status = CheckStatus::kOk;
  std::string detail;  // what was found
  std::string fix;     // what to install or set; empty when OK
};

// Below this much free space on /tmp or /dev/shm, the disk checks warn.
inline constexpr uint64_t kMinFreeDiskBytes = 1ull << 30;

// The CUDA driver against the CUDA runtime vapipe was built with.
CheckResult check_cuda(const GpuRuntime& gpus);
// One result per GPU ("gpu:N"), or a single "gpu" WARN when there is none.
std::vector<CheckResult> check_gpus(const GpuRuntime& gpus);
// LibTorch's version and CUDA build, and its CUDA major version against the driver's.
CheckResult check_libtorch(const TorchRuntimeInfo& torch, const GpuRuntime& gpus);
// GStreamer's version and the elements CPU decoding needs, with the Debian package of each missing
// one. `has_element` answers whether a factory exists (the real one asks GStreamer's registry).
using ElementLookup = std::function<bool(const std::string& factory)>;
CheckResult check_gstreamer(const std::string& gst_version, const ElementLookup& has_element);
CheckResult check_gstreamer();
// NVDEC decoders through GStreamer's nvcodec plugin, and gstreamer-cuda-1.0.
CheckResult check_nvdec();
// libzmq's version and CURVE support.
CheckResult check_zeromq();
// Free space under `path`; `purpose` says in the detail what vapipe keeps there.
CheckResult check_disk(const std::string& path, const std::string& purpose, uint64_t min_free_bytes,
                       const std::string& fix_when_low);
// The open files a process may have (RLIMIT_NOFILE): vapipe raises its soft limit to the hard one, so
// the hard one says how many cameras a lane can hold (GStreamer keeps some 20 descriptors per camera);
// below what 64 need it warns.
CheckResult check_open_files(const OpenFileLimit& limit);
CheckResult check_open_files();
// The threads that may still start (a cgroup's pids.max, kernel.threads-max, RLIMIT_NPROC): GStreamer
// starts some 10 per camera; below what 64 cameras and the job's stages need it warns.
CheckResult check_threads(const TaskLimit& limit);
CheckResult check_threads();
// The shipped demo config and its model and labels files.
CheckResult check_model(const Result<Config>& config);

// Every check, in the order above (disk: /tmp, then /dev/shm).
std::vector<CheckResult> run_all_checks();

// One line per check: "STATUS  name  detail; fix: ...".
std::string format_check_line(const CheckResult& check);
// {"vapipe_version": ..., "ok": bool, "checks": [{"name", "status", "detail", "fix"}, ...]}.
std::string checks_json(const std::vector<CheckResult>& checks);
bool any_failed(const std::vector<CheckResult>& checks);

// cuDNN's version number as "9.19.0" (cuDNN 9 encodes major*10000, cuDNN 8 and older major*1000).
std::string cudnn_version_string(long version);

}  // namespace vapipe::cli
