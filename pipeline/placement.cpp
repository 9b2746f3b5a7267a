#include "pipeline/placement.h"

#include <cstdint>
#include <sched.h>

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <thread>

#include "pipeline/cgroup.h"

namespace vapipe {
namespace {

std::string where(const Config& c, int line, const std::string& key) {
  return c.source + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " + key + ": ";
}

// infer.device cuda:N pins inference to GPU N; -1 otherwise.
int pinned_infer_gpu(const Config& c) {
  const std::string& d = c.infer.device;
  return d.rfind("cuda:", 0) == 0 ? std::stoi(d.substr(5)) : -1;
}

}  // namespace

const char* decoder_name(Decoder d) { return d == Decoder::kNvdec ? "nvdec" : "cpu"; }

std::string device_name(int gpu) { return gpu >= 0 ? "cuda:" + std::to_string(gpu) : "cpu"; }

std::string Lane::describe(const Config& config) const {
  std::string s = "lane " + std::to_string(index) + " (" + (gpu >= 0 ? "GPU " + std::to_string(gpu) : "CPU") +
                  "): decode " + decoder_name(decoder) + ", preprocess " +
                  device_name(preprocess_gpu) + ", infer " + device_name(infer_gpu) + ", " +
                  std::to_string(streams.size()) + " streams";
  // Which streams (up to 8): "(s0, ...)" did not say which lane had which.
  if (!streams.empty()) {
    std::string ids;
    for (size_t i = 0; i < streams.size() && i < 8; ++i) ids += (i ? ", " : "") + config.streams[streams[i]].id;
    s += " (" + ids + (streams.size() > 8 ? ", ... " + std::to_string(streams.size() - 8) + " more" : "") + ")";
  }
  return s;
}

int Placement::gpus_used() const {
  std::set<int> used;
  for (const Lane& l : lanes) {
    for (int g : {l.decoder == Decoder::kNvdec ? l.gpu : -1, l.preprocess_gpu, l.infer_gpu}) {
      if (g >= 0) used.insert(g);
    }
  }
  return static_cast<int>(used.size());
}

uint32_t Placement::lane_of(uint32_t stream_index) const {
  for (const Lane& l : lanes) {
    for (uint32_t s : l.streams) {
      if (s == stream_index) return l.index;
    }
  }
  return 0;
}

Result<Placement> plan_placement(const Config& c, int visible_gpus) {
  const std::string have = visible_gpus == 0 ? std::string("this machine has no usable GPU")
                                             : "this machine has " + std::to_string(visible_gpus) + " GPU" +
                                                   (visible_gpus == 1 ? "" : "s") + " (0-" +
                                                   std::to_string(visible_gpus - 1) + ")";
  std::vector<int> gpus;
  switch (c.gpus.kind) {
    case GpuSelection::Kind::kNone:
      break;
    case GpuSelection::Kind::kAll:
      for (int g = 0; g < visible_gpus; ++g) gpus.push_back(g);
      break;
    case GpuSelection::Kind::kList:
      for (int g : c.gpus.list) {
        if (g >= visible_gpus) {
          return InvalidArgument(where(c, c.gpus.line, "gpus") + "GPU " + std::to_string(g) + " does not exist; " +
                                 have);
        }
        gpus.push_back(g);
      }
      break;
  }
  // lanes_per_device lanes on each GPU (GPU-major within each round, so that streams alternate GPUs).
  if (!gpus.empty() && c.lanes_per_device > 1) {
    std::vector<int> lanes;
    for (uint32_t r = 0; r < c.lanes_per_device; ++r) lanes.insert(lanes.end(), gpus.begin(), gpus.end());
    gpus = std::move(lanes);
  }
  // Streams that decode: a member (streams[].source) rides on its source's lane.
  size_t decoding = 0;
  for (const StreamConfig& s : c.streams) decoding += !s.is_member();
  // Every lane carries at least one stream; a job that watches folders gets its files later, so it has
  // the lanes its GPUs give, however few files there are when it starts.
  if (!c.watches_folders() && gpus.size() > decoding) gpus.resize(decoding);

  const bool any_gpu = !gpus.empty();
  const std::string no_gpu_reason =
      c.gpus.kind == GpuSelection::Kind::kNone ? std::string("the config says gpus: none") : have;
  if (!any_gpu) {
    if (c.ingest.decoder == "nvdec") {
      return InvalidArgument(where(c, c.ingest.decoder_line, "ingest.decoder") + "nvdec needs a GPU, but " + no_gpu_reason +
                             " (use auto or cpu)");
    }
    if (c.preprocess.device == "cuda") {
      return InvalidArgument(where(c, c.preprocess.device_line, "preprocess.device") + "cuda needs a GPU, but " + no_gpu_reason +
                             " (use auto or cpu)");
    }
    if (c.infer.device.rfind("cuda", 0) == 0) {
      return InvalidArgument(where(c, c.infer.device_line, "infer.device") + c.infer.device + " needs a GPU, but " + no_gpu_reason +
                             " (use auto or cpu)");
    }
  }
  const int pinned = pinned_infer_gpu(c);
  if (pinned >= 0 && pinned >= visible_gpus) {
    return InvalidArgument(where(c, c.infer.device_line, "infer.device") + "GPU " + std::to_string(pinned) + " does not exist; " + have);
  }
  const size_t lane_count =
      any_gpu                ? gpus.size()
      : c.watches_folders() ? c.lanes_per_device
                             : std::min<size_t>(c.lanes_per_device, std::max<size_t>(1, decoding));
  if (!c.transport.endpoints.empty() && lane_count > 1) {
    return InvalidArgument(where(c, c.transport.endpoints_line, "transport.endpoints") + "pins one set of stages, but the job runs " +
                           std::to_string(lane_count) + " lanes (gpus, lanes_per_device); remove it, or run one lane");
  }

  Placement p;
  for (size_t i = 0; i < lane_count; ++i) {
    Lane lane;
    lane.index = static_cast<uint32_t>(i);
    lane.gpu = any_gpu ? gpus[i] : -1;
    lane.decoder = (c.ingest.decoder == "nvdec" || (c.ingest.decoder == "auto" && any_gpu)) ? Decoder::kNvdec
                                                                                            : Decoder::kCpu;
    const bool cuda_pre = c.preprocess.device == "cuda" || (c.preprocess.device == "auto" && any_gpu);
    lane.preprocess_gpu = cuda_pre ? lane.gpu : -1;
    const bool cuda_infer = c.infer.device.rfind("cuda", 0) == 0 || (c.infer.device == "auto" && any_gpu);
    lane.infer_gpu = !cuda_infer ? -1 : (pinned >= 0 ? pinned : lane.gpu);
    const bool device_pools = c.transport.mode == TransportMode::kShm && c.transport.device_pools;
    lane.frame_pool_gpu = device_pools ? lane.preprocess_gpu : -1;
    lane.tensor_pool_gpu = device_pools && lane.infer_gpu >= 0 ? lane.preprocess_gpu : -1;
    p.lanes.push_back(std::move(lane));
  }
  // Round-robin in declaration order: streams of a config are usually alike (cameras of one model, clips
  // of one archive), so equal counts are equal load; each lane's streams stay in ascending order.
  // A member goes where its source goes.
  std::map<std::string, uint32_t> lane_of_source;
  uint32_t next = 0;
  for (uint32_t s = 0; s < c.streams.size(); ++s) {
    if (c.streams[s].is_member()) continue;
    lane_of_source[c.streams[s].id] = next;
    next = static_cast<uint32_t>((next + 1) % lane_count);
  }
  for (uint32_t s = 0; s < c.streams.size(); ++s) {
    const StreamConfig& stream = c.streams[s];
    auto lane = lane_of_source.find(stream.is_member() ? stream.source : stream.id);
    p.lanes[lane == lane_of_source.end() ? 0 : lane->second].streams.push_back(s);
  }
  return p;
}

size_t streams_open_at_once(const Config& config, const Lane& lane, size_t most_groups) {
  size_t limit = config.job.mode == JobMode::kArchive ? config.ingest.max_open_streams : 0;
  if (config.job.mode == JobMode::kArchive && most_groups > 0) limit = limit ? std::min(limit, most_groups) : most_groups;
  std::map<std::string, size_t> group_size;  // by the decoded stream's id
  for (uint32_t i : lane.streams) {
    const StreamConfig& s = config.streams[i];
    ++group_size[s.is_member() ? s.source : s.id];
  }
  if (limit == 0 || group_size.size() <= limit) return lane.streams.size();
  std::vector<size_t> sizes;
  for (const auto& [id, n] : group_size) sizes.push_back(n);
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  return std::accumulate(sizes.begin(), sizes.begin() + limit, size_t{0});
}

unsigned usable_cpus() {
  unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0 && CPU_COUNT(&mask) > 0) cpus = static_cast<unsigned>(CPU_COUNT(&mask));
  if (const unsigned quota = cgroup_cpu_quota(own_cgroup_dirs("cpu")); quota > 0) cpus = std::min(cpus, quota);
  return cpus;
}

uint32_t decoder_threads_per_stream(uint32_t configured, unsigned cpus, size_t lanes, size_t decoding_at_once) {
  if (configured > 0) return configured;
  const size_t lane_cpus = std::max<size_t>(1, cpus / std::max<size_t>(1, lanes));
  return static_cast<uint32_t>(std::clamp<size_t>(lane_cpus / std::max<size_t>(1, decoding_at_once), 1, 16));
}

}  // namespace vapipe
