// One run: its metrics by step or time (every logged key), its GPUs, its log
// lines (live tail), its alerts and its config.
import { ApiError, getData, getRun, num, rangeQuery, runMetrics, type PromSeries, type Run, type RunMetrics } from "../api";
import { lineChart } from "../chart";
import { h, notice } from "../dom";
import { fmtDuration, fmtNum, fmtTime, labelsText, unitOf } from "../format";
import type { PageContext } from "../main";
import { errorNotice, flatten, orderKeys, progressBar, statusBadge, valueText } from "./common";

export const GPU_METRICS: [string, string][] = [
  ["DCGM_FI_DEV_GPU_UTIL", "GPU utilisation"],
  ["DCGM_FI_DEV_FB_USED", "GPU memory used"],
  ["DCGM_FI_DEV_GPU_TEMP", "GPU temperature"],
  ["DCGM_FI_DEV_POWER_USAGE", "GPU power"],
];

export interface LogLine {
  time: string;
  labels: Record<string, string>;
  level?: string;
  message: string;
  fields?: Record<string, unknown>;
}

export function logLine(l: LogLine): HTMLElement {
  return h(
    "div",
    { class: "logline" },
    h("time", null, l.time),
    l.level ? h("span", { class: "lvl-" + l.level.toLowerCase() }, `[${l.level}] `) : null,
    l.message,
    l.fields && Object.keys(l.fields).length ? h("span", { class: "muted" }, " " + JSON.stringify(l.fields)) : null,
  );
}

function metricLabel(m: RunMetrics): string {
  const extra = Object.entries(m.labels ?? {}).filter(([k]) => k !== "project" && k !== "run");
  return extra.length ? m.key + " {" + extra.map(([k, v]) => `${k}=${v}`).join(",") + "}" : m.key;
}

