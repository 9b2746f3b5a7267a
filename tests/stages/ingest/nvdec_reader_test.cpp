// NVDEC ingest (ctest label gpu): H.264 and H.265 clips decoded by nvcodec into CUDA memory and
// copied device to device into a device pool slot, with the same luma as the CPU decoder gives. And
// the fallback: without NVDEC, decoder nvdec still decodes every frame (on the CPU). Skips the GPU
// cases cleanly without a GPU, the CUDA toolkit or GStreamer's nvcodec decoders.
// Where no CPU decoder is installed (the GPU machine's carried GStreamer has none), the NVDEC luma is
// compared with a reference the CPU decoder made: tests/media/<clip>.luma16, the mean of each 16x16
// block of each frame's luma, rounded (NvdecReference checks it against the CPU decoder everywhere
// else, and VAPIPE_WRITE_MEDIA_REFERENCE=1 rewrites it).
#include <cstdint>
#include <gtest/gtest.h>
#include <iostream>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "pipeline/cuda/device_memory.h"
#include "pipeline/cuda/gpu_info.h"
#include "pipeline/shm_pool.h"
#include "stages/ingest/nvdec_support.h"
#include "stages/ingest/stream_reader.h"

namespace vapipe {
namespace {

using namespace std::chrono_literals;

const std::string kMedia = std::string(VAPIPE_SOURCE_DIR) + "/tests/media/";

// Collects frames, allocating payloads from a pool (a device pool here, as ingest does before a GPU
// preprocess), and keeps a host copy of each frame's luma.
class PoolEmitter final : public Emitter {
 public:
  explicit PoolEmitter(std::shared_ptr<ShmPool> pool) : pool_(std::move(pool)) {}
  Status emit(Message&& m) override {
    if (m.kind == MessageKind::kStreamError) errors.push_back(m.event.message);
    if (m.kind != MessageKind::kFrame) return Status::Ok();
    devices.push_back(m.payload.device());
    std::vector<uint8_t> y(size_t{m.frame.width} * m.frame.height);
    for (uint32_t r = 0; r < m.frame.height; ++r) {
      const std::byte* row = m.payload.data() + m.frame.offset[0] + size_t{r} * m.frame.stride[0];
      VAPIPE_RETURN_IF_ERROR(m.payload.on_device() ? cuda_copy(y.data() + size_t{r} * m.frame.width, row, m.frame.width, nullptr)
                                                   : (std::memcpy(y.data() + size_t{r} * m.frame.width, row, m.frame.width), Status::Ok()));
    }
    luma.push_back(std::move(y));
    return Status::Ok();
  }
  Result<Payload> allocate(size_t bytes) override { return pool_->acquire(bytes, 5000ms); }
  std::vector<std::vector<uint8_t>> luma;
  std::vector<int> devices;
  std::vector<std::string> errors;

