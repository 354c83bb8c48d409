// Histograms over steps, TensorBoard's two views of them:
//  - distribution: percentile bands over steps (min/7/16/31/50/69/84/93/max
//    %, the normal distribution's ±1.5σ, ±1σ, ±0.5σ), one uPlot chart whose
//    bands are filled polygons like chart.ts's envelopes;
//  - histogram: the per-step histograms as an offset ridgeline on a canvas,
//    older steps at the back (top), later steps in front (bottom).
// And PromQL's native histograms (Explore): a heatmap over time and the bars
// of one histogram, at the end of this file.
import uPlot from "uplot";
import { bucketText, type NativeBucket, type NativeHistogram } from "./api";
import { css, envelope, heatColor } from "./chart";
import { h } from "./dom";
import { fmtNum, fmtTime } from "./format";

// A histogram as numbers: [lower, upper, count] ascending.
export type Buckets = [number, number, number][];
export interface HistStep {
  step: number;
  buckets: Buckets;
}

// TensorBoard's percentiles, in basis points.
export const PERCENTILES = [0, 668, 1587, 3085, 5000, 6915, 8413, 9332, 10000];

// The value below which `p` (0..1) of the counts lie, interpolated linearly
// within the bucket that holds it; null for an empty histogram.
export function percentile(b: Buckets, p: number): number | null {
  let total = 0;
  for (const [, , c] of b) total += c > 0 ? c : 0;
  if (!(total > 0)) return null;
  const target = p * total;
  if (p <= 0) {
    const first = b.find(([, , c]) => c > 0)!;
    return first[0];
  }
  let cum = 0;
  for (const [lo, hi, c] of b) {
    if (!(c > 0)) continue;
    if (cum + c >= target) return lo + (hi - lo) * Math.min(1, Math.max(0, (target - cum) / c));
    cum += c;
  }
  for (let i = b.length - 1; i >= 0; i--) if (b[i][2] > 0) return b[i][1];
  return null;
}

export function percentiles(b: Buckets): (number | null)[] {
  return PERCENTILES.map((bp) => percentile(b, bp / 10000));
}

const BAND_NAMES = ["min–max", "7–93%", "16–84%", "31–69%"];

export interface HistView {
  el: HTMLElement;
  destroy(): void;
}

