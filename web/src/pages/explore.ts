// Explore: a PromQL editor with completion (metric names, label names and
// values, functions), graph (query_range) and table (instant query) views;
// the query, range and view live in the URL so it can be shared. Native
// histograms show as a heatmap per series (graph) or bars (table).
import { getData, instantQuery, rangeQuery, seriesPoints, type PromSeries } from "../api";
import { lineChart, PALETTE } from "../chart";
import { h } from "../dom";
import { fmtNum, fmtTime, labelsText, parseDuration, unitOf } from "../format";
import { histogramBars, histogramHeatmap, type HistView } from "../histogram";
import type { PageContext } from "../main";
import { AGGREGATIONS, FUNCTIONS, KEYWORDS } from "../promql";
import { errorNotice } from "./common";

interface Suggestion {
  text: string;
  kind: string;
}

export function renderExplore(ctx: PageContext): () => void {
  const { main, query } = ctx;
  let expr = query.get("q") ?? "";
  let rangeText = query.get("range") ?? "1h";
  let tab = query.get("tab") === "table" ? "table" : "graph";

  const ta = h("textarea", { id: "promql", "data-search": true, rows: 2, spellcheck: "false", "aria-label": "PromQL expression", "aria-autocomplete": "list", placeholder: "PromQL, e.g. rate(node_cpu_seconds_total[5m])  — Ctrl+Enter runs, Tab completes" });
  ta.value = expr;
  const list = h("ul", { class: "completions", role: "listbox", hidden: true });
  const rangeIn = h("input", { value: rangeText, size: 6, "aria-label": "range (e.g. 1h)", title: "range: 5m, 1h, 6h, 2d ..." });
  const runBtn = h("button", { type: "button", class: "primary" }, "Run");
  const tabs = h("div", { class: "tabs", role: "tablist" });
  const out = h("div", { id: "explore-out" });
  main.append(h("h1", null, "Explore"), h("div", { class: "toolbar" }, h("div", { class: "editor" }, ta, list), h("label", { class: "inline" }, "range", rangeIn), runBtn), tabs, out);

  // Completion vocabulary, loaded once.
  let metricNames: string[] = [];
  let labelNames: string[] = [];
  const labelValues = new Map<string, string[]>();
  void getData<string[]>("/api/v1/label/__name__/values").then((v) => (metricNames = v)).catch(() => {});
  void getData<string[]>("/api/v1/labels").then((v) => (labelNames = v)).catch(() => {});

  let items: Suggestion[] = [];
  let sel = 0;
  let tokenStart = 0;
  const closeList = () => {
    list.hidden = true;
    items = [];
  };
  const showList = () => {
    list.replaceChildren(
      ...items.map((s, i) => {
        const li = h("li", { role: "option", "aria-selected": String(i === sel) }, s.text, h("small", null, s.kind));
        li.addEventListener("mousedown", (e) => {
          e.preventDefault();
          sel = i;
          accept();
        });
        return li;
      }),
    );
    list.hidden = items.length === 0;
    (list.children[sel] as HTMLElement | undefined)?.scrollIntoView({ block: "nearest" });
  };
  const complete = async () => {
    const pos = ta.selectionStart;
    const before = ta.value.slice(0, pos);
    const m = /[a-zA-Z_:][a-zA-Z0-9_:]*$/.exec(before);
    const word = m ? m[0] : "";
    tokenStart = pos - word.length;
    // Inside {...}: label names, or values after label=" .
    const open = before.lastIndexOf("{"), close = before.lastIndexOf("}");
    const inBraces = open > close;
    const valueCtx = /([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)$/.exec(before);
    let cands: Suggestion[] = [];
    if (inBraces && valueCtx) {
      const name = valueCtx[1];
      if (!labelValues.has(name)) {
        try {
          labelValues.set(name, await getData<string[]>(`/api/v1/label/${encodeURIComponent(name)}/values`));
        } catch {
          labelValues.set(name, []);
        }
      }
      tokenStart = pos - valueCtx[3].length;
      cands = labelValues.get(name)!.filter((v) => v.startsWith(valueCtx[3])).map((v) => ({ text: v, kind: "value" }));
    } else if (inBraces) {
      if (!word && !/[{,]\s*$/.test(before)) return closeList();
      cands = labelNames.filter((l) => l.startsWith(word)).map((l) => ({ text: l, kind: "label" }));
    } else {
      if (!word) return closeList();
      const low = word.toLowerCase();
      cands = [
        ...FUNCTIONS.filter((f) => f.startsWith(low)).map((f) => ({ text: f, kind: "function" })),
        ...AGGREGATIONS.filter((f) => f.startsWith(low)).map((f) => ({ text: f, kind: "aggregation" })),
        ...KEYWORDS.filter((f) => f.startsWith(low)).map((f) => ({ text: f, kind: "keyword" })),
        ...metricNames.filter((n) => n.toLowerCase().includes(low)).map((n) => ({ text: n, kind: "metric" })),
      ];
    }
    items = cands.filter((c) => c.text !== word).slice(0, 50);
    sel = 0;
    showList();
  };
  const accept = () => {
    const s = items[sel];
    if (!s) return;
    const pos = ta.selectionStart;
    const suffix = s.kind === "function" || s.kind === "aggregation" ? "(" : "";
    ta.value = ta.value.slice(0, tokenStart) + s.text + suffix + ta.value.slice(pos);
    const caret = tokenStart + s.text.length + suffix.length;
    ta.setSelectionRange(caret, caret);
    closeList();
    ta.focus();
  };
  ta.addEventListener("input", () => void complete());
  ta.addEventListener("blur", () => setTimeout(closeList, 150));
  ta.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      closeList();
      void runQuery();
      return;
    }
    if (list.hidden) {
      if (e.key === "Enter" && !e.shiftKey) {
        e.preventDefault();
        void runQuery();
      }
      return;
    }
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      sel = (sel + (e.key === "ArrowDown" ? 1 : items.length - 1)) % items.length;
      showList();
    } else if (e.key === "Tab" || e.key === "Enter") {
      e.preventDefault();
      accept();
    } else if (e.key === "Escape") {
      e.preventDefault();
      closeList();
    }
  });

  const drawTabs = () => {
    tabs.replaceChildren(
      ...(["graph", "table"] as const).map((t) => {
        const b = h("button", { type: "button", role: "tab", "aria-selected": String(tab === t) }, t === "graph" ? "Graph" : "Table");
        b.addEventListener("click", () => {
          tab = t;
          drawTabs();
          void runQuery();
        });
        return b;
      }),
    );
  };
  drawTabs();

  // The histogram views drawn (their resize observers), dropped on each run.
  let views: HistView[] = [];
  const dropViews = () => {
    for (const v of views) v.destroy();
    views = [];
  };

  const runQuery = async () => {
    dropViews();
    expr = ta.value.trim();
    rangeText = rangeIn.value.trim() || "1h";
    const q = new URLSearchParams();
    if (expr) q.set("q", expr);
    q.set("range", rangeText);
    q.set("tab", tab);
    ctx.setQuery(q);
    if (!expr) {
      out.replaceChildren(h("p", { class: "muted" }, "Type a PromQL expression and press Enter."));
      return;
    }
    const range = parseDuration(rangeText);
    if (range === null || range <= 0) {
      out.replaceChildren(errorNotice("range", new Error(`"${rangeText}" is not a duration like 1h or 30m`)));
      return;
    }
    out.replaceChildren(h("div", { class: "muted" }, "running…"));
    try {
      if (tab === "table") {
        const r = await instantQuery(expr);
        out.replaceChildren(resultTable(r.resultType, r.result));
        if (r.resultType === "vector") {
          (r.result as PromSeries[]).forEach((s, i) => {
            const hist = seriesPoints(s).hists[0];
            if (hist && views.length < MAX_HIST_VIEWS) views.push(histogramBars(out, hist[1], { title: labelsText(s.metric) || expr, color: PALETTE[i % PALETTE.length] }));
          });
        }
      } else {
        const end = Date.now() / 1000;
        const step = Math.max(1, Math.round(range / 250));
        const r = await rangeQuery(expr, end - range, end, step);
        const series = r.resultType === "matrix" ? (r.result as PromSeries[]) : [];
        const points = series.map((s) => ({ s, ...seriesPoints(s) }));
        const floats = points.filter((p) => p.floats.length > 0);
        const hists = points.filter((p) => p.hists.length > 0);
        const notes = [`${series.length} series`];
        if (hists.length) notes.push(`${hists.length} with native histograms`);
        if (hists.length > MAX_HIST_VIEWS) notes.push(`heatmaps of the first ${MAX_HIST_VIEWS}`);
        out.replaceChildren(h("div", { class: "muted" }, `${notes.join(", ")} · step ${step}s`));
        if (floats.length || !hists.length) {
          const name = series[0]?.metric.__name__ ?? expr;
          lineChart(out, {
            xKind: "time",
            unit: unitOf(name),
            height: 320,
            lines: floats.map((p) => ({ label: labelsText(p.s.metric) || expr, x: p.floats.map((v) => v[0]), y: p.floats.map((v) => v[1]) })),
          });
        }
        for (const p of hists.slice(0, MAX_HIST_VIEWS)) {
          views.push(histogramHeatmap(out, p.hists, { title: labelsText(p.s.metric) || expr, start: end - range, end, step }));
        }
      }
    } catch (e) {
      out.replaceChildren(errorNotice("query", e));
    }
  };
  runBtn.addEventListener("click", () => void runQuery());
  if (expr) void runQuery();
  else out.appendChild(h("p", { class: "muted" }, "Type a PromQL expression and press Enter."));
  return dropViews;
}

