// A real encoder's frames as a decoder takes them: `frames` of videotestsrc's ball at 320x240 (or the
// caps given), encoded by a gst-launch pipeline into a file, then read back by `read_back` (a demuxer
// and a parser) into an appsink, in decoding order, with the caps they came with. For the tests of
// what ingest reads in compressed frames (key frames, references lost).
#pragma once

#include <gst/gst.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace vapipe::testing {

class EncodedFrames {
 public:
  // `encode`: what follows the raw test source (encoder, parser, muxer); `read_back`: what follows a
  // filesrc of the file up to the appsink (demuxer, parser). The file is written at `path`.
  EncodedFrames(const std::string& path, const std::string& encode, const std::string& read_back, int frames,
                const std::string& raw_caps = "video/x-raw,width=320,height=240,framerate=30/1,format=I420") {
    gst_init(nullptr, nullptr);
    const std::string command = "gst-launch-1.0 -q videotestsrc pattern=ball num-buffers=" + std::to_string(frames) +
                                " ! " + raw_caps + " ! " + encode + " ! filesink location=" + path;
    if (std::system(command.c_str()) != 0) {
      error_ = "failed: " + command;
      return;
    }
    GError* error = nullptr;
    GstElement* pipeline =
        gst_parse_launch(("filesrc location=" + path + " ! " + read_back + " ! appsink name=out sync=false").c_str(), &error);
    if (error) {
      error_ = error->message;
      g_error_free(error);
    }
    if (!pipeline) return;
    GstElement* out = gst_bin_get_by_name(GST_BIN(pipeline), "out");
    gst_element_set_state(pipeline, GST_STATE_PLAYING);
    while (GstSample* sample = pull(out)) {
      buffers_.push_back(gst_buffer_ref(gst_sample_get_buffer(sample)));
      if (!caps_) caps_ = gst_caps_ref(gst_sample_get_caps(sample));
      gst_sample_unref(sample);
    }
    gst_element_set_state(pipeline, GST_STATE_NULL);
    gst_object_unref(out);
    gst_object_unref(pipeline);
  }
  ~EncodedFrames() {
    for (GstBuffer* b : buffers_) gst_buffer_unref(b);
    if (caps_) gst_caps_unref(caps_);
  }
  EncodedFrames(const EncodedFrames&) = delete;
  EncodedFrames& operator=(const EncodedFrames&) = delete;

  const std::vector<GstBuffer*>& buffers() const { return buffers_; }
  GstCaps* caps() const { return caps_; }
  // Empty, or what went wrong making or reading the file.
  const std::string& error() const { return error_; }

 private:
  static GstSample* pull(GstElement* appsink) {
    GstSample* sample = nullptr;
    g_signal_emit_by_name(appsink, "pull-sample", &sample);
    return sample;
  }
  std::vector<GstBuffer*> buffers_;
  GstCaps* caps_ = nullptr;
  std::string error_;
};

}  // namespace vapipe::testing