// The distribution view: one band per percentile pair and the median line.
export function distributionChart(parent: HTMLElement, steps: HistStep[], opts: { color: string; height?: number }): HistView {
  const wrap = h("figure", { class: "chart hist-chart", "data-view": "distribution" });
  const plotEl = h("div", { class: "plot" });
  wrap.append(plotEl);
  parent.appendChild(wrap);
  const ok = steps.filter((s) => s.buckets.some(([, , c]) => c > 0));
  if (!ok.length) {
    plotEl.appendChild(h("div", { class: "empty" }, "no data"));
    return { el: wrap, destroy: () => {} };
  }
  const xs = ok.map((s) => s.step);
  const cols = PERCENTILES.map(() => [] as (number | null)[]);
  for (const s of ok) percentiles(s.buckets).forEach((v, i) => cols[i].push(v));
  const data: uPlot.AlignedData = [xs, ...cols];
  const n = PERCENTILES.length; // columns 1..n
  const series: uPlot.Series[] = [{ label: "step" }];
  for (let i = 0; i < n; i++) {
    const mirror = n - i; // the column of the band's lower percentile, for an upper one
    const upper = i > (n - 1) / 2;
    const median = i === (n - 1) / 2;
    if (median) series.push({ label: "median", stroke: opts.color, width: 1.5, points: { show: false }, spanGaps: true });
    else if (upper) {
      const depth = n - 1 - i; // 0: min–max, 3: 31–69 %
      series.push({ label: `p${PERCENTILES[i] / 100}`, width: 0, fill: opts.color + ["26", "33", "40", "59"][depth], points: { show: false }, spanGaps: true, paths: envelope(mirror) });
    } else series.push({ label: `p${PERCENTILES[i] / 100}`, width: 0, points: { show: false }, spanGaps: true, paths: () => null });
  }
  const tooltip = h("div", { class: "tooltip", hidden: true });
  const axisColor = css("--fg-muted"), gridColor = css("--grid");
  const plot = new uPlot(
    {
      width: Math.max(200, plotEl.clientWidth || parent.clientWidth || 500),
      height: opts.height ?? 220,
      scales: { x: { time: false } },
      series,
      legend: { show: false },
      cursor: { drag: { x: true, y: false, setScale: true }, points: { show: false } },
      axes: [
        { stroke: axisColor, grid: { stroke: gridColor, width: 1 }, ticks: { stroke: gridColor } },
        { stroke: axisColor, grid: { stroke: gridColor, width: 1 }, ticks: { stroke: gridColor }, size: 64, values: (_u, vals) => vals.map((v) => fmtNum(v, 4)) },
      ],
      hooks: {
        setCursor: [
          (u) => {
            const i = u.cursor.idx;
            if (i === null || i === undefined || u.cursor.left === undefined || u.cursor.left < 0) {
              tooltip.hidden = true;
              return;
            }
            const v = (c: number) => fmtNum(u.data[c + 1][i] as number | null);
            tooltip.replaceChildren(
              h("div", { class: "tt-x" }, "step " + fmtNum(u.data[0][i], 12)),
              h("div", null, "max ", h("b", null, v(n - 1))),
              ...[7, 6, 5].map((k) => h("div", null, `p${PERCENTILES[k] / 100} `, h("b", null, v(k)))),
              h("div", null, "median ", h("b", null, v(4))),
              ...[3, 2, 1].map((k) => h("div", null, `p${PERCENTILES[k] / 100} `, h("b", null, v(k)))),
              h("div", null, "min ", h("b", null, v(0))),
            );
            tooltip.hidden = false;
            const left = u.cursor.left, w = u.over.clientWidth;
            tooltip.style.left = (left > w / 2 ? left - tooltip.offsetWidth - 12 : left + 12) + "px";
            tooltip.style.top = "4px";
          },
        ],
      },
    },
    data,
    plotEl,
  );
  plot.over.appendChild(tooltip);
  plot.over.addEventListener("mouseleave", () => (tooltip.hidden = true));
  wrap.dataset.bands = String(BAND_NAMES.length);
  wrap.dataset.steps = String(xs.length);
  wrap.appendChild(
    h("div", { class: "legend hist-legend" },
      BAND_NAMES.map((b, d) => h("span", { class: "lg-item", "data-band": b }, h("span", { class: "swatch", style: `background:${opts.color}${["26", "40", "66", "99"][d]}` }), b)),
      h("span", { class: "lg-item" }, h("span", { class: "swatch", style: `background:${opts.color}` }), "median"),
    ),
  );
  const ro = new ResizeObserver(() => {
    const w = plotEl.clientWidth;
    if (w > 0 && Math.abs(w - plot.width) > 2) plot.setSize({ width: w, height: plot.height });
  });
  ro.observe(plotEl);
  return {
    el: wrap,
    destroy: () => {
      ro.disconnect();
      plot.destroy();
    },
  };
}

// Spreads a histogram's counts over `bins` equal bins of [lo, hi] by overlap
// (a zero-width bucket goes whole into the bin that holds it).
export function rebin(b: Buckets, lo: number, hi: number, bins: number): number[] {
  const out = new Array<number>(bins).fill(0);
  const w = (hi - lo) / bins || 1;
  const binOf = (v: number) => Math.min(bins - 1, Math.max(0, Math.floor((v - lo) / w)));
  for (const [a, z, c] of b) {
    if (!(c > 0) || !Number.isFinite(a) || !Number.isFinite(z)) continue;
    if (z <= a) {
      out[binOf(a)] += c;
      continue;
    }
    const i0 = binOf(a), i1 = binOf(z);
    for (let i = i0; i <= i1; i++) {
      const s = Math.max(a, lo + i * w), e = Math.min(z, lo + (i + 1) * w);
      if (e > s) out[i] += (c * (e - s)) / (z - a);
    }
  }
  return out;
}

