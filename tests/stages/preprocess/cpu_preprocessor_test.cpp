// The CPU preprocessor against a straightforward reference: convert every source pixel to RGB
// (chroma from its 2x2 block), resize each channel with the textbook bilinear formula (half-pixel
// centres), clamp, normalise. Stated tolerance: 1e-4 in normalised units (float rounding only).
#include <cstdint>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

#include "stages/preprocess/preprocessor.h"

namespace vapipe {
namespace {

constexpr float kTolerance = 1e-4f;

struct TestFrame {
  FrameInfo info;
  std::vector<std::byte> bytes;
  FrameView view() const { return FrameView{info, bytes.data(), bytes.size()}; }
};

TestFrame random_frame(PixelFormat format, uint32_t w, uint32_t h, uint32_t seed) {
  TestFrame f;
  f.info.format = format;
  f.info.width = w;
  f.info.height = h;
  const uint32_t cw = (w + 1) / 2, ch = (h + 1) / 2;
  size_t total = 0;
  if (format == PixelFormat::kRGB) {
    f.info.stride = {w * 3 + 5, 0, 0};  // padded rows
    total = size_t{f.info.stride[0]} * h;
  } else if (format == PixelFormat::kI420) {
    f.info.stride = {w + 3, cw + 1, cw + 2};
    f.info.offset = {0, f.info.stride[0] * h, f.info.stride[0] * h + f.info.stride[1] * ch};
    total = f.info.offset[2] + size_t{f.info.stride[2]} * ch;
  } else {
    f.info.stride = {w, cw * 2, 0};
    f.info.offset = {0, w * h, 0};
    total = f.info.offset[1] + size_t{f.info.stride[1]} * ch;
  }
  f.bytes.resize(total);
  std::mt19937 rng(seed);
  for (auto& b : f.bytes) b = std::byte(rng() & 0xff);
  return f;
}

// Source pixel (x, y) as RGB floats, without clamping (conversion is affine).
std::array<float, 3> source_rgb(const TestFrame& f, uint32_t x, uint32_t y) {
  const FrameInfo& i = f.info;
  const auto* p = reinterpret_cast<const uint8_t*>(f.bytes.data());
  if (i.format == PixelFormat::kRGB) {
    const uint8_t* px = p + i.offset[0] + y * i.stride[0] + x * 3;
    return {float(px[0]), float(px[1]), float(px[2])};
  }
  float Y = p[i.offset[0] + y * i.stride[0] + x], U, V;
  if (i.format == PixelFormat::kI420) {
    U = p[i.offset[1] + (y / 2) * i.stride[1] + x / 2];
    V = p[i.offset[2] + (y / 2) * i.stride[2] + x / 2];
  } else {
    U = p[i.offset[1] + (y / 2) * i.stride[1] + (x / 2) * 2];
    V = p[i.offset[1] + (y / 2) * i.stride[1] + (x / 2) * 2 + 1];
  }
  // BT.601 limited range, the textbook constants.
  const float kr = 0.299f, kb = 0.114f, kg = 1 - kr - kb;
  const float y1 = (Y - 16) * 255.f / 219.f, u = (U - 128) * 255.f / 224.f, v = (V - 128) * 255.f / 224.f;
  return {y1 + 2 * (1 - kr) * v, y1 - 2 * kb * (1 - kb) / kg * u - 2 * kr * (1 - kr) / kg * v, y1 + 2 * (1 - kb) * u};
}

std::vector<float> reference(const TestFrame& f, const PreprocessSpec& spec) {
  const uint32_t W = f.info.width, H = f.info.height, ow = spec.out_width, oh = spec.out_height;
  std::vector<float> out(3 * ow * oh);
  for (uint32_t oy = 0; oy < oh; ++oy) {
    for (uint32_t ox = 0; ox < ow; ++ox) {
      // torch's definition: scale = in / out, src = scale * (dst + 0.5) - 0.5, clamped at 0.
      const float scale_x = static_cast<float>(W) / ow, scale_y = static_cast<float>(H) / oh;
      float sx = std::max(scale_x * (ox + 0.5f) - 0.5f, 0.f), sy = std::max(scale_y * (oy + 0.5f) - 0.5f, 0.f);
      uint32_t x0 = std::min<uint32_t>(static_cast<uint32_t>(sx), W - 1), y0 = std::min<uint32_t>(static_cast<uint32_t>(sy), H - 1);
      uint32_t x1 = std::min(x0 + 1, W - 1), y1 = std::min(y0 + 1, H - 1);
      float ax = sx - x0, ay = sy - y0;
      auto p00 = source_rgb(f, x0, y0), p01 = source_rgb(f, x1, y0), p10 = source_rgb(f, x0, y1), p11 = source_rgb(f, x1, y1);
      for (int c = 0; c < 3; ++c) {
        float v = (1 - ay) * ((1 - ax) * p00[c] + ax * p01[c]) + ay * ((1 - ax) * p10[c] + ax * p11[c]);
        v = std::clamp(v, 0.f, 255.f);
        out[c * ow * oh + oy * ow + ox] = (v / 255.f - spec.mean[c]) / spec.std[c];
      }
    }
  }
  return out;
}

struct Case {
  PixelFormat format;
  uint32_t w, h;
};

class CpuPreprocessorParity : public ::testing::TestWithParam<Case> {};

TEST_P(CpuPreprocessorParity, MatchesTheReferenceWithin1e4) {
  const Case c = GetParam();
  PreprocessSpec spec;
  auto pre = make_cpu_preprocessor(spec);
  TestFrame f = random_frame(c.format, c.w, c.h, c.w * 31 + c.h);
  std::vector<float> out(spec.output_info().elements());
  ASSERT_TRUE(pre->run(f.view(), reinterpret_cast<std::byte*>(out.data())).ok());
  std::vector<float> ref = reference(f, spec);
  float worst = 0;
  for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(out[i] - ref[i]));
  EXPECT_LE(worst, kTolerance) << pixel_format_name(c.format) << " " << c.w << "x" << c.h;
}

INSTANTIATE_TEST_SUITE_P(Formats, CpuPreprocessorParity,
                         ::testing::Values(Case{PixelFormat::kRGB, 640, 480}, Case{PixelFormat::kRGB, 100, 50},
                                           Case{PixelFormat::kI420, 1280, 720}, Case{PixelFormat::kI420, 160, 120},
                                           Case{PixelFormat::kI420, 223, 301},  // odd sizes, upscaling
                                           Case{PixelFormat::kNV12, 854, 480}, Case{PixelFormat::kNV12, 64, 64}));

TEST(CpuPreprocessor, Float16OutputMatchesFloat32WithinHalfPrecision) {
  PreprocessSpec s32, s16;
  s16.dtype = DType::kFloat16;
  TestFrame f = random_frame(PixelFormat::kI420, 320, 240, 5);
  std::vector<float> a(s32.output_info().elements());
  std::vector<uint16_t> b(s16.output_info().elements());
  ASSERT_TRUE(make_cpu_preprocessor(s32)->run(f.view(), reinterpret_cast<std::byte*>(a.data())).ok());
  ASSERT_TRUE(make_cpu_preprocessor(s16)->run(f.view(), reinterpret_cast<std::byte*>(b.data())).ok());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(half_to_float(b[i]), a[i], 2e-3f + std::abs(a[i]) * 1e-3f) << i;
}

// preprocess.threads: a batch of frames of every format and several sizes, shared out over threads,
// gives bit for bit what one thread gives, with a bad frame's error in its own place.
TEST(CpuPreprocessor, ThreadsShareABatchAndGiveTheSameBytes) {
  PreprocessSpec spec;
  std::vector<TestFrame> frames;
  const Case cases[] = {{PixelFormat::kI420, 320, 240}, {PixelFormat::kNV12, 160, 90}, {PixelFormat::kRGB, 100, 50},
                        {PixelFormat::kI420, 223, 301}, {PixelFormat::kI420, 320, 240}, {PixelFormat::kNV12, 64, 64},
                        {PixelFormat::kRGB, 640, 480}};
  for (size_t i = 0; i < std::size(cases); ++i) frames.push_back(random_frame(cases[i].format, cases[i].w, cases[i].h, 7 + i));
  frames[4].bytes.resize(10);  // too small for its layout: an error for that frame only
  const size_t floats = spec.output_info().elements();
  auto run = [&](unsigned threads, std::vector<Status>* statuses) {
    std::vector<float> out(floats * frames.size());
    std::vector<FrameView> views;
    std::vector<TensorOut> outs;
    for (size_t i = 0; i < frames.size(); ++i) {
      views.push_back(frames[i].view());
      outs.push_back(TensorOut{reinterpret_cast<std::byte*>(out.data() + i * floats)});
    }
    *statuses = make_cpu_preprocessor(spec, threads)->run_batch(views, outs);
    return out;
  };
  std::vector<Status> one_status, three_status;
  const std::vector<float> one = run(1, &one_status);
  const std::vector<float> three = run(3, &three_status);
  ASSERT_EQ(three_status.size(), frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(three_status[i].ok(), i != 4) << i << ": " << three_status[i].message();
    EXPECT_EQ(three_status[i].message(), one_status[i].message()) << i;
    if (i == 4) continue;
    EXPECT_EQ(std::memcmp(one.data() + i * floats, three.data() + i * floats, floats * sizeof(float)), 0) << i;
  }
}

TEST(CpuPreprocessor, HalfConversionRoundTripsAndRounds) {
  for (float v : {0.f, 1.f, -2.5f, 65504.f, 0.333251953125f, 6.1035156e-05f}) EXPECT_EQ(half_to_float(float_to_half(v)), v);
  EXPECT_EQ(float_to_half(1e6f), 0x7c00);  // overflow -> +inf
  EXPECT_NEAR(half_to_float(float_to_half(0.1f)), 0.1f, 1e-4f);
}

// An 8x8 RGB frame of pure red.
TestFrame solid_red_frame() {
  TestFrame f;
  f.info.format = PixelFormat::kRGB;
  f.info.width = 8;
  f.info.height = 8;
  f.info.stride = {24, 0, 0};
  f.bytes.assign(24 * 8, std::byte{0});
  for (size_t i = 0; i < f.bytes.size(); i += 3) f.bytes[i] = std::byte{255};
  return f;
}

TEST(CpuPreprocessor, SolidRedFrameGivesTheNormalisedRed) {
  const TestFrame f = solid_red_frame();
  PreprocessSpec spec;
  std::vector<float> out(spec.output_info().elements());
  ASSERT_TRUE(make_cpu_preprocessor(spec)->run(f.view(), reinterpret_cast<std::byte*>(out.data())).ok());
  const size_t plane = 224 * 224;
  EXPECT_NEAR(out[0], (1 - 0.485f) / 0.229f, 1e-5);
  EXPECT_NEAR(out[plane + 100], (0 - 0.456f) / 0.224f, 1e-5);
  EXPECT_NEAR(out[2 * plane + plane - 1], (0 - 0.406f) / 0.225f, 1e-5);
}

// preprocess.channel_order: bgr. A red frame is red in the last plane, normalised with the mean and std
// given for that plane (the model's order); a frame of every format gives the rgb tensor with its first
// and last planes swapped, when mean and std are swapped too.
TEST(CpuPreprocessor, BgrOrderPutsBlueFirstWithTheModelsOwnMeanAndStd) {
  const TestFrame f = solid_red_frame();
  PreprocessSpec bgr;
  bgr.bgr = true;
  bgr.mean = {0.406f, 0.456f, 0.485f};
  bgr.std = {0.225f, 0.224f, 0.229f};
  std::vector<float> out(bgr.output_info().elements());
  ASSERT_TRUE(make_cpu_preprocessor(bgr)->run(f.view(), reinterpret_cast<std::byte*>(out.data())).ok());
  const size_t plane = 224 * 224;
  EXPECT_NEAR(out[0], (0 - 0.406f) / 0.225f, 1e-5);              // blue: none
  EXPECT_NEAR(out[2 * plane + 5], (1 - 0.485f) / 0.229f, 1e-5);  // red: full
  for (PixelFormat format : {PixelFormat::kI420, PixelFormat::kNV12, PixelFormat::kRGB}) {
    const TestFrame frame = random_frame(format, 37, 29, 11);
    std::vector<float> as_rgb(out.size()), as_bgr(out.size());
    ASSERT_TRUE(make_cpu_preprocessor(PreprocessSpec{})->run(frame.view(), reinterpret_cast<std::byte*>(as_rgb.data())).ok());
    ASSERT_TRUE(make_cpu_preprocessor(bgr)->run(frame.view(), reinterpret_cast<std::byte*>(as_bgr.data())).ok());
    for (size_t i = 0; i < plane; ++i) {
      ASSERT_EQ(as_bgr[i], as_rgb[2 * plane + i]) << pixel_format_name(format) << " " << i;
      ASSERT_EQ(as_bgr[plane + i], as_rgb[plane + i]) << pixel_format_name(format) << " " << i;
      ASSERT_EQ(as_bgr[2 * plane + i], as_rgb[i]) << pixel_format_name(format) << " " << i;
    }
  }
}

TEST(CpuPreprocessor, InconsistentLayoutIsAnErrorNotACrash) {
  TestFrame f = random_frame(PixelFormat::kI420, 64, 64, 1);
  f.bytes.resize(100);  // payload shorter than the layout
  PreprocessSpec spec;
  std::vector<float> out(spec.output_info().elements());
  Status s = make_cpu_preprocessor(spec)->run(f.view(), reinterpret_cast<std::byte*>(out.data()));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bytes"), std::string::npos);
  f = random_frame(PixelFormat::kRGB, 64, 64, 1);
  f.info.stride[0] = 10;  // narrower than a row
  EXPECT_FALSE(make_cpu_preprocessor(spec)->run(f.view(), reinterpret_cast<std::byte*>(out.data())).ok());
}

// The same pixels as a frame of their own: the region (x, y, w, h) of `f` copied out, tightly packed.
// x and y even for I420 and NV12, so that the copy's chroma samples are the region's.
TestFrame physically_cropped(const TestFrame& f, uint32_t x, uint32_t y, uint32_t w, uint32_t h) {
  TestFrame c;
  c.info.format = f.info.format;
  c.info.width = w;
  c.info.height = h;
  const auto* src = reinterpret_cast<const uint8_t*>(f.bytes.data());
  auto copy_plane = [&](int plane, uint32_t px, uint32_t py, uint32_t row_bytes, uint32_t rows, uint32_t bytes_per_px) {
    const size_t start = c.bytes.size();
    c.info.offset[plane] = static_cast<uint32_t>(start);
    c.info.stride[plane] = row_bytes;
    for (uint32_t r = 0; r < rows; ++r) {
      const uint8_t* row = src + f.info.offset[plane] + size_t{py + r} * f.info.stride[plane] + size_t{px} * bytes_per_px;
      for (uint32_t b = 0; b < row_bytes; ++b) c.bytes.push_back(std::byte(row[b]));
    }
  };
  const uint32_t cw = (w + 1) / 2, ch = (h + 1) / 2;
  if (f.info.format == PixelFormat::kRGB) {
    copy_plane(0, x, y, w * 3, h, 3);
  } else if (f.info.format == PixelFormat::kI420) {
    copy_plane(0, x, y, w, h, 1);
    copy_plane(1, x / 2, y / 2, cw, ch, 1);
    copy_plane(2, x / 2, y / 2, cw, ch, 1);
  } else {
    copy_plane(0, x, y, w, h, 1);
    copy_plane(1, x / 2, y / 2, cw * 2, ch, 2);
  }
  return c;
}

// streams[].roi: preprocessing a frame's region (its crop) gives, to the bit, what preprocessing that
// region as a frame of its own gives; a crop outside the frame is an error for that frame.
TEST(CenteredRegion, IsTheLargestRegionOfTheTensorsShapeInTheMiddle) {
  using R = FrameInfo::Region;
  auto same = [](const R& a, const R& b) { return a.x == b.x && a.y == b.y && a.width == b.width && a.height == b.height; };
  EXPECT_TRUE(same(centered_region(R{0, 0, 1920, 1080}, 224, 224), R{420, 0, 1080, 1080}));
  EXPECT_TRUE(same(centered_region(R{0, 0, 1080, 1920}, 224, 224), R{0, 420, 1080, 1080}));
  EXPECT_TRUE(same(centered_region(R{960, 0, 960, 1080}, 224, 224), R{960, 60, 960, 960}));  // within an roi
  EXPECT_TRUE(same(centered_region(R{0, 0, 640, 480}, 320, 240), R{0, 0, 640, 480}));      // already that shape
  EXPECT_TRUE(same(centered_region(R{0, 0, 640, 480}, 299, 224), R{0, 0, 640, 479}));      // 4:3 nearly; floor
  EXPECT_TRUE(same(centered_region(R{0, 0, 1, 1000}, 224, 224), R{0, 499, 1, 1}));
}

TEST(CpuPreprocessor, ACropIsPreprocessedExactlyAsTheRegionAloneWouldBe) {
  PreprocessSpec spec;
  auto pre = make_cpu_preprocessor(spec);
  for (PixelFormat format : {PixelFormat::kRGB, PixelFormat::kI420, PixelFormat::kNV12}) {
    TestFrame f = random_frame(format, 320, 240, 7);
    for (const std::array<uint32_t, 4>& crop : {std::array<uint32_t, 4>{160, 0, 160, 240},
                                                std::array<uint32_t, 4>{10, 20, 101, 77},
                                                std::array<uint32_t, 4>{0, 0, 320, 240}}) {
      TestFrame cropped = f;
      cropped.info.crop = crop;
      TestFrame alone = physically_cropped(f, crop[0], crop[1], crop[2], crop[3]);
      std::vector<float> a(spec.output_info().elements()), b(a.size());
      ASSERT_TRUE(pre->run(cropped.view(), reinterpret_cast<std::byte*>(a.data())).ok());
      ASSERT_TRUE(pre->run(alone.view(), reinterpret_cast<std::byte*>(b.data())).ok());
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << pixel_format_name(format) << " crop at " << crop[0] << "," << crop[1];
    }
  }
  TestFrame f = random_frame(PixelFormat::kI420, 320, 240, 7);
  f.info.crop = {200, 0, 160, 240};  // past the right edge
  std::vector<float> out(spec.output_info().elements());
  const Status s = pre->run(f.view(), reinterpret_cast<std::byte*>(out.data()));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("crop 160x240 at (200, 0) is not inside the 320x240 frame"), std::string::npos)
      << s.message();
}

