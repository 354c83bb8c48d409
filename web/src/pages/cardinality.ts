// Cardinality: where the head's series come from (GET /api/v1/status/tsdb,
// Prometheus's shape), so a team finds the label that exploded: series by
// metric name and by label pair, distinct values and bytes of values by
// label name, each the `limit` largest, with a link to Explore.
import { getData } from "../api";
import { h, link } from "../dom";
import { fmtBytes, fmtNum, fmtTime } from "../format";
import type { PageContext } from "../main";
import { errorNotice } from "./common";

interface Stat {
  name: string;
  value: number;
}
interface TsdbStatus {
  headStats: { numSeries: number; numLabelPairs: number; chunkCount: number; minTime: number; maxTime: number };
  seriesCountByMetricName: Stat[];
  labelValueCountByLabelName: Stat[];
  memoryInBytesByLabelName: Stat[];
  seriesCountByLabelValuePair: Stat[];
}

const LIMITS = ["10", "20", "50", "100"];

// The PromQL that shows a row's series in Explore.
function exploreExpr(kind: string, name: string): string {
  const lit = (s: string) => JSON.stringify(s);
  switch (kind) {
    case "metric":
      return `count by (job) ({__name__=${lit(name)}})`;
    case "pair": {
      const eq = name.indexOf("=");
      return `count by (__name__) ({${name.slice(0, eq)}=${lit(name.slice(eq + 1))}})`;
    }
    default:  // a label name
      return `topk(20, count by (${name}) ({${name}!=""}))`;
  }
}

function statTable(id: string, title: string, kind: string, head: string, rows: Stat[], total: number | null,
                   fmt: (v: number) => string): HTMLElement {
  if (!rows.length) return h("section", { id }, h("h2", null, title), h("p", { class: "muted" }, "none"));
  const max = Math.max(...rows.map((r) => r.value), 1);
  return h(
    "section",
    { id },
    h("h2", null, title),
    h(
      "table",
      { class: "cardinality" },
      h("thead", null, h("tr", null, h("th", null, head), h("th", { class: "num" }, "value"),
        total !== null ? h("th", { class: "num" }, "% of series") : null, h("th", null, ""))),
      h("tbody", null, rows.map((r) =>
        h("tr", { "data-name": r.name },
          h("td", { class: "mono" }, link("/explore?" + new URLSearchParams({ q: exploreExpr(kind, r.name), tab: "table" }), r.name)),
          h("td", { class: "num" }, fmt(r.value)),
          total !== null ? h("td", { class: "num" }, total > 0 ? fmtNum((100 * r.value) / total, 3) + " %" : "–") : null,
          h("td", { class: "bar-cell" }, h("div", { class: "gauge-bar" }, h("span", { style: `width: ${(100 * r.value) / max}%` }))),
        ))),
    ),
  );
}

export async function renderCardinality(ctx: PageContext): Promise<void> {
  const { main, query } = ctx;
  const limit = LIMITS.includes(query.get("limit") ?? "") ? query.get("limit")! : "10";
  const sel = h("select", { "aria-label": "limit" }, LIMITS.map((l) => h("option", { value: l }, `top ${l}`)));
  sel.value = limit;
  sel.addEventListener("change", () => {
    const q = new URLSearchParams(query);
    q.set("limit", sel.value);
    ctx.setQuery(q);
    main.replaceChildren();
    void renderCardinality({ ...ctx, query: q });
  });
  main.append(h("h1", null, "Cardinality"), h("div", { class: "toolbar" }, sel,
    h("span", { class: "muted" }, "series in the head (the most recent hours), as Prometheus's TSDB status")));
  let d: TsdbStatus;
  try {
    d = await getData<TsdbStatus>("/api/v1/status/tsdb", { limit });
  } catch (e) {
    main.appendChild(errorNotice("TSDB status", e));
    return;
  }
  const s = d.headStats;
  const int = (v: number) => fmtNum(v, 12);
  main.append(
    h("dl", { class: "kv", id: "head-stats" },
      h("dt", null, "Series"), h("dd", { "data-field": "numSeries" }, int(s.numSeries)),
      h("dt", null, "Label pairs"), h("dd", { "data-field": "numLabelPairs" }, int(s.numLabelPairs)),
      h("dt", null, "Chunks"), h("dd", null, int(s.chunkCount)),
      h("dt", null, "From"), h("dd", null, s.numSeries > 0 ? fmtTime(s.minTime / 1000) : "–"),
      h("dt", null, "To"), h("dd", null, s.numSeries > 0 ? fmtTime(s.maxTime / 1000) : "–")),
    statTable("by-metric", "Series by metric name", "metric", "metric", d.seriesCountByMetricName, s.numSeries, int),
    statTable("by-pair", "Series by label pair", "pair", "label=value", d.seriesCountByLabelValuePair, s.numSeries, int),
    statTable("values-by-label", "Distinct values by label name", "label", "label", d.labelValueCountByLabelName, null, int),
    statTable("bytes-by-label", "Bytes of values by label name (summed over series)", "label", "label",
      d.memoryInBytesByLabelName, null, fmtBytes),
  );
}
