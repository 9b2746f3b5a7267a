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

// Raises the rank of the nvcodec decoders present (those of every GPU: nvh264dec is the first GPU's,
// nvh264device1dec or the like another's) above software decoders, so that decodebin picks them;
// returns the names of those found (empty: none is registered, e.g. no driver or no plugin). Which
// GPU's decoder a stream gets is its reader's choice (autoplug-select, nvdec_decoder_gpu).
std::string prefer_nvdec_decoders();

// Whether NVDEC decodes a stream of these (parsed, compressed) caps into NV12, the one CUDA format ingest
// takes: not for more than 8 bits a sample (nvcodec then gives P010 or P016) nor for 4:2:2 or 4:4:4
// chroma (Y444...), which a CPU decoder and videoconvert turn into what preprocess reads. `why` says
// what the stream is, for a log line. From h264parse's, h265parse's and the demuxers' caps fields.
inline bool nvdec_decodes_to_nv12(const GstCaps* caps, std::string* why) {
  if (!caps || gst_caps_get_size(caps) == 0) return true;
  const GstStructure* s = gst_caps_get_structure(caps, 0);
  guint depth = 0;
  if (gst_structure_get_uint(s, "bit-depth-luma", &depth) && depth > 8) {
    *why = std::to_string(depth) + "-bit video";
    return false;
  }
  const gchar* chroma = gst_structure_get_string(s, "chroma-format");
  if (chroma && std::string(chroma) != "4:2:0" && std::string(chroma) != "4:0:0") {
    *why = std::string(chroma) + " chroma";
    return false;
  }
  const gchar* profile_text = gst_structure_get_string(s, "profile");
  if (!profile_text) return true;
  const std::string profile = profile_text;
  const std::string codec = gst_structure_get_name(s);
  // H.264 high-10, high-4:2:2, high-4:4:4; H.265 main-10, main-12, main-422-10, main-444 ...; VP9 1 to 3.
  const bool beyond = codec == "video/x-vp9" ? profile != "0"
                                             : profile.find("10") != std::string::npos ||
                                                   profile.find("12") != std::string::npos ||
                                                   profile.find("422") != std::string::npos ||
                                                   profile.find("4:2:2") != std::string::npos ||
                                                   profile.find("444") != std::string::npos ||
                                                   profile.find("4:4:4") != std::string::npos;
  if (beyond) *why = "profile " + profile;
  return !beyond;
}

// Answers CUDA context requests of `pipeline`'s elements with the primary context of `gpu`.
// False with `why` when the context cannot be had.
bool share_cuda_context(GstElement* pipeline, int gpu, std::string* why);

// Waits for what GStreamer has queued on `buffer`'s CUDA memory (its decoder's writes). Needed from
// GStreamer 1.24, whose CUDA memory is stream-ordered; before it, nvcodec's decoders synchronize
// before they push a frame, and this does nothing.
void sync_cuda_buffer(GstBuffer* buffer);

// Whether `buffer` holds CUDA device memory (GstCudaMemory), by memory type name: no gst-cuda needed.
inline bool is_cuda_buffer(GstBuffer* buffer) {
  GstMemory* mem = buffer ? gst_buffer_peek_memory(buffer, 0) : nullptr;
  return mem && gst_memory_is_type(mem, "gst.cuda.memory");
}

// The GstMapFlags bit that maps GstCudaMemory as a device pointer (GST_MAP_CUDA).
inline constexpr int kGstMapCuda = GST_MAP_FLAG_LAST << 1;

}  // namespace vapipe
