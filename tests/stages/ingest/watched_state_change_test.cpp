// A stream's GStreamer state change under the watchdog: a pipeline whose streaming thread does not
// stop (here an identity element asleep in its chain function, as a hung decoder would be) blocks
// set_state(NULL); watched, that becomes an abort naming the stream and what it was doing.
#include "stages/ingest/watched_state_change.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "pipeline/logging.h"

namespace vapipe {
namespace {

using namespace std::chrono_literals;

GstElement* launch(const char* description) {
  GError* error = nullptr;
  GstElement* pipeline = gst_parse_launch(description, &error);
  if (error) g_error_free(error);
  return pipeline;
}

TEST(WatchedStateChange, AStateChangeThatReturnsIsNotAHang) {
  gst_init(nullptr, nullptr);
  StageWatchdog dog("ingest: stream 'a'", 0.2);
  GstElement* pipeline = launch("videotestsrc num-buffers=5 ! fakesink");
  ASSERT_NE(pipeline, nullptr);
  EXPECT_NE(set_state_watched(pipeline, GST_STATE_PLAYING, &dog), GST_STATE_CHANGE_FAILURE);
  EXPECT_FALSE(dog.is_working());  // waiting again once the call returned
  std::this_thread::sleep_for(300ms);  // past the timeout: waiting is not watched
  EXPECT_EQ(set_state_watched(pipeline, GST_STATE_NULL, &dog), GST_STATE_CHANGE_SUCCESS);
  EXPECT_EQ(set_state_watched(pipeline, GST_STATE_NULL, nullptr), GST_STATE_CHANGE_SUCCESS);  // unwatched
  gst_object_unref(pipeline);
}

// A stream that ends while its streaming thread cannot stop (a read of a share that does not answer,
// played by identity asleep) is not held up by it: the pipeline is left to a thread of its own, which
// stops and frees it once the streaming thread lets go.
TEST(WatchedStateChange, APipelineThatCannotStopIsLeftToAThreadOfItsOwn) {
  gst_init(nullptr, nullptr);
  GstElement* quick = launch("videotestsrc ! fakesink");
  ASSERT_NE(quick, nullptr);
  gst_element_set_state(quick, GST_STATE_PLAYING);
  EXPECT_TRUE(stop_pipeline_within(quick, 5000ms));

  GstElement* hung = launch("videotestsrc is-live=false ! identity sleep-time=1500000 ! fakesink");
  ASSERT_NE(hung, nullptr);
  std::atomic<bool> freed{false};
  g_object_weak_ref(G_OBJECT(hung), [](gpointer data, GObject*) { static_cast<std::atomic<bool>*>(data)->store(true); },
                    &freed);
  gst_element_set_state(hung, GST_STATE_PLAYING);
  std::this_thread::sleep_for(300ms);  // the first buffer is asleep in identity, for 1.5 s
  EXPECT_FALSE(stop_pipeline_within(hung, 200ms));  // returned without the stop (true only once stopped)
  for (int k = 0; k < 100 && !freed; ++k) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(freed);  // once identity woke: stopped and unreffed by its thread
}

class WatchedStateChangeDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(WatchedStateChangeDeathTest, AStreamingThreadThatNeverStopsAbortsNamingTheStream) {
  EXPECT_EXIT(
      {
        init_logging("ingest", "info");
        gst_init(nullptr, nullptr);
        // Each buffer sleeps 30 s in identity's chain function, holding the stream lock that taking
        // the pipeline down waits for.
        GstElement* pipeline = launch("videotestsrc is-live=false ! identity sleep-time=30000000 ! fakesink");
        if (!pipeline) std::exit(3);
        gst_element_set_state(pipeline, GST_STATE_PLAYING);
        std::this_thread::sleep_for(500ms);  // the first buffer is asleep in identity
        StageWatchdog dog("ingest: stream 'cam'", 0.3);
        set_state_watched(pipeline, GST_STATE_NULL, &dog);
        std::exit(0);  // not reached within the 30 s
      },
      ::testing::KilledBySignal(SIGABRT),
      "ingest: stream 'cam': stuck in its own work \\(stopping a stream's GStreamer pipeline \\(state NULL\\)\\)");
}

}  // namespace
}  // namespace vapipe
