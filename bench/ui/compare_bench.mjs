// Compare-page benchmark (issue 9): time to first chart and frame time while
// zooming, with N runs x S steps loaded through the real runs API into a real
// `trainwatch serve`, measured in Debian's headless Chromium (playwright-core).
//
// usage: node bench/ui/compare_bench.mjs TRAINWATCH_BINARY [options]
//   --runs N          runs to load and compare (default 50)
//   --steps S         steps per run (default 100000)
//   --repeat R        page loads measured, each in a fresh browser context (default 5)
//   --data-dir DIR    keep the server's data here; a DIR that already holds
//                     the runs is reused without loading (default: a temp dir, removed)
//   --out FILE        write the figures as JSON too
//   --shots DIR       screenshots of the first page load, as loaded and zoomed
//   --envelope        with min/max envelopes (the page's default is off above 10 runs)
//
// Figures, per page load:
//   first_chart_ms   navigation start to the UI's `tw:first-chart` mark (the
//                    first uPlot draw with data, web/src/chart.ts)
//   all_charts_ms    navigation start to every chart of the page drawn
//   set_scale        60 zoom steps, one per animation frame, each narrowing x
//                    on every chart through uPlot's setScale (what a drag or
//                    wheel zoom does to the data already drawn): frame
//                    intervals from requestAnimationFrame, median and p95
//   drag_zoom        4 drag-selects on the loss chart, as a person zooms:
//                    frame intervals from mouse-down to the refined data drawn
//                    (the page refetches the zoomed range), and that latency
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
// playwright-core from web/node_modules (npm ci of web/package-lock.json, as
// the CMake build runs it).
const webRequire = createRequire(path.join(here, "..", "..", "web", "package.json"));

function parseArgs(argv) {
  const o = { runs: 50, steps: 100000, repeat: 5, dataDir: null, out: null, shots: null, envelope: false, binary: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) throw new Error(a + " needs a value");
      return argv[++i];
    };
    if (a === "--runs") o.runs = Number(val());
    else if (a === "--steps") o.steps = Number(val());
    else if (a === "--repeat") o.repeat = Number(val());
    else if (a === "--data-dir") o.dataDir = val();
    else if (a === "--out") o.out = val();
    else if (a === "--shots") o.shots = val();
    else if (a === "--envelope") o.envelope = true;
    else if (a.startsWith("--")) throw new Error("unknown option " + a);
    else o.binary = a;
  }
  if (!o.binary) throw new Error("usage: node bench/ui/compare_bench.mjs TRAINWATCH_BINARY [--runs N] [--steps S] [--repeat R] [--data-dir DIR] [--out FILE]");
  return o;
}

const opt = parseArgs(process.argv.slice(2));
// Resolved before loading, so a missing npm ci fails at once (--repeat 0 only loads).
const chromium = opt.repeat > 0 ? webRequire("playwright-core").chromium : null;
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const PROJECT = "uibench";
const KEYS = ["loss", "lr", "grad_norm", "samples_per_sec"];
const BATCH_POINTS = 1000; // what clients/python sends per batch (batch_points)
const STEP_MS = 100; // 10 steps a second; S steps end at the load's start

async function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}

const median = (a) => quantile(a, 0.5);
function quantile(a, q) {
  if (!a.length) return NaN;
  const s = [...a].sort((x, y) => x - y);
  const i = (s.length - 1) * q, lo = Math.floor(i), hi = Math.ceil(i);
  return s[lo] + (s[hi] - s[lo]) * (i - lo);
}
const r1 = (v) => Math.round(v * 10) / 10;

// CPU time (user + system) of a process so far, in ms (Linux /proc).
function processCpuMs(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = f.slice(f.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10; // utime, stime at 100 ticks/s
}

// Deterministic noise per run (xorshift32), so every load logs the same data.
function rng(seed) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 4294967296;
  };
}

