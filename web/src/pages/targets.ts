// Targets: scrape health per pool (Prometheus /api/v1/targets).
import { getData } from "../api";
import { h } from "../dom";
import { fmtNum, fmtTime } from "../format";
import type { PageContext } from "../main";
import { errorNotice, statusBadge } from "./common";

interface Target {
  labels: Record<string, string>;
  scrapePool: string;
  scrapeUrl: string;
  lastError: string;
  lastScrape: string;
  lastScrapeDuration: number;
  health: string;
}

export async function renderTargets(ctx: PageContext): Promise<void> {
  const { main } = ctx;
  main.appendChild(h("h1", null, "Targets"));
  let d: { activeTargets: Target[] };
  try {
    d = await getData<{ activeTargets: Target[] }>("/api/v1/targets", { state: "active" });
  } catch (e) {
    main.appendChild(errorNotice("targets", e));
    return;
  }
  if (!d.activeTargets.length) {
    main.appendChild(h("p", { class: "muted" }, "No scrape targets configured (scrape_configs in --config.file)."));
    return;
  }
  const pools = new Map<string, Target[]>();
  for (const t of d.activeTargets) pools.set(t.scrapePool, [...(pools.get(t.scrapePool) ?? []), t]);
  for (const [pool, ts] of [...pools].sort()) {
    const up = ts.filter((t) => t.health === "up").length;
    main.append(
      h("h2", null, pool, h("span", { class: "muted" }, ` (${up}/${ts.length} up)`)),
      h(
        "table",
        { "data-pool": pool },
        h("thead", null, h("tr", null, ["Endpoint", "State", "Labels", "Last scrape", "Duration", "Error"].map((t) => h("th", null, t)))),
        h("tbody", null, ts.map((t) =>
          h("tr", { "data-health": t.health },
            h("td", null, h("a", { href: t.scrapeUrl, rel: "noreferrer" }, t.scrapeUrl)),
            h("td", null, statusBadge(t.health)),
            h("td", { class: "mono" }, Object.entries(t.labels).map(([k, v]) => `${k}="${v}"`).join(", ")),
            h("td", null, t.lastScrape && !t.lastScrape.startsWith("0001") ? fmtTime(Date.parse(t.lastScrape) / 1000) : "never"),
            h("td", { class: "num" }, fmtNum(t.lastScrapeDuration * 1000, 4) + " ms"),
            h("td", { class: "bad" }, t.lastError),
          ))),
      ),
    );
  }
}