 private:
  std::shared_ptr<ShmPool> pool_;
};

StreamConfig clip(const std::string& id, const std::string& file) {
  StreamConfig s;
  s.id = id;
  auto parsed = parse_stream_uri(kMedia + file, "");
  EXPECT_TRUE(parsed.ok());
  s.parsed = parsed.value();
  s.uri = s.parsed.uri;
  return s;
}

// Decodes `file` with the given decoder into a pool on `pool_device` (-1: host).
struct Decoded {
  std::vector<std::vector<uint8_t>> luma;
  std::vector<int> devices;
  uint64_t device_frames = 0, host_frames = 0;
  std::vector<std::string> errors;
};
Decoded decode(const std::string& file, Decoder decoder, int gpu, int pool_device, bool shape_without_cuda = false) {
  Decoded d;
  static int n = 0;
  auto pool = ShmPool::create("/vapipe-nvdec-test-" + std::to_string(getpid()) + "-" + std::to_string(n++), 4,
                              1 << 20, pool_device);
  EXPECT_TRUE(pool.ok()) << pool.status().message();
  if (!pool.ok()) return d;
  IngestConfig ingest;
  auto reader = StreamReader::create(clip("clip", file), 0, ingest, ReaderOptions{decoder, gpu, shape_without_cuda});
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  if (!reader.ok()) return d;
  PoolEmitter out(*pool);
  ShutdownFlags flags;
  EXPECT_TRUE((*reader)->run(out, flags).ok());
  d.luma = std::move(out.luma);
  d.devices = std::move(out.devices);
  d.errors = std::move(out.errors);
  d.device_frames = (*reader)->device_frames();
  d.host_frames = (*reader)->host_frames();
  return d;
}

double mean_abs_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::abs(int(a[i]) - int(b[i]));
  return a.empty() ? 0 : sum / a.size();
}

constexpr uint32_t kClipWidth = 320, kClipHeight = 240, kBlock = 16;

// Each frame's luma as the means of its 16x16 blocks, rounded: frames x (240/16) x (320/16) bytes.
std::vector<uint8_t> block_means(const std::vector<std::vector<uint8_t>>& luma) {
  std::vector<uint8_t> out;
  for (const auto& y : luma) {
    for (uint32_t by = 0; by < kClipHeight / kBlock; ++by) {
      for (uint32_t bx = 0; bx < kClipWidth / kBlock; ++bx) {
        uint32_t sum = 0;
        for (uint32_t r = 0; r < kBlock; ++r) {
          for (uint32_t c = 0; c < kBlock; ++c) sum += y[size_t{by * kBlock + r} * kClipWidth + bx * kBlock + c];
        }
        out.push_back(static_cast<uint8_t>((sum + kBlock * kBlock / 2) / (kBlock * kBlock)));
      }
    }
  }
  return out;
}

std::string reference_path(const std::string& file) { return kMedia + file + ".luma16"; }

std::vector<uint8_t> read_reference(const std::string& file) {
  std::ifstream in(reference_path(file), std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class NvdecReader : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ensure_gstreamer());
    if (probe_gpus(false).devices.empty()) GTEST_SKIP() << "no GPU";
    if (!nvdec_built_in()) GTEST_SKIP() << "built without the CUDA toolkit or gstreamer-cuda-1.0";
    const std::string found = prefer_nvdec_decoders();
    if (found.empty()) GTEST_SKIP() << "no nvcodec decoder is registered";
  }
};

TEST_P(NvdecReader, DecodesIntoGpuMemoryWithTheLumaOfTheCpuDecoder) {
  const std::string file = GetParam();
  Decoded gpu = decode(file, Decoder::kNvdec, 0, /*pool_device=*/0);
  ASSERT_TRUE(gpu.errors.empty()) << gpu.errors.front();
  ASSERT_EQ(gpu.luma.size(), 30u);
  EXPECT_EQ(gpu.device_frames, 30u) << "frames did not arrive in CUDA memory";
  EXPECT_EQ(gpu.host_frames, 0u);
  for (int d : gpu.devices) EXPECT_EQ(d, 0);
  Decoded cpu = decode(file, Decoder::kCpu, -1, /*pool_device=*/-1);
  if (!cpu.luma.empty()) {
    ASSERT_EQ(cpu.luma.size(), gpu.luma.size());
    for (size_t i = 0; i < cpu.luma.size(); ++i) {
      EXPECT_LT(mean_abs_difference(cpu.luma[i], gpu.luma[i]), 1.0) << file << " frame " << i;
    }
    return;
  }
  // No CPU decoder here: the reference the CPU decoder made elsewhere (rounding adds up to 0.5).
  std::cout << "no CPU decoder for " << file << " (" << (cpu.errors.empty() ? "" : cpu.errors.front())
            << "): comparing with " << reference_path(file) << "\n";
  const std::vector<uint8_t> reference = read_reference(file);
  const std::vector<uint8_t> measured = block_means(gpu.luma);
  ASSERT_EQ(reference.size(), measured.size()) << reference_path(file);
  const size_t per_frame = measured.size() / gpu.luma.size();
  for (size_t i = 0; i < gpu.luma.size(); ++i) {
    const std::vector<uint8_t> ref(reference.begin() + i * per_frame, reference.begin() + (i + 1) * per_frame);
    const std::vector<uint8_t> got(measured.begin() + i * per_frame, measured.begin() + (i + 1) * per_frame);
    EXPECT_LT(mean_abs_difference(ref, got), 1.5) << file << " frame " << i;
  }
}

