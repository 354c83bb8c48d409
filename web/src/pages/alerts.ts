// Alerts: firing and pending alerts with their annotations (Prometheus
// /api/v1/alerts), silences (Alertmanager v2: list, create with matchers and
// a duration, expire) and the notification history.
import { deleteRaw, getData, getRaw, postRaw } from "../api";
import { h, notice } from "../dom";
import { fmtTime, parseDuration } from "../format";
import type { PageContext } from "../main";
import { errorNotice, statusBadge } from "./common";

interface PromAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: string;
  activeAt?: string;
  value?: string;
}
interface Matcher {
  name: string;
  value: string;
  isRegex: boolean;
  isEqual?: boolean;
}
interface Silence {
  id: string;
  matchers: Matcher[];
  startsAt: string;
  endsAt: string;
  createdBy: string;
  comment: string;
  status: { state: string };
}
interface Notification {
  time: string | number;
  receiver: string;
  integration: string;
  groupKey: string;
  status: string;
  alerts: number | unknown[];
  attempt: number;
  outcome: string;
  error?: string;
}

function labelChips(labels: Record<string, string>): HTMLElement {
  return h("span", { class: "mono" }, Object.entries(labels).sort().map(([k, v]) => `${k}="${v}"`).join(", "));
}

// "alertname=Foo, severity=~crit.*, job!=x" -> matchers; throws naming the bad part.
export function parseMatchers(s: string): Matcher[] {
  const out: Matcher[] = [];
  for (const part of s.split(",").map((p) => p.trim()).filter(Boolean)) {
    const m = /^([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"?(.*?)"?$/.exec(part);
    if (!m) throw new Error(`matcher "${part}": expected name=value, name!=value, name=~regex or name!~regex`);
    out.push({ name: m[1], value: m[3], isRegex: m[2].includes("~"), isEqual: !m[2].startsWith("!") });
  }
  if (!out.length) throw new Error("at least one matcher is needed");
  return out;
}

export async function renderAlerts(ctx: PageContext): Promise<void> {
  const { main } = ctx;
  main.appendChild(h("h1", null, "Alerts"));

  // ---- alerts ----
  const alertBox = h("div", { id: "alerts-list" });
  main.append(h("h2", null, "Firing and pending"), alertBox);
  try {
    const d = await getData<{ alerts: PromAlert[] }>("/api/v1/alerts");
    const sorted = [...d.alerts].sort((a, b) => (a.state === b.state ? 0 : a.state === "firing" ? -1 : 1));
    alertBox.appendChild(
      sorted.length
        ? h(
            "table",
            null,
            h("thead", null, h("tr", null, h("th", null, "State"), h("th", null, "Alert"), h("th", null, "Labels"), h("th", null, "Annotations"), h("th", null, "Active since"), h("th", { class: "num" }, "Value"))),
            h("tbody", null, sorted.map((a) =>
              h("tr", { "data-alertname": a.labels.alertname ?? "" },
                h("td", null, statusBadge(a.state)),
                h("td", null, h("b", null, a.labels.alertname ?? "")),
                h("td", null, labelChips(Object.fromEntries(Object.entries(a.labels).filter(([k]) => k !== "alertname")))),
                h("td", null, Object.entries(a.annotations).map(([k, v]) => h("div", null, h("span", { class: "muted" }, k + ": "), v))),
                h("td", null, a.activeAt ? fmtTime(Date.parse(a.activeAt) / 1000) : "–"),
                h("td", { class: "num" }, a.value ?? ""),
              ))),
          )
        : h("p", { class: "muted" }, "No alert is firing or pending."),
    );
  } catch (e) {
    alertBox.appendChild(errorNotice("alerts (/api/v1/alerts)", e));
  }

  // ---- silences ----
  const silBox = h("div", { id: "silences" });
  main.append(h("h2", null, "Silences"), silBox);
  const matchersIn = h("input", { class: "wide", id: "silence-matchers", "aria-label": "matchers", placeholder: 'alertname="GPUHot", Hostname=~"node-1.*"' });
  const durIn = h("input", { id: "silence-duration", value: "2h", size: 6, "aria-label": "duration" });
  const byIn = h("input", { id: "silence-creator", value: localStorage.getItem("tw-user") ?? "", placeholder: "your name", "aria-label": "created by", size: 12 });
  const commentIn = h("input", { id: "silence-comment", placeholder: "why", "aria-label": "comment", size: 24 });
  const formMsg = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { class: "toolbar", id: "silence-form" },
    matchersIn,
    h("label", { class: "inline" }, "for", durIn),
    byIn,
    commentIn,
    h("button", { type: "submit", class: "primary" }, "Create silence"),
  );
  const listBox = h("div");
  silBox.append(form, formMsg, listBox);
  const loadSilences = async () => {
    try {
      const sil = await getRaw<Silence[]>("/api/v2/silences");
      const shown = sil.filter((s) => s.status.state !== "expired" || Date.parse(s.endsAt) > Date.now() - 86400e3);
      listBox.replaceChildren(
        shown.length
          ? h(
              "table",
              { id: "silence-table" },
              h("thead", null, h("tr", null, h("th", null, "State"), h("th", null, "Matchers"), h("th", null, "Ends"), h("th", null, "By"), h("th", null, "Comment"), h("th", null, ""))),
              h("tbody", null, shown.map((s) => {
                const btn = h("button", { type: "button", disabled: s.status.state === "expired" }, "Expire");
                btn.addEventListener("click", async () => {
                  try {
                    await deleteRaw("/api/v2/silence/" + encodeURIComponent(s.id));
                    await loadSilences();
                  } catch (e) {
                    formMsg.replaceChildren(errorNotice("expire silence", e));
                  }
                });
                return h("tr", { "data-silence-id": s.id },
                  h("td", null, statusBadge(s.status.state)),
                  h("td", { class: "mono" }, s.matchers.map((m) => `${m.name}${m.isEqual === false ? "!" : m.isRegex ? "=" : "="}${m.isRegex ? "~" : ""}"${m.value}"`).join(", ")),
                  h("td", null, fmtTime(Date.parse(s.endsAt) / 1000)),
                  h("td", null, s.createdBy),
                  h("td", null, s.comment),
                  h("td", null, btn));
              })),
            )
          : h("p", { class: "muted" }, "No silences."),
      );
      return true;
    } catch (e) {
      listBox.replaceChildren(errorNotice("silences (/api/v2/silences)", e));
      return false;
    }
  };
  const silencesOk = await loadSilences();
  if (!silencesOk) form.querySelectorAll("input, button").forEach((el) => ((el as HTMLInputElement).disabled = true));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    let matchers: Matcher[];
    try {
      matchers = parseMatchers(matchersIn.value);
    } catch (err) {
      formMsg.replaceChildren(notice("error", (err as Error).message));
      return;
    }
    const dur = parseDuration(durIn.value);
    if (dur === null || dur <= 0) {
      formMsg.replaceChildren(notice("error", `duration "${durIn.value}": expected e.g. 30m, 2h, 1d`));
      return;
    }
    if (!byIn.value.trim()) {
      formMsg.replaceChildren(notice("error", "created by: a name is needed"));
      return;
    }
    localStorage.setItem("tw-user", byIn.value.trim());
    const now = new Date();
    try {
      const r = await postRaw<{ silenceID: string }>("/api/v2/silences", {
        matchers,
        startsAt: now.toISOString(),
        endsAt: new Date(now.getTime() + dur * 1000).toISOString(),
        createdBy: byIn.value.trim(),
        comment: commentIn.value.trim() || "created in the trainwatch UI",
      });
      formMsg.replaceChildren(notice("info", `silence ${r?.silenceID ?? ""} created`));
      await loadSilences();
    } catch (err) {
      formMsg.replaceChildren(errorNotice("create silence", err));
    }
  });

  // ---- notifications ----
  const notBox = h("div", { id: "notifications" });
  main.append(h("h2", null, "Notification history"), notBox);
  try {
    const ns = await getData<Notification[]>("/api/v1/notifications", { limit: 100 });
    notBox.appendChild(
      ns.length
        ? h(
            "table",
            null,
            h("thead", null, h("tr", null, ["Time", "Receiver", "Integration", "Status", "Alerts", "Attempt", "Outcome", "Error"].map((t) => h("th", null, t)))),
            h("tbody", null, ns.map((n) =>
              h("tr", null,
                h("td", null, typeof n.time === "number" ? fmtTime(n.time) : n.time),
                h("td", null, n.receiver), h("td", null, n.integration), h("td", null, statusBadge(n.status)),
                h("td", { class: "num" }, Array.isArray(n.alerts) ? n.alerts.length : String(n.alerts)),
                h("td", { class: "num" }, String(n.attempt)), h("td", null, n.outcome), h("td", { class: "bad" }, n.error ?? ""),
              ))),
          )
        : h("p", { class: "muted" }, "No notifications sent yet."),
    );
  } catch (e) {
    notBox.appendChild(errorNotice("notifications (/api/v1/notifications)", e));
  }
}
