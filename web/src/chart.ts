// Line charts on uPlot (canvas) with a legend that toggles series (buttons,
// so keyboard-usable), a tooltip with the exact values under the cursor, the
// unit on the y axis, optional min/max envelopes (bands) and drag-to-zoom.
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { h } from "./dom";
import { fmtNum, fmtTime, withUnit } from "./format";

export const PALETTE = [
  "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
  "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
  "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b",
];

export interface Line {
  label: string;
  x: ArrayLike<number>;
  y: ArrayLike<number | null>;
  min?: ArrayLike<number | null>; // with max: drawn as a band around y
  max?: ArrayLike<number | null>;
  color?: string;
}

export interface ChartSpec {
  title?: string;
  xKind: "time" | "step";
  unit?: string;
  lines: Line[];
  height?: number;
  // Called after a drag-zoom (x range) or a reset (null).
  onZoom?: (range: [number, number] | null) => void;
}

export interface ChartHandle {
  el: HTMLElement;
  plot: uPlot | null;
  // Replaces the data in place (no new canvas), keeping the x range shown
  // unless `resetX`; false when the new lines need another chart (a line or
  // an envelope more or less), which the caller then builds.
  update(lines: Line[], resetX?: boolean): boolean;
  // Shows x in `range` (null: all of the data) as a drag-zoom would, without
  // calling onZoom; a double-click then resets it.
  setX(range: [number, number] | null): void;
  destroy(): void;
}

const live = new Set<ChartHandle>();

// Performance hooks, read by bench/ui/compare_bench.mjs: `tw:first-chart`
// marks the document's first chart drawn with data, `tw:chart-drawn` each
// chart's draw of new data (not its redraws on zoom or cursor moves).
let firstChartMarked = false;
let drawnMarks = 0;
function markDrawn(): void {
  if (!firstChartMarked) {
    firstChartMarked = true;
    performance.mark("tw:first-chart");
  }
  // Bounded, so a page left open for days keeps no growing timeline.
  if (++drawnMarks > 1000) {
    performance.clearMarks("tw:chart-drawn");
    drawnMarks = 1;
  }
  performance.mark("tw:chart-drawn");
}

// Destroys every chart (the router calls this when the page changes).
export function destroyAllCharts(): void {
  for (const c of [...live]) c.destroy();
}

export function css(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888";
}

function fmtX(xKind: "time" | "step", v: number): string {
  return xKind === "time" ? fmtTime(v) : "step " + fmtNum(v, 10);
}

// Aligns lines with different x values into uPlot's one-x-array layout.
function align(lines: Line[]): { data: uPlot.AlignedData; index: number[][] } {
  const tables: uPlot.AlignedData[] = [];
  const index: number[][] = []; // per line: [y, min?, max?] column numbers in the joined data
  let col = 1;
  for (const l of lines) {
    const cols: ArrayLike<number | null>[] = [l.y];
    const idx = [col++];
    if (l.min && l.max) {
      cols.push(l.min, l.max);
      idx.push(col++, col++);
    }
    tables.push([l.x as number[], ...(cols as (number | null)[][])]);
    index.push(idx);
  }
  if (tables.length === 1) return { data: tables[0], index };
  return { data: uPlot.join(tables), index };
}

// Paths of an envelope drawn by its max column: the polygon along max and
// back along min, filled without a stroke. uPlot's bands fill between two
// series through a clip of the lower one's path, which costs several times
// more to rasterize without a GPU.
export function envelope(minCol: number): uPlot.Series.PathBuilder {
  return (u, si, i0, i1) => {
    const xs = u.data[0], hi = u.data[si], lo = u.data[minCol];
    const p = new Path2D();
    let n = 0;
    const to = (x: number, y: number | null | undefined) => {
      if (y === null || y === undefined || !Number.isFinite(y)) return;
      const px = u.valToPos(x, "x", true), py = u.valToPos(y, "y", true);
      if (n++ === 0) p.moveTo(px, py);
      else p.lineTo(px, py);
    };
    for (let i = i0; i <= i1; i++) to(xs[i], hi[i]);
    for (let i = i1; i >= i0; i--) to(xs[i], lo[i]);
    p.closePath();
    return { stroke: null, fill: p, clip: null, band: null };
  };
}

