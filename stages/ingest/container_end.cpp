#include "stages/ingest/container_end.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>

namespace vapipe {
namespace {

class FileBytes {
 public:
  explicit FileBytes(const std::string& path) : in_(path, std::ios::binary) {
    if (in_) {
      in_.seekg(0, std::ios::end);
      size_ = static_cast<uint64_t>(in_.tellg());
    }
  }
  bool ok() const { return static_cast<bool>(in_); }
  uint64_t size() const { return size_; }
  // `n` bytes at `offset`, or false when the file holds fewer.
  bool read(uint64_t offset, void* out, size_t n) {
    if (offset > size_ || size_ - offset < n) return false;
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(static_cast<char*>(out), static_cast<std::streamsize>(n));
    return static_cast<size_t>(in_.gcount()) == n;
  }

 private:
  std::ifstream in_;
  uint64_t size_ = 0;
};

uint64_t big_endian(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = v << 8 | p[i];
  return v;
}

uint64_t little_endian32(const uint8_t* p) {
  return uint64_t{p[0]} | uint64_t{p[1]} << 8 | uint64_t{p[2]} << 16 | uint64_t{p[3]} << 24;
}

bool printable_fourcc(const uint8_t* p) {
  for (int i = 0; i < 4; ++i) {
    if (p[i] < 0x20 || p[i] > 0x7e) return false;
  }
  return true;
}

constexpr size_t kMaxElements = 10'000'000;  // a bound on the walk, far above any real file

// ISO base media (MP4, MOV, 3GP): a file is a row of boxes, each [size32][type], size 1 meaning a
// 64-bit size follows and 0 "to the end of the file". Zeros where a box would start are a recorder's
// padding (files allocated ahead): the boxes end there. Anything else that does not parse as a box
// ends the walk without a verdict.
void check_iso_bmff(FileBytes& f, ContainerEnd* end) {
  uint64_t offset = 0;
  bool index = false, walked = false;  // walked: to the file's end, or to where it is cut
  for (size_t n = 0; n < kMaxElements; ++n) {
    if (offset >= f.size()) {
      walked = true;
      break;
    }
    uint8_t h[16];
    if (!f.read(offset, h, 8)) {
      end->cut_short = "it ends " + std::to_string(f.size() - offset) + " bytes into the header of a box";
      walked = true;
      break;
    }
    if (big_endian(h, 8) == 0) {
      walked = true;
      break;
    }
    if (!printable_fourcc(h + 4)) break;
    const std::string type(reinterpret_cast<const char*>(h + 4), 4);
    uint64_t size = big_endian(h, 4), header = 8;
    if (size == 1) {
      if (!f.read(offset + 8, h + 8, 8)) {
        end->cut_short = "it ends inside the header of its '" + type + "' box";
        walked = true;
        break;
      }
      size = big_endian(h + 8, 8);
      header = 16;
    } else if (size == 0) {
      size = f.size() - offset;
    }
    if (size < header) break;
    if (type == "moov" || type == "moof") index = true;
    if (size > f.size() - offset) {
      end->cut_short = "it ends " + std::to_string(f.size() - offset) + " bytes into its '" + type + "' box of " +
                       std::to_string(size) + " bytes";
      walked = true;
      break;
    }
    offset += size;
  }
  end->missing_index = walked && !index;
}

// An EBML variable-length integer at `offset`: its length in bytes, and its value without the length
// marker (`unknown` when every value bit is 1: "size unknown", as a live recording writes it).
struct Vint {
  int length = 0;
  uint64_t value = 0;
  bool unknown = false;
};

std::optional<Vint> read_vint(FileBytes& f, uint64_t offset, bool keep_marker) {
  uint8_t first;
  if (!f.read(offset, &first, 1) || first == 0) return std::nullopt;
  Vint v;
  v.length = 1;
  while (!(first & (0x80 >> (v.length - 1)))) ++v.length;
  uint8_t bytes[8] = {first};
  if (v.length > 1 && !f.read(offset + 1, bytes + 1, static_cast<size_t>(v.length - 1))) return std::nullopt;
  v.value = big_endian(bytes, v.length);
  if (!keep_marker) {
    const uint64_t bits = 7ull * static_cast<uint64_t>(v.length);
    v.value &= (uint64_t{1} << bits) - 1;
    v.unknown = v.value == (uint64_t{1} << bits) - 1;
  }
  return v;
}

// An EBML element's header at `offset`: its id (length marker kept), its size, and where its data
// starts. nullopt when there is none; `*cut` then says whether the file ends inside its size.
struct ElementHeader {
  uint64_t id = 0;
  Vint size;
  uint64_t data = 0;
  // Its data goes on past the file's last byte.
  bool runs_past(const FileBytes& f) const { return data > f.size() || size.value > f.size() - data; }
  uint64_t bytes_there(const FileBytes& f) const { return f.size() - std::min(data, f.size()); }
};

std::optional<ElementHeader> read_element_header(FileBytes& f, uint64_t offset, bool* cut) {
  *cut = false;
  auto id = read_vint(f, offset, true);
  if (!id) return std::nullopt;
  auto size = read_vint(f, offset + id->length, false);
  if (!size) {
    *cut = true;
    return std::nullopt;
  }
  return ElementHeader{id->value, *size, offset + id->length + size->length};
}

// Matroska and WebM: an EBML header, then the Segment with its size (or "unknown", then its children
// are walked: a cluster that runs past the end is the cut).
void check_matroska(FileBytes& f, ContainerEnd* end) {
  constexpr uint64_t kSegment = 0x18538067;
  bool cut = false;
  const auto header = read_element_header(f, 0, &cut);  // the EBML header
  if (cut) end->cut_short = "it ends inside the header of its first elements";
  if (!header || header->size.unknown) return;
  const auto segment = read_element_header(f, header->data + header->size.value, &cut);
  if (cut) end->cut_short = "it ends inside the header of its first elements";
  if (!segment || segment->id != kSegment) return;
  // Its segment info (before the first cluster, after a seek head): a Duration, or none.
  constexpr uint64_t kInfo = 0x1549A966, kDuration = 0x4489, kCluster = 0x1F43B675;
  uint64_t at = segment->data;
  for (size_t n = 0; at < f.size() && n < 16; ++n) {
    bool info_cut = false;
    const auto element = read_element_header(f, at, &info_cut);
    if (!element || element->size.unknown || element->id == kCluster) break;
    if (element->id == kInfo) {
      bool has_duration = false;
      uint64_t field = element->data;
      for (size_t k = 0; field < element->data + element->size.value && k < 64; ++k) {
        const auto child = read_element_header(f, field, &info_cut);
        if (!child || child->size.unknown) break;
        has_duration = has_duration || child->id == kDuration;
        field = child->data + child->size.value;
      }
      end->duration_unknown = !has_duration;
      break;
    }
    at = element->data + element->size.value;
  }
  if (!segment->size.unknown) {
    if (segment->runs_past(f)) {
      end->cut_short = "it ends " + std::to_string(segment->bytes_there(f)) + " bytes into its Matroska segment of " +
                       std::to_string(segment->size.value) + " bytes";
    }
    return;
  }
  // The segment's size is unknown: its children's sizes say whether the last one is whole.
  uint64_t child = segment->data;
  for (size_t n = 0; child < f.size() && n < kMaxElements; ++n) {
    const auto element = read_element_header(f, child, &cut);
    if (cut) end->cut_short = "it ends inside the header of an element of its Matroska segment";
    if (!element || element->size.unknown) return;  // a cluster of unknown size: nothing to go by
    if (element->runs_past(f)) {
      end->cut_short = "it ends " + std::to_string(element->bytes_there(f)) + " bytes into an element of " +
                       std::to_string(element->size.value) + " bytes (a cluster, most likely) of its Matroska segment";
      return;
    }
    child = element->data + element->size.value;
  }
}

// AVI: one RIFF 'AVI ' chunk, then 'AVIX' ones above 1 GB (OpenDML), each [RIFF][size LE32][form],
// padded to an even length. A size of 0 is a writer that never came back to fill it in: no verdict.
void check_avi(FileBytes& f, ContainerEnd* end) {
  uint64_t offset = 0;
  for (size_t n = 0; offset < f.size() && n < kMaxElements; ++n) {
    uint8_t h[8];
    if (!f.read(offset, h, 8) || std::string(reinterpret_cast<const char*>(h), 4) != "RIFF") return;
    const uint64_t size = little_endian32(h + 4);
    if (size == 0) return;
    const uint64_t chunk = 8 + size + (size & 1);
    if (chunk > f.size() - offset) {
      end->cut_short = "it ends " + std::to_string(f.size() - offset - 8) + " bytes into its RIFF chunk of " +
                       std::to_string(size) + " bytes";
      return;
    }
    offset += chunk;
  }
}

}  // namespace

ContainerEnd check_container_end(const std::string& path) {
  ContainerEnd end;
  FileBytes f(path);
  std::array<uint8_t, 12> head{};
  if (!f.ok() || !f.read(0, head.data(), head.size())) return end;
  const std::string type(reinterpret_cast<const char*>(head.data() + 4), 4);
  if (type == "ftyp" || type == "moov" || type == "mdat" || type == "free" || type == "skip" || type == "wide" ||
      type == "pnot" || type == "styp") {
    end.container = "MP4";
    check_iso_bmff(f, &end);
  } else if (big_endian(head.data(), 4) == 0x1A45DFA3) {
    end.container = "Matroska";
    check_matroska(f, &end);
  } else if (std::string(reinterpret_cast<const char*>(head.data()), 4) == "RIFF" &&
             std::string(reinterpret_cast<const char*>(head.data() + 8), 4) == "AVI ") {
    end.container = "AVI";
    check_avi(f, &end);
  } else {
    // MPEG-TS (188-byte packets) or M2TS/Blu-ray (192: a 4-byte timestamp first): sync bytes 0x47 in
    // step. A recorder writes whole packets.
    for (const uint64_t packet : {uint64_t{188}, uint64_t{192}}) {
      const uint64_t first = packet - 188;
      uint8_t a = 0, b = 0, c = 0;
      if (f.size() >= first + 2 * packet + 1 && f.read(first, &a, 1) && f.read(first + packet, &b, 1) &&
          f.read(first + 2 * packet, &c, 1) && a == 0x47 && b == 0x47 && c == 0x47) {
        end.container = "MPEG-TS";
        if (const uint64_t over = f.size() % packet; over != 0) {
          end.cut_short = "it ends " + std::to_string(over) + " bytes into a " + std::to_string(packet) +
                          "-byte packet";
        }
        break;
      }
    }
  }
  return end;
}

std::string unreadable_recording(const std::string& path) {
  FileBytes f(path);
  char head[4];
  if (!f.ok() || !f.read(0, head, 4) || std::string(head, 4) != "DHAV") return "";
  return "it is a Dahua DAV recording ('DHAV' frames), which GStreamer cannot read: export it as MP4 or AVI from the "
         "recorder or Dahua's player, or remux it without re-encoding: ffmpeg -i in.dav -c copy out.mp4";
}

std::string describe_unidentified_file(const std::string& path) {
  FileBytes f(path);
  char head[16];
  const size_t n = f.ok() ? static_cast<size_t>(std::min<uint64_t>(sizeof head, f.size())) : 0;
  if (n == 0 || !f.read(0, head, n)) return "";
  if (n >= 4 && std::string(head, 4) == "IMKH") {
    return "it is a Hikvision recording with its own header ('IMKH'), which GStreamer does not take: export it "
           "as MP4 from the recorder or Hikvision's player, or remux it: ffmpeg -i in.mp4 -c copy out.mp4";
  }
  std::string shown;
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(head[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      shown += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      shown += hex;
    }
  }
  return "it does not look like a video: its first bytes are \"" + shown + "\"";
}

std::string describe_container_end(const ContainerEnd& end) {
  if (end.missing_index) {
    std::string text =
        "it is an MP4/QuickTime file without its index (no 'moov' box, which a recorder writes when it "
        "finishes the file): the recording did not finish (the recorder stopped or lost power) or the copy is "
        "cut short, and none of its frames can be found without that index (untrunc rebuilds one from a whole "
        "file of the same camera)";
    if (!end.cut_short.empty()) text += "; " + end.cut_short;
    return text;
  }
  if (end.cut_short.empty()) return "";
  return "the file is cut short: " + end.cut_short +
         " (a recording that did not finish, or a copy cut short); its results end where it does";
}

}  // namespace vapipe