// The frame `f` shown as its orientation says, as a frame of its own: each plane turned at its own
// resolution (even sizes, so that a chroma sample covers the same pixels either way), tightly packed.
TestFrame physically_turned(const TestFrame& f) {
  TestFrame t;
  t.info.format = f.info.format;
  t.info.width = f.info.upright_width();
  t.info.height = f.info.upright_height();
  const OrientationMap map = orientation_map(f.info.orientation);
  const auto* src = reinterpret_cast<const uint8_t*>(f.bytes.data());
  auto turn_plane = [&](int plane, uint32_t pw, uint32_t ph, uint32_t bytes_per_sample) {
    const uint32_t uw = map.transpose ? ph : pw, uh = map.transpose ? pw : ph;
    t.info.offset[plane] = static_cast<uint32_t>(t.bytes.size());
    t.info.stride[plane] = uw * bytes_per_sample;
    for (uint32_t uy = 0; uy < uh; ++uy) {
      for (uint32_t ux = 0; ux < uw; ++ux) {
        uint32_t x = map.transpose ? uy : ux, y = map.transpose ? ux : uy;
        if (map.mirror_x) x = pw - 1 - x;
        if (map.mirror_y) y = ph - 1 - y;
        const uint8_t* sample = src + f.info.offset[plane] + size_t{y} * f.info.stride[plane] + size_t{x} * bytes_per_sample;
        for (uint32_t b = 0; b < bytes_per_sample; ++b) t.bytes.push_back(std::byte(sample[b]));
      }
    }
  };
  const uint32_t w = f.info.width, h = f.info.height;
  if (f.info.format == PixelFormat::kRGB) {
    turn_plane(0, w, h, 3);
  } else if (f.info.format == PixelFormat::kI420) {
    turn_plane(0, w, h, 1);
    turn_plane(1, w / 2, h / 2, 1);
    turn_plane(2, w / 2, h / 2, 1);
  } else {
    turn_plane(0, w, h, 1);
    turn_plane(1, w / 2, h / 2, 2);
  }
  return t;
}

