// Hyper-parameters of the compared runs as W&B's parallel-coordinates panel:
// one axis per config key that varies among the runs (numbers on linear
// axes, strings and booleans as categories) and per final metric (the
// summary's numbers; loss-like ones by default), axes added and removed with
// their boxes, one line per run colored by a chosen metric. Dragging along
// an axis brushes a range: lines outside every brush fade, and the table
// below (sortable by a click on a header) lists the runs inside.
import type { Run } from "../api";
import { heatColor } from "../chart";
import { append, clear, h, link } from "../dom";
import { fmtNum } from "../format";
import { flatten, orderKeys, sortableTable, statusBadge, summaryNumbers, valueText, type Column } from "./common";

type Value = number | string | null;

interface Axis {
  id: string; // "config.lr" or "metric:loss"
  title: string;
  kind: "num" | "cat";
  values: Value[]; // per run
  // num: [lo, hi]; cat: the categories in order.
  lo: number;
  hi: number;
  cats: string[];
}

type Brush = [number, number]; // fractions of the axis' height from the top, y0 < y1

const MAX_DEFAULT_CONFIG_AXES = 8;
const NS = "http://www.w3.org/2000/svg";

function catText(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  return JSON.stringify(v);
}

function makeAxis(id: string, title: string, raw: unknown[]): Axis {
  const present = raw.filter((v) => v !== null && v !== undefined);
  const numeric = present.length > 0 && present.every((v) => typeof v === "number" && Number.isFinite(v));
  if (numeric) {
    const nums = present as number[];
    let lo = Math.min(...nums), hi = Math.max(...nums);
    if (lo === hi) {
      lo -= Math.abs(lo) * 0.5 || 0.5;
      hi += Math.abs(hi) * 0.5 || 0.5;
    }
    return { id, title, kind: "num", values: raw.map((v) => (typeof v === "number" && Number.isFinite(v) ? v : null)), lo, hi, cats: [] };
  }
  const values = raw.map(catText);
  const cats = [...new Set(values.filter((v): v is string => v !== null))].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  return { id, title, kind: "cat", values, lo: 0, hi: 0, cats };
}

// The position of a value on its axis, 0 (top) .. 1 (bottom); null when absent.
function frac(a: Axis, v: Value): number | null {
  if (v === null) return null;
  if (a.kind === "num") return 1 - ((v as number) - a.lo) / (a.hi - a.lo);
  const i = a.cats.indexOf(v as string);
  if (i < 0) return null;
  return a.cats.length === 1 ? 0.5 : 1 - i / (a.cats.length - 1);
}