// The column layout of lines in uPlot's data: which have an envelope.
function layout(lines: Line[]): string {
  return lines.map((l) => (l.min && l.max ? "b" : "l") + l.label).join("\u0000");
}

export function lineChart(parent: HTMLElement, spec: ChartSpec): ChartHandle {
  const unit = spec.unit ?? "";
  const wrap = h("figure", { class: "chart" });
  if (spec.title) wrap.appendChild(h("figcaption", null, spec.title, unit ? h("span", { class: "unit" }, ` (${unit})`) : null));
  const plotEl = h("div", { class: "plot" });
  const legend = h("div", { class: "legend", role: "group", "aria-label": "legend" });
  wrap.append(plotEl, legend);
  parent.appendChild(wrap);

  const handle: ChartHandle = { el: wrap, plot: null, update: () => false, setX: () => {}, destroy: () => {} };
  const nonEmpty = spec.lines.some((l) => l.x.length > 0);
  if (!nonEmpty) {
    plotEl.appendChild(h("div", { class: "empty" }, "no data"));
    return handle;
  }

  const { data, index } = align(spec.lines);
  const axisColor = css("--fg-muted"), gridColor = css("--grid");
  const series: uPlot.Series[] = [{ label: spec.xKind }];
  // Many lines at 1 px: a canvas without a GPU draws strokes of at most one
  // device pixel as hairlines, several times faster than wider ones.
  const width = spec.lines.length > 8 ? 1 : 1.5;
  spec.lines.forEach((l, i) => {
    const color = l.color ?? PALETTE[i % PALETTE.length];
    series.push({ label: l.label, stroke: color, width, spanGaps: true, points: { show: false } });
    if (index[i].length === 3) {
      // The envelope is one filled polygon drawn with the max column; the min
      // column only feeds it (and the y range and tooltip).
      series.push({ label: l.label + " min", width: 0, spanGaps: true, points: { show: false }, paths: () => null });
      series.push({ label: l.label + " max", width: 0, fill: color + "22", spanGaps: true, points: { show: false }, paths: envelope(index[i][1]) });
    }
  });

  const tooltip = h("div", { class: "tooltip", hidden: true });
  const valueEls: HTMLElement[] = [];
  let zoomed = false;
  let fresh = true; // data not yet drawn: the next draw is marked

  const opts: uPlot.Options = {
    width: Math.max(200, plotEl.clientWidth || parent.clientWidth || 600),
    height: spec.height ?? 220,
    scales: { x: { time: spec.xKind === "time" } },
    series,
    legend: { show: false },
    cursor: { drag: { x: true, y: false, setScale: true }, points: { size: 5 } },
    axes: [
      { stroke: axisColor, grid: { stroke: gridColor, width: 1 }, ticks: { stroke: gridColor } },
      {
        stroke: axisColor,
        grid: { stroke: gridColor, width: 1 },
        ticks: { stroke: gridColor },
        size: 64,
        values: (_u, vals) => vals.map((v) => withUnit(v, unit)),
      },
    ],
    hooks: {
      draw: [
        () => {
          if (!fresh) return;
          fresh = false;
          markDrawn();
        },
      ],
      setCursor: [
        (u) => {
          const i = u.cursor.idx;
          if (i === null || i === undefined || u.cursor.left === undefined || u.cursor.left < 0) {
            tooltip.hidden = true;
            return;
          }
          const x = u.data[0][i];
          const rows: HTMLElement[] = [h("div", { class: "tt-x" }, fmtX(spec.xKind, x))];
          spec.lines.forEach((l, li) => {
            const [yc, minc, maxc] = index[li];
            if (!u.series[yc].show) return;
            const y = u.data[yc][i] as number | null | undefined;
            const txt = withUnit(y ?? null, unit);
            valueEls[li].textContent = txt;
            if (y === null || y === undefined) return;
            let extra = "";
            if (minc !== undefined) {
              const mn = u.data[minc][i] as number | null, mx = u.data[maxc][i] as number | null;
              if (mn !== null && mx !== null && mn !== mx) extra = ` [${fmtNum(mn)} … ${fmtNum(mx)}]`;
            }
            rows.push(
              h("div", { class: "tt-row" }, h("span", { class: "swatch", style: `background:${series[yc].stroke}` }), `${l.label}: `, h("b", null, txt), extra),
            );
          });
          tooltip.replaceChildren(...rows);
          tooltip.hidden = false;
          const left = u.cursor.left, top = u.cursor.top ?? 0;
          const w = u.over.clientWidth;
          tooltip.style.left = (left > w / 2 ? left - tooltip.offsetWidth - 12 : left + 12) + "px";
          tooltip.style.top = Math.max(0, top - 10) + "px";
        },
      ],
      setSelect: [
        (u) => {
          if (u.select.width > 0) {
            const min = u.posToVal(u.select.left, "x"), max = u.posToVal(u.select.left + u.select.width, "x");
            zoomed = true;
            spec.onZoom?.([min, max]);
          }
        },
      ],
    },
  };
  const plot = new uPlot(opts, data, plotEl);
  handle.plot = plot;
  // The instance on its figure, for tools driving the chart (bench/ui).
  (wrap as HTMLElement & { uplot?: uPlot }).uplot = plot;
  plot.over.appendChild(tooltip);
  plot.over.addEventListener("mouseleave", () => (tooltip.hidden = true));
  plot.over.addEventListener("dblclick", () => {
    if (zoomed) {
      zoomed = false;
      spec.onZoom?.(null);
    }
  });

  spec.lines.forEach((l, li) => {
    const color = l.color ?? PALETTE[li % PALETTE.length];
    const value = h("span", { class: "lg-value" }, withUnit(lastValue(l.y), unit));
    valueEls.push(value);
    const btn = h(
      "button",
      { class: "lg-item", type: "button", "aria-pressed": "true", title: "show/hide " + l.label },
      h("span", { class: "swatch", style: `background:${color}` }),
      h("span", { class: "lg-label" }, l.label),
      value,
    );
    btn.addEventListener("click", () => {
      const show = btn.getAttribute("aria-pressed") !== "true";
      btn.setAttribute("aria-pressed", String(show));
      for (const c of index[li]) plot.setSeries(c, { show });
    });
    legend.appendChild(btn);
  });

  const ro = new ResizeObserver(() => {
    const w = plotEl.clientWidth;
    if (w > 0 && Math.abs(w - plot.width) > 2) plot.setSize({ width: w, height: plot.height });
  });
  ro.observe(plotEl);
  const shape = layout(spec.lines);
  handle.update = (lines, resetX = false) => {
    if (layout(lines) !== shape || !lines.some((l) => l.x.length > 0)) return false;
    const x = plot.scales.x;
    const keep = !resetX && zoomed && x.min !== undefined && x.max !== undefined ? { min: x.min, max: x.max } : null;
    fresh = true;
    plot.setData(align(lines).data, keep === null);
    // setData without a reset keeps y as it was: setting x again fits y to
    // the new data in view.
    if (keep) plot.setScale("x", keep);
    if (resetX) zoomed = false;
    lines.forEach((l, li) => (valueEls[li].textContent = withUnit(lastValue(l.y), unit)));
    return true;
  };
  handle.setX = (range) => {
    zoomed = range !== null;
    if (range) plot.setScale("x", { min: range[0], max: range[1] });
    else {
      const xs = plot.data[0];
      if (xs.length) plot.setScale("x", { min: xs[0], max: xs[xs.length - 1] });
    }
  };
  handle.destroy = () => {
    ro.disconnect();
    plot.destroy();
    live.delete(handle);
  };
  live.add(handle);
  return handle;
}

