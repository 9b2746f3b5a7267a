// batch.max_batch_size: auto. The infer stage measures its model at batch sizes 1, 2, 4, ... and picks
// the smallest batch that reaches nearly the best throughput: larger batches than that only add
// latency (and GPU memory) for no more frames per second. Free GPU memory bounds the search. The
// choice goes to the lane's batch stage through a small file in the job's run folder, since batch sits
// upstream of infer and the edges carry data one way.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/status.h"

namespace vapipe {

struct BatchCost {
  size_t batch = 0;
  double seconds = 0;  // one forward pass at this batch size
  double per_second() const { return seconds > 0 ? batch / seconds : 0; }
};

// The smallest measured batch whose images/s is at least `fraction` of the best measured.
size_t choose_batch_size(const std::vector<BatchCost>& costs, double fraction = 0.95);

// Whether the search should stop after `costs` (the last entry just measured): throughput has stopped
// growing (the last doubling gained under 3%), or `limit` is reached.
bool batch_search_done(const std::vector<BatchCost>& costs, size_t limit);

// Whether a batch twice the last measured one is likely to fit: the memory the model used growing from
// the first to the last measurement, doubled, must leave `reserve_bytes` free.
bool next_batch_fits(uint64_t free_before, uint64_t free_now, uint64_t reserve_bytes);

// infer.batch_shapes: padded. The batch sizes the model runs at: 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (powers
// of two and one and a half times them) below `largest`, then `largest`. A batch of n runs padded with
// zeros to the smallest of them >= n: at most half again the work, in exchange for a dozen or so input
// shapes the model has seen at start-up instead of one per batch size (cuDNN builds its execution plans,
// TorchScript its specialisations, for each new shape while frames wait).
std::vector<size_t> padded_batch_sizes(size_t largest);
// The smallest of `sizes` (ascending) that holds n; n itself when none does, or when `sizes` is empty.
size_t padded_size_for(const std::vector<size_t>& sizes, size_t n);

// "1: 812/s, 2: 1530/s, ..." for the log.
std::string describe_costs(const std::vector<BatchCost>& costs);

// The hand-over file: infer writes it (atomically), the lane's batch stage waits for it.
std::string auto_batch_file(const std::string& run_dir, uint32_t lane);
Status write_auto_batch_size(const std::string& path, size_t batch);
// Waits until `path` holds a batch size, up to `timeout_s`; kCancelled when *stop becomes true.
Result<size_t> wait_for_auto_batch_size(const std::string& path, double timeout_s, const std::atomic<bool>* stop);

}  // namespace vapipe
