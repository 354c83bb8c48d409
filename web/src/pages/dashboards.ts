// Dashboards: renders Grafana dashboard JSON (graph/timeseries, stat, gauge,
// heatmap panels with Prometheus targets, legendFormat, template variables)
// against this server. The default training dashboards ship in
// web/dashboards/*.json; any other Grafana JSON can be loaded from a file.
import { getData, instantQuery, num, rangeQuery, type PromSeries } from "../api";
import { heatMap, lineChart } from "../chart";
import { h, link, notice } from "../dom";
import { labelsText, legendFormat, parseDuration, withUnit } from "../format";
import type { PageContext } from "../main";
import { errorNotice } from "./common";

interface Target {
  expr?: string;
  legendFormat?: string;
  refId?: string;
  hide?: boolean;
  instant?: boolean;
}
interface Panel {
  type: string;
  title?: string;
  gridPos?: { x: number; y: number; w: number; h: number };
  targets?: Target[];
  panels?: Panel[];
  fieldConfig?: { defaults?: { unit?: string; min?: number; max?: number; decimals?: number } };
  yaxes?: { format?: string }[];
  options?: { reduceOptions?: { calcs?: string[] } };
  description?: string;
}
interface Variable {
  name: string;
  type: string;
  query?: string | { query?: string };
  options?: { text: string; value: string }[];
  current?: { text?: string | string[]; value?: string | string[] };
  includeAll?: boolean;
  multi?: boolean;
  label?: string;
}
interface Dashboard {
  title?: string;
  uid?: string;
  panels?: Panel[];
  rows?: { title?: string; panels: Panel[] }[];
  templating?: { list?: Variable[] };
  time?: { from?: string; to?: string };
}

const shipped = import.meta.glob("../../dashboards/*.json", { eager: true, import: "default" }) as Record<string, Dashboard>;
const SHIPPED: Record<string, Dashboard> = Object.fromEntries(
  Object.entries(shipped).map(([p, d]) => [p.split("/").pop()!.replace(/\.json$/, ""), d]),
);
const CUSTOM_KEY = "tw-dashboard-custom";

// Grafana unit ids -> our unit strings (format.ts).
export function grafanaUnit(u: string | undefined): string {
  switch (u) {
    case "percent": return "%";
    case "percentunit": return "ratio";
    case "s": case "seconds": return "s";
    case "ms": return "ms";
    case "bytes": case "decbytes": return "B";
    case "mbytes": case "decmbytes": return "MiB";
    case "celsius": return "°C";
    case "watt": return "W";
    case "ops": case "reqps": return "/s";
    case undefined: case "short": case "none": case "": return "";
    default: return u;
  }
}

function allPanels(d: Dashboard): Panel[] {
  const out: Panel[] = [];
  for (const p of d.panels ?? []) {
    out.push(p);
    if (p.type === "row" && p.panels) out.push(...p.panels);
  }
  for (const r of d.rows ?? []) {
    out.push({ type: "row", title: r.title });
    for (const p of r.panels) out.push({ ...p, gridPos: p.gridPos ?? { x: 0, y: 0, w: 12, h: 8 } });
  }
  return out;
}

function varQuery(v: Variable): string {
  return typeof v.query === "string" ? v.query : v.query?.query ?? "";
}

