// LibTorch lives in a plugin, libvapipe_torch.so, loaded only by the processes that classify: the
// infer stage, `vapipe bench infer|per-frame`, `vapipe doctor`. Linked into every process, Debian's
// LibTorch (287 shared libraries) cost each one about 0.67 s of CPU and 140 MB of memory at start,
// before main: ingest, preprocess, batch, publish, `vapipe run`, `sub`, `status` and the rest never
// use it (docs/benchmarks.md). The host side (torch_loader.cpp, no LibTorch headers) finds the plugin,
// checks that it was built with this binary, and forwards load_torchscript_classifier and
// torch_runtime_info to it; the plugin (torch_classifier.cpp, torch_runtime_info.cpp,
// torch_plugin.cpp) implements them in namespace libtorch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pipeline/status.h"
#include "stages/infer/classifier.h"
#include "stages/infer/torch_runtime_info.h"

namespace vapipe {

namespace libtorch {
// What the plugin implements, with LibTorch in the same process.
Result<std::unique_ptr<Classifier>> load_classifier(const ClassifierOptions& options);
std::string version();
TorchRuntimeInfo runtime_info();
}  // namespace libtorch

// The plugin's one exported symbol returns this table. Host and plugin pass C++ objects to each other
// (Result, std::string, the Classifier), so they must come from one build: the loader refuses a plugin
// whose build id differs.
struct TorchPlugin {
  std::string build_id;
  Result<std::unique_ptr<Classifier>> (*load_classifier)(const ClassifierOptions&);
  std::string (*version)();
  TorchRuntimeInfo (*runtime_info)();
};
using TorchPluginLogSink = void (*)(const std::string& line);
// The plugin's log lines go to the host's log (its level, its process name) through these.
using TorchPluginEntry = const TorchPlugin* (*)(TorchPluginLogSink info, TorchPluginLogSink warn);
inline constexpr const char* kTorchPluginEntry = "vapipe_torch_plugin";
inline constexpr const char* kTorchPluginFile = "libvapipe_torch.so";
// Names the plugin file to load instead of looking for it (next to the binary, then ../lib/vapipe/).
inline constexpr const char* kTorchPluginEnv = "VAPIPE_TORCH_PLUGIN";

// Loads the plugin now, if it is not loaded yet (every call below loads it on first use otherwise):
// "LibTorch 1.13.0 from PATH (loaded in 0.66 s)", for a log line; the error says why it cannot be
// loaded, and every later call gives the same.
Result<std::string> load_torch_plugin();

// Where the loader looks, in order, for a binary at `exe_dir`: $VAPIPE_TORCH_PLUGIN (alone, when set),
// exe_dir/libvapipe_torch.so, exe_dir/../lib/vapipe/libvapipe_torch.so, and the build tree's plugin.
std::vector<std::string> torch_plugin_candidates(const std::string& exe_dir, const char* env_value);

}  // namespace vapipe
