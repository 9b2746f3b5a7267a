// An independent reference for the resize: torch's bilinear interpolate (align_corners=False) on the
// same RGB frame, then the same normalisation. This is also how the shipped model's training data
// was resized (models/train_pattern_cnn.py). Stated tolerance: 1e-3 in normalised units, about 0.06
// of one 8-bit level: the two sum the four taps in a different order (float rounding on random
// noise, the worst case). A wrong source coordinate or weight gives errors near 1 and more.
#include <cstdint>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <random>

#include "stages/preprocess/preprocessor.h"

namespace vapipe {
namespace {

std::vector<uint8_t> random_rgb(int w, int h, uint32_t seed) {
  std::vector<uint8_t> rgb(size_t(w) * h * 3);
  std::mt19937 rng(seed);
  for (auto& v : rgb) v = static_cast<uint8_t>(rng());
  return rgb;
}

// `rgb` (w x h, packed) through the CPU preprocessor into `out`.
bool preprocess_rgb(const PreprocessSpec& spec, const std::vector<uint8_t>& rgb, int w, int h, std::vector<float>& out) {
  FrameInfo info;
  info.format = PixelFormat::kRGB;
  info.width = w;
  info.height = h;
  info.stride = {static_cast<uint32_t>(w * 3), 0, 0};
  return make_cpu_preprocessor(spec)
      ->run(FrameView{info, reinterpret_cast<const std::byte*>(rgb.data()), rgb.size()},
            reinterpret_cast<std::byte*>(out.data()))
      .ok();
}

// The largest difference between our tensor and torch's image `pixels` ([1, 3, 224, 224], 0..255)
// normalised with the default mean and std.
float worst_difference(std::vector<float>& ours, const torch::Tensor& pixels) {
  torch::Tensor mean = torch::tensor({0.485f, 0.456f, 0.406f}).view({1, 3, 1, 1});
  torch::Tensor stdv = torch::tensor({0.229f, 0.224f, 0.225f}).view({1, 3, 1, 1});
  torch::Tensor expected = ((pixels / 255.0) - mean) / stdv;
  torch::Tensor got = torch::from_blob(ours.data(), {1, 3, 224, 224}, torch::kFloat);
  return (got - expected).abs().max().item<float>();
}

TEST(PreprocessTorchParity, RgbResizeMatchesTorchInterpolate) {
  for (auto [w, h] : {std::pair{640, 480}, {1280, 720}, {100, 60}, {225, 333}}) {
    std::vector<uint8_t> rgb = random_rgb(w, h, w + h);
    PreprocessSpec spec;
    std::vector<float> ours(spec.output_info().elements());
    ASSERT_TRUE(preprocess_rgb(spec, rgb, w, h, ours));

    torch::Tensor img = torch::from_blob(rgb.data(), {h, w, 3}, torch::kUInt8).permute({2, 0, 1}).unsqueeze(0).to(torch::kFloat);
    torch::Tensor resized = at::upsample_bilinear2d(img, {224, 224}, /*align_corners=*/false);
    const float worst = worst_difference(ours, resized);
    EXPECT_LE(worst, 1e-3f) << w << "x" << h;
  }
}

// preprocess.resize: letterbox against torch: interpolate to the rectangle's size (the shape kept,
// as torchvision's Resize of the longer side would), then the pad colour around it, then normalised.
TEST(PreprocessTorchParity, LetterboxMatchesTorchInterpolateThenPad) {
  for (auto [w, h] : {std::pair{1280, 720}, {480, 640}, {225, 333}}) {
    std::vector<uint8_t> rgb = random_rgb(w, h, w * 3 + h);
    PreprocessSpec spec;
    spec.letterbox = true;
    spec.pad_rgb = {114.f, 0.f, 255.f};
    std::vector<float> ours(spec.output_info().elements());
    ASSERT_TRUE(preprocess_rgb(spec, rgb, w, h, ours));

    const FrameInfo::Region r = letterbox_rect(w, h, 224, 224);
    torch::Tensor img = torch::from_blob(rgb.data(), {h, w, 3}, torch::kUInt8).permute({2, 0, 1}).unsqueeze(0).to(torch::kFloat);
    torch::Tensor resized = at::upsample_bilinear2d(img, {r.height, r.width}, /*align_corners=*/false);
    torch::Tensor boxed = torch::tensor({114.f, 0.f, 255.f}).view({1, 3, 1, 1}).expand({1, 3, 224, 224}).clone();
    boxed.narrow(2, r.y, r.height).narrow(3, r.x, r.width).copy_(resized);
    const float worst = worst_difference(ours, boxed);
    EXPECT_LE(worst, 1e-3f) << w << "x" << h;
  }
}

}  // namespace
}  // namespace vapipe
