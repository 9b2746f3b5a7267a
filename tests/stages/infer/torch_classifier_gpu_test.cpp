// The classifier on CUDA (ctest label gpu): batches formed from tensors in GPU memory agree with the
// host path, and fp16 / channels-last keep the model's answers. Skips cleanly without a GPU (or with a
// LibTorch built without CUDA, as Debian's).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "pipeline/cuda/device_memory.h"
#include "pipeline/cuda/gpu_info.h"
#include "stages/infer/classifier.h"

namespace vapipe {
namespace {

const std::string kModel = std::string(VAPIPE_SOURCE_DIR) + "/models/pattern_cnn.pt";
const TensorInfo kInput{DType::kFloat32, 3, 224, 224};

Result<std::unique_ptr<Classifier>> load(const std::string& device, DType precision, bool channels_last,
                                          const std::string& cuda_graphs = "auto") {
  ClassifierOptions o;
  o.cuda_graphs = cuda_graphs;
  o.model_path = kModel;
  o.device = device;
  o.input = kInput;
  o.precision = precision;
  o.channels_last = channels_last;
  o.warmup_batch_size = 4;
  o.warmup_batches = 1;
  return load_torchscript_classifier(o);
}

std::vector<float> random_batch(size_t n) {
  std::vector<float> v(n * kInput.elements());
  std::mt19937 rng(42);
  std::normal_distribution<float> d(0.f, 1.f);
  for (float& x : v) x = d(rng);
  return v;
}

// Each item of a host batch in its own GPU buffer, as device pool slots hold them.
struct DeviceItems {
  std::vector<std::unique_ptr<DeviceBuffer>> slots;
  std::vector<const std::byte*> items;
  bool upload(const std::vector<float>& host, size_t n) {
    const size_t item_bytes = kInput.bytes();
    for (size_t i = 0; i < n; ++i) {
      auto buffer = DeviceBuffer::allocate(0, item_bytes);
      if (!buffer.ok()) return false;
      slots.push_back(std::move(buffer).value());
      if (!cuda_copy(slots.back()->data(), host.data() + i * kInput.elements(), item_bytes, nullptr).ok()) return false;
      items.push_back(slots.back()->data());
    }
    return true;
  }
};

class TorchClassifierOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (probe_gpus(false).devices.empty()) GTEST_SKIP() << "no GPU";
    auto c = load("cuda:0", DType::kFloat32, false);
    if (!c.ok()) GTEST_SKIP() << "LibTorch cannot use the GPU: " << c.status().message();
    fp32_ = std::move(c).value();
  }
  std::unique_ptr<Classifier> fp32_;
};

TEST_F(TorchClassifierOnGpu, ABatchOfDeviceTensorsMatchesTheSameBatchFromTheHost) {
  constexpr size_t n = 8;
  const std::vector<float> host = random_batch(n);
  DeviceItems device;
  ASSERT_TRUE(device.upload(host, n));
  const std::vector<const std::byte*>& items = device.items;
  auto from_host = fp32_->classify(reinterpret_cast<const std::byte*>(host.data()), n, 3);
  auto from_device = fp32_->classify_device(items, 0, 3);
  ASSERT_TRUE(from_host.ok()) << from_host.status().message();
  ASSERT_TRUE(from_device.ok()) << from_device.status().message();
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ((*from_host)[i].class_ids, (*from_device)[i].class_ids) << i;
    for (size_t k = 0; k < 3; ++k) EXPECT_NEAR((*from_host)[i].scores[k], (*from_device)[i].scores[k], 1e-5f);
  }
}

TEST_F(TorchClassifierOnGpu, APaddedBatchOfDeviceTensorsMatchesTheExactOne) {
  constexpr size_t n = 5;  // padded to 6
  const std::vector<float> host = random_batch(n);
  DeviceItems device;
  ASSERT_TRUE(device.upload(host, n));
  const std::vector<const std::byte*>& items = device.items;
  auto padded = load("cuda:0", DType::kFloat32, false);
  ASSERT_TRUE(padded.ok()) << padded.status().message();
  ASSERT_TRUE((*padded)->use_batch_sizes({1, 2, 3, 4, 6, 8}).ok());
  EXPECT_EQ((*padded)->run_size(n), 6u);
  auto a = fp32_->classify_device(items, 0, 3);
  auto b = (*padded)->classify_device(items, 0, 3);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().message();
  ASSERT_EQ(b->size(), n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ((*a)[i].class_ids, (*b)[i].class_ids) << i;
    for (size_t k = 0; k < 3; ++k) EXPECT_NEAR((*a)[i].scores[k], (*b)[i].scores[k], 1e-4f) << i;
  }
}

TEST_F(TorchClassifierOnGpu, Fp16ChannelsLastKeepsTheTopClassAndScoresWithinHalfPrecision) {
  auto fp16 = load("cuda:0", DType::kFloat16, true);
  ASSERT_TRUE(fp16.ok()) << fp16.status().message();
  EXPECT_EQ((*fp16)->device(), "cuda:0");
  constexpr size_t n = 16;
  const std::vector<float> host = random_batch(n);
  auto a = fp32_->classify(reinterpret_cast<const std::byte*>(host.data()), n, 1);
  auto b = (*fp16)->classify(reinterpret_cast<const std::byte*>(host.data()), n, 1);
  ASSERT_TRUE(a.ok() && b.ok());
  size_t same = 0;
  for (size_t i = 0; i < n; ++i) {
    same += (*a)[i].class_ids[0] == (*b)[i].class_ids[0];
    EXPECT_NEAR((*a)[i].scores[0], (*b)[i].scores[0], 2e-2f) << i;
  }
  EXPECT_GE(same, n - 1);  // a near tie may flip under fp16
}

