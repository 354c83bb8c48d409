// Rich values runs log (docs/runs-api.md, "Rich values"): histograms as
// TensorBoard's distribution and histogram views, images, markdown text and
// tables with a step slider on the Run page, and the same keys side by side
// for several runs at one step on Compare.
import { histograms, media, mediaKeys, num, type HistogramEntry, type MediaEntry, type MediaKey, type Run, type TableCell } from "../api";
import { PALETTE } from "../chart";
import { append, clear, h } from "../dom";
import { fmtBytes, fmtNum, fmtTime } from "../format";
import { distributionChart, ridgelineChart, type Buckets, type HistStep, type HistView } from "../histogram";
import { renderMarkdown } from "../markdown";
import { errorNotice, sortableTable, type Column } from "./common";

const TABLE_ROWS_SHOWN = 500;

function rankText(rank: number | null): string {
  return rank === null || rank === undefined ? "run" : "rank " + rank;
}

function toBuckets(e: HistogramEntry): Buckets {
  return e.buckets.map(([a, b, c]) => [num(a) ?? NaN, num(b) ?? NaN, num(c) ?? 0]);
}

// Groups entries by rank, rankless first, in the order the server sent them.
function byRank<T extends { rank: number | null }>(xs: T[]): Map<number | null, T[]> {
  const m = new Map<number | null, T[]>();
  for (const x of xs) {
    const r = x.rank ?? null;
    if (!m.has(r)) m.set(r, []);
    m.get(r)!.push(x);
  }
  return m;
}

function rankSelect(ranks: (number | null)[], onChange: (r: number | null) => void): HTMLSelectElement | null {
  if (ranks.length < 2) return null;
  const sel = h("select", { "aria-label": "rank" }, ranks.map((r, i) => h("option", { value: String(i) }, rankText(r))));
  sel.addEventListener("change", () => onChange(ranks[Number(sel.value)]));
  return sel;
}

// ---- one entry (image, text, table) ----

export function mediaEntryView(e: MediaEntry): HTMLElement {
  const attrs = { class: "media-entry", "data-kind": e.kind, "data-step": String(e.step), "data-run": e.run };
  if (e.kind === "image") {
    const img = h("img", {
      src: e.url ?? "",
      alt: e.caption || `image at step ${e.step}`,
      width: e.width || null,
      height: e.height || null,
      loading: "lazy",
      decoding: "async",
    });
    return h("figure", attrs, h("div", { class: "media-img" }, img),
      h("figcaption", null, e.caption ? h("span", { class: "media-caption" }, e.caption, " ") : null,
        h("span", { class: "muted" }, [e.width && e.height ? `${e.width}×${e.height}` : "", e.format ?? "", e.bytes ? fmtBytes(e.bytes) : ""].filter(Boolean).join(" · "))));
  }
  if (e.kind === "text") {
    const div = h("div", { ...attrs, class: "media-entry markdown" });
    // renderMarkdown escapes the text's HTML before adding its own markup.
    div.innerHTML = renderMarkdown(e.text ?? "");
    return div;
  }
  if (e.kind === "table") return h("div", attrs, mediaTable(e.columns ?? [], e.rows ?? []));
  return h("div", attrs, h("span", { class: "muted" }, `a ${e.kind} value`));
}

// A logged table, sortable by a click on a column's header.
export function mediaTable(columns: string[], rows: TableCell[][]): HTMLElement {
  const numeric = columns.map((_, j) => rows.length > 0 && rows.every((r) => r[j] === null || typeof r[j] === "number"));
  const cols: Column<TableCell[]>[] = columns.map((c, j) => ({
    title: c,
    value: (r) => r[j],
    cell: (r) => (r[j] === null || r[j] === undefined ? "–" : typeof r[j] === "number" ? fmtNum(r[j] as number) : String(r[j])),
    num: numeric[j],
  }));
  const t = sortableTable(cols, rows, { limit: TABLE_ROWS_SHOWN });
  t.classList.add("media-table");
  return h("div", { class: "media-table-box" }, t);
}

// ---- Run page ----

export interface RunMediaSections {
  destroy(): void;
}

// The Histograms and Media sections of a run (hidden while it has no such keys).
export function runMediaSections(histSec: HTMLElement, mediaSec: HTMLElement, run: Run): RunMediaSections {
  const views: HistView[] = [];
  let alive = true;
  histSec.hidden = true;
  mediaSec.hidden = true;
  void (async () => {
    let keys: MediaKey[];
    try {
      keys = (await mediaKeys([run.id])).filter((k) => k.run === run.id);
    } catch (e) {
      if (!alive) return;
      // A server without the media routes: say so once, in the Media section.
      mediaSec.hidden = false;
      mediaSec.replaceChildren(h("h2", null, "Media"), errorNotice("rich values (/api/v1/runs/media/keys)", e));
      return;
    }
    if (!alive) return;
    const hist = keys.filter((k) => k.kind === "histogram");
    const rich = keys.filter((k) => k.kind !== "histogram");
    if (hist.length) histogramSection(histSec, run, hist, views, () => alive);
    if (rich.length) mediaSection(mediaSec, run, rich);
  })();
  return {
    destroy() {
      alive = false;
      for (const v of views) v.destroy();
    },
  };
}

