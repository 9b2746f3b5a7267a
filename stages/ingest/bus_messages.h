// What ingest takes from a stream pipeline's bus besides its errors (stream_reader.cpp's
// pop_bus_error says those): the warnings it counts, and the rest, let go so that they do not pile up.
#pragma once

#include <gst/gst.h>

#include <atomic>
#include <cstdint>

namespace vapipe {

// Whether a warning on the bus is tsdemux's continuity error on a video stream's packets: packets lost
// or damaged (a broken recording, a transfer's loss), and with them frames that never reach a decoder.
bool is_video_continuity_error(GstMessage* warning);

// Goes through the messages on the bus up to its first error, which stays on the bus for the reader
// to say: video continuity errors counted in `continuity_errors`, the rest let go. A stream whose
// frames never pause is never idle for its reader to go through them otherwise, and its messages (a
// parser's bitrate tags, every few seconds) piled up for as long as its connection lasted (found
// 2026-12-06: an RTSP camera left 0.16 a second, 14,000 a day, freed only at a reconnection). Only
// one thread may take messages off `bus`.
void drain_bus_up_to_error(GstBus* bus, std::atomic<uint64_t>* continuity_errors);

}  // namespace vapipe
