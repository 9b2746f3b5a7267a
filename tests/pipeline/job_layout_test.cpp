#include "pipeline/job_layout.h"

#include <gtest/gtest.h>

namespace vapipe {
namespace {

TEST(JobLayout, StagesAcceptTheirJobsPoolsOfAnyLaneAndNoOthers) {
  Config config;
  const JobLayout layout = make_job_layout(config, "nightly", 2);
  ASSERT_TRUE(layout.by_reference);
  const PoolFilter accepted = pools_accepted_by_stages(layout);
  ASSERT_TRUE(accepted);
  EXPECT_TRUE(accepted(layout.frame_pool));
  EXPECT_TRUE(accepted(layout.tensor_pool));
  EXPECT_TRUE(accepted(make_job_layout(config, "nightly", 0).frame_pool));  // another lane's
  EXPECT_FALSE(accepted(make_job_layout(config, "nightly-2", 0).frame_pool));  // another job's
  EXPECT_FALSE(accepted(make_job_layout(config, "night", 0).frame_pool));
  EXPECT_FALSE(accepted("/vapipe-nightly-frames-0x"));
  EXPECT_FALSE(accepted("vapipe-nightly-frames-0"));
  EXPECT_FALSE(accepted("/vapipe-nightly-frames-0/../../etc"));
  EXPECT_FALSE(accepted(""));
}

TEST(JobLayout, InlineEdgesAcceptNoPool) {
  Config config;
  config.transport.mode = TransportMode::kTcp;
  const JobLayout layout = make_job_layout(config, "nightly", 0);
  EXPECT_FALSE(layout.by_reference);
  EXPECT_FALSE(pools_accepted_by_stages(layout));
}

}  // namespace
}  // namespace vapipe