async function variableOptions(v: Variable): Promise<string[]> {
  if (v.type === "custom") return varQuery(v).split(",").map((s) => s.trim()).filter(Boolean);
  if (v.type === "interval") return varQuery(v).split(",").map((s) => s.trim()).filter(Boolean);
  if (v.type === "constant" || v.type === "textbox") return [varQuery(v)];
  if (v.type !== "query") return (v.options ?? []).map((o) => o.value);
  const q = varQuery(v).trim();
  let m = /^label_values\(\s*(?:(.+?)\s*,\s*)?([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$/.exec(q);
  if (m) {
    return getData<string[]>(`/api/v1/label/${m[2]}/values`, m[1] ? { "match[]": m[1] } : undefined);
  }
  m = /^query_result\((.+)\)$/.exec(q);
  const r = await instantQuery(m ? m[1] : q);
  return (r.result as PromSeries[]).map((s) => labelsText(s.metric));
}

const reEscape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

export async function renderDashboards(ctx: PageContext): Promise<void> {
  const { main, query } = ctx;
  const name = ctx.args[0];
  if (!name) {
    main.appendChild(h("h1", null, "Dashboards"));
    main.appendChild(h("ul", { id: "dashboard-list" }, Object.entries(SHIPPED).map(([k, d]) => h("li", null, link("/dashboards/" + k, d.title ?? k), h("span", { class: "muted" }, ` (web/dashboards/${k}.json)`)))));
    const file = h("input", { type: "file", accept: "application/json,.json", "aria-label": "Grafana dashboard JSON file" });
    const text = h("textarea", { rows: 6, style: "width:100%", "aria-label": "Grafana dashboard JSON", placeholder: "…or paste a Grafana dashboard's JSON here" });
    const msg = h("div");
    const open = (src: string) => {
      try {
        const d = JSON.parse(src) as Dashboard;
        if (!d.panels && !d.rows) throw new Error("no \"panels\" or \"rows\": not a Grafana dashboard");
        localStorage.setItem(CUSTOM_KEY, src);
        ctx.main.ownerDocument.defaultView!.history.pushState(null, "", "/dashboards/custom");
        void import("../main").then((m) => m.render());
      } catch (e) {
        msg.replaceChildren(notice("error", "dashboard JSON: " + (e as Error).message));
      }
    };
    file.addEventListener("change", async () => {
      if (file.files?.[0]) open(await file.files[0].text());
    });
    const btn = h("button", { type: "button" }, "Open pasted JSON");
    btn.addEventListener("click", () => open(text.value));
    main.append(h("h2", null, "Load a Grafana dashboard"), h("div", { class: "toolbar" }, file), text, h("div", { class: "toolbar" }, btn), msg);
    return;
  }
  let dash: Dashboard | undefined = SHIPPED[name];
  if (name === "custom") {
    try {
      dash = JSON.parse(localStorage.getItem(CUSTOM_KEY) ?? "null") ?? undefined;
    } catch {
      dash = undefined;
    }
  }
  if (!dash) {
    main.append(h("h1", null, "Dashboard not found"), h("p", null, link("/dashboards", "All dashboards")));
    return;
  }
  main.appendChild(h("h1", null, dash.title ?? name, " ", h("span", { class: "muted" }, link("/dashboards", "(all)"))));

  // Time range: ?range=, else the dashboard's "now-6h".
  const from = /^now-(.+)$/.exec(dash.time?.from ?? "now-1h")?.[1] ?? "1h";
  const rangeText = query.get("range") ?? from;
  const values: Record<string, string> = {};
  const varBar = h("form", { class: "toolbar", id: "dash-vars" });
  const rangeIn = h("input", { value: rangeText, size: 6, "aria-label": "range" });
  for (const v of dash.templating?.list ?? []) {
    let opts: string[] = [];
    try {
      opts = await variableOptions(v);
    } catch (e) {
      varBar.appendChild(errorNotice("variable " + v.name, e));
    }
    const sel = h("select", { "aria-label": v.label ?? v.name, "data-var": v.name });
    if (v.includeAll) sel.appendChild(h("option", { value: "$__all" }, "All"));
    for (const o of opts) sel.appendChild(h("option", { value: o }, o));
    const cur = query.get("var-" + v.name) ?? (Array.isArray(v.current?.value) ? v.current?.value[0] : v.current?.value);
    if (cur && [...sel.options].some((o) => o.value === cur)) sel.value = cur;
    values[v.name] = sel.value;
    varBar.appendChild(h("label", { class: "inline" }, v.label ?? v.name, sel));
    if (v.includeAll && sel.value === "$__all") values[v.name] = opts.length ? "(" + opts.map(reEscape).join("|") + ")" : ".*";
  }
  varBar.append(h("label", { class: "inline" }, "range", rangeIn), h("button", { type: "submit" }, "Apply"));
  varBar.addEventListener("submit", (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    q.set("range", rangeIn.value.trim());
    varBar.querySelectorAll<HTMLSelectElement>("select[data-var]").forEach((s) => q.set("var-" + s.dataset.var, s.value));
    history.pushState(null, "", location.pathname + "?" + q.toString());
    void import("../main").then((m) => m.render());
  });
  main.appendChild(varBar);

  const range = parseDuration(rangeText) ?? 3600;
  const end = Math.floor(Date.now() / 1000), start = end - range;
  const step = Math.max(1, Math.round(range / 300));
  const builtins: Record<string, string> = {
    __interval: step + "s",
    __rate_interval: Math.max(60, step * 4) + "s",
    __range: range + "s",
    __range_s: String(range),
  };
  const interp = (s: string) =>
    s.replace(/\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)/g, (all, a, b, c) => {
      const k = a ?? b ?? c;
      return values[k] ?? builtins[k] ?? all;
    });

  const grid = h("div", { class: "dash-grid" });
  main.appendChild(grid);
  const panels = allPanels(dash).sort((a, b) => (a.gridPos?.y ?? 0) - (b.gridPos?.y ?? 0) || (a.gridPos?.x ?? 0) - (b.gridPos?.x ?? 0));
  for (const p of panels) {
    if (p.type === "row") {
      grid.appendChild(h("div", { class: "dash-row" }, p.title ?? ""));
      continue;
    }
    const w = Math.min(24, Math.max(1, p.gridPos?.w ?? 12));
    const cell = h("div", { class: "panel", style: `grid-column: span ${w}`, "data-panel": p.title ?? "" });
    grid.appendChild(cell);
    const unit = grafanaUnit(p.fieldConfig?.defaults?.unit ?? p.yaxes?.[0]?.format);
    const targets = (p.targets ?? []).filter((t) => t.expr && !t.hide);
    try {
      if (p.type === "graph" || p.type === "timeseries") {
        const lines = [];
        for (const t of targets) {
          const r = await rangeQuery(interp(t.expr!), start, end, step);
          for (const s of r.result as PromSeries[])
            lines.push({ label: legendFormat(t.legendFormat, s.metric) || t.expr!, x: (s.values ?? []).map((v) => v[0]), y: (s.values ?? []).map((v) => num(v[1])) });
        }
        lineChart(cell, { title: p.title, xKind: "time", unit, lines, height: Math.max(120, (p.gridPos?.h ?? 8) * 30 - 80) });
      } else if (p.type === "stat" || p.type === "gauge" || p.type === "singlestat" || p.type === "bargauge") {
        const box = h("div", { class: "stat" }, h("div", { class: "stat-title" }, p.title ?? ""));
        cell.appendChild(box);
        let n = 0;
        for (const t of targets) {
          const r = await instantQuery(interp(t.expr!));
          const series = r.resultType === "scalar" ? [{ metric: {}, value: r.result as [number, string] }] : (r.result as PromSeries[]);
          for (const s of series) {
            n++;
            const v = num(s.value?.[1]);
            box.appendChild(h("div", { class: "stat-value", "data-value": s.value?.[1] ?? "" }, withUnit(v, unit)));
            if (series.length > 1 || t.legendFormat) box.appendChild(h("div", { class: "stat-sub" }, legendFormat(t.legendFormat, s.metric)));
            if (p.type !== "stat" && v !== null) {
              const lo = p.fieldConfig?.defaults?.min ?? 0, hi = p.fieldConfig?.defaults?.max ?? (unit === "%" ? 100 : Math.max(v, 1));
              const pct = Math.max(0, Math.min(100, ((v - lo) / (hi - lo || 1)) * 100));
              box.appendChild(h("div", { class: "gauge-bar", role: "meter", "aria-valuenow": String(v), "aria-valuemin": String(lo), "aria-valuemax": String(hi) }, h("span", { style: `width:${pct}%` })));
            }
          }
        }
        if (!n) box.appendChild(h("div", { class: "stat-value muted" }, "no data"));
      } else if (p.type === "heatmap") {
        const rows: string[] = [], vals: (number | null)[][] = [];
        const times: number[] = [];
        for (let t = start; t <= end; t += step) times.push(t);
        for (const t of targets) {
          const r = await rangeQuery(interp(t.expr!), start, end, step);
          const series = (r.result as PromSeries[]).sort((a, b) => (Number(a.metric.le) || 0) - (Number(b.metric.le) || 0) || labelsText(a.metric).localeCompare(labelsText(b.metric)));
          for (const s of series) {
            rows.push(s.metric.le !== undefined ? "le " + s.metric.le : legendFormat(t.legendFormat, s.metric));
            const row: (number | null)[] = times.map(() => null);
            for (const [ts, v] of s.values ?? []) row[Math.round((ts - start) / step)] = num(v);
            vals.push(row);
          }
        }
        const flat = vals.flat().filter((v): v is number => v !== null && Number.isFinite(v));
        if (!rows.length) cell.appendChild(h("figure", { class: "chart" }, h("figcaption", null, p.title ?? ""), h("div", { class: "empty" }, "no data")));
        else heatMap(cell, { title: p.title, rows, times, values: vals, min: Math.min(...flat), max: Math.max(...flat), unit });
      } else {
        cell.appendChild(notice("info", `${p.title ?? ""}: panel type "${p.type}" is not rendered (graph, timeseries, stat, gauge, bargauge and heatmap are)`));
      }
    } catch (e) {
      cell.appendChild(errorNotice(p.title ?? "panel", e));
    }
  }
}
