// An independent reference for the resize: torch's bilinear interpolate (align_corners=False) on the
// same RGB frame, then the same normalisation. This is also how the shipped model's training data
// was resized (models/train_pattern_cnn.py). Stated tolerance: 1e-3 in normalised units, about 0.06
// of one 8-bit level: the two sum the four taps in a different order (float rounding on random
// noise, the worst case). A wrong source coordinate or weight gives errors near 1 and more.
#include <gtest/gtest.h>
#include <torch/script.h>

#include <random>

#include "stages/preprocess/preprocessor.h"

namespace vapipe {
namespace {

TEST(PreprocessTorchParity, RgbResizeMatchesTorchInterpolate) {
  for (auto [w, h] : {std::pair{640, 480}, {1280, 720}, {100, 60}, {225, 333}}) {
    std::vector<uint8_t> rgb(size_t(w) * h * 3);
    std::mt19937 rng(w + h);
    for (auto& v : rgb) v = static_cast<uint8_t>(rng());
    FrameInfo info;
    info.format = PixelFormat::kRGB;
    info.width = w;
    info.height = h;
    info.stride = {static_cast<uint32_t>(w * 3), 0, 0};
    PreprocessSpec spec;
    std::vector<float> ours(spec.output_info().elements());
    ASSERT_TRUE(make_cpu_preprocessor(spec)
                    ->run(FrameView{info, reinterpret_cast<const std::byte*>(rgb.data()), rgb.size()},
                          reinterpret_cast<std::byte*>(ours.data()))
                    .ok());

    torch::Tensor img = torch::from_blob(rgb.data(), {h, w, 3}, torch::kUInt8).permute({2, 0, 1}).unsqueeze(0).to(torch::kFloat);
    torch::Tensor resized = at::upsample_bilinear2d(img, {224, 224}, /*align_corners=*/false);
    torch::Tensor mean = torch::tensor({0.485f, 0.456f, 0.406f}).view({1, 3, 1, 1});
    torch::Tensor stdv = torch::tensor({0.229f, 0.224f, 0.225f}).view({1, 3, 1, 1});
    torch::Tensor expected = ((resized / 255.0) - mean) / stdv;
    torch::Tensor got = torch::from_blob(ours.data(), {1, 3, 224, 224}, torch::kFloat);
    const float worst = (got - expected).abs().max().item<float>();
    EXPECT_LE(worst, 1e-3f) << w << "x" << h;
  }
}

}  // namespace
}  // namespace vapipe