// infer.cuda_graphs: each padded size recorded once and replayed. Batches of different sizes in turn
// (a smaller batch after a larger leaves the larger's frames in the rows past it), from device slots
// and from the host, must answer as plain runs do; so must fp16 channels-last, as the benchmark runs.
TEST_F(TorchClassifierOnGpu, CudaGraphReplaysAnswerAsPlainRunsForEveryBatchSize) {
  const std::vector<size_t> sizes = {1, 2, 3, 4, 6, 8};
  for (DType precision : {DType::kFloat32, DType::kFloat16}) {
    const bool half = precision == DType::kFloat16;
    auto plain = load("cuda:0", precision, half, "off");
    auto graphs = load("cuda:0", precision, half, "on");
    ASSERT_TRUE(plain.ok()) << plain.status().message();
    ASSERT_TRUE(graphs.ok()) << graphs.status().message();
    ASSERT_TRUE((*plain)->use_batch_sizes(sizes).ok());
    Status recorded = (*graphs)->use_batch_sizes(sizes);
    ASSERT_TRUE(recorded.ok()) << recorded.message();
    EXPECT_TRUE((*graphs)->replays_cuda_graphs());
    EXPECT_FALSE((*plain)->replays_cuda_graphs());
    const std::vector<float> host = random_batch(8);
    DeviceItems device;
    ASSERT_TRUE(device.upload(host, 8));
    for (size_t n : {size_t{8}, size_t{5}, size_t{1}, size_t{3}, size_t{8}}) {
      std::vector<const std::byte*> items(device.items.begin(), device.items.begin() + n);
      auto a = (*plain)->classify_device(items, 0, 3);
      auto b = (*graphs)->classify_device(items, 0, 3);
      auto c = (*graphs)->classify(reinterpret_cast<const std::byte*>(host.data()), n, 3);
      ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << b.status().message() << " / " << c.status().message();
      ASSERT_EQ(b->size(), n);
      ASSERT_EQ(c->size(), n);
      for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ((*a)[i].class_ids[0], (*b)[i].class_ids[0]) << "image " << i << " of " << n;
        EXPECT_EQ((*b)[i].class_ids, (*c)[i].class_ids) << "image " << i << " of " << n;
        for (size_t k = 0; k < 3; ++k) {
          EXPECT_NEAR((*a)[i].scores[k], (*b)[i].scores[k], half ? 1e-2f : 1e-4f) << "image " << i << " of " << n;
        }
      }
    }
  }
}

// A reload's model (stages/infer/infer_stage.h): loaded, warmed up and its CUDA graphs recorded on a
// thread of its own while the running model classifies batches from device slots on this one. Neither
// may fail, and both answer as a plain run of the model does.
TEST_F(TorchClassifierOnGpu, AModelLoadedAndRecordedOnAnotherThreadWhileBatchesRunAnswersAlike) {
  const std::vector<size_t> sizes = {1, 2, 3, 4, 6, 8};
  auto running = load("cuda:0", DType::kFloat16, true, "auto");
  ASSERT_TRUE(running.ok()) << running.status().message();
  ASSERT_TRUE((*running)->use_batch_sizes(sizes).ok());
  const std::vector<float> host = random_batch(8);
  DeviceItems device;
  ASSERT_TRUE(device.upload(host, 8));
  auto reference = fp32_->classify(reinterpret_cast<const std::byte*>(host.data()), 8, 1);
  ASSERT_TRUE(reference.ok());
  std::atomic<bool> loaded{false};
  Status loader_status;
  std::unique_ptr<Classifier> reloaded;
  std::thread loader([&] {
    auto c = load("cuda:0", DType::kFloat16, true, "on");
    loader_status = c.ok() ? (*c)->use_batch_sizes(sizes) : c.status();
    if (c.ok()) reloaded = std::move(c).value();
    loaded = true;
  });
  size_t batches = 0, differing = 0;
  while (!loaded || batches < 20) {
    const size_t n = sizes[batches % sizes.size()];
    std::vector<const std::byte*> items(device.items.begin(), device.items.begin() + n);
    auto r = (*running)->classify_device(items, 0, 1);
    ASSERT_TRUE(r.ok()) << "batch " << batches << " while the other loaded: " << r.status().message();
    for (size_t i = 0; i < n; ++i) differing += (*r)[i].class_ids[0] != (*reference)[i].class_ids[0];
    ++batches;
  }
  loader.join();
  ASSERT_TRUE(loader_status.ok()) << loader_status.message();
  EXPECT_TRUE(reloaded->replays_cuda_graphs());
  EXPECT_LE(differing, batches / 4) << "fp16 near ties aside, the running model's answers held";
  auto after = reloaded->classify_device(device.items, 0, 1);
  ASSERT_TRUE(after.ok()) << after.status().message();
  size_t same = 0;
  for (size_t i = 0; i < 8; ++i) same += (*after)[i].class_ids[0] == (*reference)[i].class_ids[0];
  EXPECT_GE(same, 7u);
}

TEST_F(TorchClassifierOnGpu, CudaGraphsOffOrExactShapesReplayNothing) {
  auto off = load("cuda:0", DType::kFloat32, false, "off");
  ASSERT_TRUE(off.ok());
  ASSERT_TRUE((*off)->use_batch_sizes({1, 2, 4}).ok());
  EXPECT_FALSE((*off)->replays_cuda_graphs());
  EXPECT_FALSE(fp32_->replays_cuda_graphs());  // never given fixed sizes
}

}  // namespace
}  // namespace vapipe
