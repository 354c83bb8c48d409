// The UI of rich values and artifacts (docs/runs-api.md, issue 20), part of
// ui_e2e.mjs: runs whose batches hold histograms, images, markdown text and
// tables, and artifacts logged, uploaded and used through the routes, then
// the Run page's Histograms, Media and Artifacts sections and the Compare
// page's media side by side and parallel coordinates, checked in the DOM.
import crypto from "node:crypto";
import zlib from "node:zlib";

// ---- a PNG encoder (solid color, w x h), for real image bytes ----
const CRC = new Int32Array(256).map((_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c;
});
function crc32(buf) {
  let c = -1;
  for (const b of buf) c = CRC[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ -1) >>> 0;
}
function chunk(type, data) {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type, "ascii"), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(td));
  return Buffer.concat([len, td, crc]);
}
export function png(w, h, [r, g, b]) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const raw = Buffer.alloc(h * (1 + 3 * w));
  for (let y = 0; y < h; y++) {
    raw[y * (1 + 3 * w)] = 0;
    for (let x = 0; x < w; x++) raw.set([r, g, b], y * (1 + 3 * w) + 1 + 3 * x);
  }
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", ihdr), chunk("IDAT", zlib.deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]);
}

// The value below which p of the counts lie, interpolated within its bucket (the UI's percentile).
function percentile(buckets, p) {
  const total = buckets.reduce((a, [, , c]) => a + c, 0);
  const target = p * total;
  let cum = 0;
  for (const [lo, hi, c] of buckets) {
    if (c <= 0) continue;
    if (cum + c >= target) return lo + (hi - lo) * Math.min(1, Math.max(0, (target - cum) / c));
    cum += c;
  }
  return buckets[buckets.length - 1][1];
}

// A histogram of step s: 20 buckets over [-2, 2] + s/10, counts of a bell around its middle.
function histOf(s) {
  const out = [];
  // Each bucket's lower edge is the previous one's upper, exactly (the server checks).
  const edge = (i) => Number((-2 + s / 10 + i * 0.2).toFixed(6));
  for (let i = 0; i < 20; i++) out.push([edge(i), edge(i + 1), Math.round(100 * Math.exp(-(((i - 9.5) / 4) ** 2)) * (1 + s / 10))]);
  return out;
}

const COLORS = [[230, 30, 30], [30, 200, 30], [30, 30, 230], [200, 200, 20], [20, 200, 200], [200, 20, 200], [120, 120, 120], [250, 150, 0], [0, 0, 0], [255, 255, 255]];