TEST(LetterboxRect, IsTheLargestRectangleOfTheRegionsShapeCentredInTheTensor) {
  using R = FrameInfo::Region;
  auto same = [](const R& a, const R& b) { return a.x == b.x && a.y == b.y && a.width == b.width && a.height == b.height; };
  EXPECT_TRUE(same(letterbox_rect(1920, 1080, 224, 224), R{0, 49, 224, 126}));  // 126 = 1080 x 224 / 1920
  EXPECT_TRUE(same(letterbox_rect(1080, 1920, 224, 224), R{49, 0, 126, 224}));
  EXPECT_TRUE(same(letterbox_rect(640, 480, 320, 240), R{0, 0, 320, 240}));    // already that shape
  EXPECT_TRUE(same(letterbox_rect(300, 100, 224, 224), R{0, 74, 224, 75}));     // 74.67 rounds to 75
  EXPECT_TRUE(same(letterbox_rect(225, 224, 224, 224), R{0, 0, 224, 223}));     // the odd pixel below
  EXPECT_TRUE(same(letterbox_rect(1, 1000, 224, 224), R{111, 0, 1, 224}));      // never narrower than 1
  EXPECT_TRUE(same(letterbox_rect(1920, 1080, 299, 224), R{0, 28, 299, 168}));  // a wide tensor too
  PreprocessSpec spec;
  EXPECT_TRUE(same(output_rect(spec, R{0, 0, 1920, 1080}), R{0, 0, 224, 224}));  // stretch: all of it
  spec.letterbox = true;
  EXPECT_TRUE(same(output_rect(spec, R{960, 0, 960, 1080}), R{12, 0, 199, 224}));  // an roi's own shape
}

