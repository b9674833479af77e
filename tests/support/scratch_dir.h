// A scratch folder for a test: a fresh directory of its own under the system's temporary
// directory, removed with everything in it when the object goes.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace petdaq::test {

class ScratchDir {
 public:
  // /tmp/petdaq-<label>-XXXXXX (mkdtemp): unique even among tests run in parallel, and short
  // enough for ipc:// endpoints inside it.
  explicit ScratchDir(std::string_view label = "test");
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  // Writes `text` to the file `name` in the folder; returns its path.
  std::filesystem::path write(const std::string& name, std::string_view text) const;
  // An ipc:// endpoint inside the folder: no port to collide with other tests.
  std::string ipc(const std::string& name) const { return "ipc://" + (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace petdaq::test
