// The preprocessing kernel's own code, one output pixel at a time: what each CUDA thread computes
// (cuda_preprocessor.cu launches it) and how its parameters are made from a frame. No CUDA includes:
// under nvcc the pixel functions are __host__ __device__, under a plain C++ compiler they are host
// code, so tests run the very same functions on the CPU, thread by thread (tests/stages/preprocess/
// kernel_on_host.h), and check the kernel's indexing and arithmetic against the CPU reference on
// machines without a GPU. The arithmetic follows cpu_preprocessor.cpp step for step.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "pipeline/message.h"
#include "stages/preprocess/preprocessor.h"

#if defined(__CUDACC__)
#define VAPIPE_HOST_DEVICE __host__ __device__
#else
#define VAPIPE_HOST_DEVICE
#endif

namespace vapipe {
namespace preprocess_kernel {

// One frame's work: where it is, how to read it, where its tensor goes.
struct KernelParams {
  const uint8_t* src;
  void* dst;
  int format;  // PixelFormat
  int in_w, in_h;    // the region read (streams[].roi; the whole frame by default), upright
  int in_x, in_y;    // its top left corner, in the upright picture
  int frame_w, frame_h;  // the frame as stored
  int dst_x, dst_y, dst_w, dst_h;  // the part of the tensor the region is resized to (output_rect)
  bool transpose, mirror_x, mirror_y;  // upright to stored (OrientationMap)
  int stride0, stride1, stride2;
  size_t offset0, offset1, offset2;
  float y_scale, y_offset, c_scale, cr_r, cb_g, cr_g, cb_b;
};

// What every frame of a launch shares: the output size and normalisation.
struct OutputParams {
  int out_w, out_h;
  float scale[3], bias[3];  // per output channel
  bool half;
  bool bgr;  // output channels B, G, R
  float pad[3];  // R, G, B (0..255) of the tensor outside a frame's rectangle (resize: letterbox)
};

// a * (b + 0.5) without a fused multiply-add on the GPU, as the CPU computes it.
VAPIPE_HOST_DEVICE inline float source_coordinate(float scale, int d) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(scale, __fadd_rn(static_cast<float>(d), 0.5f)) - 0.5f;
#else
  return scale * (static_cast<float>(d) + 0.5f) - 0.5f;
#endif
}

// Source index and weight along one axis, as torch's upsample_bilinear2d (align_corners=False).
VAPIPE_HOST_DEVICE inline void tap(float scale, int d, int in, int* i0, int* i1, float* w1) {
  const float src = fmaxf(source_coordinate(scale, d), 0.0f);
  const int i = static_cast<int>(src);
  *i0 = i;
  *i1 = i + (i < in - 1 ? 1 : 0);
  *w1 = src - static_cast<float>(i);
}

VAPIPE_HOST_DEVICE inline float lerp2(float a, float b, float c, float d, float wx, float wy) {
  const float top = a + (b - a) * wx;
  const float bottom = c + (d - c) * wx;
  return top + (bottom - top) * wy;
}

// Where the upright picture's pixel (ux, uy) is stored (OrientationMap, pipeline/message.h).
VAPIPE_HOST_DEVICE inline void to_stored(const KernelParams& p, int ux, int uy, int* sx, int* sy) {
  const int x = p.transpose ? uy : ux, y = p.transpose ? ux : uy;
  *sx = p.mirror_x ? p.frame_w - 1 - x : x;
  *sy = p.mirror_y ? p.frame_h - 1 - y : y;
}

// A chroma plane's sample for the luma pixel (x, y) (4:2:0; `step` 2 for NV12's interleaved plane).
VAPIPE_HOST_DEVICE inline float chroma_at(const uint8_t* plane, int stride, int step, int x, int y) {
  return plane[static_cast<size_t>(y / 2) * stride + (x / 2) * step];
}

// The frame's RGB (0..255) at pixel (dx, dy) of its rectangle in the tensor (dst_w x dst_h: the whole
// tensor but with letterbox), bilinear over its region.
VAPIPE_HOST_DEVICE inline void sample(const KernelParams& p, int dx, int dy, float rgb[3]) {
  const uint8_t* src = p.src;
  int x0, x1, y0, y1;
  float wx, wy;
  tap(static_cast<float>(p.in_w) / static_cast<float>(p.dst_w), dx, p.in_w, &x0, &x1, &wx);
  tap(static_cast<float>(p.in_h) / static_cast<float>(p.dst_h), dy, p.in_h, &y0, &y1, &wy);
  x0 += p.in_x;  // taps within the region, as if it were the whole image; then where it is in the picture
  x1 += p.in_x;
  y0 += p.in_y;
  y1 += p.in_y;
  // The four neighbours, a (x0, y0), b (x1, y0), c (x0, y1), q (x1, y1), where they are stored.
  int ax, ay, bx, by, cx, cy, qx, qy;
  to_stored(p, x0, y0, &ax, &ay);
  to_stored(p, x1, y0, &bx, &by);
  to_stored(p, x0, y1, &cx, &cy);
  to_stored(p, x1, y1, &qx, &qy);
  if (p.format == static_cast<int>(PixelFormat::kRGB)) {
    const uint8_t* base = src + p.offset0;
    const uint8_t* pa = base + static_cast<size_t>(ay) * p.stride0 + ax * 3;
    const uint8_t* pb = base + static_cast<size_t>(by) * p.stride0 + bx * 3;
    const uint8_t* pc = base + static_cast<size_t>(cy) * p.stride0 + cx * 3;
    const uint8_t* pd = base + static_cast<size_t>(qy) * p.stride0 + qx * 3;
    for (int c = 0; c < 3; ++c) rgb[c] = lerp2(pa[c], pb[c], pc[c], pd[c], wx, wy);
  } else {
    const bool nv12 = p.format == static_cast<int>(PixelFormat::kNV12);
    const uint8_t* yp = src + p.offset0;
    const uint8_t* up = src + p.offset1;
    const uint8_t* vp = nv12 ? src + p.offset1 + 1 : src + p.offset2;
    const int ys = p.stride0, us = p.stride1, vs = nv12 ? p.stride1 : p.stride2, step = nv12 ? 2 : 1;
    const float yy = (lerp2(yp[static_cast<size_t>(ay) * ys + ax], yp[static_cast<size_t>(by) * ys + bx],
                            yp[static_cast<size_t>(cy) * ys + cx], yp[static_cast<size_t>(qy) * ys + qx], wx, wy) -
                      p.y_offset) * p.y_scale;
    const float uu = (lerp2(chroma_at(up, us, step, ax, ay), chroma_at(up, us, step, bx, by),
                            chroma_at(up, us, step, cx, cy), chroma_at(up, us, step, qx, qy), wx, wy) - 128.f) *
                     p.c_scale;
    const float vv = (lerp2(chroma_at(vp, vs, step, ax, ay), chroma_at(vp, vs, step, bx, by),
                            chroma_at(vp, vs, step, cx, cy), chroma_at(vp, vs, step, qx, qy), wx, wy) - 128.f) *
                     p.c_scale;
    rgb[0] = fminf(fmaxf(yy + p.cr_r * vv, 0.f), 255.f);
    rgb[1] = fminf(fmaxf(yy + p.cb_g * uu + p.cr_g * vv, 0.f), 255.f);
    rgb[2] = fminf(fmaxf(yy + p.cb_b * uu, 0.f), 255.f);
  }
}

// What one thread computes: the normalised values of output pixel (ox, oy) of frame `p`, in the
// tensor's channel order (value[c] goes to output_index(o, c, ox, oy)). (ox, oy) inside the tensor.
VAPIPE_HOST_DEVICE inline void output_pixel(const KernelParams& p, const OutputParams& o, int ox, int oy,
                                            float value[3]) {
  float rgb[3];
  if (ox < p.dst_x || oy < p.dst_y || ox >= p.dst_x + p.dst_w || oy >= p.dst_y + p.dst_h) {
    for (int c = 0; c < 3; ++c) rgb[c] = o.pad[c];  // letterbox's margin
  } else {
    sample(p, ox - p.dst_x, oy - p.dst_y, rgb);
  }
  if (o.bgr) {
    const float red = rgb[0];
    rgb[0] = rgb[2];
    rgb[2] = red;
  }
  for (int c = 0; c < 3; ++c) value[c] = rgb[c] * o.scale[c] + o.bias[c];
}

// Where channel c of output pixel (ox, oy) lies in a frame's CHW tensor, in elements.
VAPIPE_HOST_DEVICE inline size_t output_index(const OutputParams& o, int c, int ox, int oy) {
  return static_cast<size_t>(c) * o.out_w * o.out_h + static_cast<size_t>(oy) * o.out_w + ox;
}

// Host code from here on: the parameters the host makes for each launch.

inline OutputParams output_params(const PreprocessSpec& spec) {
  OutputParams o{};
  o.out_w = static_cast<int>(spec.out_width);
  o.out_h = static_cast<int>(spec.out_height);
  for (int c = 0; c < 3; ++c) {
    o.scale[c] = 1.f / (255.f * spec.std[c]);  // (v / 255 - mean) / std == v * scale + bias
    o.bias[c] = -spec.mean[c] / spec.std[c];
    o.pad[c] = spec.pad_rgb[c];
  }
  o.half = spec.dtype == DType::kFloat16;
  o.bgr = spec.bgr;
  return o;
}

// A frame's parameters, `src` and `dst` left for the caller: the picture preprocessing reads (one
// field of an interlaced frame), its region, how it is turned, its planes and colour matrix, and the
// rectangle of the tensor it is resized to (the CPU reference's output_rect).
inline KernelParams frame_params(const PreprocessSpec& spec, const FrameInfo& decoded) {
  const FrameInfo i = field_picture(decoded);
  KernelParams p{};
  p.format = static_cast<int>(i.format);
  const FrameInfo::Region region = i.region();
  p.in_w = static_cast<int>(region.width);
  p.in_h = static_cast<int>(region.height);
  p.in_x = static_cast<int>(region.x);
  p.in_y = static_cast<int>(region.y);
  p.frame_w = static_cast<int>(i.width);
  p.frame_h = static_cast<int>(i.height);
  const FrameInfo::Region dst = output_rect(spec, decoded);  // by the shape shown, not the field's rows
  p.dst_x = static_cast<int>(dst.x);
  p.dst_y = static_cast<int>(dst.y);
  p.dst_w = static_cast<int>(dst.width);
  p.dst_h = static_cast<int>(dst.height);
  const OrientationMap map = orientation_map(i.orientation);
  p.transpose = map.transpose;
  p.mirror_x = map.mirror_x;
  p.mirror_y = map.mirror_y;
  p.stride0 = static_cast<int>(i.stride[0]);
  p.stride1 = static_cast<int>(i.stride[1]);
  p.stride2 = static_cast<int>(i.stride[2]);
  p.offset0 = i.offset[0];
  p.offset1 = i.offset[1];
  p.offset2 = i.offset[2];
  const float kr = i.matrix == ColorMatrix::kBT709 ? 0.2126f : 0.299f;
  const float kb = i.matrix == ColorMatrix::kBT709 ? 0.0722f : 0.114f;
  const float kg = 1.f - kr - kb;
  p.y_scale = i.full_range ? 1.f : 255.f / 219.f;
  p.y_offset = i.full_range ? 0.f : 16.f;
  p.c_scale = i.full_range ? 1.f : 255.f / 224.f;
  p.cr_r = 2.f * (1.f - kr);
  p.cb_b = 2.f * (1.f - kb);
  p.cb_g = -2.f * kb * (1.f - kb) / kg;
  p.cr_g = -2.f * kr * (1.f - kr) / kg;
  return p;
}

}  // namespace preprocess_kernel
}  // namespace vapipe
