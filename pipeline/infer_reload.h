// What a live job's reload changes of its `infer` section: the model and how it is run (model, labels,
// model_name, top_k, output, precision, channels_last, optimize, warmup_batches) change while the job
// runs, in each lane's running infer process, with no frame lost and no camera reconnected:
// - infer loads the reloaded model beside the one it runs (on a thread of its own, on the same device,
//   warmed up as at start) and, once it is ready, classifies every batch after that with it; the
//   results say its model_name from their first frame on;
// - a model that cannot be used (no such file, not TorchScript, its classes not its labels', labels
//   the config names that its labels file lacks) is said as an error and the running one goes on;
// - model_name and top_k alone need no new model: taken at the next batch.
// The rest of `infer` (device, threads, jit_optimize, batch_shapes, cuda_graphs) needs a restart, as
// does anything of `preprocess` and `batch` (a new model must take the input preprocess makes).
//
// As with publish's and ingest's (pipeline/publish_reload.h, ingest_reload.h), the supervisor checks a
// reload with compare_infer_sections() (through apply_stream_reload()) and writes the reloaded text as
// the job's copy of its config; infer looks at the copy's identity once a second, and a lane started
// again reads it as it starts.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeline/config.h"
#include "pipeline/status.h"

namespace vapipe {

// infer's settings that a running job takes from a reload, as the config names them.
const std::vector<std::string>& reloadable_infer_keys();
// The reloadable settings whose values differ, as the config names them ("model"). Paths are compared
// as the config reader resolved them.
std::vector<std::string> changed_infer_settings(const InferConfig& before, const InferConfig& after);
// Whether those changes need a new model loaded (any but model_name and top_k).
bool infer_change_needs_new_model(const std::vector<std::string>& keys);
// Copies the reloadable settings from `from` into `to`, the rest of `to` as it was.
void take_reloadable_infer_settings(const InferConfig& from, InferConfig& to);

struct InferReload {
  std::vector<std::string> keys;  // the reloadable settings whose text changed
  // "model", "labels": the files named as before, replaced under the same path since the job loaded
  // them (a new model copied over the old), and their paths: infer loads them again, as for a new path.
  std::vector<std::string> replaced, replaced_paths;
  // "model", "labels": named as before, not there now (the running model goes on; said as a warning).
  std::vector<std::string> missing, missing_paths;
  bool changed() const { return !keys.empty() || !replaced.empty(); }
};

// The identities (pipeline/file_identity.h) of `infer`'s model and labels files, as the supervisor saw
// them at the job's start and at each reload it took.
struct InferFileIdentities {
  std::string model, labels;
};
InferFileIdentities infer_file_identities(const InferConfig& infer);
// Notes in `change` which of `infer`'s files, their paths unchanged by the reload (not in change.keys),
// were replaced since `before`, and which are not there now.
void note_replaced_infer_files(const InferConfig& infer, const InferFileIdentities& before, InferReload& change);
// The supervisor's identities, kept in the job's run folder (run_dir/infer-files) for `vapipe validate
// --reload`, which compares the files with them as the supervisor would. nullopt: none kept (a job
// that started before 2026-12-05, stop 54) or unreadable.
Status write_infer_file_identities(const std::string& run_dir, const InferFileIdentities& identities);
std::optional<InferFileIdentities> read_infer_file_identities(const std::string& run_dir);

// Compares the `infer` sections of the running config's text and the reloaded one's. An error names the
// first setting that changed and cannot change while the job runs, with the line of the reloaded file
// (`source`) that has it; or a changed `model` or `labels` whose file is not there (`reloaded`: the
// reloaded config's, its paths resolved; null: not looked at), which infer could only refuse later.
Result<InferReload> compare_infer_sections(const std::string& running_yaml, const std::string& reloaded_yaml,
                                           const std::string& source, const InferConfig* reloaded = nullptr);

// "infer.model, infer.labels changed", "infer.model's file /models/door.pt was replaced"; empty when none
// did.
std::string describe_infer_reload(const InferReload& change);

}  // namespace vapipe