const MAX_RIDGES = 40;
const RIDGE_BINS = 60;

// The histogram view: an offset ridgeline of (at most 40 of) the steps.
export function ridgelineChart(parent: HTMLElement, all: HistStep[], opts: { color: string; height?: number }): HistView {
  const wrap = h("figure", { class: "chart hist-chart", "data-view": "histogram" });
  parent.appendChild(wrap);
  const steps0 = all.filter((s) => s.buckets.some(([, , c]) => c > 0));
  if (!steps0.length) {
    wrap.appendChild(h("div", { class: "empty" }, "no data"));
    return { el: wrap, destroy: () => {} };
  }
  // Evenly spread steps, the first and the last always in.
  let steps = steps0;
  if (steps0.length > MAX_RIDGES) {
    const pick = new Set<number>();
    for (let i = 0; i < MAX_RIDGES; i++) pick.add(Math.round((i * (steps0.length - 1)) / (MAX_RIDGES - 1)));
    steps = [...pick].sort((a, b) => a - b).map((i) => steps0[i]);
  }
  let lo = Infinity, hi = -Infinity;
  for (const s of steps)
    for (const [a, z, c] of s.buckets) {
      if (!(c > 0)) continue;
      if (Number.isFinite(a)) lo = Math.min(lo, a);
      if (Number.isFinite(z)) hi = Math.max(hi, z);
    }
  if (!(hi > lo)) {
    lo -= 0.5;
    hi += 0.5;
  }
  const binned = steps.map((s) => rebin(s.buckets, lo, hi, RIDGE_BINS));
  const peak = Math.max(...binned.map((b) => Math.max(...b))) || 1;

  const height = opts.height ?? 260;
  const canvas = h("canvas", { role: "img", "aria-label": `histograms of ${steps.length} steps, later steps in front` });
  const box = h("div", { class: "heat-box" });
  const tooltip = h("div", { class: "tooltip", hidden: true });
  box.append(canvas, tooltip);
  wrap.appendChild(box);
  wrap.dataset.ridges = String(steps.length);
  wrap.dataset.steps = String(steps0.length);

  const padL = 8, padR = 70, padT = 8, padB = 22;
  let width = 0;
  const geometry = () => {
    const plotW = width - padL - padR, plotH = height - padT - padB;
    const ridgeH = plotH * 0.45; // a ridge's tallest peak
    const spacing = steps.length > 1 ? (plotH - ridgeH) / (steps.length - 1) : 0;
    return { plotW, plotH, ridgeH, spacing };
  };
  const baseOf = (i: number) => {
    const g = geometry();
    return padT + g.ridgeH + i * g.spacing; // step 0 at the back (top)
  };
  const draw = () => {
    width = Math.max(300, box.clientWidth || parent.clientWidth || 500);
    const dpr = window.devicePixelRatio || 1;
    canvas.width = width * dpr;
    canvas.height = height * dpr;
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    const ctx = canvas.getContext("2d")!;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const g = geometry();
    const bg = css("--bg-soft"), fg = css("--fg-muted");
    const binW = g.plotW / RIDGE_BINS;
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    steps.forEach((s, i) => {
      const base = baseOf(i);
      const t = steps.length > 1 ? i / (steps.length - 1) : 1;
      ctx.beginPath();
      ctx.moveTo(padL, base);
      binned[i].forEach((c, k) => {
        const y = base - (c / peak) * g.ridgeH;
        ctx.lineTo(padL + (k + 0.5) * binW, y);
      });
      ctx.lineTo(padL + g.plotW, base);
      ctx.closePath();
      // Filled with the background so a later (front) ridge hides what is behind it.
      ctx.fillStyle = bg;
      ctx.fill();
      ctx.fillStyle = opts.color + Math.round(0x18 + t * 0x40).toString(16).padStart(2, "0");
      ctx.fill();
      ctx.strokeStyle = opts.color;
      ctx.globalAlpha = 0.35 + 0.65 * t;
      ctx.lineWidth = 1;
      ctx.stroke();
      ctx.globalAlpha = 1;
      const labelEvery = Math.max(1, Math.ceil(steps.length / 8));
      if (i % labelEvery === 0 || i === steps.length - 1) {
        ctx.fillStyle = fg;
        ctx.fillText("step " + fmtNum(s.step, 10), padL + g.plotW + 6, base);
      }
    });
    ctx.fillStyle = fg;
    ctx.textBaseline = "alphabetic";
    const ticks = [lo, lo + (hi - lo) / 2, hi];
    ticks.forEach((v, k) => {
      const txt = fmtNum(v, 4);
      const x = padL + (k * g.plotW) / 2;
      const w = ctx.measureText(txt).width;
      ctx.fillText(txt, k === 0 ? x : k === 2 ? x - w : x - w / 2, height - 6);
    });
  };
  draw();
  const ro = new ResizeObserver(() => {
    if (Math.abs((box.clientWidth || 0) - width) > 2 && box.clientWidth > 0) draw();
  });
  ro.observe(box);
  canvas.addEventListener("mousemove", (e) => {
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    const g = geometry();
    if (x < padL || x > padL + g.plotW) {
      tooltip.hidden = true;
      return;
    }
    // The frontmost ridge whose base is at or below the cursor.
    let i = steps.length - 1;
    while (i > 0 && baseOf(i - 1) >= y) i--;
    const k = Math.min(RIDGE_BINS - 1, Math.max(0, Math.floor(((x - padL) / g.plotW) * RIDGE_BINS)));
    const w = (hi - lo) / RIDGE_BINS;
    tooltip.replaceChildren(
      h("div", { class: "tt-x" }, "step " + fmtNum(steps[i].step, 12)),
      h("div", null, `[${fmtNum(lo + k * w, 4)}, ${fmtNum(lo + (k + 1) * w, 4)}): `, h("b", null, fmtNum(binned[i][k], 4))),
    );
    tooltip.hidden = false;
    tooltip.style.left = (x > width / 2 ? x - 200 : x + 12) + "px";
    tooltip.style.top = y + 8 + "px";
  });
  canvas.addEventListener("mouseleave", () => (tooltip.hidden = true));
  return { el: wrap, destroy: () => ro.disconnect() };
}

