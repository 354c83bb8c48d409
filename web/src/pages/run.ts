// One run: its metrics by step or time (every logged key), where its ranks'
// steps go (step phases, stragglers), its histograms, images, texts and
// tables by step, its artifacts, its GPUs, its log lines (live tail),
// its alerts and its config.
import { ApiError, getData, getRun, num, rangeQuery, runHistory, runMetrics, type PromSeries, type Run, type RunMetrics } from "../api";
import { lineChart, PALETTE, type ChartHandle } from "../chart";
import { h, notice } from "../dom";
import { fmtDuration, fmtNum, fmtTime, labelsText, unitOf, withUnit } from "../format";
import type { PageContext } from "../main";
import {
  findStragglers, orderPhases, phaseColors, phaseOf, rankPhases, stepTimeKey, stragglerAlerts, STRAGGLER_ALERT, WAIT_PHASE,
  type RankPhases, type RankSeries, type RuleAlert, type StragglerReport,
} from "../phases";
import { artifactsSection } from "./artifacts";
import { errorNotice, flatten, orderKeys, progressBar, statusBadge, valueText } from "./common";
import { runMediaSections } from "./media";

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
  // The rules' alerts (/api/v1/alerts), read once for the step-phase panel and the alerts section.
  const alertsP: Promise<RuleAlert[] | Error> = getData<{ alerts: RuleAlert[] }>("/api/v1/alerts").then(
    (d) => d.alerts ?? [],
    (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
  );

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
      // GPU use of the run's processes on the server's host (docs/runs-api.md).
      h("dt", null, "GPU"),
      h("dd", { "data-field": "gpu" }, run.gpu?.hours
        ? `${fmtNum(run.gpu.hours, 3)} GPU-hours · ${fmtNum(run.gpu.energy_kwh, 3)} kWh · ${fmtNum(run.gpu.idle_hours, 3)} idle GPU-hours` +
          (run.gpu.cost ? ` · cost ${fmtNum(run.gpu.cost, 4)}` : "")
        : "–"),
    ),
  );

  // ---- step phases (hidden until the run has step_phase/ keys) ----
  const phaseSec = h("section", { id: "run-phases", hidden: true });
  main.appendChild(phaseSec);
  const phases = phasePanel(phaseSec, run, alertsP);
  cleanups.push(() => phases.destroy());

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
    // The step_phase/<name> keys go to the step-phase panel, not one chart each.
    phases.update(ms.filter((m) => phaseOf(m.key) !== null), ms.map((m) => m.key), x);
    ms = ms.filter((m) => phaseOf(m.key) === null);
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
        // A zoom by step sets the range the step-phase panel averages over.
        onZoom: x === "step" ? (r) => phases.zoom(r) : undefined,
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

  // ---- histograms, media (images, text, tables) and artifacts ----
  const histSec = h("section", { id: "run-histogram-section" });
  const mediaSec = h("section", { id: "run-media-section" });
  main.append(histSec, mediaSec);
  const rich = runMediaSections(histSec, mediaSec, run);
  cleanups.push(() => rich.destroy());
  const artBox = h("div", { id: "run-artifacts" }, h("div", { class: "muted" }, "loading…"));
  main.append(h("h2", null, "Artifacts"), artBox);
  void artifactsSection(artBox, run.id);

  // ---- GPUs ----
  const gpuBox = h("div", { class: "grid", id: "run-gpus" });
  main.append(h("h2", null, "GPUs"), gpuBox);
  const start = run.start_time ?? Date.now() / 1000 - 3600;
  const gpuRange = gpuQueryRange(start, run.end_time ?? Date.now() / 1000);
  if (hosts.size === 0) gpuBox.appendChild(h("p", { class: "muted" }, "The run does not say its host, so its GPUs are unknown."));
  else {
    const hostRe = [...hosts].map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|");
    let any = false;
    for (const [metric, title] of GPU_METRICS) {
      try {
        const sel = `${metric}{Hostname=~"${hostRe}"}`;
        const r = await rangeQuery(gpuRange.avg ? `avg_over_time(${sel}[${gpuRange.step}s])` : sel,
          gpuRange.start, gpuRange.end, gpuRange.step);
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
    const d = await alertsP;
    if (d instanceof Error) throw d;
    const mine = d.filter((a) => a.labels.run === run.name && (!a.labels.project || a.labels.project === run.project));
    if (mine.length)
      alertBox.appendChild(
        h("ul", null, mine.map((a) => h("li", null, statusBadge(a.state), " ", h("b", null, a.labels.alertname ?? ""), " ", a.annotations.summary ?? a.annotations.description ?? "", h("span", { class: "muted" }, ` since ${a.activeAt ?? "?"}`)))),
      );
    else if (!own.length) alertBox.appendChild(h("p", { class: "muted" }, "No alerts for this run."));
  } catch (e) {
    if (!own.length) alertBox.appendChild(h("p", { class: "muted" }, "No alerts logged by the run."));
    alertBox.appendChild(errorNotice("alert rules (/api/v1/alerts)", e));
  }
  // Actions the rules' alerts sent to the run, and what each rank did with them.
  const acts = run.actions ?? [];
  if (acts.length) {
    main.append(
      h("h3", null, "Actions"),
      h("table", { id: "run-actions" },
        h("thead", null, h("tr", null, h("th", null, "Time"), h("th", null, "Action"), h("th", null, "Alert"), h("th", null, "Ranks"))),
        h("tbody", null, acts.map((a) => {
          const acks = Object.entries(a.acks).sort(([x], [y]) => Number(x) - Number(y));
          return h("tr", { "data-action": a.action },
            h("td", null, fmtTime(a.time)), h("td", null, h("b", null, a.action)), h("td", null, a.alert),
            h("td", null, acks.length
              ? acks.map(([rank, k]) => h("div", { "data-rank": rank, "data-status": k.status }, `rank ${rank}: `, statusBadge(k.status), k.result ? " " + k.result : ""))
              : h("span", { class: "muted" }, "pending")));
        }))));
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

// The GPU charts' query range: about 300 points (200 to 450). A long run's
// points are each the mean over their step (avg_over_time), with the step a
// multiple of the coarsest tier resolution (5 m, 1 h, 6 h) it reaches and
// the range on the step's grid, so the downsampled tiers answer them once
// raw data is old (docs/format/downsample.md: a 90-day chart reads one 6 h
// point per series and step) and no spike falls between two points; a
// short run's are raw samples.
export function gpuQueryRange(start: number, end: number): { start: number; end: number; step: number; avg: boolean } {
  const step = Math.max(1, Math.ceil((end - start) / 300));
  if (step < 300) return { start, end, step, avg: false };
  const grid = [6 * 3600, 3600, 300].find((g) => step >= g) ?? 300;
  const s = Math.max(grid, Math.round(step / grid) * grid);
  return { start: Math.floor(start / s) * s, end: Math.ceil(end / s) * s, step: s, avg: true };
}

// ---- the step-phase panel ----

// Window sizes (latest steps) the panel averages over; a chart zoomed by step
// sets the range instead. Either is cut to its last steps so that the
// history read holds at most MAX_PHASE_VALUES values (and MAX_PHASE_STEPS steps).
const PHASE_WINDOWS = [100, 500, 2000, 10000];
const MAX_PHASE_STEPS = 20000;
const MAX_PHASE_VALUES = 1_000_000;

interface PhasePanel {
  // The run's step_phase/ series (downsampled, for the phase-over-steps
  // chart), every key the run logged, and the x axis they are by.
  update(phaseMetrics: RunMetrics[], keys: string[], x: "step" | "time"): void;
  zoom(range: [number, number] | null): void;
  destroy(): void;
}

function rankText(rank: string): string {
  return rank === "" ? "run" : "rank " + rank;
}

// Where each rank's step time goes: mean seconds per phase over the latest
// steps (or a zoomed range), one stacked bar per rank with its total, the
// stragglers (above 1.2 x the median step time of the ranks) and their
// TrainingStragglerRank alerts; plus one phase over steps, a line per rank.
function phasePanel(sec: HTMLElement, run: Run, alertsP: Promise<RuleAlert[] | Error>): PhasePanel {
  let phaseKeys: string[] = [];
  let stepKey: string | null = null;
  let metrics: RunMetrics[] = [];
  let xKind: "step" | "time" = "step";
  let range: [number, number] | null = null;
  let windowSize = 500;
  let ctrl: AbortController | null = null;
  let chart: ChartHandle | null = null;
  let built = false;

  const winSel = h("select", { "aria-label": "step-phase window", id: "phase-window" },
    PHASE_WINDOWS.map((n) => h("option", { value: String(n) }, `last ${fmtNum(n)} steps`)));
  winSel.value = String(windowSize);
  const latestBtn = h("button", { type: "button", hidden: true }, "latest steps");
  const rangeText = h("span", { class: "muted", id: "phase-range" });
  const alertBox = h("div", { id: "phase-alerts" });
  const summary = h("div", { id: "phase-summary" });
  const legend = h("div", { class: "legend phase-legend", id: "phase-legend", role: "list", "aria-label": "phases" });
  const tableBox = h("div", { class: "phase-table-box" });
  const phaseSel = h("select", { "aria-label": "phase over steps", id: "phase-chart-select" });
  const chartBox = h("div", { id: "phase-chart" });

  const build = () => {
    if (built) return;
    built = true;
    sec.append(
      h("h2", null, "Step phases"),
      h("p", { class: "muted" }, "Mean seconds per step of each phase the ranks time (step_phase/<name>), per rank. A rank whose step time is above 1.2 × the median of the ranks is a straggler."),
      h("div", { class: "toolbar" }, winSel, latestBtn, rangeText),
      alertBox, summary, legend, tableBox,
      h("div", { class: "toolbar" }, h("label", { class: "inline" }, "Phase over ", xKind === "step" ? "steps" : "time", ": ", phaseSel)),
      chartBox,
    );
    winSel.addEventListener("change", () => {
      windowSize = Number(winSel.value);
      range = null;
      void load();
    });
    latestBtn.addEventListener("click", () => {
      range = null;
      void load();
    });
    phaseSel.addEventListener("change", drawChart);
  };

  const drawChart = () => {
    chart?.destroy();
    chart = null;
    chartBox.replaceChildren();
    const key = "step_phase/" + phaseSel.value;
    const list = metrics.filter((m) => m.key === key);
    if (!list.length) return;
    const cell = h("div", { "data-key": key });
    chartBox.appendChild(cell);
    chart = lineChart(cell, {
      title: `${key} by rank`,
      xKind,
      unit: "s",
      onZoom: xKind === "step" ? (r) => panel.zoom(r) : undefined,
      lines: list.map((m, i) => ({
        label: rankText(m.labels?.rank ?? "") + (m.labels?.host ? ` (${m.labels.host})` : ""),
        x: m.points.map((p) => p.x),
        y: m.points.map((p) => num(p.last)),
        color: PALETTE[i % PALETTE.length],
      })),
    });
  };

  const load = async () => {
    ctrl?.abort();
    const my = (ctrl = new AbortController());
    latestBtn.hidden = range === null;
    let start: number | undefined, end: number | undefined;
    let capped = false;
    // One series per rank and key: the phases' and the step time's.
    const nSeries = metrics.length * (stepKey ? (phaseKeys.length + 1) / phaseKeys.length : 1);
    const maxSteps = Math.max(100, Math.min(MAX_PHASE_STEPS, Math.floor(MAX_PHASE_VALUES / Math.max(1, nSeries))));
    if (range) {
      start = Math.max(0, Math.ceil(range[0]));
      end = Math.max(start, Math.floor(range[1]));
      if (end - start + 1 > maxSteps) {
        start = end - maxSteps + 1;
        capped = true;
      }
    } else if (run.step !== null && run.step !== undefined) {
      capped = windowSize > maxSteps;
      start = Math.max(0, run.step - Math.min(windowSize, maxSteps) + 1);
    }
    // Keys are comma-separated in the request: a phase with a comma in its name cannot be asked for.
    const keys = [...phaseKeys, ...(stepKey ? [stepKey] : [])].filter((k) => !k.includes(","));
    tableBox.replaceChildren(h("div", { class: "muted" }, "loading…"));
    let series: RankSeries[];
    let first = Infinity, last = -Infinity;
    try {
      const hist = await runHistory(run.id, { keys: keys.join(","), start, end }, my.signal);
      series = hist.map((s) => {
        for (const st of s.steps) {
          first = Math.min(first, st);
          last = Math.max(last, st);
        }
        return { key: s.key, rank: s.labels?.rank ?? "", host: s.labels?.host ?? "", values: s.values.map(num) };
      });
    } catch (e) {
      if ((e as Error).name === "AbortError") return;
      tableBox.replaceChildren(errorNotice("step phases", e));
      return;
    }
    const alerts = await alertsP;
    if (my !== ctrl) return;
    const ranks = rankPhases(series, stepKey);
    const report = findStragglers(ranks);
    rangeText.textContent = Number.isFinite(first)
      ? `mean over steps ${fmtNum(first, 12)}–${fmtNum(last, 12)}` +
        (range ? (capped ? ` (the last ${fmtNum(maxSteps)} steps of the zoomed range)` : " (the zoomed range)") : capped ? ` (at most ${fmtNum(maxSteps)} steps for this many ranks)` : "")
      : range ? "no steps in the zoomed range" : "no steps";
    renderAlerts(alerts);
    renderSummary(report);
    renderBars(ranks, report, alerts instanceof Error ? [] : stragglerAlerts(alerts, run.project, run.name).filter((a) => a.state === "firing").map((a) => a.rank));
  };

  const renderAlerts = (alerts: RuleAlert[] | Error) => {
    alertBox.replaceChildren();
    if (alerts instanceof Error) {
      alertBox.appendChild(errorNotice(`${STRAGGLER_ALERT} (/api/v1/alerts)`, alerts));
      return;
    }
    for (const a of stragglerAlerts(alerts, run.project, run.name)) {
      alertBox.appendChild(
        h("div", { class: "notice " + (a.state === "firing" ? "notice-error" : "notice-warn"), role: "alert", "data-rank": a.rank, "data-state": a.state },
          statusBadge(a.state), " ", h("b", null, STRAGGLER_ALERT), `: ${rankText(a.rank)} on host `, h("b", null, a.host || "?"),
          a.value !== null ? `, step time ${withUnit(a.value, "s")}` : "",
          a.activeAt ? h("span", { class: "muted" }, ` (since ${a.activeAt})`) : null),
      );
    }
  };

  const renderSummary = (report: StragglerReport) => {
    summary.replaceChildren();
    const basis = report.basis === "step_time" ? `${stepKey}` : `the sum of the phases${phaseKeys.some((k) => phaseOf(k) === WAIT_PHASE) ? ` but ${WAIT_PHASE}` : ""}`;
    if (report.median === null) return;
    if (!report.stragglers.length) {
      summary.appendChild(h("p", { class: "muted" }, `No straggler: every rank's step time (${basis}) is within ${report.factor} × the median, ${withUnit(report.median, "s")}.`));
      return;
    }
    for (const s of report.stragglers) {
      summary.appendChild(
        h("div", { class: "notice notice-warn", "data-rank": s.rank },
          h("b", null, `Straggler: ${rankText(s.rank)}`), " on host ", h("b", null, s.host || "?"),
          `: step time ${withUnit(s.time, "s")} (${basis}), ${fmtNum(s.ratio, 3)} × the median ${withUnit(report.median, "s")}`,
          s.slowPhase ? [`; slowest phase `, h("b", null, s.slowPhase), ` (+${withUnit(s.slowPhaseExcess, "s")} a step over the ranks' median)`] : "",
          "."),
      );
    }
  };

  const renderBars = (ranks: RankPhases[], report: StragglerReport, alerted: string[]) => {
    const order = orderPhases(ranks.flatMap((r) => [...r.phases.keys()]));
    const colors = phaseColors(order, PALETTE);
    legend.replaceChildren(...order.map((p) => h("span", { class: "lg-item", role: "listitem", "data-phase": p }, h("span", { class: "swatch", style: `background:${colors.get(p)}` }), p)));
    if (!ranks.length) {
      tableBox.replaceChildren(h("p", { class: "muted" }, "No step phases logged in this range."));
      return;
    }
    const maxTotal = Math.max(...ranks.map((r) => r.total)) || 1;
    const stepTimes = ranks.some((r) => r.stepTime !== null);
    const rows = ranks.map((r, i) => {
      const v = report.ranks[i];
      const alert = alerted.includes(r.rank);
      const slow = v.straggler || alert;
      const segs = order.filter((p) => r.phases.has(p)).map((p) => {
        const val = r.phases.get(p)!;
        const share = r.total > 0 ? (val / r.total) * 100 : 0;
        const text = `${p}: ${withUnit(val, "s")} (${share.toFixed(0)}%)`;
        return h("span", { class: "phase-seg", "data-phase": p, "data-value": String(val), title: text, "aria-label": text, role: "img", style: `width:${share}%;background:${colors.get(p)}` });
      });
      return h("tr", { "data-rank": r.rank, "data-host": r.host, "data-straggler": v.straggler ? "true" : null, "data-alert": alert ? "firing" : null, class: slow ? "straggler" : null },
        h("th", { scope: "row" }, rankText(r.rank), slow ? [" ", h("span", { class: "badge st-firing", title: v.straggler ? `step time ${fmtNum(v.ratio, 3)} × the median of the ranks` : `${STRAGGLER_ALERT} is firing` }, v.straggler ? `straggler ×${fmtNum(v.ratio, 3)}` : "alert firing")] : null),
        h("td", { class: slow ? "bad phase-host" : "phase-host" }, r.host || "–"),
        h("td", { class: "phase-track" }, h("div", { class: "phase-bar", style: `width:${(r.total / maxTotal) * 100}%` }, segs)),
        h("td", { class: "num", "data-field": "total", "data-value": String(r.total) }, withUnit(r.total, "s")),
        stepTimes ? h("td", { class: "num", "data-field": "step_time" }, withUnit(r.stepTime, "s")) : null,
        h("td", { class: "num", "data-field": "ratio" }, v.ratio === null ? "–" : "×" + fmtNum(v.ratio, 3)),
        order.map((p) => h("td", { class: "num", "data-phase": p }, r.phases.has(p) ? withUnit(r.phases.get(p)!, "s") : "–")),
      );
    });
    tableBox.replaceChildren(
      h("table", { id: "phase-table", class: "phase-table" },
        h("thead", null, h("tr", null, h("th", null, "Rank"), h("th", null, "Host"), h("th", { class: "phase-track" }, "Where the step goes"),
          h("th", { class: "num" }, "Sum of phases"), stepTimes ? h("th", { class: "num" }, stepKey) : null, h("th", { class: "num" }, "× median"),
          order.map((p) => h("th", { class: "num" }, p)))),
        h("tbody", null, rows)),
    );
  };

  const panel: PhasePanel = {
    update(phaseMetrics, keys, x) {
      const nextKeys = [...new Set(phaseMetrics.map((m) => m.key))].sort();
      const changed = nextKeys.join("\n") !== phaseKeys.join("\n") || x !== xKind;
      phaseKeys = nextKeys;
      stepKey = stepTimeKey(keys);
      metrics = phaseMetrics;
      sec.hidden = phaseKeys.length === 0;
      if (!phaseKeys.length) return;
      build();
      const names = orderPhases(phaseKeys.map((k) => phaseOf(k)!));
      const keep = phaseSel.value;
      phaseSel.replaceChildren(...names.map((p) => h("option", { value: p }, p)));
      phaseSel.value = names.includes(keep) ? keep : names[0];
      const wasRange = range !== null && x !== xKind;
      xKind = x;
      sec.querySelector("label.inline")?.replaceChildren("Phase over ", x === "step" ? "steps" : "time", ": ", phaseSel);
      drawChart();
      if (wasRange) range = null; // the zoomed chart is gone
      if (changed || wasRange) void load();
    },
    zoom(r) {
      if (!phaseKeys.length) return;
      range = r;
      void load();
    },
    destroy() {
      ctrl?.abort();
      chart?.destroy();
    },
  };
  return panel;
}
