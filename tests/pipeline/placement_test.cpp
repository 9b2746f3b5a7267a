#include "pipeline/placement.h"

#include <cstdint>
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "pipeline/job_layout.h"
#include "pipeline/stage.h"

namespace vapipe {
namespace {

// A config with `streams` test streams and the given extra YAML (gpus, devices).
Config config_with(int streams, const std::string& extra) {
  std::string yaml = "streams:\n";
  for (int i = 0; i < streams; ++i) {
    yaml += "  - {id: cam" + std::to_string(i) + ", uri: \"test://ball?frames=10\"}\n";
  }
  yaml += "infer: {model: m.pt, labels: m.txt}\n" + extra;
  auto c = load_config_string(yaml, "job.yaml", "/cfg");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : Config{};
}

std::vector<uint32_t> streams_of(const Placement& p, size_t lane) { return p.lanes.at(lane).streams; }

TEST(Placement, NoGpuGivesOneCpuLaneWithEveryStream) {
  auto p = plan_placement(config_with(3, ""), 0);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->lanes.size(), 1u);
  const Lane& lane = p->lanes[0];
  EXPECT_EQ(lane.gpu, -1);
  EXPECT_EQ(lane.decoder, Decoder::kCpu);
  EXPECT_EQ(lane.preprocess_gpu, -1);
  EXPECT_EQ(lane.infer_gpu, -1);
  EXPECT_EQ(lane.streams, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(p->gpus_used(), 0);
}

TEST(Placement, AllGpusGivesOneLanePerGpuWithStreamsRoundRobin) {
  auto p = plan_placement(config_with(7, ""), 3);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->lanes.size(), 3u);
  EXPECT_EQ(streams_of(*p, 0), (std::vector<uint32_t>{0, 3, 6}));
  EXPECT_EQ(streams_of(*p, 1), (std::vector<uint32_t>{1, 4}));
  EXPECT_EQ(streams_of(*p, 2), (std::vector<uint32_t>{2, 5}));
  for (uint32_t i = 0; i < 3; ++i) {
    const Lane& lane = p->lanes[i];
    EXPECT_EQ(lane.index, i);
    EXPECT_EQ(lane.gpu, static_cast<int>(i));
    // auto everywhere: the lane's GPU decodes, preprocesses and classifies.
    EXPECT_EQ(lane.decoder, Decoder::kNvdec);
    EXPECT_EQ(lane.preprocess_gpu, lane.gpu);
    EXPECT_EQ(lane.infer_gpu, lane.gpu);
  }
  EXPECT_EQ(p->gpus_used(), 3);
  EXPECT_EQ(p->lane_of(4), 1u);
  EXPECT_EQ(p->lane_of(6), 0u);
}

TEST(Placement, EveryStreamIsInExactlyOneLane) {
  for (int gpus = 0; gpus <= 8; ++gpus) {
    for (int streams = 1; streams <= 20; ++streams) {
      auto p = plan_placement(config_with(streams, ""), gpus);
      ASSERT_TRUE(p.ok()) << p.status().message();
      std::vector<int> seen(streams, 0);
      for (const Lane& lane : p->lanes) {
        EXPECT_FALSE(lane.streams.empty()) << gpus << " GPUs, " << streams << " streams: an empty lane";
        for (uint32_t s : lane.streams) ++seen.at(s);
      }
      for (int s = 0; s < streams; ++s) EXPECT_EQ(seen[s], 1) << "stream " << s;
      EXPECT_EQ(p->lanes.size(), static_cast<size_t>(std::max(1, std::min(gpus, streams))));
    }
  }
}

TEST(Placement, PoolsAreInGpuMemoryOnlyWhereBothEndsAreOnTheGpu) {
  auto all_gpu = plan_placement(config_with(1, ""), 1);
  ASSERT_TRUE(all_gpu.ok());
  EXPECT_EQ(all_gpu->lanes[0].frame_pool_gpu, 0);
  EXPECT_EQ(all_gpu->lanes[0].tensor_pool_gpu, 0);
  auto loaded = load_config_string(
      "streams: [{id: a, uri: \"test://ball?frames=1\"}]\ninfer: {model: m, labels: l, device: cpu}\n", "job.yaml", "/cfg");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  auto cpu_infer = plan_placement(*loaded, 1);
  ASSERT_TRUE(cpu_infer.ok());
  EXPECT_EQ(cpu_infer->lanes[0].frame_pool_gpu, 0);   // preprocess reads frames on the GPU
  EXPECT_EQ(cpu_infer->lanes[0].tensor_pool_gpu, -1); // but writes tensors for a CPU model to the host
  for (const char* extra : {"transport: {device_pools: false}\n", "transport: {mode: tcp}\n"}) {
    auto host = plan_placement(config_with(1, extra), 1);
    ASSERT_TRUE(host.ok());
    EXPECT_EQ(host->lanes[0].frame_pool_gpu, -1) << extra;
    EXPECT_EQ(host->lanes[0].tensor_pool_gpu, -1) << extra;
    EXPECT_EQ(host->lanes[0].preprocess_gpu, 0) << extra;
  }
  auto cpu = plan_placement(config_with(1, ""), 0);
  EXPECT_EQ(cpu->lanes[0].frame_pool_gpu, -1);
}

TEST(Placement, MoreGpusThanStreamsLeavesNoEmptyLane) {
  auto p = plan_placement(config_with(2, ""), 8);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->lanes.size(), 2u);
  EXPECT_EQ(p->gpus_used(), 2);
}