TEST_P(NvdecReader, NvdecOutputCanBeDownloadedIntoAHostPool) {
  Decoded gpu = decode(GetParam(), Decoder::kNvdec, 0, /*pool_device=*/-1);
  EXPECT_EQ(gpu.luma.size(), 30u);
  EXPECT_EQ(gpu.device_frames, 30u);
  for (int d : gpu.devices) EXPECT_EQ(d, -1);
}

INSTANTIATE_TEST_SUITE_P(Codecs, NvdecReader, ::testing::Values("ball-320x240-h264.mp4", "ball-320x240-h265.mp4"));

// Runs wherever a CPU decoder is installed: the stored luma reference is what the CPU decoder gives.
TEST(NvdecReference, StoredLumaBlocksAreWhatTheCpuDecoderGives) {
  ASSERT_TRUE(ensure_gstreamer());
  for (const char* file : {"ball-320x240-h264.mp4", "ball-320x240-h265.mp4"}) {
    Decoded cpu = decode(file, Decoder::kCpu, -1, /*pool_device=*/-1);
    if (cpu.luma.empty()) GTEST_SKIP() << "no CPU decoder for " << file;
    ASSERT_EQ(cpu.luma.size(), 30u) << file;
    const std::vector<uint8_t> measured = block_means(cpu.luma);
    if (const char* w = std::getenv("VAPIPE_WRITE_MEDIA_REFERENCE"); w && std::string(w) == "1") {
      std::ofstream(reference_path(file), std::ios::binary)
          .write(reinterpret_cast<const char*>(measured.data()), static_cast<std::streamsize>(measured.size()));
    }
    const std::vector<uint8_t> reference = read_reference(file);
    ASSERT_EQ(reference.size(), measured.size()) << reference_path(file);
    EXPECT_LT(mean_abs_difference(reference, measured), 0.01) << file;
  }
}

// Runs everywhere: with decoder nvdec on a machine where NVDEC is unavailable, every frame is still
// decoded (on the CPU), into host memory.
TEST(NvdecFallback, WithoutNvdecEveryFrameIsDecodedOnTheCpu) {
  ASSERT_TRUE(ensure_gstreamer());
  if (!probe_gpus(false).devices.empty() && !prefer_nvdec_decoders().empty()) GTEST_SKIP() << "NVDEC is available";
  Decoded d = decode("ball-320x240-h264.mp4", Decoder::kNvdec, 0, -1);
  EXPECT_TRUE(d.errors.empty());
  EXPECT_EQ(d.luma.size(), 30u);
  EXPECT_EQ(d.host_frames, 30u);
  EXPECT_EQ(d.device_frames, 0u);
}

// Runs everywhere: nvdec's pipeline shape (the caps filter's input left free for a CUDA pad) with a
// software decoder, as for a codec NVDEC lacks: videoconvert is linked in when the pad appears.
TEST(NvdecFallback, ASoftwareDecodedStreamFlowsThroughTheNvdecPipelineShape) {
  ASSERT_TRUE(ensure_gstreamer());
  if (!probe_gpus(false).devices.empty() && !prefer_nvdec_decoders().empty()) GTEST_SKIP() << "NVDEC is available";
  for (const char* file : {"ball-320x240-h264.mp4", "ball-320x240-h265.mp4"}) {
    Decoded d = decode(file, Decoder::kNvdec, 0, -1, /*shape_without_cuda=*/true);
    EXPECT_TRUE(d.errors.empty()) << file << ": " << (d.errors.empty() ? "" : d.errors.front());
    EXPECT_EQ(d.luma.size(), 30u) << file;
    EXPECT_EQ(d.host_frames, 30u) << file;
  }
}

}  // namespace
}  // namespace vapipe
