#include "app/build_info.h"

// TW_VERSION, TW_REVISION and TW_BRANCH come from src/app/CMakeLists.txt.
namespace trainwatch::app {

const char kVersion[] = TW_VERSION;
const char kRevision[] = TW_REVISION;
const char kBranch[] = TW_BRANCH;
const char kBuildDate[] = __DATE__ " " __TIME__;
#if defined(__clang__)
#define TW_STR2(x) #x
#define TW_STR(x) TW_STR2(x)
const char kCompiler[] = "clang " TW_STR(__clang_major__) "." TW_STR(__clang_minor__) "." TW_STR(__clang_patchlevel__);
#else
const char kCompiler[] = "gcc " __VERSION__;
#endif

}  // namespace trainwatch::app
