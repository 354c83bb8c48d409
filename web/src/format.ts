// Number, time and unit formatting shared by pages and charts.

// Up to 6 significant digits; exact enough to compare with the API.
export function fmtNum(v: number | null | undefined, digits = 6): string {
  if (v === null || v === undefined) return "–";
  if (Number.isNaN(v)) return "NaN";
  if (!Number.isFinite(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e-4 && a < 1e15) return String(Number(v.toPrecision(digits)));
  return v.toExponential(digits - 1).replace(/\.?0+e/, "e");
}

export function fmtDuration(sec: number | null | undefined): string {
  if (sec === null || sec === undefined || !Number.isFinite(sec)) return "–";
  sec = Math.max(0, Math.round(sec));
  const d = Math.floor(sec / 86400), hh = Math.floor((sec % 86400) / 3600), m = Math.floor((sec % 3600) / 60), s = sec % 60;
  if (d) return `${d}d ${hh}h`;
  if (hh) return `${hh}h ${m}m`;
  if (m) return `${m}m ${s}s`;
  return `${s}s`;
}

function pad(n: number, w = 2): string {
  return String(n).padStart(w, "0");
}

// Local time "YYYY-MM-DD HH:MM:SS" of unix seconds.
export function fmtTime(sec: number | null | undefined): string {
  if (sec === null || sec === undefined || !Number.isFinite(sec)) return "–";
  const d = new Date(sec * 1000);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function fmtAgo(sec: number | null | undefined): string {
  if (sec === null || sec === undefined) return "–";
  return fmtDuration(Date.now() / 1000 - sec) + " ago";
}

// The unit of a metric, from Prometheus naming conventions, dcgm-exporter's
// names and the training keys (docs/training-metrics.md).
export function unitOf(metric: string): string {
  const m = metric.toUpperCase();
  if (m.includes("DCGM_FI_DEV_GPU_UTIL") || m.includes("UTIL")) return "%";
  if (m.includes("DCGM_FI_DEV_FB_")) return "MiB";
  if (m.includes("_TEMP")) return "°C";
  if (m.includes("POWER_USAGE")) return "W";
  const l = metric.toLowerCase();
  if (l.endsWith("_seconds") || l.endsWith("_seconds_total") || l.includes("_seconds{")) return "s";
  if (l.endsWith("_bytes") || l.endsWith("_bytes_total")) return "B";
  if (l.endsWith("_ratio")) return "ratio";
  if (l.endsWith("per_sec") || l.endsWith("_per_second")) return "/s";
  if (l.endsWith("_celsius")) return "°C";
  if (l.endsWith("_watts")) return "W";
  return "";
}

export function withUnit(v: number | null | undefined, unit: string): string {
  const s = fmtNum(v);
  if (!unit || v === null || v === undefined || !Number.isFinite(v)) return s;
  if (unit === "B") return fmtBytes(v);
  if (unit === "%" || unit === "°C") return s + unit;
  if (unit === "ratio") return s;
  return s + " " + unit;
}

export function fmtBytes(v: number): string {
  const u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (Math.abs(v) >= 1024 && i < u.length - 1) {
    v /= 1024;
    i++;
  }
  return fmtNum(v, 4) + " " + u[i];
}

// "1h" / "30m" / "2d" / "45s" -> seconds; null when malformed.
export function parseDuration(s: string): number | null {
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)/g;
  let total = 0, pos = 0;
  const mult: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400, w: 604800, y: 31536000 };
  s = s.trim();
  if (!s) return null;
  for (let mm = re.exec(s); mm; mm = re.exec(s)) {
    if (mm.index !== pos) return null;
    total += parseFloat(mm[1]) * mult[mm[2]];
    pos = re.lastIndex;
  }
  return pos === s.length ? total : null;
}

export function labelsText(labels: Record<string, string>, skip: string[] = []): string {
  const parts = Object.entries(labels)
    .filter(([k]) => k !== "__name__" && !skip.includes(k))
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}="${v}"`);
  return (labels.__name__ ?? "") + (parts.length ? "{" + parts.join(", ") + "}" : "");
}

// Grafana's legendFormat: "{{label}}" replaced by the label's value.
export function legendFormat(fmt: string | undefined, labels: Record<string, string>): string {
  if (!fmt || fmt === "__auto") return labelsText(labels);
  return fmt.replace(/\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}/g, (_, k) => labels[k] ?? "");
}