function batchBody(runIdx, runId, first, n, t0) {
  const rand = rng(runIdx * 7919 + first + 1);
  const lr0 = 1e-4 * (1 + runIdx % 10);
  const points = new Array(n);
  for (let i = 0; i < n; i++) {
    const s = first + i;
    const warm = Math.min(1, s / 2000);
    const lr = lr0 * warm * 0.5 * (1 + Math.cos((Math.PI * s) / opt.steps));
    const loss = 0.3 + 2.2 * Math.pow(1 + s / 500, -0.35 - 0.01 * (runIdx % 20)) + 0.08 * (rand() - 0.5);
    points[i] = {
      step: s,
      ts: t0 + s * STEP_MS,
      values: { loss, lr, grad_norm: 0.5 + 1.5 * Math.exp(-s / 20000) + 0.3 * rand(), samples_per_sec: 1800 + 40 * runIdx % 300 + 60 * rand() },
    };
  }
  return JSON.stringify({ batch_id: `${runId}.0.bench.${first / BATCH_POINTS}`, points });
}

async function api(base, method, p, body) {
  const r = await fetch(base + p, { method, headers: body ? { "Content-Type": "application/json" } : {}, body });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : null;
}

// Loads the runs the way training jobs would: all runs log at once, each in
// batches of BATCH_POINTS steps, so the server sees the runs interleaved in
// time; a few batches in flight at a time, as several clients send.
async function load(base, ids) {
  const t0 = Date.now() - opt.steps * STEP_MS;
  for (const [i, id] of ids.entries()) {
    await api(base, "POST", "/api/v1/runs", JSON.stringify({
      id, project: PROJECT, name: `sweep-${String(i).padStart(2, "0")}`, total_steps: opt.steps,
      config: { lr: 1e-4 * (1 + i % 10), warmup: 2000, batch: 256 * (1 + (i % 3)), seed: i }, tags: ["bench"], host: `gpu-node-${i % 8}`,
    }));
  }
  const jobs = [];
  for (let first = 0; first < opt.steps; first += BATCH_POINTS) {
    for (const [i, id] of ids.entries()) jobs.push([i, id, first, Math.min(BATCH_POINTS, opt.steps - first)]);
  }
  const started = performance.now();
  let next = 0, done = 0, values = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const [i, id, first, n] = jobs[next++];
      const ans = await api(base, "POST", `/api/v1/runs/${id}/batches`, batchBody(i, id, first, n, t0));
      if (ans.data.rejected.length) throw new Error(`batch ${id}/${first}: rejected ${JSON.stringify(ans.data.rejected[0])}`);
      values += ans.data.accepted;
      if (++done % 500 === 0) console.log(`  loaded ${done}/${jobs.length} batches`);
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
  for (const id of ids) await api(base, "POST", `/api/v1/runs/${id}/finish`, JSON.stringify({ status: "finished" }));
  const s = (performance.now() - started) / 1000;
  console.log(`loaded ${ids.length} runs x ${opt.steps} steps (${values} values, ${jobs.length} batches) in ${s.toFixed(1)} s: ${Math.round(values / s)} values/s`);
}

// In the page: frame intervals from requestAnimationFrame while `work` runs.
async function framesDuring(page, fnBody, arg) {
  return page.evaluate(
    async ({ fnBody, arg }) => {
      const stamps = [];
      let on = true;
      const tick = (t) => {
        stamps.push(t);
        if (on) requestAnimationFrame(tick);
      };
      requestAnimationFrame(tick);
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      const work = new Function("arg", `return (async () => { ${fnBody} })()`);
      const extra = await work(arg);
      on = false;
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      const dts = [];
      for (let i = 1; i < stamps.length; i++) dts.push(stamps[i] - stamps[i - 1]);
      return { dts, extra };
    },
    { fnBody, arg },
  );
}

function frameStats(dts) {
  const med = median(dts), p95 = quantile(dts, 0.95);
  return { frames: dts.length, median_ms: r1(med), p95_ms: r1(p95), max_ms: r1(Math.max(...dts)), fps_median: r1(1000 / med), fps_p95: r1(1000 / p95) };
}

// Counts the UI's `tw:chart-drawn` marks as they are made (the UI clears
// them past 1000) and the time of each mouse-up, from the page's start.
function pageProbe() {
  window.__twDrawn = [];
  window.__twMouseUp = [];
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) if (e.name === "tw:chart-drawn") window.__twDrawn.push(e.startTime);
  }).observe({ type: "mark", buffered: true });
  window.addEventListener("mouseup", () => window.__twMouseUp.push(performance.now()), true);
}