export async function testRich({ page, api, data, visit, check, base, fmt6, log = console.log }) {
  // ---- seed: three runs with rich values ----
  const now = Date.now();
  const rich = [
    { id: "ui-rich-a", name: "rich-adam-1e-3", config: { lr: 0.001, optimizer: "adam", layers: 12, batch: 64 }, images: [0, 3, 6, 9], texts: [0, 5], tables: [0, 5], hist: true },
    { id: "ui-rich-b", name: "rich-sgd-1e-2", config: { lr: 0.01, optimizer: "sgd", layers: 12, batch: 64 }, images: [2, 8], texts: [4], tables: [4], hist: true },
    { id: "ui-rich-c", name: "rich-adam-3e-3", config: { lr: 0.003, optimizer: "adam", layers: 24, batch: 64 }, images: [], texts: [], tables: [], hist: false },
  ];
  const losses = {};
  const texts = {};
  const tables = {};
  for (const [ri, r] of rich.entries()) {
    const c = await api("POST", "/api/v1/runs", { id: r.id, project: "uirich", name: r.name, config: r.config, tags: ["rich"] });
    check(c.status === 200, "create rich run: " + c.text);
    const points = [];
    for (let s = 0; s < 10; s++) {
      const loss = 1 / (1 + s) + 0.1 * ri;
      const values = { loss, acc: 0.5 + 0.04 * s - 0.03 * ri };
      if (r.hist) values["weights/fc1"] = { _type: "histogram", buckets: histOf(s + ri) };
      if (r.images.includes(s)) values.samples = { _type: "image", format: "png", data: png(8, 6, COLORS[s]).toString("base64"), caption: `sample at step ${s}` };
      if (r.texts.includes(s)) {
        const md = `# Notes ${r.id}\n\nNote for **step ${s}** with *emphasis* and \`code<b>\`.\n\n- a [safe link](https://example.com/a?b=1&c=2)\n- an [unsafe link](javascript:alert(1))\n\n<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">\n\n\`\`\`\nprint("<b>not bold</b>")\n\`\`\``;
        (texts[r.id] ??= {})[s] = md;
        values.notes = { _type: "text", text: md };
      }
      if (r.tables.includes(s)) {
        const rows = [...Array(6).keys()].map((k) => [`ex-${k}`, k % 2 ? "cat" : "dog", Number(((k * 37 + s * 11) % 17 / 17).toFixed(4))]);
        (tables[r.id] ??= {})[s] = rows;
        values.preds = { _type: "table", columns: ["id", "label", "score"], rows };
      }
      points.push({ step: s, ts: now - (10 - s) * 1000, values });
    }
    losses[r.id] = points[points.length - 1].values.loss;
    const b = await api("POST", `/api/v1/runs/${r.id}/batches`, { batch_id: `${r.id}.rich`, points });
    check(b.status === 200 && b.json.data.rejected.length === 0, "rich batch: " + b.text);
    check((await api("POST", `/api/v1/runs/${r.id}/finish`, { status: "finished" })).status === 200, "finish rich run");
  }
  // ---- artifacts: a dataset logged by c (stored), used by a; a model logged by a (stored), a checkpoint of a referenced ----
  const content = Buffer.from("trainwatch model weights " + "x".repeat(1000));
  const sha = (b) => crypto.createHash("sha256").update(b).digest("hex");
  const dataset = Buffer.from("a,b\n1,2\n");
  const ds = await api("POST", "/api/v1/runs/ui-rich-c/artifacts", { name: "tiny-data", type: "dataset", sha256: sha(dataset), size: dataset.length });
  check(ds.status === 200, "log dataset artifact: " + ds.text);
  const putDs = await fetch(`${base}/api/v1/artifacts/${ds.json.data.id}/content`, { method: "PUT", body: dataset });
  check(putDs.status === 200, "upload dataset: " + putDs.status + " " + (await putDs.text()));
  const use = await api("POST", "/api/v1/runs/ui-rich-a/artifacts/use", { name: "tiny-data" });
  check(use.status === 200, "use dataset: " + use.text);
  const model = await api("POST", "/api/v1/runs/ui-rich-a/artifacts", { name: "rich-model", type: "model", sha256: sha(content), size: content.length, metadata: { epoch: 3 } });
  check(model.status === 200, "log model artifact: " + model.text);
  const put = await fetch(`${base}/api/v1/artifacts/${model.json.data.id}/content`, { method: "PUT", body: content });
  check(put.status === 200, "upload model: " + put.status + " " + (await put.text()));
  const ckpt = await api("POST", "/api/v1/runs/ui-rich-a/artifacts", { name: "rich-ckpt", type: "checkpoint", sha256: "ab".repeat(32), size: 123456789, uri: "s3://bucket/ckpt/step-9.pt" });
  check(ckpt.status === 200, "log referenced checkpoint: " + ckpt.text);

  // ---- Run page: histograms ----
  await visit("run-rich", "/runs/ui-rich-a", '#run-histograms .hist-card[data-key="weights/fc1"] figure[data-view="distribution"] canvas');
  const dist = page.locator('#run-histograms .hist-card[data-key="weights/fc1"] figure[data-view="distribution"]');
  check((await dist.getAttribute("data-bands")) === "4" && (await dist.getAttribute("data-steps")) === "10", "histograms: 4 bands over 10 steps: " + (await dist.getAttribute("data-bands")) + "/" + (await dist.getAttribute("data-steps")));
  // The bands are drawn: many pixels of the series' color family on the plot canvas.
  const painted = await dist.evaluate((f) => {
    const cv = f.querySelector("canvas");
    const d = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && d[i + 2] > d[i] + 20) n++; // bluish (PALETTE[0])
    return n / (cv.width * cv.height);
  });
  check(painted > 0.05, "histograms: bands painted on the canvas: " + painted);
  // The tooltip at a step gives the percentiles computed from that step's buckets.
  const over = await dist.locator(".u-over").boundingBox();
  await page.mouse.move(over.x + over.width * 0.5, over.y + over.height / 2);
  await page.waitForSelector('#run-histograms figure[data-view="distribution"] .tooltip:not([hidden])');
  const tt = await dist.locator(".tooltip").innerText();
  const ttStep = Number(tt.match(/step (\d+)/)[1]);
  const wantMedian = fmt6(percentile(histOf(ttStep), 0.5));
  check(tt.includes("median " + wantMedian) || tt.includes("median\n" + wantMedian) || new RegExp("median\\s*" + wantMedian.replace(".", "\\.")).test(tt), `histograms: median at step ${ttStep}: ${tt} vs ${wantMedian}`);
  const wantP93 = fmt6(percentile(histOf(ttStep), 0.9332));
  check(new RegExp("p93\\.32\\s*" + wantP93.replace(".", "\\.")).test(tt), `histograms: p93 at step ${ttStep}: ${tt} vs ${wantP93}`);
  await page.mouse.move(0, 0);
  // The histogram (ridgeline) view: one ridge per step.
  await page.click('#run-histogram-section button[data-mode="histogram"]');
  const ridge = page.locator('#run-histograms .hist-card[data-key="weights/fc1"] figure[data-view="histogram"]');
  await ridge.waitFor();
  check((await ridge.getAttribute("data-ridges")) === "10", "histograms: 10 ridges: " + (await ridge.getAttribute("data-ridges")));
  const ridgePainted = await ridge.evaluate((f) => {
    const cv = f.querySelector("canvas");
    const d = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0) n++;
    return n / (cv.width * cv.height);
  });
  check(ridgePainted > 0.1, "histograms: ridges painted: " + ridgePainted);
  await page.click('#run-histogram-section button[data-mode="distribution"]');
  await dist.waitFor();
  log("ok  run: histograms (distribution bands with the buckets' percentiles, ridgeline of 10 steps)");

  // ---- Run page: media with a step slider ----
  const img = page.locator('#run-media .media-card[data-key="samples"]');
  await img.locator("img").waitFor();
  const imgAt = async () => ({
    step: await img.locator(".media-entry").getAttribute("data-step"),
    src: await img.locator("img").getAttribute("src"),
    out: await img.locator("output").innerText(),
  });
  const i0 = await imgAt();
  check(i0.step === "9" && i0.out.startsWith("step 9"), "media: the last image shown first: " + JSON.stringify(i0));
  await img.locator('input[type="range"]').fill("1");
  await page.waitForFunction(() => document.querySelector('#run-media .media-card[data-key="samples"] .media-entry')?.dataset.step === "3");
  const i1 = await imgAt();
  check(i1.src !== i0.src && i1.out.startsWith("step 3"), "media: the slider moves to step 3's image: " + JSON.stringify(i1));
  await page.waitForFunction(() => document.querySelector('#run-media .media-card[data-key="samples"] img')?.complete);
  const nat = await img.locator("img").evaluate((e) => [e.naturalWidth, e.naturalHeight]);
  check(nat[0] === 8 && nat[1] === 6, "media: the image loads (8x6): " + nat);
  const imgResp = await fetch(new URL(i1.src, base));
  const imgBytes = Buffer.from(await imgResp.arrayBuffer());
  check(imgResp.status === 200 && imgResp.headers.get("content-type") === "image/png" && imgBytes.equals(png(8, 6, COLORS[3])), "media: the image's url answers step 3's PNG");
  check((await img.locator("figcaption").innerText()).includes("sample at step 3"), "media: caption");
  // Text: safe markdown; the slider goes back to step 0's.
  const txt = page.locator('#run-media .media-card[data-key="notes"]');
  await txt.locator(".markdown").waitFor();
  check((await txt.locator(".markdown strong").first().innerText()) === "step 5", "text: the last entry (step 5) in bold");
  check((await txt.locator(".markdown h1").innerText()) === "Notes ui-rich-a", "text: heading");
  check((await txt.locator(".markdown em").first().innerText()) === "emphasis", "text: italic");
  check((await txt.locator(".markdown p code").first().innerText()) === "code<b>", "text: inline code shown as is");
  check((await txt.locator(".markdown pre code").innerText()).includes('print("<b>not bold</b>")'), "text: code block shown as is");
  check((await txt.locator(".markdown ul li").count()) === 2, "text: list");
  const links = await txt.locator(".markdown a").evaluateAll((as) => as.map((a) => a.getAttribute("href")));
  check(links.length === 1 && links[0] === "https://example.com/a?b=1&c=2", "text: only the http(s) link is a link: " + JSON.stringify(links));
  check((await txt.locator(".markdown script, .markdown img").count()) === 0 && (await page.evaluate(() => window.__pwned)) === undefined, "text: HTML in the text is not markup");
  check((await txt.locator(".markdown").innerText()).includes("<script>window.__pwned = 1</script>"), "text: HTML shown as text");
  await txt.locator('input[type="range"]').fill("0");
  await page.waitForFunction(() => document.querySelector('#run-media .media-card[data-key="notes"] .media-entry')?.dataset.step === "0");
  check((await txt.locator(".markdown strong").first().innerText()) === "step 0", "text: the slider shows step 0's text");
  // Table: sortable by a click on a header.
  const tab = page.locator('#run-media .media-card[data-key="preds"] table');
  await tab.waitFor();
  const scores = () => tab.locator("tbody tr").evaluateAll((rs) => rs.map((r) => Number(r.cells[2].textContent)));
  const want5 = tables["ui-rich-a"][5].map((r) => r[2]);
  check(JSON.stringify(await scores()) === JSON.stringify(want5.map((v) => Number(fmt6(v)))), "table: rows of step 5 in order: " + (await scores()));
  await tab.locator("thead th", { hasText: "score" }).locator("button").click();
  const asc = await scores();
  check(JSON.stringify(asc) === JSON.stringify([...want5].sort((a, b) => a - b).map((v) => Number(fmt6(v)))), "table: sorted by score ascending: " + asc);
  await tab.locator("thead th", { hasText: "score" }).locator("button").click();
  const descd = await scores();
  check(JSON.stringify(descd) === JSON.stringify([...asc].reverse()), "table: sorted by score descending: " + descd);
  check((await tab.locator("thead th", { hasText: "score" }).getAttribute("aria-sort")) === "descending", "table: aria-sort");
  log("ok  run: media (image, text and table by the step slider; markdown escaped; table sorted)");

  // ---- Run page: artifacts ----
  await page.waitForSelector("#artifact-table tbody tr");
  const arts = await page.locator("#artifact-table tbody tr").evaluateAll((rs) => rs.map((r) => ({ name: r.dataset.artifact, dir: r.dataset.dir, version: r.dataset.version, text: r.innerText, href: r.querySelector("a.art-download")?.getAttribute("href") ?? null, links: [...r.querySelectorAll("a[data-link]")].map((a) => a.getAttribute("href")) })));
  const byName = Object.fromEntries(arts.map((a) => [a.name + "/" + a.dir, a]));
  check(arts.length === 3, "artifacts: 3 rows: " + JSON.stringify(arts.map((a) => a.name + "/" + a.dir)));
  const m = byName["rich-model/logged"];
  check(m && m.version === "v0" && m.text.includes("model") && m.text.includes(sha(content).slice(0, 12)) && m.text.includes("1.001 KiB") && m.href, "artifacts: the model's row: " + JSON.stringify(m));
  const dl = await fetch(new URL(m.href, base));
  const dlBody = Buffer.from(await dl.arrayBuffer());
  check(dl.status === 200 && dlBody.equals(content), "artifacts: the download link answers 200 with the content: " + dl.status);
  const ck = byName["rich-ckpt/logged"];
  check(ck && ck.href === null && ck.text.includes("s3://bucket/ckpt/step-9.pt") && ck.text.includes("117.7 MiB"), "artifacts: the referenced checkpoint, no download: " + JSON.stringify(ck));
  const d = byName["tiny-data/used"];
  check(d && d.text.includes("dataset") && d.links.includes("/runs/ui-rich-c") && d.href, "artifacts: the used dataset links its producer: " + JSON.stringify(d));
  const dsDl = await fetch(new URL(d.href, base));
  check(dsDl.status === 200 && Buffer.from(await dsDl.arrayBuffer()).equals(dataset), "artifacts: the dataset's download answers 200");
  // The producer's page lists its consumer.
  await visit("run-rich-c", "/runs/ui-rich-c", '#artifact-table tbody tr[data-artifact="tiny-data"]');
  const cons = await page.locator('#artifact-table tr[data-artifact="tiny-data"] a[data-link]').evaluateAll((as) => as.map((a) => a.getAttribute("href")));
  check(cons.includes("/runs/ui-rich-a"), "artifacts: the dataset's consumer linked on its producer's page: " + cons);
  check((await page.locator("#run-histogram-section").isHidden()) && (await page.locator("#run-media-section").isHidden()), "a run without rich values has no Histograms or Media section");
  log("ok  run: artifacts (logged and used, lineage links, download 200)");

  // ---- Compare: media side by side at one step ----
  const ids = rich.map((r) => r.id);
  await visit("compare-rich", "/compare?ids=" + ids.join(","), '#compare-media .media-card[data-key="samples"] .media-cell');
  for (const key of ["samples", "notes", "preds"]) {
    const cells = await page.locator(`#compare-media .media-card[data-key="${key}"] .media-cell`).evaluateAll((cs) => cs.map((c) => c.dataset.run));
    check(JSON.stringify(cells) === JSON.stringify(ids), `compare: one ${key} cell per run: ${cells}`);
  }
  const cellSteps = (key) =>
    page.locator(`#compare-media .media-card[data-key="${key}"] .media-cell`).evaluateAll((cs) => cs.map((c) => c.querySelector(".media-entry")?.dataset.step ?? null));
  await page.waitForFunction(() => document.querySelector("#compare-media")?.dataset.loadedStep === "9");
  check(JSON.stringify(await cellSteps("samples")) === JSON.stringify(["9", "8", null]), "compare: images at step 9: " + (await cellSteps("samples")));
  await page.locator("#compare-step").fill("5");
  await page.waitForFunction(() => document.querySelector("#compare-media")?.dataset.loadedStep === "5");
  check(JSON.stringify(await cellSteps("samples")) === JSON.stringify(["3", "2", null]), "compare: images at or before step 5: " + (await cellSteps("samples")));
  check(JSON.stringify(await cellSteps("notes")) === JSON.stringify(["5", "4", null]), "compare: texts at or before step 5: " + (await cellSteps("notes")));
  await page.locator("#compare-step").fill("1");
  await page.waitForFunction(() => document.querySelector("#compare-media")?.dataset.loadedStep === "1");
  check(JSON.stringify(await cellSteps("samples")) === JSON.stringify(["0", null, null]), "compare: images at or before step 1: " + (await cellSteps("samples")));
  check((await page.locator('#compare-media .media-card[data-key="samples"] .media-cell[data-run="ui-rich-b"] .media-none').innerText()).includes("nothing logged at or before step 1"), "compare: an empty cell says why");
  const srcA = await page.locator('#compare-media .media-card[data-key="samples"] .media-cell[data-run="ui-rich-a"] img').getAttribute("src");
  const ra = await fetch(new URL(srcA, base));
  check(ra.status === 200 && Buffer.from(await ra.arrayBuffer()).equals(png(8, 6, COLORS[0])), "compare: run a's image at step 0");
  log("ok  compare: media side by side at one step slider");

  // ---- Compare: parallel coordinates, brushing, the sortable table ----
  const svg = page.locator("#pc-plot svg");
  const axes = await page.locator("#pc-plot g.pc-axis").evaluateAll((gs) => gs.map((g) => g.dataset.axis));
  check(JSON.stringify(axes) === JSON.stringify(["config.layers", "config.lr", "config.optimizer", "metric:loss", "metric:acc"]), "parallel coordinates: the varying config keys and the loss-like metrics: " + axes);
  check((await page.locator('#pc-constant').innerText()).includes("batch=64"), "parallel coordinates: the constant config named");
  const rowIds = () => page.locator("#hparams tbody tr").evaluateAll((rs) => rs.map((r) => r.dataset.runId));
  check((await rowIds()).length === 3, "parallel coordinates: a row per run");
  // Drags along an axis from f0 to f1 (fractions of its length from the top).
  const drag = async (axis, f0, f1) => {
    await svg.scrollIntoViewIfNeeded();
    const bb = await page.locator(`#pc-plot rect.pc-hit[data-axis="${axis}"]`).boundingBox();
    // The hit area reaches 4 SVG units past each end of the axis (the SVG is 320 units high).
    const unit = (await svg.boundingBox()).height / 320;
    const y0 = bb.y + 4 * unit, len = bb.height - 8 * unit, x = bb.x + bb.width / 2;
    await page.mouse.move(x, y0 + f0 * len);
    await page.mouse.down();
    await page.mouse.move(x, y0 + ((f0 + f1) / 2) * len, { steps: 4 });
    await page.mouse.move(x, y0 + f1 * len, { steps: 4 });
    await page.mouse.up();
  };
  // lr: 0.01 at the top, 0.003 at 78 %, 0.001 at the bottom: the top 40 % is run b.
  await drag("config.lr", -0.01, 0.4);
  await page.waitForFunction(() => document.querySelectorAll("#hparams tbody tr").length === 1);
  check(JSON.stringify(await rowIds()) === JSON.stringify(["ui-rich-b"]), "brushing lr's top keeps run b: " + (await rowIds()));
  check((await svg.getAttribute("data-active")) === "1" && (await page.locator("#pc-plot polyline.pc-off").count()) === 2, "brushing: 2 lines faded");
  // A click on the axis clears its brush; optimizer's bottom half (adam) keeps a and c.
  await svg.scrollIntoViewIfNeeded();
  const hitLr = await page.locator('#pc-plot rect.pc-hit[data-axis="config.lr"]').boundingBox();
  await page.mouse.click(hitLr.x + hitLr.width / 2, hitLr.y + hitLr.height / 2);
  await page.waitForFunction(() => document.querySelectorAll("#hparams tbody tr").length === 3);
  await drag("config.optimizer", 0.6, 1.01);
  await page.waitForFunction(() => document.querySelectorAll("#hparams tbody tr").length === 2);
  check(JSON.stringify((await rowIds()).sort()) === JSON.stringify(["ui-rich-a", "ui-rich-c"]), "brushing optimizer = adam: " + (await rowIds()));
  // Sorting the table by loss, both ways.
  const lossBtn = page.locator("#hparams thead th", { hasText: /^loss/ }).locator("button");
  await lossBtn.click();
  const byLoss = (desc) => ["ui-rich-a", "ui-rich-c"].sort((x, y) => (desc ? losses[y] - losses[x] : losses[x] - losses[y]));
  check(JSON.stringify(await rowIds()) === JSON.stringify(byLoss(false)), "table sorted by loss: " + (await rowIds()));
  await lossBtn.click();
  check(JSON.stringify(await rowIds()) === JSON.stringify(byLoss(true)), "table sorted by loss, descending: " + (await rowIds()));
  const lossCells = await page.locator("#hparams tbody tr").evaluateAll((rs) => rs.map((r) => r.cells[r.cells.length - 2].textContent));
  check(JSON.stringify(lossCells) === JSON.stringify(byLoss(true).map((id) => fmt6(losses[id]))), "table: loss values: " + lossCells);
  // Removing an axis drops its column; the brush on another axis stays.
  await page.locator('#pc-axes input[data-axis="config.layers"]').uncheck();
  await page.waitForFunction(() => document.querySelector("#pc-plot svg")?.dataset.axes === "4");
  const heads = await page.locator("#hparams thead th").allInnerTexts();
  check(!heads.some((t) => t.includes("layers")) && (await rowIds()).length === 2, "removing an axis: " + heads.join(","));
  await page.locator("#pc-clear").click();
  await page.waitForFunction(() => document.querySelectorAll("#hparams tbody tr").length === 3);
  // Color by a metric: the lines take the ramp's colors.
  const strokes = await page.locator("#pc-plot polyline.pc-line").evaluateAll((ls) => ls.map((l) => l.getAttribute("stroke")));
  check(strokes.length === 3 && strokes.every((s) => s.startsWith("rgb(")) && new Set(strokes).size === 3, "lines colored by loss: " + strokes);
  log("ok  compare: parallel coordinates (brushing filters the table, sorting, axes removed)");
}
