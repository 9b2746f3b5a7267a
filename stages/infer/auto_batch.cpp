#include "stages/infer/auto_batch.h"

#include <cstdint>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

namespace vapipe {

size_t choose_batch_size(const std::vector<BatchCost>& costs, double fraction) {
  double best = 0;
  for (const BatchCost& c : costs) best = std::max(best, c.per_second());
  size_t chosen = 0;
  for (const BatchCost& c : costs) {
    if (c.per_second() >= fraction * best && (chosen == 0 || c.batch < chosen)) chosen = c.batch;
  }
  return chosen == 0 ? 1 : chosen;
}

bool batch_search_done(const std::vector<BatchCost>& costs, size_t limit) {
  if (costs.empty()) return false;
  if (costs.back().batch >= limit) return true;
  if (costs.size() < 3) return false;  // small batches are noisy: always try 1, 2 and 4
  const BatchCost& last = costs[costs.size() - 1];
  const BatchCost& before = costs[costs.size() - 2];
  return last.per_second() < 1.03 * before.per_second();
}

bool next_batch_fits(uint64_t free_before, uint64_t free_now, uint64_t reserve_bytes) {
  const uint64_t used = free_before > free_now ? free_before - free_now : 0;
  // Activations grow about linearly with the batch: doubling it needs about as much again.
  return free_now > reserve_bytes && free_now - reserve_bytes > used;
}

std::vector<size_t> padded_batch_sizes(size_t largest) {
  std::vector<size_t> sizes;
  if (largest == 0) return sizes;
  for (size_t power = 1; power < largest; power *= 2) {
    sizes.push_back(power);
    const size_t between = power + power / 2;  // 3, 6, 12, ... (none between 1 and 2)
    if (between > power && between < largest) sizes.push_back(between);
  }
  sizes.push_back(largest);
  return sizes;
}

size_t padded_size_for(const std::vector<size_t>& sizes, size_t n) {
  auto it = std::lower_bound(sizes.begin(), sizes.end(), n);
  return it == sizes.end() ? n : *it;
}

std::string describe_costs(const std::vector<BatchCost>& costs) {
  std::string s;
  char buf[64];
  for (const BatchCost& c : costs) {
    std::snprintf(buf, sizeof buf, "%s%zu: %.0f/s", s.empty() ? "" : ", ", c.batch, c.per_second());
    s += buf;
  }
  return s;
}

std::string auto_batch_file(const std::string& run_dir, uint32_t lane) {
  return run_dir + "/auto-batch-size-" + std::to_string(lane);
}

Status write_auto_batch_size(const std::string& path, size_t batch) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp);
    out << batch << "\n";
    if (!out) return Unavailable("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path, ec);  // the reader sees the whole number or nothing
  if (ec) return Unavailable("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return Status::Ok();
}

Result<size_t> wait_for_auto_batch_size(const std::string& path, double timeout_s, const std::atomic<bool>* stop) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (stop && stop->load()) return Cancelled("stopped while waiting for " + path);
    std::ifstream in(path);
    size_t batch = 0;
    if (in >> batch && batch > 0) return batch;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status(StatusCode::kTimeout, "batch.max_batch_size is auto, but infer did not write its choice to " + path +
                                          " within " + std::to_string(static_cast<int>(timeout_s)) +
                                          " s (batch and infer must share the job's run folder, i.e. one host)");
}

}  // namespace vapipe
