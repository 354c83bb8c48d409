// trainwatch web UI: a client-side router over plain-DOM pages. Every page
// reads trainwatch's own APIs; nothing is fetched from elsewhere.
import "./style.css";
import { destroyAllCharts } from "./chart";
import { clear, h, link } from "./dom";
import { renderRuns } from "./pages/runs";
import { renderRun } from "./pages/run";
import { renderCompare } from "./pages/compare";
import { renderExplore } from "./pages/explore";
import { renderAlerts } from "./pages/alerts";
import { renderTargets } from "./pages/targets";
import { renderGpus } from "./pages/gpus";
import { renderDashboards } from "./pages/dashboards";
import { renderCardinality } from "./pages/cardinality";

// A page renders into `main`; it may return a cleanup (timers, streams).
export type Cleanup = (() => void) | void;
export interface PageContext {
  main: HTMLElement;
  query: URLSearchParams;
  args: string[];
  // Replaces the URL's query string without re-rendering (shareable state).
  setQuery(q: URLSearchParams): void;
}
type Page = (ctx: PageContext) => Cleanup | Promise<Cleanup>;

const routes: [RegExp, Page, string][] = [
  [/^\/$/, renderRuns, "Runs"],
  [/^\/runs\/([^/]+)$/, renderRun, "Runs"],
  [/^\/compare$/, renderCompare, "Compare"],
  [/^\/explore$/, renderExplore, "Explore"],
  [/^\/alerts$/, renderAlerts, "Alerts"],
  [/^\/targets$/, renderTargets, "Targets"],
  [/^\/cardinality$/, renderCardinality, "Cardinality"],
  [/^\/gpus$/, renderGpus, "GPUs"],
  [/^\/dashboards(?:\/([^/]+))?$/, renderDashboards, "Dashboards"],
];

const nav: [string, string, string][] = [
  ["/", "Runs", "r"],
  ["/compare", "Compare", "c"],
  ["/explore", "Explore", "e"],
  ["/alerts", "Alerts", "a"],
  ["/gpus", "GPUs", "g"],
  ["/dashboards", "Dashboards", "d"],
  ["/targets", "Targets", "t"],
  ["/cardinality", "Cardinality", "k"],
];

// GET /api/v1/status/security: a banner while anyone who reaches the port
// may read and write (a non-loopback listen address with no authentication).
let securityBanner: Promise<HTMLElement | null> | undefined;
function banner(): Promise<HTMLElement | null> {
  securityBanner ??= fetch("/api/v1/status/security")
    .then((r) => (r.ok ? r.json() : null))
    .then((j: { data?: { open?: boolean; warning?: string } } | null) =>
      j?.data?.open ? h("div", { class: "notice notice-warn security-banner", role: "alert" }, j.data.warning ?? "") : null,
    )
    .catch(() => null);
  return securityBanner;
}

let cleanup: Cleanup = undefined;
let renderSeq = 0;

function applyTheme(theme: string): void {
  document.documentElement.dataset.theme = theme;
}

function header(active: string): HTMLElement {
  const theme = document.documentElement.dataset.theme ?? "dark";
  const toggle = h(
    "button",
    { type: "button", class: "theme-toggle", title: "switch dark/light theme (key: shift+T)", "aria-label": "switch theme" },
    theme === "dark" ? "☀ light" : "☾ dark",
  );
  toggle.addEventListener("click", () => {
    const next = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
    localStorage.setItem("tw-theme", next);
    applyTheme(next);
    void render();
  });
  return h(
    "nav",
    { class: "topnav", "aria-label": "main" },
    h("a", { href: "/", "data-link": true, class: "brand" }, "trainwatch"),
    nav.map(([href, label, key]) => {
      const a = link(href, label);
      a.title = `${label} (keys: g ${key})`;
      if (label === active) a.setAttribute("aria-current", "page");
      return a;
    }),
    h("span", { class: "spacer" }),
    toggle,
  );
}

export async function render(): Promise<void> {
  const seq = ++renderSeq;
  if (typeof cleanup === "function") cleanup();
  cleanup = undefined;
  destroyAllCharts();
  const path = location.pathname;
  const main = document.getElementById("main")!;
  const top = document.getElementById("top")!;
  clear(main);
  let found = false;
  for (const [re, page, section] of routes) {
    const m = re.exec(path);
    if (!m) continue;
    found = true;
    top.replaceChildren(header(section));
    void banner().then((b) => {
      if (b && seq === renderSeq) top.appendChild(b);
    });
    document.title = `${section} · trainwatch`;
    const ctx: PageContext = {
      main,
      query: new URLSearchParams(location.search),
      args: m.slice(1).map((s) => (s === undefined ? "" : decodeURIComponent(s))),
      setQuery(q) {
        const s = q.toString();
        history.replaceState(null, "", location.pathname + (s ? "?" + s : ""));
      },
    };
    try {
      const c = await page(ctx);
      if (seq === renderSeq) cleanup = c;
      else if (typeof c === "function") c();
    } catch (e) {
      console.warn(e);
      main.appendChild(h("div", { class: "notice notice-error", role: "alert" }, String((e as Error).message ?? e)));
    }
    break;
  }
  if (!found) {
    top.replaceChildren(header(""));
    main.appendChild(h("h1", null, "Not found"));
    main.appendChild(h("p", null, "No page at ", h("code", null, path), ". ", link("/", "Back to runs")));
  }
}

export function navigate(href: string): void {
  history.pushState(null, "", href);
  void render();
  document.getElementById("main")?.focus({ preventScroll: true });
}

document.addEventListener("click", (e) => {
  const a = (e.target as Element).closest?.("a[data-link]") as HTMLAnchorElement | null;
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  e.preventDefault();
  navigate(a.getAttribute("href")!);
});
window.addEventListener("popstate", () => void render());

// Keyboard: "g" then a letter jumps to a page; "/" focuses the page's search box.
let pendingG = 0;
document.addEventListener("keydown", (e) => {
  const t = e.target as HTMLElement;
  if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable)) return;
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === "/") {
    const box = document.querySelector<HTMLElement>("[data-search]");
    if (box) {
      e.preventDefault();
      box.focus();
    }
    return;
  }
  if (e.key === "T") {
    document.querySelector<HTMLButtonElement>(".theme-toggle")?.click();
    return;
  }
  if (e.key === "g") {
    pendingG = Date.now();
    return;
  }
  if (Date.now() - pendingG < 1500) {
    pendingG = 0;
    const target = nav.find(([, , k]) => k === e.key);
    if (target) navigate(target[0]);
  }
});

applyTheme(localStorage.getItem("tw-theme") ?? (matchMedia("(prefers-color-scheme: light)").matches ? "light" : "dark"));
void render();
