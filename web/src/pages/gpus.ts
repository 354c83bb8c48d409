// GPU fleet: a heat map of every GPU over time across hosts (utilisation,
// memory, temperature or power, dcgm-exporter names), idle GPUs flagged
// (mean utilisation < 5 % over 10 minutes), XID errors marked, the GPU time
// runs held over the last day and how much of it sat idle (per project and
// run, from trainwatch_run_gpu_*_seconds_total), and a table of current values.
import { instantQuery, num, rangeQuery, type PromSeries } from "../api";
import { heatMap } from "../chart";
import { h } from "../dom";
import { parseDuration, unitOf, withUnit } from "../format";
import type { PageContext } from "../main";
import { errorNotice } from "./common";
import { GPU_METRICS } from "./run";

const gpuKey = (m: Record<string, string>) => `${m.Hostname ?? m.instance ?? "?"} gpu ${m.gpu ?? "?"}`;

export async function renderGpus(ctx: PageContext): Promise<void> {
  const { main, query } = ctx;
  let metric = query.get("metric") ?? GPU_METRICS[0][0];
  let rangeText = query.get("range") ?? "1h";
  const mSel = h("select", { "aria-label": "metric" }, GPU_METRICS.map(([m, t]) => h("option", { value: m }, t)));
  mSel.value = metric;
  const rIn = h("input", { value: rangeText, size: 6, "aria-label": "range" });
  const form = h("form", { class: "toolbar" }, mSel, h("label", { class: "inline" }, "range", rIn), h("button", { type: "submit" }, "Show"));
  const heatBox = h("div", { id: "gpu-heat" });
  const idleBox = h("div", { id: "gpu-idle" });
  const wasteBox = h("div", { id: "gpu-waste" });
  const tableBox = h("div", { id: "gpu-table" });
  main.append(h("h1", null, "GPU fleet"), form, heatBox, h("h2", null, "Idle GPUs"), idleBox,
    h("h2", null, "GPU time held by runs, last 24 h"), wasteBox, h("h2", null, "Now"), tableBox);

  const draw = async () => {
    const q = new URLSearchParams({ metric, range: rangeText });
    ctx.setQuery(q);
    const range = parseDuration(rangeText) ?? 3600;
    const end = Math.floor(Date.now() / 1000), start = end - range;
    const step = Math.max(1, Math.round(range / 120));
    heatBox.replaceChildren(h("div", { class: "muted" }, "loading…"));
    try {
      const r = await rangeQuery(metric, start, end, step);
      const series = (r.result as PromSeries[]).sort((a, b) => gpuKey(a.metric).localeCompare(gpuKey(b.metric), undefined, { numeric: true }));
      if (!series.length) {
        heatBox.replaceChildren(h("p", { class: "muted" }, `No GPU metrics (${metric}) in the last ${rangeText}: run dcgm-exporter or trainwatch's GPU collector.`));
      } else {
        const times: number[] = [];
        for (let t = start; t <= end; t += step) times.push(t);
        const rows = series.map((s) => gpuKey(s.metric));
        const values = series.map((s) => {
          const row: (number | null)[] = times.map(() => null);
          for (const [t, v] of s.values ?? []) row[Math.round((t - start) / step)] = num(v);
          return row;
        });
        const flat = values.flat().filter((v): v is number => v !== null && Number.isFinite(v));
        const unit = unitOf(metric);
        const min = unit === "%" ? 0 : Math.min(...flat), max = unit === "%" ? 100 : Math.max(...flat);
        const marks = new Set<string>();
        try {
          const x = await rangeQuery("DCGM_FI_DEV_XID_ERRORS != 0", start, end, step);
          for (const s of x.result as PromSeries[]) {
            const ri = rows.indexOf(gpuKey(s.metric));
            if (ri < 0) continue;
            for (const [t] of s.values ?? []) marks.add(`${ri}:${Math.round((t - start) / step)}`);
          }
        } catch {
          /* no XID series: nothing to mark */
        }
        heatBox.replaceChildren();
        heatMap(heatBox, { rows, times, values, min, max, unit, marks, title: GPU_METRICS.find(([m]) => m === metric)?.[1] ?? metric });
        if (marks.size) heatBox.appendChild(h("p", { class: "bad" }, `${marks.size} interval(s) with XID errors (outlined in red).`));
      }
    } catch (e) {
      heatBox.replaceChildren(errorNotice("GPU metrics", e));
    }
  };

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    metric = mSel.value;
    rangeText = rIn.value.trim() || "1h";
    void draw();
  });
  await draw();

  try {
    const idle = await instantQuery("avg_over_time(DCGM_FI_DEV_GPU_UTIL[10m]) < 5");
    const list = idle.result as PromSeries[];
    idleBox.replaceChildren(
      list.length
        ? h("ul", null, list.map((s) => h("li", { class: "st-pending" }, `${gpuKey(s.metric)}: mean utilisation ${withUnit(num(s.value?.[1]), "%")} over 10m`)))
        : h("p", { class: "muted" }, "No idle GPU."),
    );
  } catch (e) {
    idleBox.replaceChildren(errorNotice("idle GPUs", e));
  }

  try {
    wasteBox.replaceChildren(await idleWaste());
  } catch (e) {
    wasteBox.replaceChildren(errorNotice("GPU time of runs", e));
  }

  try {
    const cur = new Map<string, Record<string, number | null>>();
    for (const [m] of [...GPU_METRICS, ["DCGM_FI_DEV_XID_ERRORS", "XID"]]) {
      const r = await instantQuery(m);
      for (const s of r.result as PromSeries[]) {
        const k = gpuKey(s.metric);
        cur.set(k, { ...(cur.get(k) ?? {}), [m]: num(s.value?.[1]) });
      }
    }
    const keys = [...cur.keys()].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
    tableBox.replaceChildren(
      keys.length
        ? h("table", null,
            h("thead", null, h("tr", null, h("th", null, "GPU"), GPU_METRICS.map(([, t]) => h("th", { class: "num" }, t)), h("th", { class: "num" }, "last XID"))),
            h("tbody", null, keys.map((k) => h("tr", { "data-gpu": k }, h("td", null, k),
              GPU_METRICS.map(([m]) => h("td", { class: "num" }, withUnit(cur.get(k)![m], unitOf(m)))),
              h("td", { class: cur.get(k)!.DCGM_FI_DEV_XID_ERRORS ? "num bad" : "num" }, withUnit(cur.get(k)!.DCGM_FI_DEV_XID_ERRORS, "")))))) 
        : h("p", { class: "muted" }, "No GPU reports now."),
    );
  } catch (e) {
    tableBox.replaceChildren(errorNotice("GPU values", e));
  }
}

