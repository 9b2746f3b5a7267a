// CPU preprocessing: one pass over the output pixels. Bilinear weights are computed once per input
// size; YUV is interpolated before conversion to RGB (the conversion is affine, so this equals
// converting each source pixel first, minus the clamping), which keeps the inner loop short.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "stages/preprocess/preprocessor.h"

namespace vapipe {

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7fffffu;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xffu);
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));  // inf / nan
  exp = exp - 127 + 15;
  if (exp >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (exp <= 0) {                                                 // subnormal or zero
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half_mant = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: correct
  return static_cast<uint16_t>(h);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        --exp;
      }
      x = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

std::vector<Status> Preprocessor::run_batch(const std::vector<FrameView>& frames, const std::vector<TensorOut>& outs) {
  std::vector<Status> statuses;
  statuses.reserve(frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    if (frames[i].device >= 0 || outs[i].device >= 0) {
      statuses.push_back(FailedPrecondition("this preprocessor works on host memory; the frame or its tensor is "
                                            "in GPU memory"));
    } else {
      statuses.push_back(run(frames[i], outs[i].data));
    }
  }
  return statuses;
}

FrameInfo::Region centered_region(const FrameInfo::Region& region, uint64_t out_width, uint64_t out_height) {
  if (out_width == 0 || out_height == 0 || region.width == 0 || region.height == 0) return region;
  FrameInfo::Region r = region;
  // Compare width/height with out_width/out_height without rounding: width * out_height vs ...
  // (sides of at most 2^32 by shapes of at most 2^32: no overflow).
  if (uint64_t{region.width} * out_height > uint64_t{region.height} * out_width) {
    r.width = static_cast<uint32_t>(std::clamp<uint64_t>(uint64_t{region.height} * out_width / out_height, 1, region.width));
    r.x = region.x + (region.width - r.width) / 2;
  } else {
    r.height = static_cast<uint32_t>(std::clamp<uint64_t>(uint64_t{region.width} * out_height / out_width, 1, region.height));
    r.y = region.y + (region.height - r.height) / 2;
  }
  return r;
}

FrameInfo::Region centered_region(const FrameInfo& frame, uint32_t out_width, uint32_t out_height) {
  // A region of w x h stored pixels is shown (w * pw) x (h * ph): the tensor's shape out_w:out_h, as
  // shown, is (out_w * ph):(out_h * pw) in stored pixels.
  const bool turned = orientation_map(frame.orientation).transpose;
  const uint64_t pixel_width = turned ? frame.par_d : frame.par_n, pixel_height = turned ? frame.par_n : frame.par_d;
  return centered_region(frame.region(), out_width * pixel_height, out_height * pixel_width);
}

FrameInfo::Region letterbox_rect(uint64_t region_width, uint64_t region_height, uint32_t out_width,
                                 uint32_t out_height) {
  if (out_width == 0 || out_height == 0 || region_width == 0 || region_height == 0) {
    return {0, 0, out_width, out_height};
  }
  // Compared and rounded in integers: the same rectangle on every platform and in the CUDA host code
  // (shapes of at most 2^48 by sides of at most 2^15: no overflow).
  if (region_width * out_height >= region_height * out_width) {  // wider: full width
    const uint64_t h = (2 * region_height * out_width + region_width) / (2 * region_width);
    const uint32_t height = static_cast<uint32_t>(std::clamp<uint64_t>(h, 1, out_height));
    return {0, (out_height - height) / 2, out_width, height};
  }
  const uint64_t w = (2 * region_width * out_height + region_height) / (2 * region_height);
  const uint32_t width = static_cast<uint32_t>(std::clamp<uint64_t>(w, 1, out_width));
  return {(out_width - width) / 2, 0, width, out_height};
}

FrameInfo::Region output_rect(const PreprocessSpec& spec, const FrameInfo::Region& region) {
  return spec.letterbox ? letterbox_rect(region.width, region.height, spec.out_width, spec.out_height)
                        : FrameInfo::Region{0, 0, spec.out_width, spec.out_height};
}

FrameInfo::Region output_rect(const PreprocessSpec& spec, const FrameInfo& frame) {
  const FrameInfo::Shape shown = frame.shown_shape();
  return spec.letterbox ? letterbox_rect(shown.width, shown.height, spec.out_width, spec.out_height)
                        : FrameInfo::Region{0, 0, spec.out_width, spec.out_height};
}

Status validate_frame(const FrameView& frame) {
  const FrameInfo& i = frame.info;
  if (i.width == 0 || i.height == 0) return InvalidArgument("frame has zero width or height");
  if (frame.data == nullptr) return InvalidArgument("frame has no payload");
  size_t need = i.required_bytes();
  if (need == 0) return InvalidArgument(std::string("inconsistent ") + pixel_format_name(i.format) + " layout");
  if (need > frame.size) {
    return InvalidArgument("frame layout needs " + std::to_string(need) + " bytes, payload has " +
                           std::to_string(frame.size));
  }
  if (static_cast<uint8_t>(i.orientation) > kMaxOrientation) return InvalidArgument("unknown orientation");
  if (static_cast<uint8_t>(i.field) > kMaxFieldRead) return InvalidArgument("unknown field");
  const FrameInfo::Region r = i.region();  // in the upright picture
  const uint32_t w = i.upright_width(), h = i.upright_height();
  if (r.width == 0 || r.height == 0 || uint64_t{r.x} + r.width > w || uint64_t{r.y} + r.height > h) {
    return InvalidArgument("crop " + std::to_string(r.width) + "x" + std::to_string(r.height) + " at (" +
                           std::to_string(r.x) + ", " + std::to_string(r.y) + ") is not inside the " +
                           std::to_string(w) + "x" + std::to_string(h) + " frame");
  }
  return Status::Ok();
}

namespace {

// Source index and weight along one axis, as torch's upsample_bilinear2d (align_corners=False).
struct Tap {
  uint32_t i0, i1;
  float w1;  // weight of i1; i0 gets 1 - w1
};

// Over `in` source pixels from `first` (a crop), as if those were the whole image. `mirror_size`:
// indices count from the other end of an axis that long (a picture shown mirrored or turned).
std::vector<Tap> make_taps(uint32_t in, uint32_t out, uint32_t first = 0, uint32_t mirror_size = 0) {
  std::vector<Tap> taps(out);
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (uint32_t d = 0; d < out; ++d) {
    float src = std::max(scale * (static_cast<float>(d) + 0.5f) - 0.5f, 0.0f);
    uint32_t i0 = static_cast<uint32_t>(src);
    uint32_t step = i0 < in - 1 ? 1 : 0;
    taps[d] = {first + i0, first + i0 + step, src - static_cast<float>(i0)};
    if (mirror_size) taps[d] = {mirror_size - 1 - taps[d].i0, mirror_size - 1 - taps[d].i1, taps[d].w1};
  }
  return taps;
}

// YUV -> RGB (0..255) as r = y + cr_r * v, g = y + cb_g * u + cr_g * v, b = y + cb_b * u, where
// y, u, v are already range-expanded and centred.
struct YuvMatrix {
  float y_scale, y_offset, c_scale;
  float cr_r, cb_g, cr_g, cb_b;
};

YuvMatrix make_matrix(ColorMatrix m, bool full_range) {
  const float kr = m == ColorMatrix::kBT709 ? 0.2126f : 0.299f;
  const float kb = m == ColorMatrix::kBT709 ? 0.0722f : 0.114f;
  const float kg = 1.f - kr - kb;
  YuvMatrix y{};
  y.y_scale = full_range ? 1.f : 255.f / 219.f;
  y.y_offset = full_range ? 0.f : 16.f;
  y.c_scale = full_range ? 1.f : 255.f / 224.f;
  y.cr_r = 2.f * (1.f - kr);
  y.cb_b = 2.f * (1.f - kb);
  y.cb_g = -2.f * kb * (1.f - kb) / kg;
  y.cr_g = -2.f * kr * (1.f - kr) / kg;
  return y;
}

inline float lerp2(float a, float b, float c, float d, float wx, float wy) {
  const float top = a + (b - a) * wx;
  const float bottom = c + (d - c) * wx;
  return top + (bottom - top) * wy;
}

// One thread's converter: its bilinear taps (per input size) and its scratch buffer.
class FrameConverter {
 public:
  explicit FrameConverter(const PreprocessSpec& spec) : spec_(spec) {
    for (int c = 0; c < 3; ++c) {
      // (v / 255 - mean) / std == v * scale + bias
      scale_[c] = 1.f / (255.f * spec.std[c]);
      bias_[c] = -spec.mean[c] / spec.std[c];
    }
  }

  Status run(const FrameView& decoded, std::byte* out) {
    VAPIPE_RETURN_IF_ERROR(validate_frame(decoded));
    // One field of an interlaced frame is read as a picture of its own (the same bytes, rows apart).
    const FrameView frame{field_picture(decoded.info), decoded.data, decoded.size, decoded.device};
    const FrameInfo& info = frame.info;
    const FrameInfo::Region region = info.region();
    if (region.x != region_.x || region.y != region_.y || region.width != region_.width ||
        region.height != region_.height || info.orientation != orientation_ || info.width != width_ ||
        info.height != height_ || info.par_n != par_n_ || info.par_d != par_d_) {
      region_ = region;
      orientation_ = info.orientation;
      width_ = info.width;
      height_ = info.height;
      par_n_ = info.par_n;
      par_d_ = info.par_d;
      // Taps along the upright picture's axes, as stored indices: of the stored x axis, or y when the
      // picture is turned a quarter (transpose), counted from its far end when mirrored.
      const OrientationMap map = orientation_map(info.orientation);
      transposed_ = map.transpose;
      const uint32_t x_mirror = map.transpose ? (map.mirror_y ? info.height : 0) : (map.mirror_x ? info.width : 0);
      const uint32_t y_mirror = map.transpose ? (map.mirror_x ? info.width : 0) : (map.mirror_y ? info.height : 0);
      // The region is resized to the part of the tensor it fills (all of it but with letterbox).
      dst_ = output_rect(spec_, decoded.info);  // by the shape shown, not the field's rows
      xs_ = make_taps(region.width, dst_.width, region.x, x_mirror);
      ys_ = make_taps(region.height, dst_.height, region.y, y_mirror);
      x0_.resize(xs_.size());
      x1_.resize(xs_.size());
      wx_.resize(xs_.size());
      for (size_t i = 0; i < xs_.size(); ++i) {
        x0_[i] = xs_[i].i0;
        x1_[i] = xs_[i].i1;
        wx_[i] = xs_[i].w1;
      }
    }
    const size_t plane = size_t{spec_.out_width} * spec_.out_height;
    row_.resize(plane * 3);
    float* r_out = row_.data();
    float* g_out = r_out + plane;
    float* b_out = g_out + plane;
    if (spec_.bgr) std::swap(r_out, b_out);  // blue in the first plane; planes are in output order
    if (dst_.width != spec_.out_width || dst_.height != spec_.out_height) {  // letterbox's margins
      std::fill(r_out, r_out + plane, spec_.pad_rgb[0]);
      std::fill(g_out, g_out + plane, spec_.pad_rgb[1]);
      std::fill(b_out, b_out + plane, spec_.pad_rgb[2]);
    }
    if (info.format == PixelFormat::kRGB) {
      transposed_ ? run_rgb<true>(frame, r_out, g_out, b_out) : run_rgb<false>(frame, r_out, g_out, b_out);
    } else if (transposed_) {
      run_yuv<true>(frame, r_out, g_out, b_out);
    } else if (info.format == PixelFormat::kNV12) {
      run_yuv_rows<true>(frame, r_out, g_out, b_out);
    } else {
      run_yuv_rows<false>(frame, r_out, g_out, b_out);
    }
    // Normalise and store in the requested dtype.
    if (spec_.dtype == DType::kFloat32) {
      float* dst = reinterpret_cast<float*>(out);
      for (int c = 0; c < 3; ++c) {
        const float* src = row_.data() + c * plane;
        float* d = dst + c * plane;
        size_t i = 0;
#if defined(__SSE2__)
        const __m128 scale = _mm_set1_ps(scale_[c]), bias = _mm_set1_ps(bias_[c]);
        for (; i + 4 <= plane; i += 4) _mm_storeu_ps(d + i, _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(src + i), scale), bias));
#endif
        for (; i < plane; ++i) d[i] = src[i] * scale_[c] + bias_[c];
      }
    } else {
      uint16_t* dst = reinterpret_cast<uint16_t*>(out);
      for (int c = 0; c < 3; ++c) {
        const float* src = row_.data() + c * plane;
        uint16_t* d = dst + c * plane;
        for (size_t i = 0; i < plane; ++i) d[i] = float_to_half(src[i] * scale_[c] + bias_[c]);
      }
    }
    return Status::Ok();
  }

 private:
  // Calls f(tx, ty, o) for every output pixel o of the frame's rectangle (dst_), in the order that
  // reads the stored frame along its rows: row by row of the output, or column by column when the
  // picture is turned a quarter (its upright x axis runs down the stored columns: 1,298-1,306 frames/s
  // on a 1080p frame turned a quarter, against 859-884 row by row; 1,345-1,390 unturned).
  template <bool kTransposed, typename F>
  void for_each_output(F&& f) const {
    const size_t out_width = spec_.out_width;
    const size_t first = size_t{dst_.y} * out_width + dst_.x;
    if constexpr (!kTransposed) {
      for (size_t iy = 0; iy < ys_.size(); ++iy) {
        size_t o = first + iy * out_width;
        for (const Tap& tx : xs_) f(tx, ys_[iy], o++);
      }
    } else {
      for (size_t ix = 0; ix < xs_.size(); ++ix) {
        for (size_t iy = 0; iy < ys_.size(); ++iy) f(xs_[ix], ys_[iy], first + iy * out_width + ix);
      }
    }
  }

  // kTransposed: the upright x axis runs along stored rows (xs_ index rows, ys_ columns). p01 is the
  // pixel one step along upright x from p00, p10 one step along upright y, either way.
  template <bool kTransposed>
  void run_rgb(const FrameView& frame, float* r, float* g, float* b) const {
    const uint8_t* base = frame.plane(0);
    const size_t stride = frame.info.stride[0];
    auto at = [&](uint32_t ux, uint32_t uy) {
      return kTransposed ? base + size_t{ux} * stride + size_t{uy} * 3 : base + size_t{uy} * stride + size_t{ux} * 3;
    };
    for_each_output<kTransposed>([&](const Tap& tx, const Tap& ty, size_t o) {
      const uint8_t* p00 = at(tx.i0, ty.i0);
      const uint8_t* p01 = at(tx.i1, ty.i0);
      const uint8_t* p10 = at(tx.i0, ty.i1);
      const uint8_t* p11 = at(tx.i1, ty.i1);
      r[o] = lerp2(p00[0], p01[0], p10[0], p11[0], tx.w1, ty.w1);
      g[o] = lerp2(p00[1], p01[1], p10[1], p11[1], tx.w1, ty.w1);
      b[o] = lerp2(p00[2], p01[2], p10[2], p11[2], tx.w1, ty.w1);
    });
  }

  template <bool kTransposed>
  void run_yuv(const FrameView& frame, float* r, float* g, float* b) const {
    const FrameInfo& info = frame.info;
    const YuvMatrix m = make_matrix(info.matrix, info.full_range);
    const bool nv12 = info.format == PixelFormat::kNV12;
    const uint8_t* yp = frame.plane(0);
    const uint8_t* up = frame.plane(1);
    const uint8_t* vp = nv12 ? frame.plane(1) + 1 : frame.plane(2);
    const size_t ys = info.stride[0], us = info.stride[1], vs = nv12 ? info.stride[1] : info.stride[2];
    const size_t cstep = nv12 ? 2 : 1;  // bytes between horizontally adjacent chroma samples
    // A sample of a plane at upright (ux, uy), as stored indices; chroma at half of each.
    auto luma = [&](uint32_t ux, uint32_t uy) {
      return kTransposed ? yp[size_t{ux} * ys + uy] : yp[size_t{uy} * ys + ux];
    };
    auto chroma = [&](const uint8_t* plane, size_t stride, uint32_t ux, uint32_t uy) {
      return kTransposed ? plane[size_t{ux / 2} * stride + (uy / 2) * cstep]
                         : plane[size_t{uy / 2} * stride + (ux / 2) * cstep];
    };
    for_each_output<kTransposed>([&](const Tap& tx, const Tap& ty, size_t o) {
      const float yy = (lerp2(luma(tx.i0, ty.i0), luma(tx.i1, ty.i0), luma(tx.i0, ty.i1), luma(tx.i1, ty.i1), tx.w1,
                              ty.w1) - m.y_offset) * m.y_scale;
      const float uu = (lerp2(chroma(up, us, tx.i0, ty.i0), chroma(up, us, tx.i1, ty.i0), chroma(up, us, tx.i0, ty.i1),
                              chroma(up, us, tx.i1, ty.i1), tx.w1, ty.w1) - 128.f) * m.c_scale;
      const float vv = (lerp2(chroma(vp, vs, tx.i0, ty.i0), chroma(vp, vs, tx.i1, ty.i0), chroma(vp, vs, tx.i0, ty.i1),
                              chroma(vp, vs, tx.i1, ty.i1), tx.w1, ty.w1) - 128.f) * m.c_scale;
      r[o] = std::clamp(yy + m.cr_r * vv, 0.f, 255.f);
      g[o] = std::clamp(yy + m.cb_g * uu + m.cr_g * vv, 0.f, 255.f);
      b[o] = std::clamp(yy + m.cb_b * uu, 0.f, 255.f);
    });
  }

  // run_yuv<false> (the picture as stored, I420 or NV12), row by row of the output with the x taps
  // held as arrays, four output pixels at a time with SSE2. Each lane computes what run_yuv's scalar
  // code does, the same float operations in the same order (no FMA: the build targets baseline x86-64),
  // so the output is bit for bit the same: only the sample loads and their addresses are shared out.
  template <bool kNv12>
  void run_yuv_rows(const FrameView& frame, float* r, float* g, float* b) const {
    const FrameInfo& info = frame.info;
    const YuvMatrix m = make_matrix(info.matrix, info.full_range);
    const uint8_t* yp = frame.plane(0);
    const uint8_t* up = frame.plane(1);
    const uint8_t* vp = kNv12 ? frame.plane(1) + 1 : frame.plane(2);
    const size_t ys = info.stride[0], us = info.stride[1], vs = kNv12 ? info.stride[1] : info.stride[2];
    constexpr size_t kCstep = kNv12 ? 2 : 1;  // bytes between horizontally adjacent chroma samples
    const size_t out_width = spec_.out_width;
    const size_t first = size_t{dst_.y} * out_width + dst_.x;
    const size_t n = x0_.size();
    const uint32_t* x0 = x0_.data();
    const uint32_t* x1 = x1_.data();
    const float* wx = wx_.data();
    for (size_t iy = 0; iy < ys_.size(); ++iy) {
      const Tap ty = ys_[iy];
      const uint8_t* y0 = yp + size_t{ty.i0} * ys;
      const uint8_t* y1 = yp + size_t{ty.i1} * ys;
      const uint8_t* u0 = up + size_t{ty.i0 / 2} * us;
      const uint8_t* u1 = up + size_t{ty.i1 / 2} * us;
      const uint8_t* v0 = vp + size_t{ty.i0 / 2} * vs;
      const uint8_t* v1 = vp + size_t{ty.i1 / 2} * vs;
      float* ro = r + first + iy * out_width;
      float* go = g + first + iy * out_width;
      float* bo = b + first + iy * out_width;
      size_t i = 0;
#if defined(__SSE2__)
      const __m128 wy = _mm_set1_ps(ty.w1);
      const __m128 y_offset = _mm_set1_ps(m.y_offset), y_scale = _mm_set1_ps(m.y_scale);
      const __m128 c_offset = _mm_set1_ps(128.f), c_scale = _mm_set1_ps(m.c_scale);
      const __m128 cr_r = _mm_set1_ps(m.cr_r), cb_g = _mm_set1_ps(m.cb_g), cr_g = _mm_set1_ps(m.cr_g);
      const __m128 cb_b = _mm_set1_ps(m.cb_b), lo = _mm_setzero_ps(), hi = _mm_set1_ps(255.f);
      // lerp2 of four lanes: the row's samples at x0 and x1 of rows 0 and 1.
      auto lerp4 = [&](const uint8_t* p0, const uint8_t* p1, const size_t* a, const size_t* c, __m128 w) {
        const __m128 s00 = _mm_cvtepi32_ps(_mm_setr_epi32(p0[a[0]], p0[a[1]], p0[a[2]], p0[a[3]]));
        const __m128 s01 = _mm_cvtepi32_ps(_mm_setr_epi32(p0[c[0]], p0[c[1]], p0[c[2]], p0[c[3]]));
        const __m128 s10 = _mm_cvtepi32_ps(_mm_setr_epi32(p1[a[0]], p1[a[1]], p1[a[2]], p1[a[3]]));
        const __m128 s11 = _mm_cvtepi32_ps(_mm_setr_epi32(p1[c[0]], p1[c[1]], p1[c[2]], p1[c[3]]));
        const __m128 top = _mm_add_ps(s00, _mm_mul_ps(_mm_sub_ps(s01, s00), w));
        const __m128 bottom = _mm_add_ps(s10, _mm_mul_ps(_mm_sub_ps(s11, s10), w));
        return _mm_add_ps(top, _mm_mul_ps(_mm_sub_ps(bottom, top), wy));
      };
      // std::clamp(v, 0, 255) exactly: v < 0 ? 0 : (255 < v ? 255 : v) (max/min return their second
      // operand on equal values, so -0.0 stays -0.0 as with std::clamp).
      auto clamp4 = [&](__m128 v) { return _mm_min_ps(hi, _mm_max_ps(lo, v)); };
      for (; i + 4 <= n; i += 4) {
        const size_t la[4] = {x0[i], x0[i + 1], x0[i + 2], x0[i + 3]};
        const size_t lc[4] = {x1[i], x1[i + 1], x1[i + 2], x1[i + 3]};
        const size_t ca[4] = {x0[i] / 2 * kCstep, x0[i + 1] / 2 * kCstep, x0[i + 2] / 2 * kCstep, x0[i + 3] / 2 * kCstep};
        const size_t cc[4] = {x1[i] / 2 * kCstep, x1[i + 1] / 2 * kCstep, x1[i + 2] / 2 * kCstep, x1[i + 3] / 2 * kCstep};
        const __m128 w = _mm_loadu_ps(wx + i);
        const __m128 yy = _mm_mul_ps(_mm_sub_ps(lerp4(y0, y1, la, lc, w), y_offset), y_scale);
        const __m128 uu = _mm_mul_ps(_mm_sub_ps(lerp4(u0, u1, ca, cc, w), c_offset), c_scale);
        const __m128 vv = _mm_mul_ps(_mm_sub_ps(lerp4(v0, v1, ca, cc, w), c_offset), c_scale);
        _mm_storeu_ps(ro + i, clamp4(_mm_add_ps(yy, _mm_mul_ps(cr_r, vv))));
        _mm_storeu_ps(go + i, clamp4(_mm_add_ps(_mm_add_ps(yy, _mm_mul_ps(cb_g, uu)), _mm_mul_ps(cr_g, vv))));
        _mm_storeu_ps(bo + i, clamp4(_mm_add_ps(yy, _mm_mul_ps(cb_b, uu))));
      }
#endif
      for (; i < n; ++i) {  // the row's last pixels (all of them without SSE2): run_yuv's formula
        const size_t a = x0[i], c = x1[i], ca = a / 2 * kCstep, cc = c / 2 * kCstep;
        const float yy = (lerp2(y0[a], y0[c], y1[a], y1[c], wx[i], ty.w1) - m.y_offset) * m.y_scale;
        const float uu = (lerp2(u0[ca], u0[cc], u1[ca], u1[cc], wx[i], ty.w1) - 128.f) * m.c_scale;
        const float vv = (lerp2(v0[ca], v0[cc], v1[ca], v1[cc], wx[i], ty.w1) - 128.f) * m.c_scale;
        ro[i] = std::clamp(yy + m.cr_r * vv, 0.f, 255.f);
        go[i] = std::clamp(yy + m.cb_g * uu + m.cr_g * vv, 0.f, 255.f);
        bo[i] = std::clamp(yy + m.cb_b * uu, 0.f, 255.f);
      }
    }
  }

  PreprocessSpec spec_;
  std::array<float, 3> scale_{}, bias_{};
  FrameInfo::Region region_{0, 0, 0, 0};  // the taps' region, orientation and stored size
  FrameInfo::Region dst_{0, 0, 0, 0};     // the part of the tensor the region is resized to
  Orientation orientation_ = Orientation::kAsStored;
  uint32_t width_ = 0, height_ = 0, par_n_ = 1, par_d_ = 1;
  bool transposed_ = false;
  std::vector<Tap> xs_, ys_;
  std::vector<uint32_t> x0_, x1_;  // xs_ as arrays, for run_yuv_rows
  std::vector<float> wx_;
  std::vector<float> row_;
};

