// The host side of the LibTorch plugin (torch_plugin.h): loads libvapipe_torch.so once per process, on
// first use, and forwards to it. No LibTorch headers here.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "pipeline/log_text.h"
#include "stages/infer/torch_plugin.h"

namespace vapipe {
namespace {

struct LoadedPlugin {
  const TorchPlugin* plugin = nullptr;
  std::string description;  // which LibTorch, from where, loaded in how long
  std::string error;        // why there is none
};

std::string executable_dir() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return ".";
  return std::filesystem::path(std::string(path, static_cast<size_t>(n))).parent_path().string();
}

LoadedPlugin load_plugin() {
  LoadedPlugin loaded;
  std::string tried;
  for (const std::string& candidate : torch_plugin_candidates(executable_dir(), std::getenv(kTorchPluginEnv))) {
    if (!std::filesystem::exists(candidate)) {
      tried += (tried.empty() ? "" : ", ") + candidate;
      continue;
    }
    // RTLD_LOCAL: LibTorch's symbols stay the plugin's; the plugin is never unloaded.
    const auto start = std::chrono::steady_clock::now();
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      loaded.error = "LibTorch's plugin " + candidate + " does not load: " + dlerror();
      return loaded;
    }
    auto entry = reinterpret_cast<TorchPluginEntry>(dlsym(handle, kTorchPluginEntry));
    if (!entry) {
      loaded.error = "LibTorch's plugin " + candidate + " is not vapipe's (no " + kTorchPluginEntry + ")";
      return loaded;
    }
    const TorchPlugin* plugin = entry(&log_info_text, &log_warn_text);
    if (!plugin || plugin->build_id != VAPIPE_BUILD_ID) {
      loaded.error = "LibTorch's plugin " + candidate + " comes from another build of vapipe (" +
                     (plugin ? plugin->build_id : std::string("?")) + ", this binary is " + VAPIPE_BUILD_ID +
                     "): install the two together";
      return loaded;
    }
    loaded.plugin = plugin;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.2f",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    loaded.description = "LibTorch " + plugin->version() + " from " + candidate + " (loaded in " + seconds + " s)";
    return loaded;
  }
  loaded.error = std::string("LibTorch's plugin ") + kTorchPluginFile + " is not installed beside vapipe (looked at " +
                 tried + "; " + kTorchPluginEnv + " names another)";
  return loaded;
}

const LoadedPlugin& plugin() {
  static std::once_flag once;
  static LoadedPlugin loaded;
  std::call_once(once, [] { loaded = load_plugin(); });
  return loaded;
}

}  // namespace

std::vector<std::string> torch_plugin_candidates(const std::string& exe_dir, const char* env_value) {
  if (env_value && *env_value) return {env_value};
  const std::filesystem::path dir = exe_dir;
  std::vector<std::string> candidates = {(dir / kTorchPluginFile).string(),
                                         (dir.parent_path() / "lib" / "vapipe" / kTorchPluginFile).string()};
  const std::string built = VAPIPE_TORCH_PLUGIN_BUILT;  // the build tree's, for its tests and tools
  if (!built.empty() && built != candidates[0]) candidates.push_back(built);
  return candidates;
}

Result<std::string> load_torch_plugin() {
  const LoadedPlugin& p = plugin();
  if (!p.plugin) return FailedPrecondition(p.error);
  return p.description;
}

Result<std::unique_ptr<Classifier>> load_torchscript_classifier(const ClassifierOptions& options) {
  const LoadedPlugin& p = plugin();
  if (!p.plugin) return FailedPrecondition(p.error);
  return p.plugin->load_classifier(options);
}

TorchRuntimeInfo torch_runtime_info() {
  const LoadedPlugin& p = plugin();
  if (p.plugin) return p.plugin->runtime_info();
  TorchRuntimeInfo info;
  info.error = p.error;
  return info;
}

}  // namespace vapipe
