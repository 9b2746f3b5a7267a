#include "pipeline/seq_reservation.h"

#include <cstdint>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "pipeline/atomic_file.h"

namespace vapipe {

std::string seq_reservation_path(const JobLayout& layout) {
  return layout.run_dir + "/seq-" + std::to_string(layout.lane) + ".json";
}

Result<std::unique_ptr<SeqReservations>> SeqReservations::open(std::string path, uint64_t block) {
  std::unique_ptr<SeqReservations> table(new SeqReservations(path, block == 0 ? 1 : block));
  std::ifstream in(path);
  if (!in) return table;  // no earlier instance reserved anything
  std::stringstream text;
  text << in.rdbuf();
  try {
    const nlohmann::json j = nlohmann::json::parse(text.str());
    for (const auto& [id, next] : j.at("streams").items()) table->reserved_[id] = next.get<uint64_t>();
    if (j.contains("ended")) {
      for (const auto& id : j.at("ended")) table->ended_.insert(id.get<std::string>());
    }
    if (j.contains("positions")) {
      for (const auto& [id, at] : j.at("positions").items()) {
        Position p{at.at("slot").get<uint32_t>(), at.at("uri").get<std::string>()};
        table->next_slot_ = std::max(table->next_slot_, p.slot + 1);
        table->positions_[id] = std::move(p);
      }
      table->next_slot_ = std::max(table->next_slot_, j.value("next_slot", 0u));
    }
  } catch (const std::exception& e) {
    return InvalidArgument(path + ": not a sequence reservation file (" + e.what() + ")");
  }
  if (!table->positions_.empty()) {
    // A slot past the file's end, or a hole, reads 0: nothing was sent from it.
    std::error_code none;
    auto bytes = std::filesystem::exists(table->positions_path(), none) ? read_file_bytes(table->positions_path())
                                                                        : Result<std::string>(std::string());
    if (!bytes.ok()) return bytes.status();
    table->earlier_sent_.resize(bytes->size() / sizeof(int64_t));
    if (!table->earlier_sent_.empty()) {  // (memcpy from an empty vector's null data() is undefined)
      std::memcpy(table->earlier_sent_.data(), bytes->data(), table->earlier_sent_.size() * sizeof(int64_t));
    }
  }
  return table;
}

SeqReservations::~SeqReservations() {
  if (positions_fd_ >= 0) ::close(positions_fd_);
}

std::string SeqReservations::positions_path() const {
  const std::string stem = path_.size() > 5 && path_.compare(path_.size() - 5, 5, ".json") == 0
                               ? path_.substr(0, path_.size() - 5)
                               : path_;
  return stem + ".positions";
}

Status SeqReservations::note_sent(const std::string& stream_id, const std::string& uri, int64_t pts_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = positions_.find(stream_id);
  if (it == positions_.end() || it->second.uri != uri || ended_.count(stream_id) > 0) {
    // A slot is never used for a second uri: the old one's timestamp could be taken for the new one's
    // should this instance crash before the first write into it.
    if (it == positions_.end() || it->second.uri != uri) {
      positions_[stream_id] = Position{next_slot_++, uri};
    }
    ended_.erase(stream_id);
    VAPIPE_RETURN_IF_ERROR(write_locked());
    it = positions_.find(stream_id);
  }
  if (positions_fd_ < 0) {
    positions_fd_ = ::open(positions_path().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (positions_fd_ < 0) return Unavailable("cannot write " + positions_path() + ": " + std::strerror(errno));
  }
  // One aligned 8-byte write: a process killed at any point leaves the old value or the new one.
  const int64_t value = pts_ns + 1;
  const off_t at = static_cast<off_t>(it->second.slot) * static_cast<off_t>(sizeof value);
  if (::pwrite(positions_fd_, &value, sizeof value, at) != static_cast<ssize_t>(sizeof value)) {
    return Unavailable("cannot write " + positions_path() + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

std::optional<int64_t> SeqReservations::last_sent(const std::string& stream_id, const std::string& uri) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = positions_.find(stream_id);
  if (it == positions_.end() || it->second.uri != uri || it->second.slot >= earlier_sent_.size()) return std::nullopt;
  const int64_t value = earlier_sent_[it->second.slot];
  if (value <= 0) return std::nullopt;
  return value - 1;
}

uint64_t SeqReservations::reserved(const std::string& stream_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = reserved_.find(stream_id);
  return it == reserved_.end() ? 0 : it->second;
}

Status SeqReservations::ensure(const std::string& stream_id, uint64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t& mark = reserved_[stream_id];
  if (seq < mark) return Status::Ok();
  mark = seq + block_;
  return write_locked();
}

Status SeqReservations::mark_ended(const std::string& stream_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!ended_.insert(stream_id).second) return Status::Ok();
  return write_locked();
}

bool SeqReservations::ended(const std::string& stream_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ended_.count(stream_id) > 0;
}

Status SeqReservations::write_locked() {
  nlohmann::json streams = nlohmann::json::object();
  for (const auto& [id, next] : reserved_) streams[id] = next;
  nlohmann::json j{{"streams", streams}};
  if (!ended_.empty()) j["ended"] = ended_;
  if (!positions_.empty()) {
    nlohmann::json at = nlohmann::json::object();
    for (const auto& [id, p] : positions_) at[id] = {{"slot", p.slot}, {"uri", p.uri}};
    j["positions"] = at;
    j["next_slot"] = next_slot_;
  }
  return write_file_atomically(path_, j.dump() + "\n", 0644);
}

}  // namespace vapipe
