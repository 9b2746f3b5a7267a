// A decoder's plug-in that does not load is told apart from one not installed. The failure is made
// real: a child process under an address-space limit, as `ulimit -v` sets, loads libav's plug-in.
#include "stages/ingest/decoder_plugins.h"

#include <gst/gst.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <fstream>
#include <string>

#include "tests/fakes/child_process.h"

namespace vapipe {
namespace {

GstCaps* h264_caps() { return gst_caps_from_string("video/x-h264, stream-format=avc, alignment=au"); }

// The process's address space in use now, in bytes (VmSize).
long long address_space_in_use() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long long kb = 0;
  while (status >> key) {
    if (key == "VmSize:") {
      status >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

TEST(DecoderPlugins, AnInstalledDecoderThatLoadsIsNoFailure) {
  gst_init(nullptr, nullptr);
  GstCaps* caps = h264_caps();
  EXPECT_EQ(decoder_plugin_load_failure(caps), "");
  gst_caps_unref(caps);
}

TEST(DecoderPlugins, CapsNoDecoderTakesAreNoFailure) {
  gst_init(nullptr, nullptr);
  GstCaps* caps = gst_caps_from_string("video/x-vapipe-no-such-codec");
  EXPECT_EQ(decoder_plugin_load_failure(caps), "");
  gst_caps_unref(caps);
}

TEST(DecoderPlugins, ADecoderWhosePluginCannotMapItsLibrariesIsNamedWithTheLoadersWords) {
  gst_init(nullptr, nullptr);
  GstElementFactory* factory = gst_element_factory_find("avdec_h264");
  if (!factory) GTEST_SKIP() << "no avdec_h264 here (gstreamer1.0-libav)";
  GstPlugin* plugin = gst_plugin_feature_get_plugin(GST_PLUGIN_FEATURE(factory));
  const bool loaded = plugin && gst_plugin_is_loaded(plugin);
  if (plugin) gst_object_unref(plugin);
  gst_object_unref(factory);
  // ctest runs each test in a process of its own; run together, an earlier test may have loaded it.
  if (loaded) GTEST_SKIP() << "libav's plug-in is loaded in this process already";

  const testing::ChildOutcome limited = testing::said_by_child([] {
    // Room for small allocations, none for libav's libraries (tens of MB mapped).
    const rlim_t limit = static_cast<rlim_t>(address_space_in_use() + 4 * 1024 * 1024);
    const rlimit r{limit, limit};
    setrlimit(RLIMIT_AS, &r);
    return decoder_plugin_load_failure(h264_caps());
  });
  ASSERT_TRUE(limited.ran) << "the child under the limit did not exit: " << limited.status;
  const std::string& failure = limited.said;
  EXPECT_NE(failure.find(") is installed but could not be loaded: "), std::string::npos) << failure;
  EXPECT_NE(failure.find("failed to map segment"), std::string::npos) << failure;
}

}  // namespace
}  // namespace vapipe
