// Owning pointers for GStreamer objects (elements, buses): unreferenced when they go.
#pragma once

#include <gst/gst.h>

#include <memory>

namespace vapipe {

struct GstObjectUnref {
  void operator()(gpointer p) const {
    if (p) gst_object_unref(p);
  }
};
using GstElementPtr = std::unique_ptr<GstElement, GstObjectUnref>;
using GstBusPtr = std::unique_ptr<GstBus, GstObjectUnref>;

}  // namespace vapipe
