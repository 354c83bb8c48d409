// Pieces shared by several pages.
import { ApiError, type Run } from "../api";
import { h, notice } from "../dom";
import { fmtNum } from "../format";

export function statusBadge(status: string): HTMLElement {
  return h("span", { class: `badge st-${status}` }, status);
}

export function progressBar(p: number | null | undefined): HTMLElement {
  if (p === null || p === undefined || !Number.isFinite(p)) return h("span", { class: "muted" }, "–");
  const pct = Math.max(0, Math.min(1, p)) * 100;
  return h(
    "div",
    { class: "progress", role: "progressbar", "aria-valuenow": pct.toFixed(1), "aria-valuemin": "0", "aria-valuemax": "100" },
    h("span", { style: `width:${pct}%` }),
    h("em", null, pct.toFixed(1) + "%"),
  );
}

// The error of a failed request as a notice; "not available" for endpoints
// this server does not have (yet).
export function errorNotice(what: string, e: unknown): HTMLElement {
  if (e instanceof ApiError && e.unavailable) return notice("unavailable", `${what}: not available on this server (${e.message})`);
  return notice("error", `${what}: ${(e as Error).message ?? String(e)}`);
}

// The summary's numeric values by key.
export function summaryNumbers(r: Run): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(r.summary ?? {})) {
    if (typeof v === "number") out[k] = v;
    else if (v === "NaN") out[k] = NaN;
  }
  return out;
}

export const KEY_ORDER = ["loss", "val_loss", "eval_loss", "lr", "grad_norm", "samples_per_sec", "tokens_per_sec", "step_time_seconds"];

// Keys in a helpful order: the conventional ones first, then alphabetical.
export function orderKeys(keys: Iterable<string>): string[] {
  const rank = (k: string) => {
    const suffix = k.split(/[/_:]/).pop() ?? k;
    const i = KEY_ORDER.indexOf(k) >= 0 ? KEY_ORDER.indexOf(k) : KEY_ORDER.indexOf(suffix);
    return i < 0 ? 100 : i;
  };
  return [...new Set(keys)].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

// Flattens {"a": {"b": 1}} into {"a.b": 1}.
export function flatten(obj: Record<string, unknown> | undefined, prefix = "", out: Record<string, unknown> = {}): Record<string, unknown> {
  for (const [k, v] of Object.entries(obj ?? {})) {
    const key = prefix ? prefix + "." + k : k;
    if (v && typeof v === "object" && !Array.isArray(v)) flatten(v as Record<string, unknown>, key, out);
    else out[key] = v;
  }
  return out;
}

export function valueText(v: unknown): string {
  if (typeof v === "number") return fmtNum(v);
  if (v === null || v === undefined) return "–";
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}

// A sortable table: clicking (or Enter on) a header sorts by that column.
export interface Column<T> {
  title: string;
  value: (row: T) => unknown; // sort key
  cell?: (row: T) => Node | string;
  num?: boolean;
}

// At most `limit` rows are drawn (the first of the sorted order), with a
// line saying how many there are; `onSort` hears each new order.
export function sortableTable<T>(
  columns: Column<T>[],
  rows: T[],
  opts: { sortBy?: number; desc?: boolean; rowAttrs?: (r: T) => Record<string, string>; limit?: number; onSort?: (sortBy: number, desc: boolean) => void } = {},
): HTMLElement {
  let sortBy = opts.sortBy ?? -1, desc = opts.desc ?? false;
  const table = h("table", { class: "sortable" });
  const draw = () => {
    const sorted = [...rows];
    if (sortBy >= 0) {
      const col = columns[sortBy];
      sorted.sort((a, b) => {
        const va = col.value(a), vb = col.value(b);
        const na = va === null || va === undefined || (typeof va === "number" && Number.isNaN(va));
        const nb = vb === null || vb === undefined || (typeof vb === "number" && Number.isNaN(vb));
        if (na || nb) return na === nb ? 0 : na ? 1 : -1; // absent last
        const c = typeof va === "number" && typeof vb === "number" ? va - vb : String(va).localeCompare(String(vb), undefined, { numeric: true });
        return desc ? -c : c;
      });
    }
    const head = h(
      "tr",
      null,
      columns.map((c, i) => {
        const b = h("button", { class: "sort", type: "button" }, c.title, sortBy === i ? (desc ? " ▼" : " ▲") : "");
        b.addEventListener("click", () => {
          if (sortBy === i) desc = !desc;
          else {
            sortBy = i;
            desc = false;
          }
          draw();
          opts.onSort?.(sortBy, desc);
        });
        return h("th", { class: c.num ? "num" : "", "aria-sort": sortBy === i ? (desc ? "descending" : "ascending") : "none" }, b);
      }),
    );
    const shown = opts.limit !== undefined && sorted.length > opts.limit ? sorted.slice(0, opts.limit) : sorted;
    const body = shown.map((r) =>
      h(
        "tr",
        opts.rowAttrs?.(r) ?? null,
        columns.map((c) => h("td", { class: c.num ? "num" : "" }, c.cell ? c.cell(r) : valueText(c.value(r)))),
      ),
    );
    const more = shown.length < sorted.length
      ? h("tfoot", null, h("tr", null, h("td", { colspan: String(columns.length), class: "muted" }, `the first ${shown.length} of ${sorted.length} rows`)))
      : null;
    table.replaceChildren(...[h("thead", null, head), h("tbody", null, body), more].filter((e): e is HTMLTableSectionElement => e !== null));
  };
  draw();
  return table;
}
