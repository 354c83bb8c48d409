#include "fuzz_util.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>

namespace trainwatch::fuzz {

namespace {
std::string* scratch = nullptr;
void RemoveScratch() {
  std::error_code ec;
  std::filesystem::remove_all(*scratch, ec);
}
}  // namespace

const std::string& ScratchDir() {
  if (scratch == nullptr) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/tw_fuzz_XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    scratch = new std::string(tmpl);
    std::atexit(RemoveScratch);
  }
  return *scratch;
}

void WriteScratchFile(const std::string& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror(path.c_str());
    std::abort();
  }
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n <= 0) {
      std::perror(path.c_str());
      std::abort();
    }
    off += static_cast<size_t>(n);
  }
  ::close(fd);
}

}  // namespace trainwatch::fuzz
