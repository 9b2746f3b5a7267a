#include "pipeline/ingest_reload.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace vapipe {
namespace {

std::string with_ingest(const std::string& ingest) {
  return "job: {mode: live}\nstreams: [{id: a, uri: 'rtsp://cam/a'}]\ninfer: {model: m.pt, labels: m.txt}\ningest:\n" +
         ingest;
}

IngestConfig reloaded_ingest(const std::string& yaml) {
  auto c = load_config_string(yaml, "job.yaml", "/cfg");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? c->ingest : IngestConfig{};
}

Result<IngestReload> compare(const std::string& running, const std::string& reloaded) {
  return compare_ingest_sections(running, reloaded, "job.yaml", reloaded_ingest(reloaded));
}

TEST(IngestReload, SamplingAndReconnectionChangeByValueAndTheRestIsRefusedWithItsLine) {
  const std::string running = with_ingest("  max_fps: 5\n  reconnect_attempts: 3\n  decoder: cpu\n");
  auto same = compare(running, with_ingest("  decoder: 'cpu'\n  max_fps: 5.0\n  reconnect_attempts: 3\n"));
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_FALSE(same->changed());

  auto tuned = compare(running, with_ingest("  max_fps: 2\n  reconnect_attempts: 10\n  decoder: cpu\n"
                                            "  stall_timeout_s: 4\n  reconnect_max_delay_s: 5\n"));
  ASSERT_TRUE(tuned.ok()) << tuned.status().message();
  EXPECT_EQ(tuned->keys,
            (std::vector<std::string>{"max_fps", "reconnect_max_delay_s", "reconnect_attempts", "stall_timeout_s"}));
  EXPECT_EQ(tuned->before.max_fps, 5);
  EXPECT_EQ(tuned->before.reconnect_attempts, 3u);
  EXPECT_EQ(tuned->before.stall_timeout_s, 10);  // unset: the default
  EXPECT_EQ(tuned->after.max_fps, 2);
  EXPECT_EQ(tuned->after.stall_timeout_s, 4);
  EXPECT_EQ(describe_ingest_reload(*tuned),
            "ingest.max_fps, ingest.reconnect_max_delay_s, ingest.reconnect_attempts, ingest.stall_timeout_s changed");

  // A key set to its default where it was unset is no change.
  auto explicit_default = compare(running, running + "  rtsp_latency_ms: 200\n");
  ASSERT_TRUE(explicit_default.ok());
  EXPECT_FALSE(explicit_default->changed());

  auto decoder = compare(running, with_ingest("  max_fps: 5\n  reconnect_attempts: 3\n  decoder: auto\n"));
  ASSERT_FALSE(decoder.ok());
  EXPECT_EQ(decoder.status().message(),
            "job.yaml:7: `ingest.decoder` changed; of `ingest`, a running job takes only max_fps, keyframes_only, "
            "rtsp_latency_ms, reconnect, reconnect_delay_s, reconnect_max_delay_s, reconnect_attempts, "
            "stall_timeout_s, deinterlace, orientation (restart the job for the rest)");
  // deinterlace: its words, read as the config reader reads them (first_field, the default, where unset).
  auto woven = compare(running, running + "  deinterlace: off\n");
  ASSERT_TRUE(woven.ok()) << woven.status().message();
  EXPECT_EQ(woven->keys, std::vector<std::string>{"deinterlace"});
  EXPECT_TRUE(woven->before.first_field);
  EXPECT_FALSE(woven->after.first_field);
  auto back = compare(running + "  deinterlace: off\n", running + "  deinterlace: first_field\n");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_FALSE(back->before.first_field);
  EXPECT_EQ(describe_ingest_reload(*back), "ingest.deinterlace changed");
  // orientation likewise (upright, the default, where unset).
  auto as_stored = compare(running, running + "  orientation: as_stored\n");
  ASSERT_TRUE(as_stored.ok()) << as_stored.status().message();
  EXPECT_EQ(as_stored->keys, std::vector<std::string>{"orientation"});
  EXPECT_TRUE(as_stored->before.upright);
  EXPECT_FALSE(as_stored->after.upright);
  EXPECT_FALSE(compare(running, running + "  orientation: upright\n")->changed());
  auto queue_gone = compare(running + "  queue_capacity: 16\n", running);
  ASSERT_FALSE(queue_gone.ok());
  EXPECT_NE(queue_gone.status().message().find("job.yaml:4: `ingest.queue_capacity` changed"), std::string::npos);
}

// The running values are read as the config reader read them: merged in, or from the environment.
TEST(IngestReload, TheRunningValuesAreReadThroughMergeKeysAndTheEnvironment) {
  ::setenv("VAPIPE_TEST_INGEST_FPS", "4", 1);
  const std::string running = "x-cam: &cam {keyframes_only: true}\n" +
                              with_ingest("  <<: *cam\n  max_fps: ${VAPIPE_TEST_INGEST_FPS}\n");
  auto change = compare(running, with_ingest("  max_fps: 4\n  keyframes_only: true\n"));
  ASSERT_TRUE(change.ok()) << change.status().message();
  EXPECT_FALSE(change->changed());
  EXPECT_TRUE(change->before.keyframes_only);
  auto off = compare(running, with_ingest("  max_fps: 4\n"));
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->keys, std::vector<std::string>{"keyframes_only"});
  ::unsetenv("VAPIPE_TEST_INGEST_FPS");
}

TEST(IngestReload, TheSettingsThatDifferAreNamedAsTheConfigNamesThem) {
  IngestConfig before, after;
  after.max_fps = 5;
  after.keyframes_only = true;
  after.reconnect_attempts = 9;
  EXPECT_EQ(changed_ingest_settings(before, after),
            (std::vector<std::string>{"max_fps", "keyframes_only", "reconnect_attempts"}));
  EXPECT_TRUE(changed_ingest_settings(after, after).empty());
}

TEST(IngestReload, EachReloadableKeyIsTakenAndNoOther) {
  IngestConfig from, to;
  from.max_fps = 3;
  from.keyframes_only = true;
  from.rtsp_latency_ms = 50;
  from.reconnect = false;
  from.reconnect_delay_s = 2;
  from.reconnect_max_delay_s = 4;
  from.reconnect_attempts = 7;
  from.stall_timeout_s = 1;
  from.first_field = false;
  from.upright = false;
  from.decoder = "cpu";
  from.queue_capacity = 99;
  take_reloadable_ingest_settings(from, to);
  EXPECT_TRUE(changed_ingest_settings(from, to).empty());
  EXPECT_EQ(to.decoder, "auto");
  EXPECT_EQ(to.queue_capacity, IngestConfig{}.queue_capacity);
  EXPECT_EQ(reloadable_ingest_keys().size(), 10u);
}

}  // namespace
}  // namespace vapipe