async function measure(browser, base, ids, shots) {
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  await ctx.addInitScript(pageProbe);
  const page = await ctx.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  const url = `${base}/compare?ids=${ids.join(",")}&keys=${KEYS.join(",")}` + (opt.envelope ? "&envelope=1" : "");
  const chartsDrawn = (n) => page.waitForFunction((n) => window.__twDrawn.length >= n, n, { timeout: 120000 });
  page.on("crash", () => errors.push("page crashed"));
  const phase = (m) => process.env.BENCH_VERBOSE && console.log(`  [${new Date().toISOString().slice(11, 19)}] ${m}`);
  phase("open " + url.slice(0, 80));
  await page.goto(url);
  await chartsDrawn(KEYS.length);
  phase("charts drawn");
  await page.waitForLoadState("networkidle");
  const load = await page.evaluate(() => {
    const res = performance.getEntriesByType("resource").filter((e) => e.name.includes("/api/v1/runs/metrics"));
    return {
      first: performance.getEntriesByName("tw:first-chart")[0].startTime,
      drawn: [...window.__twDrawn],
      metrics: res.map((e) => ({ url: e.name, start: e.startTime, wait: e.responseStart - e.requestStart, end: e.responseEnd, bytes: e.encodedBodySize })),
      api: performance.getEntriesByType("resource").filter((e) => e.name.includes("/api/")).length,
      runsList: performance.getEntriesByType("resource").filter((e) => /\/api\/v1\/runs\?/.test(e.name)).map((e) => [e.startTime, e.responseEnd])[0],
      domReady: performance.getEntriesByType("navigation")[0]?.domContentLoadedEventEnd,
    };
  });
  // Every chart drawn with its first data: the KEYS.length-th draw.
  const allCharts = load.drawn[KEYS.length - 1];
  if (shots) await page.locator("#compare-charts").screenshot({ path: path.join(shots, "compare-50-runs.png") });

  // Programmatic zoom: 60 frames, each narrowing x to 0.93 of the last range
  // around the middle, on every chart at once (their uPlot instances).
  const setScale = await framesDuring(
    page,
    `
      const plots = [...document.querySelectorAll("#compare-charts figure.chart")].map((f) => f.uplot).filter(Boolean);
      if (!plots.length) throw new Error("no uPlot instances on the compare page");
      const work = [];
      for (let i = 0; i < 60; i++) {
        await new Promise((r) => requestAnimationFrame(r));
        const t = performance.now();
        for (const u of plots) {
          const min = u.scales.x.min, max = u.scales.x.max, mid = (min + max) / 2, half = ((max - min) / 2) * 0.93;
          u.setScale("x", { min: mid - half, max: mid + half });
        }
        await Promise.resolve(); // uPlot redraws in a microtask
        await Promise.resolve();
        work.push(performance.now() - t);
      }
      return work;
    `,
  );
  phase("setScale steps done");
  // Back to the page as loaded, then zoom as a person does: drag-select the
  // middle half of the loss chart, 4 times, each waiting for the refined
  // data of every chart (KEYS.length more draws of new data).
  await page.reload();
  await chartsDrawn(KEYS.length);
  await page.waitForLoadState("networkidle");
  const over = page.locator('#compare-charts [data-key="loss"] .u-over');
  const refined = [];
  const dragDts = [];
  for (let d = 0; d < 4; d++) {
    const box = await over.boundingBox();
    const before = await page.evaluate(() => window.__twDrawn.length);
    const frames = page.evaluate(
      (want) =>
        new Promise((resolve) => {
          const stamps = [];
          const tick = (t) => {
            stamps.push(t);
            if (window.__twDrawn.length < want) return requestAnimationFrame(tick);
            const dts = [];
            for (let i = 1; i < stamps.length; i++) dts.push(stamps[i] - stamps[i - 1]);
            resolve({ dts, refined: window.__twDrawn.at(-1) - window.__twMouseUp.at(-1) });
          };
          requestAnimationFrame(tick);
        }),
      before + KEYS.length,
    );
    phase(`drag ${d + 1}`);
    const y = box.y + box.height / 2;
    await page.mouse.move(box.x + box.width * 0.25, y);
    await page.mouse.down();
    for (let k = 1; k <= 10; k++) await page.mouse.move(box.x + box.width * (0.25 + 0.05 * k), y);
    await page.mouse.up();
    const f = await frames;
    dragDts.push(...f.dts);
    refined.push(f.refined);
    await page.waitForLoadState("networkidle");
  }
  if (shots) await page.locator("#compare-charts").screenshot({ path: path.join(shots, "compare-50-runs-zoomed.png") });
  const zoomedTo = await page.evaluate(() => {
    const u = document.querySelector('#compare-charts [data-key="loss"] figure.chart')?.uplot;
    return u ? [u.scales.x.min, u.scales.x.max] : null;
  });
  await ctx.close();
  if (errors.length) throw new Error("page errors: " + errors.join(" | "));
  return {
    first_chart_ms: r1(load.first),
    all_charts_ms: r1(allCharts),
    metrics_requests: load.metrics.map((m) => ({ start_ms: r1(m.start), server_wait_ms: r1(m.wait), end_ms: r1(m.end), bytes: m.bytes })),
    first_request_url: [...load.metrics].sort((a, b) => a.end - b.end)[0]?.url,
    api_requests: load.api,
    dom_content_loaded_ms: r1(load.domReady),
    runs_request_ms: load.runsList ? load.runsList.map(r1) : null,
    set_scale: { ...frameStats(setScale.dts), work_median_ms: r1(median(setScale.extra)), work_p95_ms: r1(quantile(setScale.extra, 0.95)) },
    drag_zoom: { ...frameStats(dragDts), refined_ms: refined.map(r1), zoomed_to: zoomedTo },
  };
}

