#include "tsdb/index/block_meta.h"

#include <nlohmann/json.hpp>

#include "base/file.h"

namespace trainwatch::index {

using nlohmann::ordered_json;

std::string EncodeBlockMeta(const BlockMeta& m) {
  ordered_json j;
  j["version"] = m.version;
  j["ulid"] = m.id;
  j["minTime"] = m.mint;
  j["maxTime"] = m.maxt;
  j["stats"] = {{"numSeries", m.num_series}, {"numSamples", m.num_samples}, {"numChunks", m.num_chunks}};
  j["compaction"] = {{"level", m.compaction_level}, {"sources", m.sources}};
  j["seq"] = m.seq;
  return j.dump(2) + "\n";
}

namespace {

template <typename T>
bool GetInt(const ordered_json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return false;
  if constexpr (std::is_unsigned_v<T>) {
    if (!it->is_number_unsigned()) return false;
    const uint64_t v = it->get<uint64_t>();
    if (v > std::numeric_limits<T>::max()) return false;
    *out = static_cast<T>(v);
  } else {
    *out = it->get<T>();
  }
  return true;
}

}  // namespace

Result<BlockMeta> DecodeBlockMeta(std::string_view json) {
  ordered_json j = ordered_json::parse(json, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::Corruption("block meta: malformed json");
  BlockMeta m;
  auto bad = [](std::string_view f) { return Status::Corruption("block meta: missing or invalid \"" + std::string(f) + "\""); };
  if (!GetInt(j, "version", &m.version)) return bad("version");
  if (m.version != 1) return Status::Corruption("block meta: unsupported version " + std::to_string(m.version));
  auto id = j.find("ulid");
  if (id == j.end() || !id->is_string()) return bad("ulid");
  m.id = id->get<std::string>();
  if (!GetInt(j, "minTime", &m.mint)) return bad("minTime");
  if (!GetInt(j, "maxTime", &m.maxt)) return bad("maxTime");
  if (m.mint > m.maxt) return Status::Corruption("block meta: minTime after maxTime");
  auto st = j.find("stats");
  if (st == j.end() || !st->is_object()) return bad("stats");
  if (!GetInt(*st, "numSeries", &m.num_series)) return bad("stats.numSeries");
  if (!GetInt(*st, "numSamples", &m.num_samples)) return bad("stats.numSamples");
  if (!GetInt(*st, "numChunks", &m.num_chunks)) return bad("stats.numChunks");
  auto cp = j.find("compaction");
  if (cp == j.end() || !cp->is_object()) return bad("compaction");
  if (!GetInt(*cp, "level", &m.compaction_level)) return bad("compaction.level");
  auto src = cp->find("sources");
  if (src == cp->end() || !src->is_array()) return bad("compaction.sources");
  for (const auto& s : *src) {
    if (!s.is_string()) return bad("compaction.sources");
    m.sources.push_back(s.get<std::string>());
  }
  if (!GetInt(j, "seq", &m.seq)) return bad("seq");
  return m;
}

Result<BlockMeta> ReadBlockMeta(const std::string& dir) {
  const std::string path = dir + "/" + std::string(kBlockMetaFile);
  std::string data;
  RETURN_IF_ERROR(file::ReadFile(path, &data));
  Result<BlockMeta> m = DecodeBlockMeta(data);
  if (!m.ok()) return m.error().Annotate(path);
  return m;
}

Status WriteBlockMeta(const std::string& dir, const BlockMeta& m) {
  return file::WriteFileAtomic(dir + "/" + std::string(kBlockMetaFile), EncodeBlockMeta(m));
}

}  // namespace trainwatch::index
