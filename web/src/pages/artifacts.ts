// A run's artifacts (docs/runs-api.md, "Artifacts"): the versions it logged
// and the ones it used, with their lineage (the run that produced each and
// the runs that used it) and a download link where the content is stored.
import { runArtifacts, type ArtifactVersion } from "../api";
import { h, link } from "../dom";
import { fmtBytes, fmtTime } from "../format";
import { errorNotice, sortableTable, type Column } from "./common";

interface Row {
  dir: "logged" | "used";
  v: ArtifactVersion;
}

function versionText(v: ArtifactVersion): string {
  return typeof v.version === "number" ? "v" + v.version : String(v.version);
}

function runLink(id: string, self: string): Node {
  return id === self ? h("span", { class: "muted", title: id }, "this run") : link("/runs/" + encodeURIComponent(id), id);
}

export async function artifactsSection(box: HTMLElement, runId: string): Promise<void> {
  let d: { logged: ArtifactVersion[]; used: ArtifactVersion[] };
  try {
    d = await runArtifacts(runId);
  } catch (e) {
    box.replaceChildren(errorNotice("artifacts", e));
    return;
  }
  const rows: Row[] = [...(d.logged ?? []).map((v): Row => ({ dir: "logged", v })), ...(d.used ?? []).map((v): Row => ({ dir: "used", v }))];
  if (!rows.length) {
    box.replaceChildren(h("p", { class: "muted" }, "No artifacts logged or used by this run."));
    return;
  }
  const cols: Column<Row>[] = [
    { title: "", value: (r) => r.dir, cell: (r) => h("span", { class: "badge art-" + r.dir }, r.dir) },
    { title: "name", value: (r) => r.v.name, cell: (r) => h("b", null, r.v.name) },
    { title: "type", value: (r) => r.v.type },
    { title: "version", value: (r) => (typeof r.v.version === "number" ? r.v.version : String(r.v.version)), cell: (r) => versionText(r.v) },
    { title: "size", value: (r) => r.v.size, cell: (r) => (typeof r.v.size === "number" ? fmtBytes(r.v.size) : "–"), num: true },
    { title: "sha256", value: (r) => r.v.sha256, cell: (r) => h("code", { title: r.v.sha256 }, (r.v.sha256 ?? "").slice(0, 12)) },
    { title: "created", value: (r) => r.v.created_time ?? null, cell: (r) => fmtTime(r.v.created_time) },
    { title: "produced by", value: (r) => r.v.producer ?? "", cell: (r) => (r.v.producer ? runLink(r.v.producer, runId) : "–") },
    {
      title: "used by",
      value: (r) => (r.v.consumers ?? []).length,
      cell: (r) => {
        const cs = r.v.consumers ?? [];
        if (!cs.length) return "–";
        const span = h("span", { class: "consumers" });
        cs.forEach((c, i) => {
          if (i) span.append(", ");
          span.append(runLink(c, runId));
        });
        return span;
      },
    },
    {
      title: "content",
      value: (r) => (r.v.stored && !r.v.deleted ? 2 : r.v.uri ? 1 : 0),
      cell: (r) => {
        if (r.v.stored && !r.v.deleted)
          return h("a", { href: `/api/v1/artifacts/${encodeURIComponent(String(r.v.id))}/content`, download: r.v.name, class: "art-download" }, "download");
        const where = r.v.deleted ? h("span", { class: "muted" }, "deleted") : null;
        return h("span", null, where, r.v.uri ? h("code", { class: "art-uri", title: r.v.uri }, (where ? " " : "") + r.v.uri) : where ? "" : "–");
      },
    },
  ];
  const t = sortableTable(cols, rows, {
    rowAttrs: (r) => ({ "data-artifact": r.v.name, "data-version": versionText(r.v), "data-dir": r.dir, "data-id": String(r.v.id) }),
  });
  t.id = "artifact-table";
  box.replaceChildren(t);
}
