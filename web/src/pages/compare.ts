// Compare: N runs overlaid by step or time, server-side EMA smoothing, a
// min/max envelope where buckets hold several points (on by default for up
// to 10 runs; zoom in to refetch at full resolution), the runs' images,
// texts and tables side by side at one step, and a parallel-coordinates
// view of the config keys that differ and the final metrics, brushed to
// filter a sortable table of the runs.
import { listRuns, num, runMetrics, type Run, type RunMetrics } from "../api";
import { lineChart, PALETTE, type ChartHandle, type Line } from "../chart";
import { h, link } from "../dom";
import { unitOf } from "../format";
import type { PageContext } from "../main";
import { errorNotice, orderKeys, summaryNumbers } from "./common";
import { hparamsView } from "./hparams";
import { compareMedia } from "./media";

const kEnvelopeRuns = 10;

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
  // One request for every run (their ids as a filter), in the order asked.
  const runs: Run[] = [];
  try {
    // Run ids are [A-Za-z0-9_.-] (docs/runs-api.md): others are no run, and
    // quoting the rest needs no escapes.
    // 50 ids a request keep the URL within the server's 8 KiB limit.
    const valid = ids.filter((id) => /^[A-Za-z0-9_.-]{1,64}$/.test(id));
    const parts: string[][] = [];
    for (let i = 0; i < valid.length; i += 50) parts.push(valid.slice(i, i + 50));
    const found = (
      await Promise.all(parts.map((p) => listRuns({ filter: p.map((id) => `id = "${id}"`).join(" or "), limit: p.length })))
    ).flat();
    const byId = new Map(found.map((r) => [r.id, r]));
    for (const id of ids) {
      const r = byId.get(id);
      if (r) runs.push(r);
      else main.appendChild(errorNotice("run " + id, new Error("not found")));
    }
  } catch (e) {
    main.appendChild(errorNotice("runs", e));
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
  // Min/max envelopes: on by default for up to 10 runs. With more, each
  // run's band lies over the others' (one blur), and their fill is most of
  // a redraw's cost without a GPU (bench/ui); the tooltip still gives each
  // bucket's [min … max], and the box turns them on.
  const envDefault = runs.length <= kEnvelopeRuns;
  let envelopes = query.get("envelope") === null ? envDefault : query.get("envelope") === "1";

  const save = () => {
    const q = new URLSearchParams();
    q.set("ids", runs.map((r) => r.id).join(","));
    if (x !== "step") q.set("x", x);
    if (smoothing) q.set("smoothing", String(smoothing));
    q.set("keys", keys.join(","));
    if (envelopes !== envDefault) q.set("envelope", envelopes ? "1" : "0");
    ctx.setQuery(q);
  };

  const xSel = h("select", { "aria-label": "x axis" }, h("option", { value: "step" }, "by step"), h("option", { value: "time" }, "by time"));
  xSel.value = x;
  const slider = h("input", { type: "range", min: "0", max: "0.99", step: "0.01", value: String(smoothing), "aria-label": "smoothing" });
  const sliderVal = h("output", null, smoothing.toFixed(2));
  const envBox = h("input", { type: "checkbox", checked: envelopes, "aria-label": "min/max envelope" });
  envBox.addEventListener("change", () => {
    envelopes = envBox.checked;
    save();
    void draw(true);
  });
  const keyBoxes = allKeys.map((k) => {
    const cb = h("input", { type: "checkbox", value: k, checked: keys.includes(k) });
    cb.addEventListener("change", () => {
      keys = allKeys.filter((kk) => keyBoxes.find((b) => b.value === kk)!.checked);
      save();
      void draw(true);
    });
    return cb;
  });
  main.append(
    h("p", null, runs.map((r) => [h("span", { class: "swatch", style: `background:${color.get(r.id)}` }), " ", link("/runs/" + encodeURIComponent(r.id), r.name), "  "])),
    h("div", { class: "toolbar" }, xSel, h("label", { class: "inline" }, "smoothing (EMA) ", slider, sliderVal), h("label", { class: "inline" }, envBox, " min/max envelope"), h("span", { class: "muted" }, "drag on a chart to zoom, double-click to reset")),
    h("fieldset", { class: "toolbar" }, h("legend", null, "metrics"), keyBoxes.map((b) => h("label", { class: "inline" }, b, b.value))),
  );
  const charts = h("div", { class: "grid", id: "compare-charts" });
  main.appendChild(charts);

  // One chart per key, drawn as its data comes, at about one bucket per
  // pixel of the chart's width: more than that is not seen, and each bucket
  // keeps its min and max.
  const views = new Map<string, { cell: HTMLElement; chart: ChartHandle | null }>();
  // The plot area is the cell less the y axis (64 px) and the padding.
  const budget = (cell: HTMLElement) => Math.max(200, Math.min(2000, Math.round(((cell.clientWidth || 600) - 84) * (window.devicePixelRatio || 1))));
  const linesOf = (ms: RunMetrics[], key: string): Line[] =>
    ms
      .filter((m) => m.key === key && (!m.labels?.rank || m.labels.rank === "0"))
      .map((m) => {
        const env = envelopes && m.points.some((p) => p.count > 1);
        return {
          label: m.name,
          color: color.get(m.id),
          x: m.points.map((p) => p.x),
          y: m.points.map((p) => num(smoothing ? p.ema : p.last)),
          min: env ? m.points.map((p) => num(p.min)) : undefined,
          max: env ? m.points.map((p) => num(p.max)) : undefined,
        };
      });

  // A zoom on one chart shows the same range on all of them at once, from the
  // data they have; the range's finer data is fetched once the zooming stops.
  let refineTimer = 0;
  const zoom = (from: string, r: [number, number] | null) => {
    range = r ? (x === "step" ? [Math.floor(r[0]), Math.ceil(r[1])] : r) : null;
    // The dragged chart zooms itself; a reset (double-click) is for all.
    for (const [key, v] of views) if (key !== from || r === null) v.chart?.setX(r);
    clearTimeout(refineTimer);
    refineTimer = window.setTimeout(() => void draw(false), 150);
  };

  let controller: AbortController | null = null;
  // rebuild: new charts for the keys shown (keys, x or smoothing changed);
  // else new data for the charts there are (zoomed, or zoom reset).
  const draw = async (rebuild: boolean) => {
    controller?.abort();
    const ctl = (controller = new AbortController());
    if (rebuild) {
      for (const v of views.values()) v.chart?.destroy();
      views.clear();
      charts.replaceChildren();
      for (const key of keys) {
        const cell = h("div", { "data-key": key });
        charts.appendChild(cell);
        views.set(key, { cell, chart: null });
      }
    }
    const t0 = performance.now();
    // The first chart's key on its own, the others in one request: each
    // request reads every run's step series once (x=step joins on it), so
    // this reads it twice, not once per key, and the first chart needs
    // only its own key read.
    const shown = [...views.keys()];
    const groups = [shown.slice(0, 1), shown.slice(1)].filter((g) => g.length);
    const width = Math.max(...[...views.values()].map((v) => budget(v.cell)));
    const show = (key: string, ms: RunMetrics[]) => {
      const v = views.get(key)!;
      const lines = linesOf(ms, key);
      if (v.chart?.update(lines, range === null)) return;
      v.chart?.destroy();
      v.cell.replaceChildren();
      v.chart = lineChart(v.cell, {
        title: key + (smoothing ? ` (EMA ${smoothing.toFixed(2)})` : ""),
        xKind: x,
        unit: unitOf(ms.find((m) => m.key === key)?.metric ?? key),
        onZoom: (r) => zoom(key, r),
        lines,
      });
    };
    await Promise.all(
      groups.map(async (group) => {
        let ms: RunMetrics[];
        try {
          ms = await runMetrics(
            { ids: runs.map((r) => r.id).join(","), keys: group.join(","), x, points: width, smoothing: smoothing || undefined, start: range?.[0], end: range?.[1] },
            ctl.signal,
          );
        } catch (e) {
          if ((e as Error).name === "AbortError") return;
          for (const key of group) {
            const v = views.get(key)!;
            v.chart?.destroy();
            v.chart = null;
            v.cell.replaceChildren(errorNotice("metrics " + key, e));
          }
          return;
        }
        if (ctl.signal.aborted) return;
        for (const key of group) show(key, ms);
      }),
    );
    if (!ctl.signal.aborted) charts.dataset.firstChartMs = String(Math.round(performance.now() - t0));
  };
  xSel.addEventListener("change", () => {
    x = xSel.value as "step" | "time";
    range = null;
    save();
    void draw(true);
  });
  let slideTimer = 0;
  slider.addEventListener("input", () => {
    smoothing = Number(slider.value);
    sliderVal.textContent = smoothing.toFixed(2);
    clearTimeout(slideTimer);
    slideTimer = window.setTimeout(() => {
      save();
      void draw(true);
    }, 200);
  });
  save();
  await draw(true);

  // ---- media side by side, hyper-parameters ----
  const mediaView = compareMedia(main, runs, color);
  hparamsView(main, runs, color);
  return () => {
    clearTimeout(refineTimer);
    controller?.abort();
    mediaView.destroy();
  };
}