// Anamorphic video (HDV's 1440x1080, shown 16:9 with pixels 4:3 wide) is letterboxed and center-cropped
// by the shape it is shown in, as a square-pixel 1920x1080 frame is; so is one field of an interlaced
// frame (deinterlace: first_field reads 1920x540 rows of a 1920x1080 picture). Before 2026-12-06 both
// went by their stored rows: HDV boxed as 4:3, a field as 32:9 (224x63 of the tensor).
TEST(LetterboxRect, GoesByTheShapeShownWithAnamorphicPixelsAndFieldsRead) {
  using R = FrameInfo::Region;
  auto same = [](const R& a, const R& b) { return a.x == b.x && a.y == b.y && a.width == b.width && a.height == b.height; };
  PreprocessSpec spec;
  spec.letterbox = true;
  FrameInfo hdv;
  hdv.width = 1440;
  hdv.height = 1080;
  hdv.par_n = 4;
  hdv.par_d = 3;
  EXPECT_TRUE(same(output_rect(spec, hdv), R{0, 49, 224, 126}));
  FrameInfo upright = hdv;  // turned a quarter: 1080x1440 stored pixels 3:4 wide, shown 9:16
  upright.orientation = Orientation::kRotate90;
  EXPECT_TRUE(same(output_rect(spec, upright), R{49, 0, 126, 224}));
  FrameInfo field;
  field.width = 1920;
  field.height = 1080;
  field.field = FieldRead::kTopField;
  EXPECT_TRUE(same(output_rect(spec, field), R{0, 49, 224, 126}));
  FrameInfo square = field;
  square.field = FieldRead::kWholeFrame;
  EXPECT_TRUE(same(output_rect(spec, square), R{0, 49, 224, 126}));
  spec.letterbox = false;
  EXPECT_TRUE(same(output_rect(spec, hdv), R{0, 0, 224, 224}));  // stretch: all of it, whatever its shape
  // center_crop: the middle square as shown, 810 stored columns of 1080 rows (810 x 4/3 = 1080).
  EXPECT_TRUE(same(centered_region(hdv, 224, 224), R{315, 0, 810, 1080}));
  EXPECT_TRUE(same(centered_region(square, 224, 224), R{420, 0, 1080, 1080}));
  EXPECT_TRUE(same(centered_region(upright, 224, 224), R{0, 315, 1080, 810}));
  FrameInfo pal = hdv;  // PAL DV widescreen: 720x576, pixels 64:45, shown 16:9
  pal.width = 720;
  pal.height = 576;
  pal.par_n = 64;
  pal.par_d = 45;
  spec.letterbox = true;
  EXPECT_TRUE(same(output_rect(spec, pal), R{0, 49, 224, 126}));
}

