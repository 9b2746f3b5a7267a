// Where the stages of a job run. One lane (ingest, preprocess, batch, infer) per GPU the job uses, or
// `lanes_per_device` of them; streams are sharded across lanes; one publish stage gathers every lane's
// results. On a machine without GPUs (or with `gpus: none`) the lanes run on the CPU. The plan is a pure function of the config
// and the GPU count, so the supervisor and every stage process compute the same plan, and tests
// exercise it with fake device counts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/config.h"
#include "pipeline/status.h"

namespace vapipe {

enum class Decoder { kCpu, kNvdec };
const char* decoder_name(Decoder d);
// "cuda:N" for GPU N, "cpu" for -1 (as infer.device spells devices).
std::string device_name(int gpu);

struct Lane {
  uint32_t index = 0;
  int gpu = -1;                   // the lane's GPU; -1: a CPU lane
  std::vector<uint32_t> streams;  // indices into Config::streams, ascending
  Decoder decoder = Decoder::kCpu;
  int preprocess_gpu = -1;        // -1: CPU preprocessing
  int infer_gpu = -1;             // -1: CPU inference (differs from `gpu` only with infer.device cuda:N)
  // Where the lane's pools keep their bytes: a GPU (device pool, CUDA IPC) or -1 (host shared memory).
  // Frames stay on the GPU when preprocess runs there; tensors when preprocess and infer both do.
  int frame_pool_gpu = -1;
  int tensor_pool_gpu = -1;
  std::string describe(const Config& config) const;
};

struct Placement {
  std::vector<Lane> lanes;
  // How many distinct GPUs the job's stages use: decode, preprocess or infer on them (for the cost
  // line of the summary).
  int gpus_used() const;
  // The lane that carries a stream.
  uint32_t lane_of(uint32_t stream_index) const;
};

// How many of a lane's streams can be open at once: all of them in a live job; in an archive job the
// streams of at most ingest.max_open_streams groups (a decoded stream with its `source` members), the
// largest ones, and of at most `most_groups` (0: no such bound; ingest's open-file budget). What the
// lane's frame pool is sized for.
size_t streams_open_at_once(const Config& config, const Lane& lane, size_t most_groups = 0);

// CPUs this process may run on: its affinity mask, bounded by its cgroups' CPU quota (a container's
// `--cpus`, a pod's CPU limit: the mask shows the host's CPUs there). At least 1.
unsigned usable_cpus();

// Threads for each CPU decoder (libav, libvpx, ...) of a lane: ingest.decoder_threads when set;
// otherwise (auto, 0) the lane's share of the `cpus` (the job's `lanes` share them) divided among the
// streams it decodes at once, from 1 to 16. A decoder left to itself takes one thread per CPU of the
// machine, each with its own frames: with more streams than CPUs, memory for no speed.
uint32_t decoder_threads_per_stream(uint32_t configured, unsigned cpus, size_t lanes, size_t decoding_at_once);

// visible_gpus: GPUs CUDA can see (visible_gpu_count() in production, a fake count in tests).
// Errors name the config file, line and key (e.g. a listed GPU that does not exist, `cuda` asked for on
// a machine without GPUs).
Result<Placement> plan_placement(const Config& config, int visible_gpus);

}  // namespace vapipe
