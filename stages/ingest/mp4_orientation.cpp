#include "stages/ingest/mp4_orientation.h"

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>

namespace vapipe {

namespace {

constexpr int32_t kOne = 0x10000;  // 1.0 in the matrix's 16.16 fixed point

// The rotation and mirror part of a track's matrix (a, b, c, d) and its translation (x, y) in 16.16,
// for a picture stored W x H: [x' y'] = [x y] [[a b] [c d]] + [tx ty] maps a stored pixel to where it
// is shown (ISO/IEC 14496-12, 8.3.2; QuickTime's), as orientation_map() (pipeline/message.h) turns it.
struct Matrix {
  int32_t a, b, c, d;
  bool tx_width, tx_height, ty_width, ty_height;  // which of the stored size the translation takes
};

Matrix matrix_of(Orientation turn) {
  switch (turn) {
    case Orientation::kAsStored: return {kOne, 0, 0, kOne, false, false, false, false};
    case Orientation::kRotate90: return {0, kOne, -kOne, 0, false, true, false, false};   // (H - y, x)
    case Orientation::kRotate180: return {-kOne, 0, 0, -kOne, true, false, false, true};  // (W - x, H - y)
    case Orientation::kRotate270: return {0, -kOne, kOne, 0, false, false, true, false};  // (y, W - x)
    case Orientation::kFlipHorizontal: return {-kOne, 0, 0, kOne, true, false, false, false};  // (W - x, y)
    case Orientation::kFlipVertical: return {kOne, 0, 0, -kOne, false, false, false, true};    // (x, H - y)
    case Orientation::kTranspose: return {0, kOne, kOne, 0, false, false, false, false};       // (y, x)
    case Orientation::kTransverse: return {0, -kOne, -kOne, 0, false, true, true, false};      // (H - y, W - x)
  }
  return matrix_of(Orientation::kAsStored);
}

uint64_t big_endian(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

void put_big_endian(uint32_t v, unsigned char* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (24 - 8 * i));
}

struct Box {
  uint64_t start = 0;   // of its header
  uint64_t body = 0;    // where its content begins
  uint64_t end = 0;     // one past its last byte
  std::string type;
};

class Mp4File {
 public:
  explicit Mp4File(const std::string& path, bool write)
      : path_(path), in_(path, std::ios::binary | std::ios::in | (write ? std::ios::out : std::ios::in)) {}

  Status open_status() {
    if (!in_) return NotFound("file " + path_ + " cannot be opened");
    std::error_code ec;
    size_ = std::filesystem::file_size(path_, ec);
    if (ec) return NotFound("file " + path_ + ": " + ec.message());
    return Status::Ok();
  }
  uint64_t size() const { return size_; }

  // The box whose header is at `at`, inside [.., within_end).
  Result<Box> box_at(uint64_t at, uint64_t within_end) {
    unsigned char header[16];
    if (!read(at, header, 8)) return DataLoss("file " + path_ + " ends inside a box header");
    Box box;
    box.start = at;
    box.type.assign(reinterpret_cast<const char*>(header + 4), 4);
    uint64_t size = big_endian(header, 4);
    box.body = at + 8;
    if (size == 1) {
      if (!read(at + 8, header + 8, 8)) return DataLoss("file " + path_ + " ends inside a box header");
      size = big_endian(header + 8, 8);
      box.body = at + 16;
    } else if (size == 0) {
      size = within_end - at;  // to the end of what holds it
    }
    if (size < box.body - at || at > within_end || size > within_end - at) {  // (at + size may wrap)
      return DataLoss("file " + path_ + ": its '" + box.type + "' box at byte " + std::to_string(at) +
                      " runs past the end of what holds it (a file cut short?)");
    }
    box.end = at + size;
    return box;
  }

  // The first box of `type` directly inside [from, to).
  Result<std::optional<Box>> find(const std::string& type, uint64_t from, uint64_t to) {
    for (uint64_t at = from; at + 8 <= to;) {
      VAPIPE_ASSIGN_OR_RETURN(Box box, box_at(at, to));
      if (box.type == type) return std::optional<Box>(box);
      at = box.end;
    }
    return std::optional<Box>();
  }