// Heatmaps (or bars) drawn for at most this many histogram series.
const MAX_HIST_VIEWS = 20;

function resultTable(type: string, result: unknown): HTMLElement {
  if (type === "scalar" || type === "string") {
    const [t, v] = result as [number, string];
    return h("table", { id: "result-table" }, h("tbody", null, h("tr", null, h("td", null, type), h("td", { class: "num", "data-value": v }, v), h("td", { class: "muted" }, fmtTime(t)))));
  }
  const series = result as PromSeries[];
  if (!series.length) return h("p", { class: "muted" }, "Empty result.");
  return h(
    "table",
    { id: "result-table" },
    h("thead", null, h("tr", null, h("th", null, "series"), h("th", { class: "num" }, "value"))),
    h("tbody", null, series.map((s) => {
      const hist = seriesPoints(s).hists.at(-1);
      if (hist && !s.value && !s.values?.length) {
        const text = `histogram: count ${fmtNum(hist[1].count)}, sum ${fmtNum(hist[1].sum)}, ${hist[1].buckets.length} buckets`;
        return h("tr", { "data-kind": "histogram" }, h("td", { class: "mono" }, labelsText(s.metric) || "{}"), h("td", { class: "num", "data-value": String(hist[1].count) }, text));
      }
      const v = s.value ? s.value[1] : s.values?.[s.values.length - 1]?.[1] ?? "";
      return h("tr", null, h("td", { class: "mono" }, labelsText(s.metric) || "{}"), h("td", { class: "num", "data-value": v }, v));
    })),
  );
}
