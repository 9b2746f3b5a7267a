// MPEG-TS video frames cut short at their end by packets lost (a file's damaged sectors, a UDP or SRT
// stream's lost datagrams, a recording cut), found from the packets' continuity counters as they reach
// tsdemux. tsdemux finds a gap itself inside a PES (it warns, and drops the frame: the codec's own
// numbering then shows the frame missing, see decoder_input_gate.h), but not at a packet that starts a
// PES: the PES before it, whose last packets were lost, goes on to the decoder cut short, with nothing
// said and nothing missing, and the decoder conceals its end and the frames after it (measured with
// tools/damage-truth.py: most of the smeared pictures no mark found). This watch reads the packets in
// front of tsdemux, and tells which PES (by its PTS) was cut so; the frame tsdemux sends for it is then
// marked DISCONT, as a depayloader marks a camera's frame that lost a packet. Not at a join of files put
// end to end (`cat`): the video's decoding time goes back or jumps there, or the PAT's counter starts
// over with the video's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

namespace vapipe {

class TsTailLossWatch {
 public:
  // The next bytes of the transport stream, in any chunks (188-byte packets, or 192 as M2TS files
  // have). `discontinuous`: they do not follow the bytes before (a seek, a demuxer reading the file's
  // end first, another HLS segment): no continuity is expected across.
  void feed(const uint8_t* data, size_t size, bool discontinuous);

  // A frame tsdemux sent on the pad of `pid`, at `pts_ns` (its time, which is the PES's PTS less an
  // offset of tsdemux's own, learnt from the first): whether its PES lost its last packets, and whether
  // a PES before it that tsdemux did not send (dropped: packets lost inside it) was a key frame's, as
  // its first packet said (random_access_indicator, which muxers set on a key frame's PES). A lost
  // key frame harms every frame to the next one, and an H.264 IDR frame's loss need not show in
  // frame_num (it starts over at the IDR: lost, the frame after it may number on from the frame before).
  // The PESs before it are forgotten.
  struct SentFrame {
    bool cut_short = false;
    bool after_lost_key_frame = false;
  };
  SentFrame sent(uint16_t pid, uint64_t pts_ns);
  bool cut_short(uint16_t pid, uint64_t pts_ns) { return sent(pid, pts_ns).cut_short; }

  // The PID in a tsdemux pad's name ("video_0_0041" -> 0x41), if it has one.
  static std::optional<uint16_t> pid_of_pad(const char* name);

 private:
  struct Pes {
    uint64_t pts_ns;  // its PTS (90 kHz) in nanoseconds
    bool key = false;  // its first packet's random_access_indicator
    bool cut_short = false;
  };
  struct Pid {
    std::optional<uint8_t> last_cc;   // the continuity counter of its last packet with a payload
    std::deque<Pes> pes;              // the video PESs seen and not yet sent, in order
    bool in_pes = false;              // the last PES's packets are coming
    std::optional<int64_t> offset_ns; // a sent frame's time less its PES's PTS
    std::optional<uint64_t> last_dts; // its last PES's decoding time (90 kHz): its DTS, or its PTS without
  };
  void packet(const uint8_t* p);
  std::mutex mutex_;
  std::vector<uint8_t> carry_;  // the start of a packet cut by the chunk's end
  size_t packet_size_ = 0;      // 188 or 192 (0: not yet synced)
  size_t sync_at_ = 0;          // where the sync byte sits in a packet (4 in M2TS)
  std::map<uint16_t, Pid> pids_;
  std::optional<uint8_t> pat_cc_;  // the PAT's last continuity counter
  bool pat_restarted_ = false;     // it started over since the last video PES began: a join, not a loss
};

}  // namespace vapipe