// ---- native histograms (PromQL query results) ----
// Two views of the query API's histograms sharing one bucket-bound scale:
// a heatmap (time on x, bucket bounds on y, counts as colour) for a range
// query and bars (bounds on x, counts as height) for an instant one. The
// TensorBoard views above rebin to equal-width bins, which flattens
// exponential buckets into one bin; these keep each bucket's own bounds.

// Bucket bounds to a 0..1 position, logarithmic for exponential buckets
// (and positive bounds spanning decades), else linear.
export interface BoundScale {
  log: boolean;
  min: number;
  max: number;
  pos(v: number): number;
  ticks(): number[];
}

// The scale of every non-empty bucket of `hists`; null when all are empty.
// On a log scale the zero bucket (lower <= 0) is drawn as one band below
// the smallest positive bound; infinite bounds are drawn at the ends.
export function boundScale(hists: NativeBucket[][]): BoundScale | null {
  let lo = Infinity, hi = -Infinity, minPos = Infinity, positive = true, exponential = true, infLo = false, infHi = false;
  let ratio = 0, any = false;
  for (const bs of hists)
    for (const b of bs) {
      if (!(b.count > 0)) continue;
      any = true;
      if (Number.isFinite(b.lower)) lo = Math.min(lo, b.lower);
      else infLo = true;
      if (Number.isFinite(b.upper)) hi = Math.max(hi, b.upper);
      else infHi = true;
      if (b.upper <= 0 || (b.lower < 0 && b.lower !== -b.upper)) positive = false;
      if (b.lower > 0) {
        minPos = Math.min(minPos, b.lower);
        if (Number.isFinite(b.upper)) {
          const r = b.upper / b.lower;
          if (ratio === 0) ratio = r;
          else if (Math.abs(r - ratio) > 1e-6 * ratio) exponential = false;
        }
      }
    }
  if (!any) return null;
  if (!Number.isFinite(hi)) hi = Number.isFinite(lo) ? lo + 1 : 1;
  if (!Number.isFinite(lo)) lo = hi - 1;
  const log = positive && hi > 0 && ((exponential && ratio > 1) || (Number.isFinite(minPos) && hi / minPos >= 20));
  if (log) {
    // The zero bucket gets one band of the bucket width (or a decade).
    const step = exponential && ratio > 1 ? ratio : 10;
    let min = Number.isFinite(minPos) ? minPos : hi / step;
    if (lo < min) min /= step;
    let max = hi;
    if (infHi) max *= step;
    const l0 = Math.log10(min), l1 = Math.log10(max);
    const span = l1 - l0 || 1;
    return {
      log, min, max,
      pos: (v) => (v <= min ? 0 : v >= max ? 1 : (Math.log10(v) - l0) / span),
      ticks: () => {
        const out: number[] = [];
        for (let e = Math.ceil(l0); e <= Math.floor(l1); e++) for (const m of span > 3 ? [1] : [1, 2, 5]) {
          const v = m * 10 ** e;
          if (v >= min && v <= max) out.push(v);
        }
        if (out.length < 2) out.splice(0, out.length, min, Math.sqrt(min * max), max);
        return out;
      },
    };
  }
  let min = lo, max = hi;
  if (!(max > min)) {
    min -= 0.5;
    max += 0.5;
  }
  const pad = (max - min) * 0.1;
  if (infLo) min -= pad;
  if (infHi) max += pad;
  return {
    log, min, max,
    pos: (v) => (v <= min ? 0 : v >= max ? 1 : (v - min) / (max - min)),
    ticks: () => [0, 1, 2, 3, 4].map((k) => min + ((max - min) * k) / 4),
  };
}