export function hparamsView(parent: HTMLElement, runs: Run[], color: Map<string, string>): void {
  const cfgs = runs.map((r) => flatten(r.config));
  const sums = runs.map((r) => summaryNumbers(r));
  const cfgKeys = [...new Set(cfgs.flatMap((c) => Object.keys(c)))].sort();
  // A config key varies when the runs have more than one distinct value (absent counts as one).
  const varying = cfgKeys.filter((k) => new Set(cfgs.map((c) => JSON.stringify(c[k] ?? null))).size > 1);
  const constant = cfgKeys.filter((k) => !varying.includes(k));
  const metricKeys = orderKeys(sums.flatMap((s) => Object.keys(s)));
  const candidates: Axis[] = [
    ...varying.map((k) => makeAxis("config." + k, k, cfgs.map((c) => c[k]))),
    ...metricKeys.map((k) => makeAxis("metric:" + k, k, sums.map((s) => s[k]))),
  ];
  const byId = new Map(candidates.map((a) => [a.id, a]));
  const lossy = metricKeys.filter((k) => /loss|acc|err|perplexity|ppl|score|f1|bleu|reward/i.test(k)).slice(0, 3);
  const defaultMetrics = lossy.length ? lossy : metricKeys.slice(0, 1);
  let shown: string[] = [...varying.slice(0, MAX_DEFAULT_CONFIG_AXES).map((k) => "config." + k), ...defaultMetrics.map((k) => "metric:" + k)];
  let colorBy: string | null = defaultMetrics.length ? "metric:" + defaultMetrics[0] : (shown.find((id) => byId.get(id)!.kind === "num") ?? null);
  const brushes = new Map<string, Brush>();

  const sec = h("section", { id: "hparams-section" });
  parent.appendChild(sec);
  sec.append(h("h2", null, "Hyper-parameters"));
  if (!candidates.length) {
    sec.append(h("p", { class: "muted" }, "The runs have no config keys that differ and no final metrics."));
    return;
  }
  const axisBoxes = h("fieldset", { class: "toolbar", id: "pc-axes" }, h("legend", null, "axes"));
  for (const a of candidates) {
    const cb = h("input", { type: "checkbox", value: a.id, checked: shown.includes(a.id), "data-axis": a.id });
    cb.addEventListener("change", () => {
      shown = candidates.map((c) => c.id).filter((id) => (id === a.id ? cb.checked : shown.includes(id)));
      if (!cb.checked) brushes.delete(a.id);
      draw();
    });
    axisBoxes.append(h("label", { class: "inline", title: a.kind === "num" ? "linear axis" : "categories" }, cb, a.id.startsWith("config.") ? "config." + a.title : a.title));
  }
  const colorSel = h("select", { "aria-label": "color lines by", id: "pc-color" },
    h("option", { value: "" }, "run colors"),
    candidates.filter((a) => a.kind === "num").map((a) => h("option", { value: a.id }, a.id.startsWith("config.") ? "config." + a.title : a.title)));
  colorSel.value = colorBy ?? "";
  colorSel.addEventListener("change", () => {
    colorBy = colorSel.value || null;
    draw();
  });
  const clearBtn = h("button", { type: "button", id: "pc-clear" }, "clear brushes");
  clearBtn.addEventListener("click", () => {
    brushes.clear();
    draw();
  });
  const count = h("span", { class: "muted", id: "pc-count", "aria-live": "polite" });
  const scale = h("span", { class: "heat-scale", id: "pc-scale" });
  const plot = h("div", { class: "pc", id: "pc-plot" });
  const tableBox = h("div", { id: "hparams", style: "overflow-x:auto" });
  append(sec, [
    axisBoxes,
    h("div", { class: "toolbar" }, h("label", { class: "inline" }, "color by ", colorSel), scale, clearBtn, count,
      h("span", { class: "muted" }, "drag along an axis to filter; click an axis to clear its brush")),
    plot,
    constant.length
      ? h("p", { class: "muted", id: "pc-constant" }, "Same in every run: ", constant.map((k, i) => [i ? ", " : "", h("code", null, `${k}=${valueText(cfgs.find((c) => c[k] !== undefined)?.[k])}`)]))
      : null,
    tableBox,
  ]);

  let tableSort: { sortBy: number; desc: boolean } | null = null;

  const inside = (a: Axis, i: number): boolean => {
    const b = brushes.get(a.id);
    if (!b) return true;
    const f = frac(a, a.values[i]);
    return f !== null && f >= b[0] - 1e-9 && f <= b[1] + 1e-9;
  };

  const draw = () => {
    const axes = shown.map((id) => byId.get(id)!).filter(Boolean);
    const active = runs.map((_, i) => axes.every((a) => inside(a, i)));
    const nActive = active.filter(Boolean).length;
    count.textContent = brushes.size ? `${nActive} of ${runs.length} runs in the brushes` : `${runs.length} runs`;
    clearBtn.disabled = brushes.size === 0;

    // Line colors: the chosen metric on the viridis ramp, or the runs' own.
    const ca = colorBy ? byId.get(colorBy) ?? null : null;
    const lineColor = (i: number): string => {
      if (!ca) return color.get(runs[i].id) ?? "#888";
      const v = ca.values[i];
      if (v === null) return "#888";
      return heatColor(((v as number) - ca.lo) / (ca.hi - ca.lo || 1));
    };
    clear(scale);
    if (ca) append(scale, [fmtNum(ca.lo, 4), h("span", { class: "heat-gradient" }), fmtNum(ca.hi, 4)]);

    // ---- the plot ----
    // Drawn at the width it is shown (1 unit = 1 px), so the text keeps its size.
    const W = Math.max(640, axes.length * 110, Math.min(1400, plot.clientWidth || 900)), H = 320, top = 44, bottom = 16, padX = 70;
    const plotH = H - top - bottom;
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", "parallel coordinates of the runs' config and final metrics");
    svg.dataset.axes = String(axes.length);
    svg.dataset.active = String(nActive);
    const el = (parentEl: Element, tag: string, attrs: Record<string, string | number>, text?: string) => {
      const e = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
      if (text !== undefined) e.textContent = text;
      parentEl.appendChild(e);
      return e;
    };
    const xs = axes.map((_, i) => (axes.length === 1 ? W / 2 : padX + (i * (W - 2 * padX)) / (axes.length - 1)));
    const yOf = (f: number) => top + f * plotH;
    // Lines: the filtered-out ones first (faded), the ones in the brushes on top.
    const lines = el(svg, "g", { class: "pc-lines" });
    const order = runs.map((_, i) => i).sort((a, b) => Number(active[a]) - Number(active[b]));
    for (const i of order) {
      const pts: string[] = [];
      axes.forEach((a, k) => {
        const f = frac(a, a.values[i]);
        if (f !== null) pts.push(`${xs[k].toFixed(1)},${yOf(f).toFixed(1)}`);
      });
      if (!pts.length) continue;
      const pl = el(lines, "polyline", {
        points: pts.length === 1 ? `${pts[0]} ${pts[0]}` : pts.join(" "),
        fill: "none",
        stroke: active[i] ? lineColor(i) : "#8884",
        "stroke-width": active[i] ? 2 : 1,
        class: active[i] ? "pc-line" : "pc-line pc-off",
        "data-run": runs[i].id,
      });
      el(pl, "title", {}, runs[i].name + "\n" + axes.map((a) => `${a.id.startsWith("config.") ? "config." + a.title : a.title} = ${a.values[i] === null ? "–" : valueText(a.values[i])}`).join("\n"));
    }
    // Axes, their ticks and their brushes.
    axes.forEach((a, k) => {
      const g = el(svg, "g", { class: "pc-axis", "data-axis": a.id });
      el(g, "line", { x1: xs[k], x2: xs[k], y1: top, y2: top + plotH, class: "axis" });
      const name = a.id.startsWith("config.") ? a.title : a.title;
      el(g, "text", { x: xs[k], y: 14, "text-anchor": "middle", class: "pc-title" + (a.id.startsWith("config.") ? "" : " pc-metric") }, name.length > 22 ? name.slice(0, 21) + "…" : name);
      el(g, "text", { x: xs[k], y: 27, "text-anchor": "middle", class: "pc-sub" }, a.id.startsWith("config.") ? "config" : "metric");
      const ticks: [number, string][] = a.kind === "num"
        ? [0, 0.25, 0.5, 0.75, 1].map((f) => [f, fmtNum(a.hi - f * (a.hi - a.lo), 4)])
        : a.cats.map((c) => [frac(a, c)!, c.length > 14 ? c.slice(0, 13) + "…" : c]);
      for (const [f, t] of ticks) {
        el(g, "line", { x1: xs[k] - 3, x2: xs[k], y1: yOf(f), y2: yOf(f), class: "axis" });
        el(g, "text", { x: xs[k] - 5, y: yOf(f) + 3.5, "text-anchor": "end", class: "pc-tick" }, t);
      }
      const b = brushes.get(a.id);
      const brushRect = el(g, "rect", { x: xs[k] - 8, width: 16, y: b ? yOf(b[0]) : 0, height: b ? Math.max(1, (b[1] - b[0]) * plotH) : 0, class: "pc-brush", visibility: b ? "visible" : "hidden" });
      // The hit area: drag to brush, click to clear.
      const hit = el(g, "rect", { x: xs[k] - 14, width: 28, y: top - 4, height: plotH + 8, class: "pc-hit", "data-axis": a.id, tabindex: 0, role: "slider", "aria-label": `brush on ${a.id}` });
      hit.addEventListener("pointerdown", (ev) => {
        const e0 = ev as PointerEvent;
        e0.preventDefault();
        (hit as Element).setPointerCapture(e0.pointerId);
        const toF = (e: PointerEvent) => {
          const m = (svg as SVGSVGElement).getScreenCTM();
          if (!m) return 0;
          const p = new DOMPoint(e.clientX, e.clientY).matrixTransform(m.inverse());
          return Math.min(1, Math.max(0, (p.y - top) / plotH));
        };
        const f0 = toF(e0);
        let f1 = f0;
        const move = (e: Event) => {
          f1 = toF(e as PointerEvent);
          const lo = Math.min(f0, f1), hi = Math.max(f0, f1);
          brushRect.setAttribute("y", String(yOf(lo)));
          brushRect.setAttribute("height", String(Math.max(1, (hi - lo) * plotH)));
          brushRect.setAttribute("visibility", "visible");
        };
        const up = (e: Event) => {
          hit.removeEventListener("pointermove", move);
          hit.removeEventListener("pointerup", up);
          hit.removeEventListener("pointercancel", up);
          f1 = toF(e as PointerEvent);
          if (Math.abs(f1 - f0) * plotH < 3) brushes.delete(a.id);
          else brushes.set(a.id, [Math.min(f0, f1), Math.max(f0, f1)]);
          draw();
        };
        hit.addEventListener("pointermove", move);
        hit.addEventListener("pointerup", up);
        hit.addEventListener("pointercancel", up);
      });
      hit.addEventListener("keydown", (ev) => {
        if ((ev as KeyboardEvent).key === "Escape" || (ev as KeyboardEvent).key === "Delete") {
          brushes.delete(a.id);
          draw();
        }
      });
    });
    plot.replaceChildren(svg as unknown as HTMLElement);

    // ---- the table of the runs in the brushes ----
    const rows = runs.map((_, i) => i).filter((i) => active[i]);
    const cols: Column<number>[] = [
      {
        title: "run",
        value: (i) => runs[i].name,
        cell: (i) => h("span", null, h("span", { class: "swatch", style: `background:${color.get(runs[i].id)}` }), " ", link("/runs/" + encodeURIComponent(runs[i].id), runs[i].name)),
      },
      { title: "status", value: (i) => runs[i].status, cell: (i) => statusBadge(runs[i].status) },
      // GPU use, where the runs' processes held GPUs of the server's host.
      ...(runs.some((r) => r.gpu?.hours)
        ? ([["GPU-hours", "hours"], ["kWh", "energy_kwh"], ["idle GPU-hours", "idle_hours"], ["cost", "cost"]] as const).map(
            ([title, f]): Column<number> => ({ title, value: (i) => runs[i].gpu?.[f] ?? 0, cell: (i) => fmtNum(runs[i].gpu?.[f] ?? 0, 3), num: true }))
        : []),
      ...axes.map((a): Column<number> => ({
        title: a.id.startsWith("config.") ? "config." + a.title : a.title,
        value: (i) => a.values[i],
        cell: (i) => (a.values[i] === null ? "–" : typeof a.values[i] === "number" ? fmtNum(a.values[i] as number) : String(a.values[i])),
        num: a.kind === "num",
      })),
    ];
    // A sort by a column that is still there stays.
    const prevTitles = tableBox.querySelectorAll("thead th");
    let sortBy = -1, desc = false;
    if (tableSort && tableSort.sortBy < prevTitles.length) {
      const title = prevTitles[tableSort.sortBy]?.textContent?.replace(/ [▲▼]$/, "") ?? "";
      sortBy = cols.findIndex((c) => c.title === title);
      desc = tableSort.desc;
    }
    const table = sortableTable(cols, rows, {
      sortBy,
      desc,
      rowAttrs: (i) => ({ "data-run-id": runs[i].id }),
      onSort: (s, d) => (tableSort = { sortBy: s, desc: d }),
    });
    tableSort = sortBy >= 0 ? { sortBy, desc } : null;
    table.id = "hparams-table";
    tableBox.replaceChildren(table);
    if (!rows.length) tableBox.append(h("p", { class: "muted" }, "No run is inside every brush."));
  };
  draw();
}
