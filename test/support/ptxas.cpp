#include "support/ptxas.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace nimble::testing {

std::string find_ptxas() {
  if (std::system("command -v ptxas >/dev/null 2>&1") == 0) return "ptxas";
  for (const char* p : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"})
    if (std::filesystem::exists(p)) return p;
  return "";
}

PtxasResult run_ptxas(const std::string& ptxas, const std::string& ptx, const std::string& arch) {
  static std::atomic<int> next{0};
  const std::filesystem::path base = std::filesystem::temp_directory_path() /
                                     ("nimble_ptxas_" + std::to_string(::getpid()) + "_" + std::to_string(next++));
  const std::filesystem::path source = base.string() + ".ptx";
  const std::filesystem::path log = base.string() + ".log";
  {
    std::ofstream out(source);
    out << ptx;
  }
  const std::string command =
      ptxas + " -arch=" + arch + " " + source.string() + " -o /dev/null >" + log.string() + " 2>&1";
  const int status = std::system(command.c_str());
  PtxasResult result;
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(log);
  std::ostringstream text;
  text << in.rdbuf();
  result.log = text.str();
  std::filesystem::remove(source);
  std::filesystem::remove(log);
  return result;
}

}  // namespace nimble::testing