TEST(Placement, AListPicksThoseGpusInOrder) {
  auto p = plan_placement(config_with(4, "gpus: [3, 1]\n"), 4);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->lanes.size(), 2u);
  EXPECT_EQ(p->lanes[0].gpu, 3);
  EXPECT_EQ(p->lanes[1].gpu, 1);
  EXPECT_EQ(streams_of(*p, 0), (std::vector<uint32_t>{0, 2}));
}

TEST(Placement, AListedGpuThatDoesNotExistIsAnErrorNamingTheLine) {
  auto p = plan_placement(config_with(2, "gpus: [0, 2]\n"), 2);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("job.yaml:5: gpus: GPU 2 does not exist; this machine has 2 GPUs (0-1)"),
            std::string::npos)
      << p.status().message();
}

TEST(Placement, GpusNoneRunsOnTheCpuEvenWithGpus) {
  auto p = plan_placement(config_with(3, "gpus: none\n"), 2);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->lanes.size(), 1u);
  EXPECT_EQ(p->lanes[0].gpu, -1);
  EXPECT_EQ(p->lanes[0].decoder, Decoder::kCpu);
}

// (at the key's line: they had none, where gpus had one)
TEST(Placement, CudaOrNvdecAskedForWithoutAGpuIsAnErrorNamingTheKey) {
  for (auto [blocks, key] : std::vector<std::pair<std::string, std::string>>{
           {"ingest: {decoder: nvdec}\ninfer: {model: m.pt, labels: m.txt}\n", "job.yaml:2: ingest.decoder: nvdec needs a GPU"},
           {"preprocess: {device: cuda}\ninfer: {model: m.pt, labels: m.txt}\n", "job.yaml:2: preprocess.device: cuda needs a GPU"},
           {"infer:\n  {model: m.pt, labels: m.txt, device: cuda}\n", "job.yaml:3: infer.device: cuda needs a GPU"}}) {
    auto c = load_config_string("streams: [{id: a, uri: \"test://ball?frames=1\"}]\n" + blocks, "job.yaml", "/cfg");
    ASSERT_TRUE(c.ok()) << c.status().message();
    auto p = plan_placement(*c, 0);
    ASSERT_FALSE(p.ok()) << blocks;
    EXPECT_NE(p.status().message().find(key), std::string::npos) << p.status().message();
    EXPECT_NE(p.status().message().find("no usable GPU"), std::string::npos) << p.status().message();
  }
}

