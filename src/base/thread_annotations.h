#pragma once

// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html).
// The ASan build compiles with clang and -Wthread-safety (errors, as every
// warning): a member marked TW_GUARDED_BY(mu_) read or written without mu_
// held fails the build. Under g++ (the release build) they expand to nothing.
//
// Use with base::Mutex / base::MutexLock (base/mutex.h): std::mutex carries no
// capability attribute in libstdc++, so the analysis cannot see it.

#if defined(__clang__)
#define TW_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TW_THREAD_ANNOTATION(x)
#endif

// On a member: read and written only with the given mutex held.
#define TW_GUARDED_BY(x) TW_THREAD_ANNOTATION(guarded_by(x))
// On a pointer member: the pointee is guarded (the pointer itself is not).
#define TW_PT_GUARDED_BY(x) TW_THREAD_ANNOTATION(pt_guarded_by(x))
// On a function: the caller holds these mutexes (exclusively / shared).
#define TW_REQUIRES(...) TW_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define TW_REQUIRES_SHARED(...) TW_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// On a function: the caller must not hold these (the function takes them).
#define TW_EXCLUDES(...) TW_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a mutex: the lock order (taken after / before these).
#define TW_ACQUIRED_AFTER(...) TW_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define TW_ACQUIRED_BEFORE(...) TW_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
// On lock and unlock functions.
#define TW_ACQUIRE(...) TW_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define TW_ACQUIRE_SHARED(...) TW_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define TW_RELEASE(...) TW_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TW_RELEASE_SHARED(...) TW_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define TW_RELEASE_GENERIC(...) TW_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define TW_TRY_ACQUIRE(...) TW_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// On a function returning without a lock held that the analysis cannot
// prove; tells it the capability is held from here on.
#define TW_ASSERT_CAPABILITY(x) TW_THREAD_ANNOTATION(assert_capability(x))
// On classes: a lock type, and an RAII holder of one.
#define TW_CAPABILITY(x) TW_THREAD_ANNOTATION(capability(x))
#define TW_SCOPED_CAPABILITY TW_THREAD_ANNOTATION(scoped_lockable)
// The escape hatch: a function the analysis cannot follow (say why beside it).
#define TW_NO_THREAD_SAFETY_ANALYSIS TW_THREAD_ANNOTATION(no_thread_safety_analysis)