type HistMode = "distribution" | "histogram";

function histogramSection(sec: HTMLElement, run: Run, keys: MediaKey[], views: HistView[], alive: () => boolean): void {
  sec.hidden = false;
  let mode: HistMode = "distribution";
  const buttons = (["distribution", "histogram"] as HistMode[]).map((m) => {
    const b = h("button", { type: "button", "data-mode": m, "aria-pressed": String(m === mode) }, m === "distribution" ? "Distribution" : "Histogram");
    b.addEventListener("click", () => {
      if (mode === m) return;
      mode = m;
      for (const bb of buttons) bb.setAttribute("aria-pressed", String(bb.dataset.mode === mode));
      for (const c of cards) c.redraw();
    });
    return b;
  });
  const grid = h("div", { class: "grid", id: "run-histograms" });
  sec.replaceChildren(
    h("h2", null, "Histograms"),
    h("div", { class: "toolbar", role: "group", "aria-label": "histogram view" }, buttons, h("span", { class: "muted" },
      "distribution: percentile bands over steps (min–max, 7–93 %, 16–84 %, 31–69 %, median); histogram: each step's histogram, later steps in front")),
    grid,
  );
  const cards: { redraw(): void }[] = [];
  keys.forEach((k, ki) => {
    const color = PALETTE[ki % PALETTE.length];
    const body = h("div", { class: "hist-body" });
    const info = h("span", { class: "muted" });
    const tools = h("div", { class: "hist-tools" }, info);
    const cell = h("div", { class: "hist-card", "data-key": k.key }, h("div", { class: "hist-head" }, h("b", null, k.key), tools), body);
    grid.appendChild(cell);
    let groups = new Map<number | null, HistStep[]>();
    let rank: number | null = null;
    let view: HistView | null = null;
    const redraw = () => {
      if (view) {
        view.destroy();
        views.splice(views.indexOf(view), 1);
      }
      body.replaceChildren();
      const steps = groups.get(rank) ?? [];
      view = (mode === "distribution" ? distributionChart : ridgelineChart)(body, steps, { color });
      views.push(view);
    };
    cards.push({ redraw: () => groups.size && redraw() });
    body.appendChild(h("div", { class: "muted" }, "loading…"));
    void histograms({ ids: run.id, key: k.key, points: 200 })
      .then((es) => {
        if (!alive()) return;
        const g = byRank(es.filter((e) => e.run === run.id));
        groups = new Map([...g].map(([r, list]) => [r, list.map((e) => ({ step: e.step, buckets: toBuckets(e) }))]));
        rank = groups.size ? [...groups.keys()][0] : null;
        info.textContent = `${fmtNum(k.steps, 12)} step${k.steps === 1 ? "" : "s"} (${fmtNum(k.first_step, 12)}–${fmtNum(k.last_step, 12)})`;
        const sel = rankSelect([...groups.keys()], (r) => {
          rank = r;
          redraw();
        });
        if (sel) tools.appendChild(sel);
        if (!groups.size) body.replaceChildren(h("div", { class: "muted" }, "no data"));
        else redraw();
      })
      .catch((e: unknown) => alive() && body.replaceChildren(errorNotice("histograms " + k.key, e)));
  });
}

function mediaSection(sec: HTMLElement, run: Run, keys: MediaKey[]): void {
  sec.hidden = false;
  const grid = h("div", { class: "media-grid", id: "run-media" });
  sec.replaceChildren(h("h2", null, "Media"), grid);
  for (const k of keys) {
    const body = h("div", { class: "media-body" }, h("div", { class: "muted" }, "loading…"));
    const tools = h("div", { class: "media-tools" });
    grid.appendChild(h("section", { class: "media-card", "data-key": k.key, "data-kind": k.kind }, h("div", { class: "media-head" }, h("b", null, k.key), " ", h("span", { class: "badge" }, k.kind)), tools, body));
    void media({ ids: run.id, key: k.key })
      .then((es) => {
        const groups = byRank(es.filter((e) => e.run === run.id).sort((a, b) => a.step - b.step));
        if (!groups.size) {
          body.replaceChildren(h("div", { class: "muted" }, "no entries"));
          return;
        }
        let list = [...groups.values()][0];
        const slider = h("input", { type: "range", class: "step-slider", min: "0", max: String(list.length - 1), step: "1", value: String(list.length - 1), "aria-label": `step of ${k.key}` });
        const out = h("output", { class: "step-out" });
        const show = () => {
          const i = Math.min(list.length - 1, Math.max(0, Number(slider.value)));
          const e = list[i];
          out.textContent = `step ${fmtNum(e.step, 12)} (${i + 1} of ${list.length})`;
          out.title = fmtTime(e.timestamp > 1e11 ? e.timestamp / 1000 : e.timestamp);
          body.replaceChildren(mediaEntryView(e));
        };
        slider.addEventListener("input", show);
        const sel = rankSelect([...groups.keys()], (r) => {
          const step = list[Number(slider.value)]?.step ?? Infinity;
          list = groups.get(r) ?? [];
          slider.max = String(Math.max(0, list.length - 1));
          // The same step (or the last one before it) in the other rank.
          let j = list.length - 1;
          while (j > 0 && list[j].step > step) j--;
          slider.value = String(j);
          show();
        });
        clear(tools);
        append(tools, [h("label", { class: "inline" }, "step ", slider), out, sel,
          k.steps > list.length ? h("span", { class: "muted" }, ` ${fmtNum(list.length)} of ${fmtNum(k.steps)} steps listed`) : null]);
        show();
      })
      .catch((e: unknown) => body.replaceChildren(errorNotice(k.key, e)));
  }
}