async function main() {
  const dataDir = opt.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), "tw-uibench-"));
  fs.mkdirSync(dataDir, { recursive: true });
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const logPath = path.join(dataDir, "..", path.basename(dataDir) + "-server.log");
  const log = fs.openSync(logPath, "w");
  const server = spawn(opt.binary, ["serve", "--data-dir", dataDir, "--listen", `127.0.0.1:${port}`], { stdio: ["ignore", log, log] });
  let browser = null;
  // Stopped from outside: take the server and the browser down too.
  for (const sig of ["SIGINT", "SIGTERM"]) {
    process.once(sig, () => {
      server.kill("SIGTERM");
      if (browser) browser.close().catch(() => {});
      setTimeout(() => process.exit(130), 500);
    });
  }
  try {
    for (let i = 0; ; i++) {
      try {
        if ((await fetch(base + "/-/ready")).status === 200) break;
      } catch {}
      if (i > 600 || server.exitCode !== null) throw new Error("server did not become ready; see " + logPath);
      await new Promise((r) => setTimeout(r, 100));
    }
    const ids = Array.from({ length: opt.runs }, (_, i) => `bench-${String(i).padStart(2, "0")}`);
    const have = await api(base, "GET", "/api/v1/runs?filter=" + encodeURIComponent(`project = "${PROJECT}"`) + "&limit=100000");
    const complete = have.data.filter((r) => ids.includes(r.id) && r.step === opt.steps - 1 && r.status === "finished").length;
    if (complete === ids.length) console.log(`reusing ${ids.length} loaded runs in ${dataDir}`);
    else if (have.data.length) throw new Error(`${dataDir} holds other or partial runs of project ${PROJECT}: use an empty --data-dir`);
    else await load(base, ids);

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    const results = [];
    for (let i = 0; i < opt.repeat; i++) {
      if (opt.shots) fs.mkdirSync(opt.shots, { recursive: true });
      const r = await measure(browser, base, ids, i === 0 ? opt.shots : null);
      results.push(r);
      console.log(`load ${i + 1}: first chart ${r.first_chart_ms} ms, all ${r.all_charts_ms} ms; setScale frames median ${r.set_scale.median_ms} ms p95 ${r.set_scale.p95_ms} ms (work ${r.set_scale.work_median_ms}/${r.set_scale.work_p95_ms} ms); drag zoom frames median ${r.drag_zoom.median_ms} p95 ${r.drag_zoom.p95_ms} ms, refined in ${r.drag_zoom.refined_ms.join("/")} ms`);
      console.log(`        DOMContentLoaded ${r.dom_content_loaded_ms} ms, runs list ${r.runs_request_ms?.join("..")} ms`);
      console.log("        metrics requests: " + r.metrics_requests.map((m) => `[${m.start_ms}..${m.end_ms} ms, server ${m.server_wait_ms} ms, ${Math.round(m.bytes / 1024)} KiB]`).join(" "));
    }
    // The first chart's request again, alone, with the server's CPU time
    // (utime + stime of /proc/PID/stat): what the first chart costs the
    // server whatever else the machine runs.
    const replay = [];
    for (let i = 0; i < 3 && results[0]?.first_request_url; i++) {
      const cpu0 = processCpuMs(server.pid), t0 = performance.now();
      const r = await fetch(results[0].first_request_url);
      const body = await r.arrayBuffer();
      replay.push({ wall_ms: r1(performance.now() - t0), cpu_ms: processCpuMs(server.pid) - cpu0, bytes: body.byteLength });
    }
    if (replay.length) console.log(`first chart's request alone: wall ${replay.map((x) => x.wall_ms).join("/")} ms, server CPU ${replay.map((x) => x.cpu_ms).join("/")} ms`);
    const pick = (f) => results.map(f);
    const summary = {
      runs: opt.runs,
      steps: opt.steps,
      envelope: opt.envelope,
      keys: KEYS,
      repeat: opt.repeat,
      loadavg: os.loadavg().map((v) => Math.round(v * 100) / 100),
      first_chart_ms: { median: r1(median(pick((r) => r.first_chart_ms))), min: Math.min(...pick((r) => r.first_chart_ms)), max: Math.max(...pick((r) => r.first_chart_ms)) },
      all_charts_ms: { median: r1(median(pick((r) => r.all_charts_ms))), min: Math.min(...pick((r) => r.all_charts_ms)), max: Math.max(...pick((r) => r.all_charts_ms)) },
      set_scale_frame_ms: { median: r1(median(pick((r) => r.set_scale.median_ms))), p95: r1(median(pick((r) => r.set_scale.p95_ms))), p95_max: Math.max(...pick((r) => r.set_scale.p95_ms)) },
      drag_zoom_frame_ms: { median: r1(median(pick((r) => r.drag_zoom.median_ms))), p95: r1(median(pick((r) => r.drag_zoom.p95_ms))), p95_max: Math.max(...pick((r) => r.drag_zoom.p95_ms)) },
      drag_zoom_refined_ms: r1(median(results.flatMap((r) => r.drag_zoom.refined_ms))),
      first_request_alone: replay,
      results,
    };
    console.log(
      `SUMMARY ${opt.runs} runs x ${opt.steps} steps${opt.envelope ? ", envelopes on" : ""}, ${opt.repeat} loads, load avg ${summary.loadavg.join(" ")}: ` +
        `first chart median ${summary.first_chart_ms.median} ms (${summary.first_chart_ms.min}-${summary.first_chart_ms.max}); ` +
        `setScale zoom frame median ${summary.set_scale_frame_ms.median} ms, p95 ${summary.set_scale_frame_ms.p95} ms (${r1(1000 / summary.set_scale_frame_ms.p95)} fps at p95); ` +
        `drag zoom frame median ${summary.drag_zoom_frame_ms.median} ms, p95 ${summary.drag_zoom_frame_ms.p95} ms; refined data in ${summary.drag_zoom_refined_ms} ms`,
    );
    if (opt.out) fs.writeFileSync(opt.out, JSON.stringify(summary, null, 2) + "\n");
  } finally {
    if (browser) await browser.close().catch(() => {});
    server.kill("SIGTERM");
    await new Promise((r) => (server.exitCode !== null ? r() : server.once("exit", r)));
    if (!opt.dataDir) {
      fs.rmSync(dataDir, { recursive: true, force: true });
      fs.rmSync(logPath, { force: true });
    }
  }
}

main().catch((e) => {
  console.error(e.stack ?? String(e));
  process.exitCode = 1;
});