function lastValue(y: ArrayLike<number | null>): number | null {
  for (let i = y.length - 1; i >= 0; i--) if (y[i] !== null && y[i] !== undefined) return y[i];
  return null;
}

// A heat map on a canvas: rows (e.g. GPUs) by time buckets, colour by value
// in [min, max]; `marks` (row, column) get a red outline (e.g. XID errors).
export interface HeatSpec {
  rows: string[];
  times: number[]; // column start times, unix seconds
  values: (number | null)[][]; // [row][column]
  min: number;
  max: number;
  unit: string;
  marks?: Set<string>; // "row:col"
  title?: string;
}

export function heatMap(parent: HTMLElement, spec: HeatSpec): HTMLElement {
  const wrap = h("figure", { class: "chart heat" });
  if (spec.title) wrap.appendChild(h("figcaption", null, spec.title, h("span", { class: "unit" }, ` (${spec.unit})`)));
  const labelW = 220, cellH = 16;
  const box = h("div", { class: "heat-box" });
  const canvas = h("canvas", { role: "img", "aria-label": spec.title ?? "heat map" });
  const tooltip = h("div", { class: "tooltip", hidden: true });
  box.append(canvas, tooltip);
  wrap.appendChild(box);
  const scale = h("div", { class: "heat-scale" }, withUnit(spec.min, spec.unit), h("span", { class: "heat-gradient" }), withUnit(spec.max, spec.unit));
  wrap.appendChild(scale);
  parent.appendChild(wrap);
  const width = Math.max(300, parent.clientWidth || 800);
  const cols = spec.times.length;
  const cellW = Math.max(1, (width - labelW) / Math.max(1, cols));
  const dpr = window.devicePixelRatio || 1;
  canvas.width = width * dpr;
  canvas.height = (spec.rows.length * cellH + 18) * dpr;
  canvas.style.width = width + "px";
  canvas.style.height = spec.rows.length * cellH + 18 + "px";
  const ctx = canvas.getContext("2d")!;
  ctx.scale(dpr, dpr);
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillStyle = css("--fg");
  ctx.textBaseline = "middle";
  spec.rows.forEach((r, ri) => {
    ctx.fillStyle = css("--fg");
    ctx.fillText(r.length > 34 ? r.slice(0, 33) + "…" : r, 2, ri * cellH + cellH / 2);
    spec.values[ri].forEach((v, ci) => {
      ctx.fillStyle = v === null ? css("--bg-soft") : heatColor((v - spec.min) / (spec.max - spec.min || 1));
      ctx.fillRect(labelW + ci * cellW, ri * cellH + 1, Math.ceil(cellW), cellH - 2);
      if (spec.marks?.has(`${ri}:${ci}`)) {
        ctx.strokeStyle = "#ff1744";
        ctx.lineWidth = 2;
        ctx.strokeRect(labelW + ci * cellW + 1, ri * cellH + 2, Math.max(2, cellW - 2), cellH - 4);
      }
    });
  });
  ctx.fillStyle = css("--fg-muted");
  if (cols) {
    ctx.fillText(fmtTime(spec.times[0]), labelW, spec.rows.length * cellH + 9);
    const last = fmtTime(spec.times[cols - 1]);
    ctx.fillText(last, width - ctx.measureText(last).width - 2, spec.rows.length * cellH + 9);
  }
  canvas.addEventListener("mousemove", (e) => {
    const rect = canvas.getBoundingClientRect();
    const x = e.clientX - rect.left, y = e.clientY - rect.top;
    const ri = Math.floor(y / cellH), ci = Math.floor((x - labelW) / cellW);
    if (x < labelW || ri < 0 || ri >= spec.rows.length || ci < 0 || ci >= cols) {
      tooltip.hidden = true;
      return;
    }
    const v = spec.values[ri][ci];
    tooltip.replaceChildren(
      h("div", { class: "tt-x" }, fmtTime(spec.times[ci])),
      h("div", null, spec.rows[ri], ": ", h("b", null, withUnit(v, spec.unit))),
    );
    if (spec.marks?.has(`${ri}:${ci}`)) tooltip.appendChild(h("div", { class: "bad" }, "XID error"));
    tooltip.hidden = false;
    tooltip.style.left = (x > width / 2 ? x - 220 : x + 12) + "px";
    tooltip.style.top = y + 8 + "px";
  });
  canvas.addEventListener("mouseleave", () => (tooltip.hidden = true));
  return wrap;
}

// Viridis-like ramp, t in [0, 1].
export function heatColor(t: number): string {
  t = Math.min(1, Math.max(0, t));
  const stops = [
    [68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37],
  ];
  const p = t * (stops.length - 1), i = Math.min(stops.length - 2, Math.floor(p)), f = p - i;
  const c = stops[i].map((a, k) => Math.round(a + (stops[i + 1][k] - a) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}