// GPU-hours the runs' processes held over the last day and the idle part
// (below --runs.gpu-idle-utilization), per project, then per run, most idle
// first: the GPU-hours paid for and not used.
async function idleWaste(): Promise<HTMLElement> {
  const by = async (q: string) => {
    const m = new Map<string, number>();
    for (const s of (await instantQuery(q)).result as PromSeries[]) {
      m.set(`${s.metric.project ?? ""}\u0000${s.metric.run ?? ""}`, num(s.value?.[1]) ?? 0);
    }
    return m;
  };
  const held = await by("sum by (project, run) (increase(trainwatch_run_gpu_seconds_total[24h])) / 3600");
  const idle = await by("sum by (project, run) (increase(trainwatch_run_gpu_idle_seconds_total[24h])) / 3600");
  if (!held.size) return h("p", { class: "muted" }, "No run held a GPU of this host in the last 24 h (GPU time comes from the processes of runs the GPU collector sees).");
  type Row = { project: string; run: string; held: number; idle: number };
  const rows: Row[] = [...held].map(([k, v]) => {
    const [project, run] = k.split("\u0000");
    return { project, run, held: v, idle: idle.get(k) ?? 0 };
  });
  const projects = new Map<string, Row>();
  for (const r of rows) {
    const p = projects.get(r.project) ?? { project: r.project, run: "", held: 0, idle: 0 };
    p.held += r.held;
    p.idle += r.idle;
    projects.set(r.project, p);
  }
  const fmt = (v: number) => v.toFixed(v < 10 ? 2 : 1);
  const share = (r: Row) => (r.held > 0 ? r.idle / r.held : 0);
  const table = (list: Row[], first: string) =>
    h("table", { class: "gpu-waste" },
      h("thead", null, h("tr", null, h("th", null, first), h("th", { class: "num" }, "GPU-hours"), h("th", { class: "num" }, "idle GPU-hours"), h("th", { class: "num" }, "idle"))),
      h("tbody", null, list.sort((a, b) => b.idle - a.idle || b.held - a.held).map((r) =>
        h("tr", { "data-project": r.project, "data-run": r.run },
          h("td", null, r.run ? `${r.project} / ${r.run}` : r.project),
          h("td", { class: "num" }, fmt(r.held)),
          h("td", { class: share(r) > 0.5 ? "num bad" : "num" }, fmt(r.idle)),
          h("td", { class: "num" }, `${Math.round(100 * share(r))} %`)))));
  return h("div", null, table([...projects.values()], "project"), table(rows, "run"));
}