// ---- Compare page ----

// The compared runs' image, text and table keys, one row of cells (a cell
// per run) per key at one step slider shared by all keys: each cell shows
// the run's last entry at or before the step.
export function compareMedia(parent: HTMLElement, runs: Run[], color: Map<string, string>): { destroy(): void } {
  const ctl = new AbortController();
  const sec = h("section", { id: "compare-media", hidden: true });
  parent.appendChild(sec);
  void (async () => {
    let keys: MediaKey[];
    try {
      keys = await mediaKeys(runs.map((r) => r.id), ctl.signal);
    } catch (e) {
      if ((e as Error).name === "AbortError") return;
      sec.hidden = false;
      sec.replaceChildren(h("h2", null, "Media"), errorNotice("rich values (/api/v1/runs/media/keys)", e));
      return;
    }
    const rich = keys.filter((k) => k.kind !== "histogram");
    if (!rich.length) return;
    const byKey = new Map<string, MediaKey[]>();
    for (const k of rich) byKey.set(k.key, [...(byKey.get(k.key) ?? []), k]);
    const lo = Math.min(...rich.map((k) => k.first_step ?? 0)), hi = Math.max(...rich.map((k) => k.last_step ?? 0));
    const slider = h("input", { type: "range", class: "step-slider", id: "compare-step", min: String(lo), max: String(hi), step: "1", value: String(hi), "aria-label": "step of the media" });
    const out = h("output", { class: "step-out" }, "step " + fmtNum(hi, 12));
    const grid = h("div", { id: "compare-media-keys" });
    sec.hidden = false;
    sec.replaceChildren(
      h("h2", null, "Media"),
      h("div", { class: "toolbar" }, h("label", { class: "inline" }, "step ", slider), out, h("span", { class: "muted" }, "each run's last entry at or before the step")),
      grid,
    );
    const rows = [...byKey.entries()].map(([key, ks]) => {
      const cells = new Map(runs.map((r) => [r.id, h("div", { class: "media-cell", "data-run": r.id }, h("div", { class: "media-cell-head" }, h("span", { class: "swatch", style: `background:${color.get(r.id)}` }), " ", r.name))]));
      grid.appendChild(h("section", { class: "media-card", "data-key": key, "data-kind": ks[0].kind }, h("div", { class: "media-head" }, h("b", null, key), " ", h("span", { class: "badge" }, ks[0].kind)),
        h("div", { class: "media-row", style: `grid-template-columns:repeat(${Math.min(runs.length, 4)}, minmax(0, 1fr))` }, [...cells.values()])));
      return { key, ks, cells };
    });
    let seq = 0;
    const load = async () => {
      const my = ++seq;
      const step = Number(slider.value);
      out.textContent = "step " + fmtNum(step, 12);
      sec.dataset.step = String(step);
      await Promise.all(rows.map(async ({ key, ks, cells }) => {
        let es: MediaEntry[];
        try {
          es = await media({ ids: ks.map((k) => k.run).join(","), key, step }, ctl.signal);
        } catch (e) {
          if ((e as Error).name === "AbortError" || my !== seq) return;
          for (const c of cells.values()) c.replaceChildren(c.firstChild!, errorNotice(key, e));
          return;
        }
        if (my !== seq) return;
        for (const r of runs) {
          const c = cells.get(r.id)!;
          // Rankless first, then the lowest rank: the server's order.
          const e = es.find((x) => x.run === r.id);
          const has = ks.some((k) => k.run === r.id);
          const head = c.firstChild!;
          clear(c);
          append(c, [head,
            e ? h("div", { class: "muted media-at" }, `step ${fmtNum(e.step, 12)}${e.rank !== null && e.rank !== undefined ? " · " + rankText(e.rank) : ""}`) : null,
            e ? mediaEntryView(e) : h("div", { class: "muted media-none" }, has ? `nothing logged at or before step ${fmtNum(step, 12)}` : `the run has no ${key}`)]);
        }
      }));
      if (my === seq) sec.dataset.loadedStep = String(step);
    };
    let timer = 0;
    slider.addEventListener("input", () => {
      out.textContent = "step " + fmtNum(Number(slider.value), 12);
      clearTimeout(timer);
      timer = window.setTimeout(() => void load(), 120);
    });
    await load();
  })();
  return { destroy: () => ctl.abort() };
}