TEST(Placement, ExplicitDevicesOverrideAutoPerStage) {
  auto p = plan_placement(config_with(2, "ingest: {decoder: cpu}\npreprocess: {device: cpu}\n"), 2);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->lanes.size(), 2u);
  for (const Lane& lane : p->lanes) {
    EXPECT_EQ(lane.decoder, Decoder::kCpu);
    EXPECT_EQ(lane.preprocess_gpu, -1);
    EXPECT_EQ(lane.infer_gpu, lane.gpu);  // infer stays auto: the lane's GPU
  }
}

TEST(Placement, InferPinnedToOneGpuServesEveryLane) {
  auto loaded = load_config_string(
      "streams: [{id: a, uri: \"test://ball?frames=1\"}, {id: b, uri: \"test://ball?frames=1\"}]\n"
      "infer: {model: m.pt, labels: m.txt, device: \"cuda:1\"}\n",
      "job.yaml", "/cfg");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  auto p = plan_placement(*loaded, 2);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->lanes[0].infer_gpu, 1);
  EXPECT_EQ(p->lanes[1].infer_gpu, 1);
  EXPECT_EQ(p->lanes[0].preprocess_gpu, 0);
  auto missing = plan_placement(*loaded, 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("infer.device: GPU 1 does not exist"), std::string::npos);
}

// The start-up line says which lane has which streams (it named the first alone: "(cam0, ...)").
TEST(Placement, ALanesDescriptionNamesItsStreams) {
  const Config c = config_with(21, "lanes_per_device: 2\n");
  auto p = plan_placement(c, 0);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->lanes.size(), 2u);
  EXPECT_EQ(p->lanes[1].describe(c),
            "lane 1 (CPU): decode cpu, preprocess cpu, infer cpu, 10 streams (cam1, cam3, cam5, cam7, cam9, cam11, "
            "cam13, cam15, ... 2 more)");
  const Config two = config_with(2, "lanes_per_device: 2\n");
  auto q = plan_placement(two, 0);
  ASSERT_TRUE(q.ok());
  EXPECT_NE(q->lanes[0].describe(two).find("1 streams (cam0)"), std::string::npos) << q->lanes[0].describe(two);
}

// lanes_per_device: several stage sets per GPU (or on the CPU), streams shared out over all of them.
TEST(Placement, LanesPerDeviceGivesEachGpuSeveralLanes) {
  auto p = plan_placement(config_with(9, "lanes_per_device: 2\n"), 2);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->lanes.size(), 4u);
  EXPECT_EQ(p->lanes[0].gpu, 0);
  EXPECT_EQ(p->lanes[1].gpu, 1);
  EXPECT_EQ(p->lanes[2].gpu, 0);
  EXPECT_EQ(p->lanes[3].gpu, 1);
  for (const Lane& lane : p->lanes) {
    EXPECT_EQ(lane.infer_gpu, lane.gpu);
    EXPECT_EQ(lane.preprocess_gpu, lane.gpu);
  }
  EXPECT_EQ(streams_of(*p, 0), (std::vector<uint32_t>{0, 4, 8}));
  EXPECT_EQ(streams_of(*p, 3), (std::vector<uint32_t>{3, 7}));
  EXPECT_EQ(p->gpus_used(), 2);

  auto cpu = plan_placement(config_with(3, "lanes_per_device: 2\n"), 0);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  ASSERT_EQ(cpu->lanes.size(), 2u);
  EXPECT_EQ(cpu->lanes[1].gpu, -1);
  EXPECT_EQ(streams_of(*cpu, 1), (std::vector<uint32_t>{1}));

  auto few = plan_placement(config_with(3, "lanes_per_device: 4\n"), 1);  // no lane without a stream
  ASSERT_TRUE(few.ok());
  EXPECT_EQ(few->lanes.size(), 3u);
  EXPECT_FALSE(load_config_string("streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n"
                                  "lanes_per_device: 0\n", "job.yaml", "/cfg").ok());
}

TEST(Placement, PinnedEndpointsWithSeveralLanesAreRefused) {
  Config c = config_with(2, "transport: {endpoints: {batch: \"tcp://10.0.0.2:5552\"}}\n");
  EXPECT_TRUE(plan_placement(c, 1).ok());
  auto p = plan_placement(c, 2);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("transport.endpoints"), std::string::npos);
}

