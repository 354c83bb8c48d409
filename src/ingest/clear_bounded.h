#pragma once
// Reusable per-thread batches: empty a buffer but keep its capacity for the
// next request of a similar size, unless it grew past a bound.

#include <cstddef>

namespace trainwatch::ingest {

// Empties *v (a vector or string); frees its storage when capacity() > max_keep.
template <typename V>
void ClearBounded(V* v, size_t max_keep) {
  if (v->capacity() > max_keep) {
    V().swap(*v);
  } else {
    v->clear();
  }
}

}  // namespace trainwatch::ingest