// The same through the preprocessor: a field read of a frame and an anamorphic frame fill the
// rectangle of the shape they are shown in, the rest is the pad colour.
TEST(CpuPreprocessor, LetterboxFillsTheRectangleOfTheShapeShown) {
  PreprocessSpec spec;
  spec.letterbox = true;
  spec.pad_rgb = {0.f, 0.f, 0.f};
  spec.mean = {0.f, 0.f, 0.f};
  spec.std = {1.f, 1.f, 1.f};
  auto pre = make_cpu_preprocessor(spec);
  for (int which : {0, 1}) {
    TestFrame f = random_frame(PixelFormat::kRGB, which == 0 ? 640 : 480, 360, 5);
    for (auto& b : f.bytes) b = std::byte{200};  // a grey frame on black margins
    if (which == 0) {
      f.info.field = FieldRead::kTopField;  // 640x180 rows read of a 640x360 picture
    } else {
      f.info.par_n = 4;  // 480x360 stored, shown 640x360
      f.info.par_d = 3;
    }
    std::vector<float> t(spec.output_info().elements());
    ASSERT_TRUE(pre->run(f.view(), reinterpret_cast<std::byte*>(t.data())).ok());
    uint32_t first = 224, last = 0;  // the rows holding the picture, down the middle column
    for (uint32_t y = 0; y < 224; ++y) {
      if (t[size_t{y} * 224 + 112] > 0.5f) {
        first = std::min(first, y);
        last = std::max(last, y);
      }
    }
    EXPECT_EQ(first, 49u) << which;  // 16:9 in 224x224: rows 49 to 174
    EXPECT_EQ(last, 174u) << which;
  }
}

