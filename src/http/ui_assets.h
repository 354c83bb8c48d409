#pragma once
// The web UI's built files (web/), embedded into the binary by the build:
// web/build_assets.py generates the table that tw_ui compiles.

#include <cstddef>
#include <span>
#include <string_view>

namespace trainwatch::http {

struct UiAsset {
  std::string_view path;          // "/index.html", "/assets/index-3f2a.js"
  std::string_view content_type;  // from the file extension
  const unsigned char* data;
  size_t size;
  bool immutable;  // content-hashed name: cacheable forever
};

// Every embedded file, sorted by path; empty when built with TW_BUILD_UI=OFF.
std::span<const UiAsset> UiAssets();

}  // namespace trainwatch::http
