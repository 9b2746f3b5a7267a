// The plugin's entry: the table of what it implements (torch_plugin.h), and its log lines sent to the
// host's log. Compiled into libvapipe_torch.so only.
#include "stages/infer/torch_plugin.h"

#include "pipeline/log_text.h"

namespace vapipe {
namespace {

TorchPluginLogSink g_info = nullptr;
TorchPluginLogSink g_warn = nullptr;

}  // namespace

// log_text.h's functions, for the LibTorch translation units: to the host's log.
void log_info_text(const std::string& line) {
  if (g_info) g_info(line);
}
void log_warn_text(const std::string& line) {
  if (g_warn) g_warn(line);
}

}  // namespace vapipe

extern "C" __attribute__((visibility("default"))) const vapipe::TorchPlugin* vapipe_torch_plugin(
    vapipe::TorchPluginLogSink info, vapipe::TorchPluginLogSink warn) {
  vapipe::g_info = info;
  vapipe::g_warn = warn;
  static const vapipe::TorchPlugin plugin{VAPIPE_BUILD_ID, vapipe::libtorch::load_classifier,
                                          vapipe::libtorch::version, vapipe::libtorch::runtime_info};
  return &plugin;
}
