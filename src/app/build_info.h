#pragma once
// The version, the revision and the build's date and compiler, for
// --version, /api/v1/status/buildinfo, the User-Agent and the start-up log.
// Only build_info.cc sees the revision (src/app/CMakeLists.txt): every commit
// changes it, and a define on the whole module recompiled all of tw_app's
// sources for each one.

namespace trainwatch::app {

extern const char kVersion[];
extern const char kRevision[];
extern const char kBranch[];
extern const char kBuildDate[];
extern const char kCompiler[];

}  // namespace trainwatch::app
