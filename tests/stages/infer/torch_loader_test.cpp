// LibTorch's plugin (stages/infer/torch_plugin.h) as the processes that classify load it: where it is
// looked for, and what a missing or foreign plugin says. Each case that loads runs in a child process
// of its own (the loader loads once per process). The classifier itself, through the plugin, is
// tested in torch_classifier_test.cpp.
#include "stages/infer/torch_plugin.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace vapipe {
namespace {

TEST(TorchPluginCandidates, BesideTheBinaryThenItsLibFolderThenTheBuildTree) {
  const std::vector<std::string> c = torch_plugin_candidates("/opt/vapipe/bin", nullptr);
  ASSERT_GE(c.size(), 2u);
  EXPECT_EQ(c[0], "/opt/vapipe/bin/libvapipe_torch.so");
  EXPECT_EQ(c[1], "/opt/vapipe/lib/vapipe/libvapipe_torch.so");
  if (c.size() == 3) {
    EXPECT_EQ(std::filesystem::path(c[2]).filename(), "libvapipe_torch.so");
  }
  EXPECT_EQ(torch_plugin_candidates("/opt/vapipe/bin", ""), c) << "an empty variable names nothing";
  EXPECT_EQ(torch_plugin_candidates("/opt/vapipe/bin", "/x/libmine.so"), std::vector<std::string>{"/x/libmine.so"});
}

// In a child: with VAPIPE_TORCH_PLUGIN set to `plugin`, loading a model fails, naming `expected`, and
// torch_runtime_info says the same. Exit 0 when all of that holds.
void expect_refused_in_a_child(const std::string& plugin, const std::string& expected) {
  EXPECT_EXIT(
      {
        setenv(kTorchPluginEnv, plugin.c_str(), 1);
        ClassifierOptions options;
        options.model_path = VAPIPE_SOURCE_DIR "/models/pattern_cnn.pt";
        auto loaded = load_torchscript_classifier(options);
        const TorchRuntimeInfo info = torch_runtime_info();
        const bool as_expected = !loaded.ok() && loaded.status().code() == StatusCode::kFailedPrecondition &&
                                 loaded.status().message().find(expected) != std::string::npos &&
                                 info.version.empty() && info.error == loaded.status().message();
        if (!as_expected) std::fprintf(stderr, "%s\n", loaded.ok() ? "loaded" : loaded.status().message().c_str());
        std::exit(as_expected ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(TorchPluginDeathTest, AMissingPluginIsAnErrorNamingWhereItWasLookedFor) {
  expect_refused_in_a_child("/nonexistent/libvapipe_torch.so",
                            "LibTorch's plugin libvapipe_torch.so is not installed beside vapipe (looked at "
                            "/nonexistent/libvapipe_torch.so; VAPIPE_TORCH_PLUGIN names another)");
}

TEST(TorchPluginDeathTest, AFileThatIsNoLibraryOrNotVapipesIsRefusedNamingIt) {
  const std::filesystem::path text = std::filesystem::temp_directory_path() / "vapipe-not-a-plugin.so";
  std::ofstream(text) << "not a shared library\n";
  expect_refused_in_a_child(text.string(), "LibTorch's plugin " + text.string() + " does not load: ");
  std::filesystem::remove(text);
  // A real shared library, but not vapipe's plugin: the C library itself.
  for (const char* libc : {"/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6"}) {
    if (!std::filesystem::exists(libc)) continue;
    expect_refused_in_a_child(libc, std::string("LibTorch's plugin ") + libc + " is not vapipe's (no vapipe_torch_plugin)");
  }
}

}  // namespace
}  // namespace vapipe
