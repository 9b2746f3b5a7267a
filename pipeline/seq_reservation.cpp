#include "pipeline/seq_reservation.h"

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
  } catch (const std::exception& e) {
    return InvalidArgument(path + ": not a sequence reservation file (" + e.what() + ")");
  }
  return table;
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
  return write_file_atomically(path_, j.dump() + "\n", 0644);
}

}  // namespace vapipe
