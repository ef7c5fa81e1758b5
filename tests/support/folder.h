// folder.h — a fresh, empty directory for one test, and what the program
// under test left in it: the names (temporary files included) and the bytes.
#pragma once

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/run_program.h"

namespace dpt_test {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

/// Created empty under the temp dir, removed with everything in it at the end.
struct Folder {
  std::string path;
  explicit Folder(const std::string& name) : path(temp_path(name)) {
    std::system(("rm -rf '" + path + "' && mkdir -p '" + path + "'").c_str());
  }
  ~Folder() { std::system(("chmod -R u+rwx '" + path + "' 2>/dev/null; rm -rf '" + path + "'").c_str()); }  // a test may leave it read-only
  Folder(const Folder&) = delete;
  Folder& operator=(const Folder&) = delete;
  std::string operator/(const std::string& name) const { return path + "/" + name; }
  /// Every entry's name, sorted.
  std::vector<std::string> entries() const;
};

/// Every entry's name in the folder `path`, sorted (none when it does not exist).
inline std::vector<std::string> entries_in(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = ::opendir(path.c_str());
  while (dirent* e = dir ? ::readdir(dir) : nullptr)
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
  if (dir) ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

inline std::vector<std::string> Folder::entries() const { return entries_in(path); }

}  // namespace dpt_test