// preprocess.resize: letterbox: the tensor holds, to the bit, the frame stretched to its rectangle
// (letterbox_rect) and, around it, the pad colour normalised as pixels are, in either channel order;
// turned frames and crops as their upright pictures (the output loop's rectangle, both loop orders).
TEST(CpuPreprocessor, LetterboxPutsTheWholeFrameInItsRectangleAndThePadColourAround) {
  for (bool bgr : {false, true}) {
    PreprocessSpec boxed;
    boxed.letterbox = true;
    boxed.pad_rgb = {114.f, 20.f, 250.f};
    boxed.bgr = bgr;
    boxed.mean = {0.40f, 0.45f, 0.50f};
    for (PixelFormat format : {PixelFormat::kRGB, PixelFormat::kI420, PixelFormat::kNV12}) {
      for (auto [w, h] : {std::pair<uint32_t, uint32_t>{1280, 720}, {240, 320}, {224, 224}}) {
        const TestFrame f = random_frame(format, w, h, w + h);
        const FrameInfo::Region rect = letterbox_rect(w, h, 224, 224);
        PreprocessSpec stretched = boxed;  // the same frame stretched to the rectangle's size alone
        stretched.letterbox = false;
        stretched.out_width = rect.width;
        stretched.out_height = rect.height;
        std::vector<float> a(boxed.output_info().elements()), b(stretched.output_info().elements());
        ASSERT_TRUE(make_cpu_preprocessor(boxed)->run(f.view(), reinterpret_cast<std::byte*>(a.data())).ok());
        ASSERT_TRUE(make_cpu_preprocessor(stretched)->run(f.view(), reinterpret_cast<std::byte*>(b.data())).ok());
        size_t margin = 0, inside = 0;
        for (int c = 0; c < 3; ++c) {
          const int colour = bgr ? 2 - c : c;  // output channel c holds this colour
          const float pad = (boxed.pad_rgb[colour] / 255.f - boxed.mean[c]) / boxed.std[c];
          for (uint32_t y = 0; y < 224; ++y) {
            for (uint32_t x = 0; x < 224; ++x) {
              const float got = a[static_cast<size_t>(c) * 224 * 224 + size_t{y} * 224 + x];
              if (x >= rect.x && x < rect.x + rect.width && y >= rect.y && y < rect.y + rect.height) {
                const float want = b[static_cast<size_t>(c) * rect.width * rect.height + size_t{y - rect.y} * rect.width + (x - rect.x)];
                ASSERT_EQ(got, want) << pixel_format_name(format) << " " << w << "x" << h << " at " << x << "," << y;
                ++inside;
              } else {
                ASSERT_NEAR(got, pad, 1e-5) << pixel_format_name(format) << " " << w << "x" << h << " at " << x << "," << y;
                ++margin;
              }
            }
          }
        }
        EXPECT_EQ(inside, size_t{3} * rect.width * rect.height);
        EXPECT_EQ(margin, size_t{3} * (224 * 224 - rect.width * rect.height));
      }
    }
  }
  // Turned and cropped frames: the same tensor as their upright pictures as frames of their own.
  PreprocessSpec spec;
  spec.letterbox = true;
  spec.pad_rgb = {114.f, 114.f, 114.f};
  auto pre = make_cpu_preprocessor(spec);
  for (PixelFormat format : {PixelFormat::kRGB, PixelFormat::kI420, PixelFormat::kNV12}) {
    for (Orientation o : {Orientation::kAsStored, Orientation::kRotate90, Orientation::kFlipHorizontal}) {
      TestFrame f = random_frame(format, 320, 240, 13);
      f.info.orientation = o;
      for (const std::array<uint32_t, 4>& crop : {std::array<uint32_t, 4>{0, 0, 0, 0},
                                                  std::array<uint32_t, 4>{10, 20, 101, 77}}) {
        TestFrame a_frame = f, b_frame = physically_turned(f);
        a_frame.info.crop = b_frame.info.crop = crop;
        std::vector<float> a(spec.output_info().elements()), b(a.size());
        ASSERT_TRUE(pre->run(a_frame.view(), reinterpret_cast<std::byte*>(a.data())).ok());
        ASSERT_TRUE(pre->run(b_frame.view(), reinterpret_cast<std::byte*>(b.data())).ok());
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
            << pixel_format_name(format) << ", " << orientation_name(o) << ", crop " << crop[2];
      }
    }
  }
}