  bool read(uint64_t at, unsigned char* into, size_t n) {
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(at));
    in_.read(reinterpret_cast<char*>(into), static_cast<std::streamsize>(n));
    return static_cast<size_t>(in_.gcount()) == n;
  }
  bool write(uint64_t at, const unsigned char* from, size_t n) {
    in_.clear();
    in_.seekp(static_cast<std::streamoff>(at));
    in_.write(reinterpret_cast<const char*>(from), static_cast<std::streamsize>(n));
    in_.flush();
    return static_cast<bool>(in_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::fstream in_;
  uint64_t size_ = 0;
};

// Where the first video track's header keeps its matrix (36 bytes), followed by its picture's width and
// height (16.16).
Result<uint64_t> video_track_matrix(Mp4File& file) {
  // An MP4 (or a QuickTime file) begins with its file type box.
  const Result<Box> first = file.box_at(0, file.size());
  if (!first.ok() || first->type != "ftyp") {
    return InvalidArgument("file " + file.path() + " is not an MP4 (it does not begin with an 'ftyp' box)");
  }
  VAPIPE_ASSIGN_OR_RETURN(std::optional<Box> moov, file.find("moov", 0, file.size()));
  if (!moov) return DataLoss("file " + file.path() + " has no index (no 'moov' box: its writer did not finish it?)");
  for (uint64_t at = moov->body; at + 8 <= moov->end;) {
    VAPIPE_ASSIGN_OR_RETURN(std::optional<Box> trak, file.find("trak", at, moov->end));
    if (!trak) break;
    at = trak->end;
    VAPIPE_ASSIGN_OR_RETURN(std::optional<Box> tkhd, file.find("tkhd", trak->body, trak->end));
    if (!tkhd) continue;
    unsigned char version = 0;
    if (!file.read(tkhd->body, &version, 1)) return DataLoss("file " + file.path() + " ends inside a track header");
    // version and flags; times, track id, reserved, duration (32 or 64 bits); reserved, layer,
    // alternate group, volume, reserved.
    const uint64_t matrix = tkhd->body + 4 + (version == 1 ? 32 : 20) + 16;
    if (matrix + 36 + 8 > tkhd->end) return DataLoss("file " + file.path() + ": a track header is too short");
    unsigned char size[8];
    if (!file.read(matrix + 36, size, 8)) return DataLoss("file " + file.path() + " ends inside a track header");
    if (big_endian(size, 4) != 0 && big_endian(size + 4, 4) != 0) return matrix;  // a picture: video
  }
  return NotFound("file " + file.path() + " has no video track");
}

}  // namespace

Status set_mp4_orientation(const std::string& path, Orientation turn) {
  Mp4File file(path, /*write=*/true);
  VAPIPE_RETURN_IF_ERROR(file.open_status());
  VAPIPE_ASSIGN_OR_RETURN(uint64_t at, video_track_matrix(file));
  unsigned char size[8];
  if (!file.read(at + 36, size, 8)) return DataLoss("file " + path + " ends inside a track header");
  const auto width = static_cast<uint32_t>(big_endian(size, 4)), height = static_cast<uint32_t>(big_endian(size + 4, 4));
  const Matrix m = matrix_of(turn);
  const uint32_t tx = m.tx_width ? width : m.tx_height ? height : 0;
  const uint32_t ty = m.ty_width ? width : m.ty_height ? height : 0;
  const std::array<uint32_t, 9> values{static_cast<uint32_t>(m.a), static_cast<uint32_t>(m.b), 0,
                                       static_cast<uint32_t>(m.c), static_cast<uint32_t>(m.d), 0,
                                       tx, ty, 0x40000000u};  // w: 1.0 in 2.30
  std::array<unsigned char, 36> bytes{};
  for (size_t i = 0; i < values.size(); ++i) put_big_endian(values[i], bytes.data() + 4 * i);
  if (!file.write(at, bytes.data(), bytes.size())) return Internal("file " + path + ": its track header cannot be written");
  return Status::Ok();
}

Result<Orientation> mp4_orientation(const std::string& path) {
  Mp4File file(path, /*write=*/false);
  VAPIPE_RETURN_IF_ERROR(file.open_status());
  VAPIPE_ASSIGN_OR_RETURN(uint64_t at, video_track_matrix(file));
  unsigned char bytes[36];
  if (!file.read(at, bytes, sizeof bytes)) return DataLoss("file " + path + " ends inside a track header");
  auto entry = [&](int i) { return static_cast<int32_t>(static_cast<uint32_t>(big_endian(bytes + 4 * i, 4))); };
  const int32_t a = entry(0), b = entry(1), c = entry(3), d = entry(4);
  for (int i = 0; i < 8; ++i) {
    const auto turn = static_cast<Orientation>(i);
    const Matrix m = matrix_of(turn);
    if (m.a == a && m.b == b && m.c == c && m.d == d) return turn;
  }
  return InvalidArgument("file " + path + ": its video track's matrix is not a turn or a mirror (a scale or a shear)");
}

}  // namespace vapipe
