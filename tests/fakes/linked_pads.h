// A GStreamer source pad linked to a sink pad that records the timestamps of what reaches it, buffers
// one by one and in lists: a pad to put a probe on (ingest's decoder probes) and push through, without
// an element. Active, with its stream-start, optional caps and a TIME segment already pushed.
#pragma once

#include <gst/gst.h>

#include <string>
#include <vector>

namespace vapipe::testing {

class LinkedPads {
 public:
  explicit LinkedPads(const std::string& stream_id, const char* caps = nullptr) {
    gst_init(nullptr, nullptr);
    src_ = gst_pad_new("src", GST_PAD_SRC);
    sink_ = gst_pad_new("sink", GST_PAD_SINK);
    g_object_set_data(G_OBJECT(sink_), "linked-pads", this);
    gst_pad_set_chain_function(sink_, [](GstPad* pad, GstObject*, GstBuffer* b) {
      of(pad).arrived_.push_back(GST_BUFFER_PTS(b));
      if (GST_BUFFER_FLAG_IS_SET(b, GST_BUFFER_FLAG_CORRUPTED)) of(pad).corrupted_.push_back(GST_BUFFER_PTS(b));
      gst_buffer_unref(b);
      return GST_FLOW_OK;
    });
    gst_pad_set_chain_list_function(sink_, [](GstPad* pad, GstObject*, GstBufferList* list) {
      LinkedPads& self = of(pad);
      ++self.lists_;
      for (guint i = 0; i < gst_buffer_list_length(list); ++i) {
        self.arrived_.push_back(GST_BUFFER_PTS(gst_buffer_list_get(list, i)));
      }
      gst_buffer_list_unref(list);
      return GST_FLOW_OK;
    });
    linked_ = gst_pad_link(src_, sink_) == GST_PAD_LINK_OK;
    gst_pad_set_active(sink_, TRUE);
    gst_pad_set_active(src_, TRUE);
    gst_pad_push_event(src_, gst_event_new_stream_start(stream_id.c_str()));
    if (caps) {
      GstCaps* c = gst_caps_from_string(caps);
      gst_pad_push_event(src_, gst_event_new_caps(c));
      gst_caps_unref(c);
    }
    push_segment();
  }
  ~LinkedPads() {
    gst_pad_set_active(src_, FALSE);
    gst_pad_set_active(sink_, FALSE);
    gst_object_unref(src_);
    gst_object_unref(sink_);
  }
  LinkedPads(const LinkedPads&) = delete;
  LinkedPads& operator=(const LinkedPads&) = delete;

  bool linked() const { return linked_; }
  GstPad* src() const { return src_; }
  GstPad* sink() const { return sink_; }
  // The timestamps of the buffers that reached the sink pad, in order, and how many lists brought some.
  const std::vector<GstClockTime>& arrived() const { return arrived_; }
  // Of those (pushed one by one), the ones marked GST_BUFFER_FLAG_CORRUPTED.
  const std::vector<GstClockTime>& corrupted() const { return corrupted_; }
  int lists() const { return lists_; }

  // A new TIME segment from 0 (after a flush, as a seek's).
  void push_segment() {
    GstSegment segment;
    gst_segment_init(&segment, GST_FORMAT_TIME);
    gst_pad_push_event(src_, gst_event_new_segment(&segment));
  }
  // A flushing seek's events: flush-start, flush-stop, a new segment.
  void flush() {
    gst_pad_push_event(src_, gst_event_new_flush_start());
    gst_pad_push_event(src_, gst_event_new_flush_stop(TRUE));
    push_segment();
  }

 private:
  static LinkedPads& of(GstPad* pad) { return *static_cast<LinkedPads*>(g_object_get_data(G_OBJECT(pad), "linked-pads")); }

  GstPad* src_ = nullptr;
  GstPad* sink_ = nullptr;
  bool linked_ = false;
  std::vector<GstClockTime> arrived_;
  std::vector<GstClockTime> corrupted_;
  int lists_ = 0;
};

}  // namespace vapipe::testing
