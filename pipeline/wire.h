// Binary wire format of Message (version 2). A message is a list of parts: part 0 is the header
// (kind, envelope, metadata, payload descriptors), further parts carry inline payload bytes. A payload
// in a shared memory slot travels as a descriptor (pool name, slot, generation) when the transport
// allows references, so only a few dozen bytes cross the socket.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "pipeline/message.h"
#include "pipeline/shm_pool.h"
#include "pipeline/status.h"

namespace vapipe {

struct EncodedMessage {
  std::vector<std::byte> header;
  std::vector<Payload> inline_payloads;  // parts 1..n, in order
  std::vector<Payload> handed_off;       // shm payloads sent by reference: hand off after sending
};

// by_reference: shm payloads travel as descriptors; otherwise every payload is sent inline.
EncodedMessage encode_message(const Message& msg, bool by_reference);

// parts[0] is the header; parts[1..] inline payloads (wrapping the received buffers, no copy).
// Shared memory descriptors are adopted through `pools`; a malformed message is kDataLoss.
Result<Message> decode_message(std::vector<Payload> parts, ShmPoolRegistry* pools);

}  // namespace vapipe