// ingest.orientation: a frame that says how to turn it (a phone's portrait video, stored sideways) is
// preprocessed, to the bit, as the picture turned that way would be, in every orientation and format,
// whole and with a crop of the upright picture; nothing is copied to turn it. Its crop is checked
// against the upright size.
TEST(CpuPreprocessor, AFrameThatSaysHowToTurnItIsPreprocessedAsTheTurnedPicture) {
  PreprocessSpec spec;
  auto pre = make_cpu_preprocessor(spec);
  for (PixelFormat format : {PixelFormat::kRGB, PixelFormat::kI420, PixelFormat::kNV12}) {
    for (uint8_t o = 0; o <= kMaxOrientation; ++o) {
      TestFrame f = random_frame(format, 320, 240, 11);
      f.info.orientation = static_cast<Orientation>(o);
      const TestFrame turned = physically_turned(f);
      EXPECT_EQ(f.info.region().width, turned.info.width) << orientation_name(f.info.orientation);
      for (const std::array<uint32_t, 4>& crop : {std::array<uint32_t, 4>{0, 0, 0, 0},
                                                  std::array<uint32_t, 4>{10, 20, 101, 77}}) {
        TestFrame a_frame = f, b_frame = turned;
        a_frame.info.crop = b_frame.info.crop = crop;
        std::vector<float> a(spec.output_info().elements()), b(a.size());
        ASSERT_TRUE(pre->run(a_frame.view(), reinterpret_cast<std::byte*>(a.data())).ok());
        ASSERT_TRUE(pre->run(b_frame.view(), reinterpret_cast<std::byte*>(b.data())).ok());
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
            << pixel_format_name(format) << ", " << orientation_name(f.info.orientation) << ", crop " << crop[2];
      }
    }
  }
  TestFrame f = random_frame(PixelFormat::kI420, 320, 240, 7);
  f.info.orientation = Orientation::kRotate90;  // 240 wide, 320 high as shown
  f.info.crop = {0, 200, 240, 120};
  std::vector<float> out(spec.output_info().elements());
  EXPECT_TRUE(pre->run(f.view(), reinterpret_cast<std::byte*>(out.data())).ok());
  f.info.crop = {100, 0, 160, 240};  // inside 320x240 as stored, not inside 240x320 as shown
  const Status s = pre->run(f.view(), reinterpret_cast<std::byte*>(out.data()));
  EXPECT_NE(s.message().find("crop 160x240 at (100, 0) is not inside the 240x320 frame"), std::string::npos)
      << s.message();
}

// One field of `f` (rows `parity`, parity + 2, ... of every plane, chroma rows too) as a frame of its
// own, tightly packed: what a deinterlacer that drops the other field gives. Its height is even.
TestFrame physically_one_field(const TestFrame& f, uint32_t parity) {
  TestFrame t;
  t.info = f.info;
  t.info.field = FieldRead::kWholeFrame;
  t.info.height = (f.info.height / 2) & ~1u;
  const auto* src = reinterpret_cast<const uint8_t*>(f.bytes.data());
  const uint32_t w = f.info.width;
  auto copy_plane = [&](int plane, uint32_t row_bytes, uint32_t rows) {
    t.info.offset[plane] = static_cast<uint32_t>(t.bytes.size());
    t.info.stride[plane] = row_bytes;
    for (uint32_t r = 0; r < rows; ++r) {
      const uint8_t* row = src + f.info.offset[plane] + size_t{parity + 2 * r} * f.info.stride[plane];
      for (uint32_t b = 0; b < row_bytes; ++b) t.bytes.push_back(std::byte(row[b]));
    }
  };
  const uint32_t h = t.info.height;
  if (f.info.format == PixelFormat::kRGB) {
    copy_plane(0, w * 3, h);
  } else if (f.info.format == PixelFormat::kI420) {
    copy_plane(0, w, h);
    copy_plane(1, w / 2, h / 2);
    copy_plane(2, w / 2, h / 2);
  } else {
    copy_plane(0, w, h);
    copy_plane(1, w, h / 2);
  }
  return t;
}

