// Compare: N runs overlaid by step or time, server-side EMA smoothing, a
// min/max envelope where buckets hold several points (zoom in to refetch at
// full resolution), a sortable hyper-parameter table with final metrics and
// a parallel-coordinates view of config vs final metrics.
import { getRun, listRuns, num, runMetrics, type Run, type RunMetrics } from "../api";
import { lineChart, PALETTE } from "../chart";
import { h, link } from "../dom";
import { fmtNum, unitOf } from "../format";
import type { PageContext } from "../main";
import { errorNotice, flatten, orderKeys, sortableTable, summaryNumbers, valueText, type Column } from "./common";

export async function renderCompare(ctx: PageContext): Promise<() => void> {
  const { main, query } = ctx;
  let ids = (query.get("ids") ?? "").split(",").filter(Boolean);
  main.appendChild(h("h1", null, "Compare runs"));
  if (ids.length === 0) {
    // No selection: offer the 10 newest runs.
    try {
      const recent = await listRuns({ limit: 10 });
      if (recent.length === 0) {
        main.appendChild(h("p", { class: "muted" }, "No runs yet."));
        return () => {};
      }
      main.appendChild(h("p", { class: "muted" }, "No runs selected: showing the newest. Select runs on the ", link("/", "Runs"), " page."));
      ids = recent.map((r) => r.id);
    } catch (e) {
      main.appendChild(errorNotice("runs", e));
      return () => {};
    }
  }
  const runs: Run[] = [];
  for (const id of ids) {
    try {
      runs.push(await getRun(id));
    } catch (e) {
      main.appendChild(errorNotice("run " + id, e));
    }
  }
  if (!runs.length) return () => {};
  const color = new Map(runs.map((r, i) => [r.id, PALETTE[i % PALETTE.length]]));

  let x: "step" | "time" = query.get("x") === "time" ? "time" : "step";
  let smoothing = Math.min(0.99, Math.max(0, Number(query.get("smoothing") ?? "0") || 0));
  const allKeys = orderKeys(runs.flatMap((r) => Object.keys(summaryNumbers(r))));
  let keys = (query.get("keys") ?? "").split(",").filter((k) => allKeys.includes(k));
  if (!keys.length) keys = allKeys.filter((k) => ["loss", "lr", "grad_norm", "samples_per_sec"].includes(k));
  if (!keys.length) keys = allKeys.slice(0, 4);
  let range: [number, number] | null = null;

  const save = () => {
    const q = new URLSearchParams();
    q.set("ids", runs.map((r) => r.id).join(","));
    if (x !== "step") q.set("x", x);
    if (smoothing) q.set("smoothing", String(smoothing));
    q.set("keys", keys.join(","));
    ctx.setQuery(q);
  };

  const xSel = h("select", { "aria-label": "x axis" }, h("option", { value: "step" }, "by step"), h("option", { value: "time" }, "by time"));
  xSel.value = x;
  const slider = h("input", { type: "range", min: "0", max: "0.99", step: "0.01", value: String(smoothing), "aria-label": "smoothing" });
  const sliderVal = h("output", null, smoothing.toFixed(2));
  const keyBoxes = allKeys.map((k) => {
    const cb = h("input", { type: "checkbox", value: k, checked: keys.includes(k) });
    cb.addEventListener("change", () => {
      keys = allKeys.filter((kk) => keyBoxes.find((b) => b.value === kk)!.checked);
      save();
      void draw();
    });
    return cb;
  });
  main.append(
    h("p", null, runs.map((r) => [h("span", { class: "swatch", style: `background:${color.get(r.id)}` }), " ", link("/runs/" + encodeURIComponent(r.id), r.name), "  "])),
    h("div", { class: "toolbar" }, xSel, h("label", { class: "inline" }, "smoothing (EMA) ", slider, sliderVal), h("span", { class: "muted" }, "drag on a chart to zoom, double-click to reset")),
    h("fieldset", { class: "toolbar" }, h("legend", null, "metrics"), keyBoxes.map((b) => h("label", { class: "inline" }, b, b.value))),
  );
  const charts = h("div", { class: "grid", id: "compare-charts" });
  main.appendChild(charts);

  let controller: AbortController | null = null;
  const draw = async () => {
    controller?.abort();
    controller = new AbortController();
    const t0 = performance.now();
    let ms: RunMetrics[];
    try {
      ms = await runMetrics(
        { ids: runs.map((r) => r.id).join(","), keys: keys.join(","), x, points: 1000, smoothing: smoothing || undefined, start: range?.[0], end: range?.[1] },
        controller.signal,
      );
    } catch (e) {
      if ((e as Error).name === "AbortError") return;
      charts.replaceChildren(errorNotice("metrics", e));
      return;
    }
    charts.replaceChildren();
    for (const key of keys) {
      const list = ms.filter((m) => m.key === key && (!m.labels?.rank || m.labels.rank === "0"));
      const cell = h("div", { "data-key": key });
      charts.appendChild(cell);
      lineChart(cell, {
        title: key + (smoothing ? ` (EMA ${smoothing.toFixed(2)})` : ""),
        xKind: x,
        unit: unitOf(list[0]?.metric ?? key),
        onZoom: (r) => {
          range = r ? (x === "step" ? [Math.floor(r[0]), Math.ceil(r[1])] : r) : null;
          void draw();
        },
        lines: list.map((m) => {
          const env = m.points.some((p) => p.count > 1);
          return {
            label: m.name,
            color: color.get(m.id),
            x: m.points.map((p) => p.x),
            y: m.points.map((p) => num(smoothing ? p.ema : p.last)),
            min: env ? m.points.map((p) => num(p.min)) : undefined,
            max: env ? m.points.map((p) => num(p.max)) : undefined,
          };
        }),
      });
    }
    charts.dataset.firstChartMs = String(Math.round(performance.now() - t0));
  };
  xSel.addEventListener("change", () => {
    x = xSel.value as "step" | "time";
    range = null;
    save();
    void draw();
  });
  let slideTimer = 0;
  slider.addEventListener("input", () => {
    smoothing = Number(slider.value);
    sliderVal.textContent = smoothing.toFixed(2);
    clearTimeout(slideTimer);
    slideTimer = window.setTimeout(() => {
      save();
      void draw();
    }, 200);
  });
  save();
  await draw();

  // ---- hyper-parameters and final metrics ----
  const cfgs = runs.map((r) => flatten(r.config));
  const cfgKeys = [...new Set(cfgs.flatMap((c) => Object.keys(c)))].sort();
  const cols: Column<number>[] = [
    { title: "run", value: (i) => runs[i].name, cell: (i) => h("span", null, h("span", { class: "swatch", style: `background:${color.get(runs[i].id)}` }), " ", link("/runs/" + encodeURIComponent(runs[i].id), runs[i].name)) },
    { title: "status", value: (i) => runs[i].status },
    ...cfgKeys.map((k): Column<number> => ({ title: "config." + k, value: (i) => cfgs[i][k], num: typeof cfgs.find((c) => c[k] !== undefined)?.[k] === "number" })),
    ...allKeys.map((k): Column<number> => ({ title: k, value: (i) => summaryNumbers(runs[i])[k], cell: (i) => fmtNum(summaryNumbers(runs[i])[k]), num: true })),
  ];
  main.append(h("h2", null, "Hyper-parameters and final metrics"), h("div", { id: "hparams", style: "overflow-x:auto" }, sortableTable(cols, runs.map((_, i) => i))));

  // ---- parallel coordinates ----
  const numeric = cfgKeys.filter((k) => cfgs.some((c) => typeof c[k] === "number"));
  const metricKey = keys[0] ?? allKeys[0];
  const axes = [...numeric.map((k) => ({ name: "config." + k, get: (i: number) => cfgs[i][k] as number | undefined })),
    ...(metricKey ? [{ name: metricKey, get: (i: number) => summaryNumbers(runs[i])[metricKey] }] : [])];
  if (axes.length >= 2) main.append(h("h2", null, "Parallel coordinates"), parallelCoords(axes, runs, color));
  return () => controller?.abort();
}

