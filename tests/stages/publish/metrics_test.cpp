// The Prometheus text and the health document, from a JobMetrics snapshot.
#include "stages/publish/metrics.h"

#include <gtest/gtest.h>

namespace vapipe {
namespace {

JobMetrics two_cameras() {
  JobMetrics m;
  m.job = "yard \"north\"";
  m.mode = "live";
  m.start_unix_s = 1000;
  m.now_unix_s = 1060;
  StreamMetrics a;
  a.id = "gate";
  a.state = "running";
  a.results = 1800;
  a.frame_errors = 2;
  a.gaps = 5;
  a.reconnects = 1;
  a.latency_sum_s = 90;
  a.latency_count = 1800;
  a.latency_max_s = 0.25;
  a.last_result_unix_s = 1059.5;
  StreamMetrics b;
  b.id = "dock";
  b.state = "reconnecting";
  m.streams = {a, b};
  return m;
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(Metrics, PrometheusTextHasEveryFamilyAndStream) {
  const std::string t = prometheus_text(two_cameras());
  EXPECT_TRUE(has_line(t, "vapipe_job_info{job=\"yard \\\"north\\\"\",mode=\"live\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "# TYPE vapipe_results_total counter"));
  EXPECT_TRUE(has_line(t, "vapipe_results_total{stream=\"gate\"} 1800"));
  EXPECT_TRUE(has_line(t, "vapipe_results_total{stream=\"dock\"} 0"));
  EXPECT_TRUE(has_line(t, "vapipe_frame_errors_total{stream=\"gate\"} 2"));
  EXPECT_TRUE(has_line(t, "vapipe_gaps_total{stream=\"gate\"} 5"));
  EXPECT_TRUE(has_line(t, "vapipe_reconnects_total{stream=\"gate\"} 1"));
  EXPECT_TRUE(has_line(t, "vapipe_stream_state{stream=\"gate\",state=\"running\"} 1"));
  EXPECT_TRUE(has_line(t, "vapipe_stream_state{stream=\"gate\",state=\"reconnecting\"} 0"));
  EXPECT_TRUE(has_line(t, "vapipe_stream_state{stream=\"dock\",state=\"reconnecting\"} 1"));
  EXPECT_TRUE(has_line(t, "# TYPE vapipe_latency_seconds summary"));
  EXPECT_TRUE(has_line(t, "vapipe_latency_seconds_sum{stream=\"gate\"} 90"));
  EXPECT_TRUE(has_line(t, "vapipe_latency_seconds_count{stream=\"gate\"} 1800"));
  EXPECT_TRUE(has_line(t, "vapipe_latency_max_seconds{stream=\"gate\"} 0.25"));
  EXPECT_TRUE(has_line(t, "vapipe_last_result_time_seconds{stream=\"gate\"} 1059.5"));
  EXPECT_TRUE(has_line(t, "vapipe_job_start_time_seconds 1000"));
  // Each stream has one state line per state; every family is declared once.
  size_t state_lines = 0, pos = 0;
  while ((pos = t.find("\nvapipe_stream_state{", pos + 1)) != std::string::npos) ++state_lines;
  EXPECT_EQ(state_lines, 2 * stream_states().size());
  EXPECT_EQ(t.back(), '\n');
}

TEST(Metrics, HealthSaysEachStreamsStateAndHowLongSinceItsLastResult) {
  const nlohmann::json h = health_json(two_cameras());
  EXPECT_EQ(h["status"], "ok");
  EXPECT_EQ(h["mode"], "live");
  EXPECT_DOUBLE_EQ(h["uptime_s"].get<double>(), 60);
  EXPECT_EQ(h["streams"]["gate"]["state"], "running");
  EXPECT_DOUBLE_EQ(h["streams"]["gate"]["last_result_age_s"].get<double>(), 0.5);
  EXPECT_EQ(h["streams"]["dock"]["state"], "reconnecting");
  EXPECT_TRUE(h["streams"]["dock"]["last_result_age_s"].is_null());
}

}  // namespace
}  // namespace vapipe