// ingest.deinterlace: a frame that says to read one field is preprocessed, to the bit, as that field
// alone would be (in every format and orientation, whole and cropped: the crop halves along the stored
// rows), with nothing copied; heights that are not a multiple of 4 (486-row NTSC) keep to the frame.
TEST(CpuPreprocessor, AFieldOfAnInterlacedFrameIsPreprocessedAsThatFieldAlone) {
  PreprocessSpec spec;
  auto pre = make_cpu_preprocessor(spec);
  for (PixelFormat format : {PixelFormat::kRGB, PixelFormat::kI420, PixelFormat::kNV12}) {
    for (uint32_t height : {240u, 250u}) {
      for (FieldRead field : {FieldRead::kTopField, FieldRead::kBottomField}) {
        for (Orientation orientation : {Orientation::kAsStored, Orientation::kRotate90, Orientation::kRotate180}) {
          TestFrame f = random_frame(format, 320, height, 13);
          f.info.field = field;
          f.info.orientation = orientation;
          TestFrame alone = physically_one_field(f, field == FieldRead::kBottomField ? 1 : 0);
          const bool transposed = orientation_map(orientation).transpose;
          const std::array<uint32_t, 4> crop{10, 20, 101, 77};
          for (bool cropped : {false, true}) {
            f.info.crop = cropped ? crop : std::array<uint32_t, 4>{};
            alone.info.crop = !cropped     ? std::array<uint32_t, 4>{}
                              : transposed ? std::array<uint32_t, 4>{5, 20, 50, 77}
                                           : std::array<uint32_t, 4>{10, 10, 101, 38};
            std::vector<float> a(spec.output_info().elements()), b(a.size());
            ASSERT_TRUE(pre->run(f.view(), reinterpret_cast<std::byte*>(a.data())).ok());
            ASSERT_TRUE(pre->run(alone.view(), reinterpret_cast<std::byte*>(b.data())).ok());
            EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
                << pixel_format_name(format) << " " << height << " rows, " << field_read_name(field) << ", "
                << orientation_name(orientation) << (cropped ? ", cropped" : "");
          }
        }
      }
    }
  }
}

// What reading one field is for: a ball moving across an interlaced frame is in two places, one per
// field, combed row by row; the whole frame shows both half there, the first field the ball it saw.
TEST(CpuPreprocessor, ReadingOneFieldOfAnInterlacedFrameShowsAMovingObjectOnce) {
  PreprocessSpec spec;
  spec.out_width = spec.out_height = 64;
  auto pre = make_cpu_preprocessor(spec);
  TestFrame f = random_frame(PixelFormat::kI420, 256, 256, 1);
  auto* bytes = reinterpret_cast<uint8_t*>(f.bytes.data());
  std::fill(bytes, bytes + f.bytes.size(), uint8_t{128});  // grey: Y 128, no colour
  for (uint32_t y = 0; y < 256; ++y) {
    std::fill_n(bytes + y * f.info.stride[0], 256, uint8_t{16});  // black
    const uint32_t left = y % 2 == 0 ? 64 : 128;  // the top field saw the square here, the bottom 1/50 s later
    if (y >= 96 && y < 160) std::fill_n(bytes + y * f.info.stride[0] + left, 64, uint8_t{235});  // white
  }
  auto luma_at = [&](const std::vector<float>& t, uint32_t x, uint32_t y) {
    return (t[y * 64 + x] * spec.std[0] + spec.mean[0]) * 255.f;  // the red channel: the luma here
  };
  std::vector<float> woven(spec.output_info().elements()), field(woven.size());
  ASSERT_TRUE(pre->run(f.view(), reinterpret_cast<std::byte*>(woven.data())).ok());
  f.info.field = FieldRead::kTopField;
  ASSERT_TRUE(pre->run(f.view(), reinterpret_cast<std::byte*>(field.data())).ok());
  // Square centres (input 96, 128) and (160, 128): output (24, 32) and (40, 32).
  EXPECT_NEAR(luma_at(woven, 24, 32), 127.5f, 2.f);  // half white, half black: combed
  EXPECT_NEAR(luma_at(woven, 40, 32), 127.5f, 2.f);
  EXPECT_NEAR(luma_at(field, 24, 32), 255.f, 1.f);  // the top field's square, whole
  EXPECT_NEAR(luma_at(field, 40, 32), 0.f, 1.f);    // and nothing where the bottom field saw it
}

}  // namespace
}  // namespace vapipe
