#pragma once

#include <string>
#include <vector>

namespace vapipe::cli {

// Each returns the process exit status.
int run_command(const std::vector<std::string>& args, const std::string& self_exe);
int stage_command(const std::vector<std::string>& args);
int sub_command(const std::vector<std::string>& args);
int keygen_command(const std::vector<std::string>& args);
int status_command(const std::vector<std::string>& args);  // 0: the job answered; 2: it did not
int bench_command(const std::vector<std::string>& args);
int validate_command(const std::vector<std::string>& args);
// 0: the job took the reload; 1: it refused it (nothing changed), a bad argument, or no job; 2: the
// job did not say within the time what became of it.
int reload_command(const std::vector<std::string>& args);
int doctor_command(const std::vector<std::string>& args);  // 0: nothing failed, 1: some check failed
int segments_command(const std::vector<std::string>& args);  // 0, or 1 for a bad argument or file
// 0: streams listed (with --open: some opened); 1: a bad argument; 2: no camera answered; 3: cameras
// answered, no stream listed (or, with --open, none opened).
int discover_command(const std::vector<std::string>& args);

}  // namespace vapipe::cli