export async function renderRun(ctx: PageContext): Promise<() => void> {
  const { main, query } = ctx;
  const id = ctx.args[0];
  let run: Run;
  try {
    run = await getRun(id);
  } catch (e) {
    main.appendChild(errorNotice("run " + id, e));
    return () => {};
  }
  let x: "step" | "time" = query.get("x") === "time" ? "time" : "step";
  const cleanups: (() => void)[] = [];

  main.appendChild(h("h1", null, run.name, " ", statusBadge(run.status), h("span", { class: "muted" }, `  ${run.project} · ${run.id}`)));
  main.appendChild(
    h(
      "dl",
      { class: "kv", id: "run-info" },
      h("dt", null, "Progress"), h("dd", null, progressBar(run.progress)),
      h("dt", null, "Step"), h("dd", { "data-field": "step" }, run.step === null || run.step === undefined ? "–" : fmtNum(run.step, 12) + (run.total_steps ? " / " + fmtNum(run.total_steps, 12) : "")),
      h("dt", null, "ETA"), h("dd", null, run.status === "running" ? fmtDuration(run.eta_seconds) : "–"),
      h("dt", null, "Started"), h("dd", null, fmtTime(run.start_time)),
      h("dt", null, "Ended"), h("dd", null, fmtTime(run.end_time)),
      h("dt", null, "Last heartbeat"), h("dd", null, fmtTime(run.heartbeat_time)),
      h("dt", null, "Host"), h("dd", null, run.host ?? "–", run.world_size ? ` (world size ${run.world_size})` : ""),
      h("dt", null, "Command"), h("dd", null, h("code", null, run.command ?? "–")),
      h("dt", null, "Git commit"), h("dd", null, run.git_commit ?? "–"),
      h("dt", null, "Tags"), h("dd", null, (run.tags ?? []).join(", ") || "–"),
    ),
  );

  // ---- metrics ----
  const xSel = h("select", { "aria-label": "x axis" }, h("option", { value: "step" }, "by step"), h("option", { value: "time" }, "by time"));
  xSel.value = x;
  const charts = h("div", { class: "grid", id: "run-charts" });
  // Every logged value at full resolution, by step (GET /api/v1/runs/{id}/history).
  const csv = h("a", { href: `/api/v1/runs/${encodeURIComponent(run.id)}/history?format=csv`, download: `${run.id}.csv`, id: "run-history-csv" }, "Download CSV");
  main.append(h("h2", null, "Metrics"), h("div", { class: "toolbar" }, xSel, " ", csv), charts);
  let hosts = new Set<string>(run.host ? [run.host] : []);
  const drawMetrics = async () => {
    charts.replaceChildren(h("div", { class: "muted" }, "loading…"));
    let ms: RunMetrics[];
    try {
      ms = await runMetrics({ ids: run.id, x, points: 1000 });
    } catch (e) {
      charts.replaceChildren(errorNotice("metrics", e));
      return;
    }
    charts.replaceChildren();
    for (const m of ms) if (m.labels?.host) hosts.add(m.labels.host);
    if (ms.length === 0) {
      charts.appendChild(h("p", { class: "muted" }, "This run has logged no metrics yet."));
      return;
    }
    const byKey = new Map<string, RunMetrics[]>();
    for (const m of ms) byKey.set(m.key, [...(byKey.get(m.key) ?? []), m]);
    for (const key of orderKeys(byKey.keys())) {
      const list = byKey.get(key)!;
      const cell = h("div", { "data-key": key });
      charts.appendChild(cell);
      lineChart(cell, {
        title: key,
        xKind: x,
        unit: unitOf(list[0].metric),
        lines: list.map((m) => {
          const env = m.points.some((p) => p.count > 1);
          return {
            label: metricLabel(m),
            x: m.points.map((p) => p.x),
            y: m.points.map((p) => num(p.last)),
            min: env ? m.points.map((p) => num(p.min)) : undefined,
            max: env ? m.points.map((p) => num(p.max)) : undefined,
          };
        }),
      });
    }
  };
  xSel.addEventListener("change", () => {
    x = xSel.value as "step" | "time";
    const q = new URLSearchParams(location.search);
    q.set("x", x);
    ctx.setQuery(q);
    void drawMetrics();
  });
  await drawMetrics();

  // ---- GPUs ----
  const gpuBox = h("div", { class: "grid", id: "run-gpus" });
  main.append(h("h2", null, "GPUs"), gpuBox);
  const start = run.start_time ?? Date.now() / 1000 - 3600;
  const end = run.end_time ?? Date.now() / 1000;
  const step = Math.max(1, Math.ceil((end - start) / 300));
  if (hosts.size === 0) gpuBox.appendChild(h("p", { class: "muted" }, "The run does not say its host, so its GPUs are unknown."));
  else {
    const hostRe = [...hosts].map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|");
    let any = false;
    for (const [metric, title] of GPU_METRICS) {
      try {
        const r = await rangeQuery(`${metric}{Hostname=~"${hostRe}"}`, start, end, step);
        const series = r.result as PromSeries[];
        if (series.length === 0) continue;
        any = true;
        const cell = h("div");
        gpuBox.appendChild(cell);
        lineChart(cell, {
          title,
          xKind: "time",
          unit: unitOf(metric),
          lines: series.map((s) => ({
            label: `${s.metric.Hostname ?? ""} gpu ${s.metric.gpu ?? "?"}`,
            x: (s.values ?? []).map((v) => v[0]),
            y: (s.values ?? []).map((v) => num(v[1])),
          })),
        });
      } catch (e) {
        gpuBox.appendChild(errorNotice(title, e));
      }
    }
    if (!any) gpuBox.appendChild(h("p", { class: "muted" }, `No GPU metrics (DCGM_FI_DEV_*) for host ${[...hosts].join(", ")} during the run.`));
  }

  // ---- alerts ----
  const alertBox = h("div", { id: "run-alerts" });
  main.append(h("h2", null, "Alerts"), alertBox);
  const own = run.alerts ?? [];
  if (own.length) {
    alertBox.appendChild(
      h("table", null, h("thead", null, h("tr", null, h("th", null, "Time"), h("th", null, "Level"), h("th", null, "Title"), h("th", null, "Text"))),
        h("tbody", null, own.map((a) => h("tr", null, h("td", null, fmtTime(a.time)), h("td", null, statusBadge(a.level)), h("td", null, a.title), h("td", null, a.text))))),
    );
  }
  try {
    const d = await getData<{ alerts: { labels: Record<string, string>; annotations: Record<string, string>; state: string; activeAt?: string; value?: string }[] }>("/api/v1/alerts");
    const mine = d.alerts.filter((a) => a.labels.run === run.name && (!a.labels.project || a.labels.project === run.project));
    if (mine.length)
      alertBox.appendChild(
        h("ul", null, mine.map((a) => h("li", null, statusBadge(a.state), " ", h("b", null, a.labels.alertname ?? ""), " ", a.annotations.summary ?? a.annotations.description ?? "", h("span", { class: "muted" }, ` since ${a.activeAt ?? "?"}`)))),
      );
    else if (!own.length) alertBox.appendChild(h("p", { class: "muted" }, "No alerts for this run."));
  } catch (e) {
    if (!own.length) alertBox.appendChild(h("p", { class: "muted" }, "No alerts logged by the run."));
    alertBox.appendChild(errorNotice("alert rules (/api/v1/alerts)", e));
  }

  // ---- logs ----
  const logBox = h("div", { class: "logs", id: "run-logs", "aria-live": "polite" });
  main.append(h("h2", null, "Logs"), logBox);
  const logQuery = `{run="${run.name}"}`;
  try {
    const d = await getData<{ lines: LogLine[] }>("/api/v1/logs/query", { query: logQuery, limit: 200, start: Math.floor(start) });
    for (const l of d.lines) logBox.appendChild(logLine(l));
    if (!d.lines.length) logBox.appendChild(h("div", { class: "muted" }, "no log lines yet"));
    const es = new EventSource("/api/v1/logs/tail?query=" + encodeURIComponent(logQuery));
    es.onmessage = (ev) => {
      try {
        logBox.appendChild(logLine(JSON.parse(ev.data) as LogLine));
        while (logBox.childElementCount > 2000) logBox.firstElementChild?.remove();
        logBox.scrollTop = logBox.scrollHeight;
      } catch {
        /* a keep-alive or malformed event: ignore */
      }
    };
    cleanups.push(() => es.close());
  } catch (e) {
    logBox.replaceWith(e instanceof ApiError && e.unavailable ? notice("unavailable", "Logs: not available on this server (" + e.message + ")") : errorNotice("logs", e));
  }

  // ---- config ----
  const cfg = flatten(run.config);
  main.append(
    h("h2", null, "Config"),
    Object.keys(cfg).length
      ? h("table", { id: "run-config" }, h("tbody", null, Object.entries(cfg).map(([k, v]) => h("tr", null, h("th", null, k), h("td", { class: "mono" }, valueText(v))))))
      : h("p", { class: "muted" }, "No config logged."),
    h("h2", null, "Summary"),
    h("p", { class: "mono" }, labelsText(Object.fromEntries(Object.entries(run.summary ?? {}).map(([k, v]) => [k, valueText(v)])))),
  );
  return () => cleanups.forEach((c) => c());
}
