#include "pipeline/job_layout.h"

namespace vapipe {

JobLayout make_job_layout(const Config& config, const std::string& job_id) {
  JobLayout l;
  l.job_id = job_id;
  l.run_dir = "/tmp/vapipe-" + job_id;
  l.by_reference = config.transport.mode == TransportMode::kShm;
  l.frame_pool = "/vapipe-" + job_id + "-frames";
  l.tensor_pool = "/vapipe-" + job_id + "-tensors";
  int port = 5551;
  for (StageKind k : {StageKind::kPreprocess, StageKind::kBatch, StageKind::kInfer, StageKind::kPublish}) {
    auto it = config.transport.endpoints.find(k);
    if (it != config.transport.endpoints.end()) {
      l.input_endpoint[k] = it->second;
    } else if (l.by_reference) {
      l.input_endpoint[k] = "ipc://" + l.run_dir + "/" + stage_kind_name(k) + ".sock";
    } else {
      l.input_endpoint[k] = "tcp://127.0.0.1:" + std::to_string(port);
    }
    ++port;
  }
  return l;
}

}  // namespace vapipe