TEST(Placement, LanesMeetOnTheirOwnEdgesAndShareThePublishInput) {
  Config c = config_with(2, "");
  JobLayout l0 = make_job_layout(c, "j", 0);
  JobLayout l1 = make_job_layout(c, "j", 1);
  for (StageKind k : {StageKind::kPreprocess, StageKind::kBatch, StageKind::kInfer}) {
    EXPECT_NE(l0.input_endpoint.at(k), l1.input_endpoint.at(k)) << stage_kind_name(k);
  }
  EXPECT_EQ(l0.input_endpoint.at(StageKind::kPublish), l1.input_endpoint.at(StageKind::kPublish));
  EXPECT_NE(l0.frame_pool, l1.frame_pool);
  EXPECT_NE(l0.tensor_pool, l1.tensor_pool);

  Config tcp = config_with(2, "transport: {mode: tcp}\n");
  EXPECT_EQ(make_job_layout(tcp, "j", 0).input_endpoint.at(StageKind::kPreprocess), "tcp://127.0.0.1:5551");
  EXPECT_EQ(make_job_layout(tcp, "j", 0).input_endpoint.at(StageKind::kPublish), "tcp://127.0.0.1:5554");
  EXPECT_EQ(make_job_layout(tcp, "j", 1).input_endpoint.at(StageKind::kPreprocess), "tcp://127.0.0.1:5603");
  EXPECT_EQ(make_job_layout(tcp, "j", 2).input_endpoint.at(StageKind::kInfer), "tcp://127.0.0.1:5608");
}

TEST(StreamTracker, ALaneIsDoneWhenItsOwnStreamsEnded) {
  StreamTracker tracker(4, {1, 3});
  auto end_of = [](uint32_t i) {
    Envelope env;
    env.stream_index = i;
    return Message::stream_event(MessageKind::kStreamEnd, env, {});
  };
  tracker.observe(end_of(0));  // another lane's stream: not counted
  EXPECT_EQ(tracker.ended_count(), 0u);
  tracker.observe(end_of(1));
  EXPECT_FALSE(tracker.all_ended());
  tracker.observe(end_of(3));
  EXPECT_TRUE(tracker.all_ended());
  EXPECT_EQ(tracker.expected_count(), 2u);
}

TEST(Placement, AStreamWithASourceGoesOnItsSourcesLaneAndLanesAreCountedByTheStreamsThatDecode) {
  // Members listed before and after their sources; 3 decoded streams on 4 GPUs make 3 lanes.
  auto c = load_config_string(R"(
streams:
  - {id: a-left, source: a, roi: [0, 0, 0.5, 1]}
  - {id: a, uri: 'test://ball?frames=10'}
  - {id: b, uri: 'test://smpte?frames=10'}
  - {id: c, uri: 'test://snow?frames=10'}
  - {id: b-top, source: b, roi: [0, 0, 1, 0.5]}
  - {id: c-left, source: c, roi: [0, 0, 0.5, 1]}
  - {id: a-right, source: a, roi: [0.5, 0, 0.5, 1]}
infer: {model: m.pt, labels: m.txt}
)", "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto p = plan_placement(*c, 4);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->lanes.size(), 3u);
  EXPECT_EQ(streams_of(*p, 0), (std::vector<uint32_t>{0, 1, 6}));  // a and its members, in order
  EXPECT_EQ(streams_of(*p, 1), (std::vector<uint32_t>{2, 4}));
  EXPECT_EQ(streams_of(*p, 2), (std::vector<uint32_t>{3, 5}));
  // Without a GPU, lanes_per_device lanes at most, one per decoded stream.
  auto cpu = load_config_string(R"(
lanes_per_device: 4
streams:
  - {id: a, uri: 'test://ball?frames=10'}
  - {id: a-left, source: a, roi: [0, 0, 0.5, 1]}
infer: {model: m.pt, labels: m.txt}
)", "job.yaml", "/cfg");
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  auto one = plan_placement(*cpu, 0);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->lanes.size(), 1u);
  EXPECT_EQ(streams_of(*one, 0), (std::vector<uint32_t>{0, 1}));
}