function parallelCoords(axes: { name: string; get: (i: number) => number | undefined }[], runs: Run[], color: Map<string, string>): HTMLElement {
  const W = 900, H = 260, pad = 40;
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H + 40}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "parallel coordinates of config and final metric");
  const el = (tag: string, attrs: Record<string, string | number>, text?: string) => {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };
  const xs = axes.map((_, i) => pad + (i * (W - 2 * pad)) / (axes.length - 1));
  const scales = axes.map((a) => {
    const vals = runs.map((_, i) => a.get(i)).filter((v): v is number => typeof v === "number" && Number.isFinite(v));
    const lo = Math.min(...vals), hi = Math.max(...vals);
    return { lo, hi, y: (v: number) => (hi === lo ? H / 2 : 20 + (1 - (v - lo) / (hi - lo)) * (H - 20)) };
  });
  axes.forEach((a, i) => {
    el("line", { x1: xs[i], x2: xs[i], y1: 20, y2: H, class: "axis" });
    el("text", { x: xs[i], y: 12, "text-anchor": "middle" }, a.name);
    el("text", { x: xs[i] + 4, y: 24 }, fmtNum(scales[i].hi, 4));
    el("text", { x: xs[i] + 4, y: H }, fmtNum(scales[i].lo, 4));
  });
  runs.forEach((r, ri) => {
    const pts: string[] = [];
    axes.forEach((a, i) => {
      const v = a.get(ri);
      if (typeof v === "number" && Number.isFinite(v)) pts.push(`${xs[i]},${scales[i].y(v)}`);
    });
    const line = el("polyline", { points: pts.join(" "), fill: "none", stroke: color.get(r.id) ?? "#888", "stroke-width": 2 });
    const title = document.createElementNS(NS, "title");
    title.textContent = r.name + ": " + axes.map((a) => `${a.name}=${valueText(a.get(ri))}`).join(", ");
    line.appendChild(title);
  });
  return h("div", { class: "pc" }, svg as unknown as HTMLElement);
}
