#define GST_USE_UNSTABLE_API 1
#include "stages/ingest/nvdec_support.h"

#include <cuda_runtime_api.h>
#include <gst/cuda/gstcudacontext.h>
#include <gst/cuda/gstcudaloader.h>
#include <gst/cuda/gstcudautils.h>

#include <cstring>
#include <map>
#include <mutex>

namespace vapipe {
namespace {

// One wrapped context per GPU per process, shared by every stream's pipeline.
struct SharedContexts {
  std::mutex mutex;
  std::map<int, GstCudaContext*> by_gpu;  // owned (one reference each), for the process lifetime
};
SharedContexts& shared_contexts() {
  static SharedContexts s;
  return s;
}

GstCudaContext* primary_context(int gpu, std::string* why) {
  SharedContexts& s = shared_contexts();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (auto it = s.by_gpu.find(gpu); it != s.by_gpu.end()) return it->second;
  if (!gst_cuda_load_library()) {
    *why = "GStreamer's CUDA library cannot load libcuda (no NVIDIA driver?)";
    return nullptr;
  }
  // Make the runtime create (or reuse) GPU `gpu`'s primary context, current on this thread; take it
  // off the thread's stack to learn its handle, then put it back.
  cudaError_t err = cudaSetDevice(gpu);
  if (err == cudaSuccess) err = cudaFree(nullptr);
  if (err != cudaSuccess) {
    *why = std::string("cannot start CUDA on GPU ") + std::to_string(gpu) + ": " + cudaGetErrorString(err);
    return nullptr;
  }
  CUcontext ctx = nullptr;
  CUdevice device = 0;
  if (CuCtxPopCurrent(&ctx) != CUDA_SUCCESS || !ctx || CuCtxPushCurrent(ctx) != CUDA_SUCCESS ||
      CuDeviceGet(&device, gpu) != CUDA_SUCCESS) {
    *why = "cannot find the primary CUDA context of GPU " + std::to_string(gpu);
    return nullptr;
  }
  GstCudaContext* wrapped = gst_cuda_context_new_wrapped(ctx, device);
  if (!wrapped) {
    *why = "gst_cuda_context_new_wrapped failed for GPU " + std::to_string(gpu);
    return nullptr;
  }
  s.by_gpu[gpu] = wrapped;
  return wrapped;
}

GstBusSyncReply on_bus_message(GstBus*, GstMessage* msg, gpointer user) {
  if (GST_MESSAGE_TYPE(msg) != GST_MESSAGE_NEED_CONTEXT) return GST_BUS_PASS;
  const gchar* type = nullptr;
  if (!gst_message_parse_context_type(msg, &type) || std::strcmp(type, GST_CUDA_CONTEXT_TYPE) != 0) {
    return GST_BUS_PASS;
  }
  auto* context = static_cast<GstCudaContext*>(user);
  GstContext* gst_context = gst_context_new_cuda_context(context);
  gst_element_set_context(GST_ELEMENT(GST_MESSAGE_SRC(msg)), gst_context);
  gst_context_unref(gst_context);
  return GST_BUS_PASS;
}

}  // namespace

bool nvdec_built_in() { return true; }

std::string prefer_nvdec_decoders() {
  static std::once_flag once;
  static std::string found;
  std::call_once(once, [] {
    for (const char* name : {"nvh264dec", "nvh265dec", "nvvp8dec", "nvvp9dec", "nvav1dec", "nvmpeg2videodec",
                             "nvmpeg4videodec", "nvjpegdec"}) {
      GstElementFactory* f = gst_element_factory_find(name);
      if (!f) continue;
      gst_plugin_feature_set_rank(GST_PLUGIN_FEATURE(f), GST_RANK_PRIMARY + 100);
      gst_object_unref(f);
      found += (found.empty() ? "" : ", ") + std::string(name);
    }
  });
  return found;
}

bool share_cuda_context(GstElement* pipeline, int gpu, std::string* why) {
  GstCudaContext* context = primary_context(gpu, why);
  if (!context) return false;
  GstBus* bus = gst_element_get_bus(pipeline);
  gst_bus_set_sync_handler(bus, &on_bus_message, context, nullptr);
  gst_object_unref(bus);
  return true;
}

}  // namespace vapipe