function fmtBound(v: number): string {
  return Number.isFinite(v) ? fmtNum(v, 4) : v > 0 ? "+Inf" : "-Inf";
}

// A canvas sized to its box at the device's pixel ratio, and its 2D context.
function sizedCanvas(canvas: HTMLCanvasElement, width: number, height: number): CanvasRenderingContext2D {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = width * dpr;
  canvas.height = height * dpr;
  canvas.style.width = width + "px";
  canvas.style.height = height + "px";
  const ctx = canvas.getContext("2d")!;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.font = "11px system-ui, sans-serif";
  return ctx;
}

function placeTooltip(tooltip: HTMLElement, x: number, y: number, width: number): void {
  tooltip.hidden = false;
  tooltip.style.left = (x > width / 2 ? x - tooltip.offsetWidth - 12 : x + 12) + "px";
  tooltip.style.top = y + 8 + "px";
}

function countLegend(max: number): HTMLElement {
  return h("div", { class: "heat-scale" }, "count 0", h("span", { class: "heat-gradient" }), fmtNum(max, 4));
}

export interface HeatmapOpts {
  title?: string;
  // The query's range: columns sit at their times, `step` wide.
  start: number;
  end: number;
  step: number;
  height?: number;
}

// The heatmap of one series' histograms over time.
export function histogramHeatmap(parent: HTMLElement, points: [number, NativeHistogram][], opts: HeatmapOpts): HistView {
  const wrap = h("figure", { class: "chart hist-heatmap", "data-view": "heatmap" });
  if (opts.title) wrap.appendChild(h("figcaption", null, opts.title));
  parent.appendChild(wrap);
  const scale = boundScale(points.map(([, p]) => p.buckets));
  if (!scale) {
    wrap.appendChild(h("div", { class: "empty" }, "no data (every bucket empty)"));
    return { el: wrap, destroy: () => {} };
  }
  let maxCount = 0, cells = 0;
  for (const [, p] of points)
    for (const b of p.buckets)
      if (b.count > 0) {
        maxCount = Math.max(maxCount, b.count);
        cells++;
      }
  const height = opts.height ?? 260;
  const padL = 64, padR = 8, padT = 8, padB = 22;
  const canvas = h("canvas", { role: "img", "aria-label": `heatmap of ${points.length} histograms, bucket bounds on a ${scale.log ? "log" : "linear"} scale` });
  const box = h("div", { class: "heat-box" });
  const tooltip = h("div", { class: "tooltip", hidden: true });
  box.append(canvas, tooltip);
  wrap.append(box, countLegend(maxCount));
  Object.assign(wrap.dataset, { columns: String(points.length), cells: String(cells), scale: scale.log ? "log" : "linear", max: String(maxCount) });

  const x0 = opts.start - opts.step / 2, x1 = opts.end + opts.step / 2;
  let width = 0;
  const plotW = () => width - padL - padR, plotH = height - padT - padB;
  const xOf = (t: number) => padL + ((t - x0) / (x1 - x0 || 1)) * plotW();
  const yOf = (v: number) => padT + (1 - scale.pos(v)) * plotH;
  const draw = () => {
    width = Math.max(300, box.clientWidth || parent.clientWidth || 600);
    const ctx = sizedCanvas(canvas, width, height);
    const fg = css("--fg-muted"), grid = css("--grid");
    const colW = Math.max(1, (opts.step / (x1 - x0 || 1)) * plotW());
    for (const [t, p] of points) {
      const left = xOf(t) - colW / 2;
      for (const b of p.buckets) {
        if (!(b.count > 0)) continue;
        const top = yOf(b.upper), bottom = yOf(b.lower);
        ctx.fillStyle = heatColor(b.count / maxCount);
        ctx.fillRect(left, top, Math.ceil(colW), Math.max(1, bottom - top));
      }
    }
    ctx.strokeStyle = grid;
    ctx.fillStyle = fg;
    ctx.textBaseline = "middle";
    for (const v of scale.ticks()) {
      const y = Math.round(yOf(v)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(padL - 4, y);
      ctx.lineTo(padL, y);
      ctx.stroke();
      const txt = fmtNum(v, 3);
      ctx.fillText(txt, padL - 6 - ctx.measureText(txt).width, y);
    }
    ctx.textBaseline = "alphabetic";
    const first = fmtTime(opts.start), last = fmtTime(opts.end);
    ctx.fillText(first, padL, height - 6);
    ctx.fillText(last, width - padR - ctx.measureText(last).width, height - 6);
  };
  draw();
  const ro = new ResizeObserver(() => {
    if (box.clientWidth > 0 && Math.abs(box.clientWidth - width) > 2) draw();
  });
  ro.observe(box);
  canvas.addEventListener("mousemove", (e) => {
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    const t = x0 + ((x - padL) / (plotW() || 1)) * (x1 - x0);
    let best: [number, NativeHistogram] | null = null;
    for (const p of points) if (Math.abs(p[0] - t) <= opts.step / 2 && (!best || Math.abs(p[0] - t) < Math.abs(best[0] - t))) best = p;
    const b = best?.[1].buckets.find((b) => b.count > 0 && y >= yOf(b.upper) - 0.5 && y <= yOf(b.lower) + 0.5);
    if (!best || !b) {
      tooltip.hidden = true;
      return;
    }
    tooltip.replaceChildren(h("div", { class: "tt-x" }, fmtTime(best[0])), h("div", null, bucketText(b, fmtBound), ": ", h("b", null, fmtNum(b.count))));
    placeTooltip(tooltip, x, y, width);
  });
  canvas.addEventListener("mouseleave", () => (tooltip.hidden = true));
  return { el: wrap, destroy: () => ro.disconnect() };
}

// The bars of one histogram: each bucket over its bounds, count as height.
export function histogramBars(parent: HTMLElement, hist: NativeHistogram, opts: { title?: string; color: string; height?: number }): HistView {
  const wrap = h("figure", { class: "chart hist-bars", "data-view": "bars" });
  if (opts.title) wrap.appendChild(h("figcaption", null, opts.title));
  parent.appendChild(wrap);
  const scale = boundScale([hist.buckets]);
  if (!scale) {
    wrap.appendChild(h("div", { class: "empty" }, "no data (every bucket empty)"));
    return { el: wrap, destroy: () => {} };
  }
  const bars = hist.buckets.filter((b) => b.count > 0);
  const maxCount = Math.max(...bars.map((b) => b.count));
  const height = opts.height ?? 200;
  const padL = 56, padR = 12, padT = 8, padB = 22;
  const canvas = h("canvas", { role: "img", "aria-label": `${bars.length} buckets, bounds on a ${scale.log ? "log" : "linear"} scale` });
  const box = h("div", { class: "heat-box" });
  const tooltip = h("div", { class: "tooltip", hidden: true });
  box.append(canvas, tooltip);
  wrap.append(box, h("div", { class: "heat-scale" }, `count ${fmtNum(hist.count)} · sum ${fmtNum(hist.sum)}`));
  Object.assign(wrap.dataset, { bars: String(bars.length), scale: scale.log ? "log" : "linear", max: String(maxCount) });

  let width = 0;
  const plotH = height - padT - padB;
  const xOf = (v: number) => padL + scale.pos(v) * (width - padL - padR);
  const yOf = (c: number) => padT + plotH - (c / maxCount) * plotH;
  const draw = () => {
    width = Math.max(300, box.clientWidth || parent.clientWidth || 600);
    const ctx = sizedCanvas(canvas, width, height);
    const fg = css("--fg-muted");
    for (const b of bars) {
      const l = xOf(b.lower), r = xOf(b.upper), top = yOf(b.count);
      ctx.fillStyle = opts.color + "99";
      ctx.fillRect(l, top, Math.max(1, r - l), padT + plotH - top);
      ctx.strokeStyle = opts.color;
      ctx.strokeRect(l + 0.5, top + 0.5, Math.max(1, r - l - 1), padT + plotH - top - 1);
    }
    ctx.fillStyle = fg;
    ctx.textBaseline = "middle";
    for (const c of [0, maxCount / 2, maxCount]) {
      const txt = fmtNum(c, 4);
      ctx.fillText(txt, padL - 6 - ctx.measureText(txt).width, yOf(c));
    }
    ctx.textBaseline = "alphabetic";
    let lastRight = -Infinity;
    for (const v of scale.ticks()) {
      const txt = fmtNum(v, 3), w = ctx.measureText(txt).width;
      const x = Math.min(width - padR - w, Math.max(padL, xOf(v) - w / 2));
      if (x < lastRight + 6) continue;
      ctx.fillText(txt, x, height - 6);
      lastRight = x + w;
    }
  };
  draw();
  const ro = new ResizeObserver(() => {
    if (box.clientWidth > 0 && Math.abs(box.clientWidth - width) > 2) draw();
  });
  ro.observe(box);
  canvas.addEventListener("mousemove", (e) => {
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    const b = bars.find((b) => x >= xOf(b.lower) - 0.5 && x <= xOf(b.upper) + 0.5);
    if (!b) {
      tooltip.hidden = true;
      return;
    }
    tooltip.replaceChildren(h("div", null, bucketText(b, fmtBound), ": ", h("b", null, fmtNum(b.count))));
    placeTooltip(tooltip, x, y, width);
  });
  canvas.addEventListener("mouseleave", () => (tooltip.hidden = true));
  return { el: wrap, destroy: () => ro.disconnect() };
}