// An archive lane opens ingest.max_open_streams groups at once (a stream with its `source` members
// counts once): its frame pool is sized for the largest of them, not for every file of the folder.
TEST(Placement, AnArchiveLaneIsSizedForTheStreamsOpenAtOnce) {
  const auto lane_of = [](const Config& c) { return plan_placement(c, 0)->lanes.at(0); };
  Config ten = config_with(10, "ingest: {max_open_streams: 3}\n");
  EXPECT_EQ(streams_open_at_once(ten, lane_of(ten)), 3u);
  Config all = config_with(10, "ingest: {max_open_streams: 0}\n");
  EXPECT_EQ(streams_open_at_once(all, lane_of(all)), 10u);
  Config few = config_with(10, "");  // the default, 64, has room for all ten
  EXPECT_EQ(streams_open_at_once(few, lane_of(few)), 10u);
  Config live = config_with(10, "job: {mode: live}\ningest: {max_open_streams: 3}\n");  // cameras all run
  EXPECT_EQ(streams_open_at_once(live, lane_of(live)), 10u);
  auto groups = load_config_string(R"(
ingest: {max_open_streams: 2}
streams:
  - {id: a, uri: 'test://ball?frames=10'}
  - {id: b, uri: 'test://smpte?frames=10'}
  - {id: b-left, source: b, roi: [0, 0, 0.5, 1]}
  - {id: c, uri: 'test://snow?frames=10'}
  - {id: b-right, source: b, roi: [0.5, 0, 0.5, 1]}
  - {id: d, uri: 'test://ball?frames=10'}
infer: {model: m.pt, labels: m.txt}
)", "job.yaml", "/cfg");
  ASSERT_TRUE(groups.ok()) << groups.status().message();
  EXPECT_EQ(streams_open_at_once(*groups, lane_of(*groups)), 4u);  // b with its two members, and one more
  // Ingest's open-file budget bounds it too (and alone, with max_open_streams 0); not a live job's.
  EXPECT_EQ(streams_open_at_once(ten, lane_of(ten), 2), 2u);
  EXPECT_EQ(streams_open_at_once(all, lane_of(all), 4), 4u);
  EXPECT_EQ(streams_open_at_once(all, lane_of(all), 40), 10u);
  EXPECT_EQ(streams_open_at_once(live, lane_of(live), 4), 10u);
}

// ingest.decoder_threads auto: the lane's share of the CPUs divided among the streams it decodes at
// once, 1 to 16 (a decoder left to itself takes one thread per CPU of the machine); a set value wins.
TEST(Placement, ADecoderGetsItsShareOfTheLanesCpus) {
  EXPECT_EQ(decoder_threads_per_stream(0, 16, 1, 1), 16u);   // one file: all of them
  EXPECT_EQ(decoder_threads_per_stream(0, 16, 1, 4), 4u);
  EXPECT_EQ(decoder_threads_per_stream(0, 16, 1, 6), 2u);    // rounded down: the CPUs stay busy
  EXPECT_EQ(decoder_threads_per_stream(0, 16, 1, 64), 1u);   // an archive folder: one each
  EXPECT_EQ(decoder_threads_per_stream(0, 2, 1, 8), 1u);
  EXPECT_EQ(decoder_threads_per_stream(0, 128, 1, 1), 16u);  // no decoder gains from more
  EXPECT_EQ(decoder_threads_per_stream(0, 16, 4, 2), 2u);    // four lanes share the 16
  EXPECT_EQ(decoder_threads_per_stream(0, 2, 8, 1), 1u);     // more lanes than CPUs
  EXPECT_EQ(decoder_threads_per_stream(0, 16, 1, 0), 16u);
  EXPECT_EQ(decoder_threads_per_stream(3, 16, 1, 64), 3u);   // set: as set
  EXPECT_EQ(decoder_threads_per_stream(32, 2, 1, 1), 32u);
  const unsigned cpus = usable_cpus();
  EXPECT_GE(cpus, 1u);
  EXPECT_LE(cpus, std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace vapipe