// The frames of a batch are shared out over `threads` converters (frame i to converter i mod n):
// frames are independent, so the output is the same for any thread count.
class CpuPreprocessor final : public Preprocessor {
 public:
  CpuPreprocessor(const PreprocessSpec& spec, unsigned threads) : spec_(spec) {
    for (unsigned i = 0; i < std::max(1u, threads); ++i) converters_.emplace_back(spec);
  }

  const PreprocessSpec& spec() const override { return spec_; }
  Status run(const FrameView& frame, std::byte* out) override { return converters_[0].run(frame, out); }

  std::vector<Status> run_batch(const std::vector<FrameView>& frames, const std::vector<TensorOut>& outs) override {
    const size_t n = std::min(converters_.size(), frames.size());
    if (n <= 1) return Preprocessor::run_batch(frames, outs);
    std::vector<Status> statuses(frames.size());
    auto work = [&](size_t w) {
      for (size_t i = w; i < frames.size(); i += n) {
        statuses[i] = frames[i].device >= 0 || outs[i].device >= 0
                          ? FailedPrecondition("this preprocessor works on host memory; the frame or its tensor "
                                               "is in GPU memory")
                          : converters_[w].run(frames[i], outs[i].data);
      }
    };
    // Threads per batch rather than a pool: starting one costs tens of microseconds, a 720p frame
    // about 0.7 ms, and a batch holds several.
    std::vector<std::thread> helpers;
    helpers.reserve(n - 1);
    for (size_t w = 1; w < n; ++w) helpers.emplace_back(work, w);
    work(0);
    for (std::thread& t : helpers) t.join();
    return statuses;
  }

 private:
  PreprocessSpec spec_;
  std::deque<FrameConverter> converters_;  // deque: stable addresses, no copies
};

}  // namespace

std::unique_ptr<Preprocessor> make_cpu_preprocessor(const PreprocessSpec& spec, unsigned threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  return std::make_unique<CpuPreprocessor>(spec, threads);
}

}  // namespace vapipe
