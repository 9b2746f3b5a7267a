// What ingest needs to keep NVDEC output on the GPU (no CUDA or gst-cuda headers here).
//
// nvcodec decoders (nvh264dec, nvh265dec, ...) write into GstCudaMemory that belongs to a CUDA context
// GStreamer asks its application for. We answer with the CUDA runtime's primary context of the lane's
// GPU, the one our pools, kernels and LibTorch use, so a decoded frame's device pointer can be copied
// into a device pool slot (or to the host) with ordinary runtime calls and no host round trip.
// Built from nvdec_support.cpp with the CUDA toolkit and gstreamer-cuda-1.0, else from the stub.
#pragma once

#include <gst/gst.h>

#include <string>

namespace vapipe {

// Whether this build can decode into CUDA memory (toolkit and gstreamer-cuda-1.0 at build time).
bool nvdec_built_in();

// Raises the rank of the nvcodec decoders present above software decoders, so that decodebin picks
// them; returns the names of those found (empty: none is registered, e.g. no driver or no plugin).
std::string prefer_nvdec_decoders();

// Answers CUDA context requests of `pipeline`'s elements with the primary context of `gpu`.
// False with `why` when the context cannot be had.
bool share_cuda_context(GstElement* pipeline, int gpu, std::string* why);

// Whether `buffer` holds CUDA device memory (GstCudaMemory), by memory type name: no gst-cuda needed.
inline bool is_cuda_buffer(GstBuffer* buffer) {
  GstMemory* mem = buffer ? gst_buffer_peek_memory(buffer, 0) : nullptr;
  return mem && gst_memory_is_type(mem, "gst.cuda.memory");
}

// The GstMapFlags bit that maps GstCudaMemory as a device pointer (GST_MAP_CUDA).
inline constexpr int kGstMapCuda = GST_MAP_FLAG_LAST << 1;

}  // namespace vapipe
