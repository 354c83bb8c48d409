// Runs (home): every run with status, progress, ETA and its key metrics'
// last values; sorted by the server, filtered with the run search expression;
// runs can be selected for Compare.
import { listRuns, type Run } from "../api";
import { h, link } from "../dom";
import { fmtAgo, fmtDuration, fmtNum, fmtTime } from "../format";
import { navigate, type PageContext } from "../main";
import { errorNotice, orderKeys, progressBar, statusBadge, summaryNumbers } from "./common";

const FIELDS: [string, string][] = [
  ["name", "Name"],
  ["project", "Project"],
  ["status", "Status"],
  ["progress", "Progress"],
  ["step", "Step"],
  ["eta_seconds", "ETA"],
  ["gpu_hours", "GPU-h"],
  ["gpu_kwh", "kWh"],
  ["gpu_cost", "Cost"],
  ["start_time", "Started"],
  ["heartbeat_time", "Last seen"],
];

export function renderRuns(ctx: PageContext): () => void {
  const { main, query } = ctx;
  let filter = query.get("filter") ?? "";
  let sort = query.get("sort") ?? "start_time";
  let order = query.get("order") ?? "desc";
  const selected = new Set<string>((query.get("selected") ?? "").split(",").filter(Boolean));

  const input = h("input", {
    type: "search",
    "data-search": true,
    value: filter,
    "aria-label": "run filter expression",
    placeholder: 'filter, e.g. config.lr > 1e-4 and status = "running"  (press / to focus)',
  });
  const compareBtn = h("button", { type: "button", class: "primary" }, "Compare selected");
  const form = h("form", { class: "toolbar", role: "search" }, input, h("button", { type: "submit" }, "Filter"), compareBtn);
  const status = h("div", { class: "muted", "aria-live": "polite" });
  const tableBox = h("div");
  main.append(h("h1", null, "Runs"), form, status, tableBox);

  const updateCompare = () => {
    compareBtn.disabled = selected.size === 0;
    compareBtn.textContent = `Compare selected (${selected.size})`;
  };
  updateCompare();
  compareBtn.addEventListener("click", () => navigate("/compare?ids=" + encodeURIComponent([...selected].join(","))));

  const saveQuery = () => {
    const q = new URLSearchParams();
    if (filter) q.set("filter", filter);
    if (sort !== "start_time") q.set("sort", sort);
    if (order !== "desc") q.set("order", order);
    ctx.setQuery(q);
  };

  let timer = 0;
  let seq = 0;
  const load = async () => {
    const my = ++seq;
    let runs: Run[];
    try {
      runs = await listRuns({ filter, sort, order, limit: 1000 });
    } catch (e) {
      if (my === seq) tableBox.replaceChildren(errorNotice("runs", e));
      return;
    }
    if (my !== seq) return;
    status.textContent = `${runs.length} run${runs.length === 1 ? "" : "s"}${filter ? " matching the filter" : ""} · updated ${fmtTime(Date.now() / 1000)}`;
    tableBox.replaceChildren(runsTable(runs));
  };

  const runsTable = (runs: Run[]): HTMLElement => {
    if (runs.length === 0) return h("p", { class: "muted" }, filter ? "No run matches the filter." : "No runs yet: a training client creates them (POST /api/v1/runs, docs/runs-api.md).");
    const keyCount = new Map<string, number>();
    for (const r of runs) for (const k of Object.keys(summaryNumbers(r))) keyCount.set(k, (keyCount.get(k) ?? 0) + 1);
    const keys = orderKeys(keyCount.keys()).slice(0, 5);
    const sortHeader = (field: string, title: string, num = false) => {
      const active = sort === field;
      const b = h("button", { class: "sort", type: "button", title: `sort by ${field}` }, title, active ? (order === "desc" ? " ▼" : " ▲") : "");
      b.addEventListener("click", () => {
        if (active) order = order === "desc" ? "asc" : "desc";
        else {
          sort = field;
          order = field === "name" || field === "project" || field === "status" ? "asc" : "desc";
        }
        saveQuery();
        void load();
      });
      return h("th", { class: num ? "num" : "", "aria-sort": active ? (order === "desc" ? "descending" : "ascending") : "none" }, b);
    };
    const all = h("input", { type: "checkbox", "aria-label": "select all runs", checked: runs.every((r) => selected.has(r.id)) });
    all.addEventListener("change", () => {
      for (const r of runs) all.checked ? selected.add(r.id) : selected.delete(r.id);
      updateCompare();
      tableBox.replaceChildren(runsTable(runs));
    });
    const head = h(
      "tr",
      null,
      h("th", null, all),
      FIELDS.map(([f, t]) => sortHeader(f, t, f === "step" || f === "eta_seconds" || f.startsWith("gpu_"))),
      keys.map((k) => sortHeader("summary." + k, k, true)),
    );
    const rows = runs.map((r) => {
      const box = h("input", { type: "checkbox", "aria-label": `select run ${r.name}`, checked: selected.has(r.id) });
      const tr = h(
        "tr",
        { "data-run-id": r.id, class: selected.has(r.id) ? "selected" : "" },
        h("td", null, box),
        h("td", null, link("/runs/" + encodeURIComponent(r.id), r.name)),
        h("td", null, r.project),
        h("td", null, statusBadge(r.status)),
        h("td", null, progressBar(r.progress)),
        h("td", { class: "num" }, r.step === null || r.step === undefined ? "–" : fmtNum(r.step, 12) + (r.total_steps ? " / " + fmtNum(r.total_steps, 12) : "")),
        h("td", { class: "num" }, r.status === "running" ? fmtDuration(r.eta_seconds) : "–"),
        // GPU use: only where the run's processes held GPUs of the server's host.
        h("td", { class: "num", "data-field": "gpu_hours" }, r.gpu?.hours ? fmtNum(r.gpu.hours, 3) : "–"),
        h("td", { class: "num", "data-field": "gpu_kwh" }, r.gpu?.hours ? fmtNum(r.gpu.energy_kwh, 3) : "–"),
        h("td", { class: "num", "data-field": "gpu_cost" }, r.gpu?.cost ? fmtNum(r.gpu.cost, 3) : "–"),
        h("td", { title: fmtTime(r.start_time) }, fmtTime(r.start_time)),
        h("td", { title: fmtTime(r.heartbeat_time) }, fmtAgo(r.heartbeat_time)),
        keys.map((k) => {
          const v = summaryNumbers(r)[k];
          return h("td", { class: "num", "data-key": k }, v === undefined ? "–" : fmtNum(v));
        }),
      );
      box.addEventListener("change", () => {
        box.checked ? selected.add(r.id) : selected.delete(r.id);
        tr.classList.toggle("selected", box.checked);
        updateCompare();
      });
      return tr;
    });
    return h("table", { class: "runs" }, h("thead", null, head), h("tbody", null, rows));
  };

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    filter = input.value.trim();
    saveQuery();
    void load();
  });
  void load();
  timer = window.setInterval(() => {
    if (!document.hidden) void load();
  }, 5000);
  return () => clearInterval(timer);
}
