// Native histograms on the Explore page, part of ui_e2e.mjs: `trainwatch
// demo` sends its step durations as a native histogram through remote write
// (train_step_duration_seconds, exponential schema 3), then a range query
// must draw a heatmap, an instant one bars, histogram_quantile a line chart
// and a query mixing floats and histograms both; numbers checked against
// the query API.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const METRIC = "train_step_duration_seconds";

// Pixels of a canvas (in CSS pixels from its box) that are drawn in colour
// (not the greys of axis text): the cells or bars.
async function colouredPixels(locator) {
  return locator.evaluate((c) => {
    const ctx = c.getContext("2d");
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    const dpr = c.width / c.clientWidth;
    const out = [];
    for (let i = 0; i < d.length; i += 4) {
      const [r, g, b, a] = [d[i], d[i + 1], d[i + 2], d[i + 3]];
      if (a > 200 && Math.max(r, g, b) - Math.min(r, g, b) > 40) {
        const p = i / 4;
        out.push([(p % c.width) / dpr, Math.floor(p / c.width) / dpr]);
      }
    }
    return out;
  });
}

export async function testNativeHistograms({ page, data, visit, check, binary, base, outDir }) {
  // ---- data: one short demo run, its step durations by remote write ----
  const spool = fs.mkdtempSync(path.join(os.tmpdir(), "tw-ui-demo-spool-"));
  const demoLog = fs.openSync(path.join(outDir, "demo.log"), "w");
  const demo = spawn(binary, ["demo", "--url", base, "--project", "uihist", "--steps", "240", "--rate", "40", "--ranks", "2",
                              "--runs", "1", "--pause", "0", "--baseline", "false", "--spool-dir", spool],
                     { stdio: ["ignore", demoLog, demoLog] });
  const code = await new Promise((resolve) => {
    const timer = setTimeout(() => demo.kill("SIGKILL"), 90_000);
    demo.once("exit", (c) => (clearTimeout(timer), resolve(c)));
  });
  fs.rmSync(spool, { recursive: true, force: true });
  check(code === 0, `trainwatch demo exited ${code} (${outDir}/demo.log)`);
  const inst = await data("/api/v1/query?query=" + encodeURIComponent(METRIC));
  check(inst.resultType === "vector" && inst.result.length === 1 && inst.result[0].histogram && !inst.result[0].value,
        "the demo's native histogram: " + JSON.stringify(inst).slice(0, 400));
  const h = inst.result[0].histogram[1];
  const nonEmpty = h.buckets.filter((b) => Number(b[3]) > 0);
  // Two ranks x 240 steps; exponential buckets around the ~0.14 s step.
  check(Number(h.count) === 480 && nonEmpty.length >= 2 && nonEmpty.every((b) => b[0] === 0 && Number(b[1]) > 0.05 && Number(b[2]) < 1),
        "the demo's histogram: " + JSON.stringify(h));

  // ---- range query: a heatmap with a log scale, a legend and a tooltip ----
  await visit("explore-heatmap", `/explore?q=${METRIC}&range=5m&tab=graph`, 'figure[data-view="heatmap"] canvas');
  const fig = page.locator('figure[data-view="heatmap"]');
  check((await fig.count()) === 1, "one heatmap for one histogram series");
  check((await page.locator("#explore-out .u-over").count()) === 0, "no line chart for a histogram-only result");
  const ds = await fig.evaluate((f) => ({ ...f.dataset }));
  check(ds.scale === "log" && Number(ds.columns) >= 1 && Number(ds.cells) >= nonEmpty.length, "heatmap: " + JSON.stringify(ds));
  check(Number(ds.max) > 0 && Number(ds.max) <= 480, "heatmap max count: " + ds.max);
  check((await fig.locator("figcaption").innerText()).includes('job="trainwatch-demo"'), "heatmap titled by its series");
  check((await fig.locator(".heat-scale .heat-gradient").count()) === 1 && (await fig.locator(".heat-scale").innerText()).includes(String(Number(ds.max))),
        "heatmap legend: " + (await fig.locator(".heat-scale").innerText()));
  const canvas = fig.locator("canvas");
  const cells = await colouredPixels(canvas);
  check(cells.length > 50, `heatmap cells drawn: ${cells.length} coloured pixels`);
  const box = await canvas.boundingBox();
  const [cx, cy] = cells[Math.floor(cells.length / 2)];
  await page.mouse.move(box.x + cx, box.y + cy);
  const tip = fig.locator(".tooltip");
  await tip.waitFor({ state: "visible" });
  const tipText = await tip.innerText();
  check(/\(\d[\d.e-]*, \d[\d.e-]*\]: \d/.test(tipText) && /\d{2}:\d{2}/.test(tipText), "heatmap tooltip names time, bounds and count: " + tipText);
  await page.screenshot({ path: path.join(outDir, "explore-heatmap.png"), fullPage: true });
  console.log(`ok  explore: native histogram heatmap (${ds.cells} cells, log scale), tooltip "${tipText.replace(/\n/g, " ")}"`);

  // ---- instant query: the table row and the bars ----
  await visit("explore-bars", `/explore?q=${METRIC}&tab=table`, 'figure[data-view="bars"] canvas');
  const row = page.locator('#result-table tr[data-kind="histogram"]');
  check((await row.count()) === 1 && (await row.locator("td.num").getAttribute("data-value")) === "480", "table row of the histogram: count 480");
  const bars = page.locator('figure[data-view="bars"]');
  const bs = await bars.evaluate((f) => ({ ...f.dataset }));
  check(Number(bs.bars) === nonEmpty.length && bs.scale === "log" && Number(bs.max) === Math.max(...nonEmpty.map((b) => Number(b[3]))),
        `bars ${JSON.stringify(bs)} vs ${nonEmpty.length} non-empty buckets`);
  const barPx = await colouredPixels(bars.locator("canvas"));
  check(barPx.length > 50, `bars drawn: ${barPx.length} coloured pixels`);
  const bbox = await bars.locator("canvas").boundingBox();
  const [bx, by] = barPx[Math.floor(barPx.length / 2)];
  await page.mouse.move(bbox.x + bx, bbox.y + by);
  await bars.locator(".tooltip").waitFor({ state: "visible" });
  const barTip = await bars.locator(".tooltip").innerText();
  check(nonEmpty.some((b) => barTip.includes(`: ${Number(b[3])}`)), "bar tooltip count is a bucket's: " + barTip);
  await page.screenshot({ path: path.join(outDir, "explore-bars.png"), fullPage: true });
  console.log(`ok  explore: native histogram bars (${bs.bars} buckets), tooltip "${barTip}"`);

  // ---- functions of histograms are ordinary floats ----
  const quantile = `histogram_quantile(0.9, rate(${METRIC}[1m]))`;
  await visit("explore-quantile", `/explore?q=${encodeURIComponent(quantile)}&range=5m&tab=graph`, "#explore-out .u-over");
  check((await page.locator('figure[data-view="heatmap"]').count()) === 0, "histogram_quantile: a line chart, no heatmap");
  const count = `histogram_count(${METRIC})`;
  await visit("explore-count", `/explore?q=${encodeURIComponent(count)}&tab=table`, "#result-table td[data-value]");
  const countApi = await data("/api/v1/query?query=" + encodeURIComponent(count));
  const countCell = await page.locator("#result-table td[data-value]").getAttribute("data-value");
  check(countCell === countApi.result[0].value[1] && countCell === "480", `histogram_count: ${countCell} vs ${JSON.stringify(countApi.result)}`);
  check((await page.locator('figure[data-view="bars"]').count()) === 0, "histogram_count: no bars");

  // ---- floats and histograms in one result: both views ----
  const mixed = `${METRIC} or label_replace(histogram_count(${METRIC}), "kind", "count", "", "")`;
  await visit("explore-mixed", `/explore?q=${encodeURIComponent(mixed)}&range=5m&tab=graph`, 'figure[data-view="heatmap"] canvas');
  await page.waitForSelector("#explore-out .u-over");
  check((await page.locator('figure[data-view="heatmap"]').count()) === 1 && (await page.locator("#explore-out .lg-item").count()) === 1,
        "mixed result: one heatmap and one line");
  console.log("ok  explore: histogram_quantile / histogram_count as floats, a mixed result shows both");
}
