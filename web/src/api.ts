// Fetch helpers for trainwatch's JSON APIs (Prometheus envelope, runs API,
// Alertmanager v2). An endpoint that is not there (404/501/503) raises an
// ApiError with `unavailable` set, so a page can say so instead of failing.

export class ApiError extends Error {
  constructor(
    message: string,
    public status: number,
    public unavailable: boolean,
  ) {
    super(message);
  }
}

export type Params = Record<string, string | number | undefined | null>;

export function url(path: string, params?: Params): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params ?? {})) if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  const s = q.toString();
  return s ? path + "?" + s : path;
}

async function request(method: string, path: string, params?: Params, body?: unknown, signal?: AbortSignal): Promise<unknown> {
  let resp: Response;
  try {
    resp = await fetch(url(path, params), {
      method,
      signal,
      headers: body !== undefined ? { "Content-Type": "application/json" } : undefined,
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
  } catch (e) {
    if ((e as Error).name === "AbortError") throw e;
    throw new ApiError(`${path}: server unreachable (${(e as Error).message})`, 0, true);
  }
  const text = await resp.text();
  let json: unknown = undefined;
  if (text) {
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
  }
  if (!resp.ok) {
    const unavailable = resp.status === 404 && json === undefined ? true : resp.status === 501 || resp.status === 503;
    const msg =
      (json && typeof json === "object" && "error" in json ? String((json as { error: unknown }).error) : text.trim()) ||
      resp.statusText;
    throw new ApiError(`${path}: ${resp.status} ${msg}`, resp.status, unavailable);
  }
  return json;
}

// GET with Prometheus's envelope: returns `data`.
export async function getData<T>(path: string, params?: Params, signal?: AbortSignal): Promise<T> {
  const j = (await request("GET", path, params, undefined, signal)) as { status?: string; data?: T; error?: string };
  if (j && typeof j === "object" && j.status === "error") throw new ApiError(`${path}: ${j.error}`, 200, false);
  if (j && typeof j === "object" && "data" in j) return j.data as T;
  throw new ApiError(`${path}: unexpected answer`, 200, false);
}

// GET/POST/DELETE without an envelope (Alertmanager v2).
export async function getRaw<T>(path: string, params?: Params): Promise<T> {
  return (await request("GET", path, params)) as T;
}
export async function postRaw<T>(path: string, body: unknown): Promise<T> {
  return (await request("POST", path, undefined, body)) as T;
}
export async function deleteRaw(path: string): Promise<void> {
  await request("DELETE", path);
}

// ---- shapes ----

export interface Run {
  id: string;
  project: string;
  name: string;
  status: string;
  config?: Record<string, unknown>;
  tags?: string[];
  total_steps?: number | null;
  step?: number | null;
  start_time?: number | null;
  end_time?: number | null;
  heartbeat_time?: number | null;
  host?: string | null;
  pid?: number | null;
  command?: string | null;
  git_commit?: string | null;
  world_size?: number | null;
  summary?: Record<string, unknown>;
  progress?: number | null;
  eta_seconds?: number | null;
  // GPU use of the run's processes on the server's host (docs/runs-api.md).
  gpu?: { hours: number; energy_kwh: number; idle_hours: number; cost: number };
  alerts?: { time?: number; title: string; text: string; level: string }[];
  actions?: RunAction[];
}

// An action a firing alert sent to the run, and each rank's result (docs/runs-api.md, "Actions").
export interface RunAction {
  id: number;
  action: string;
  alert: string;
  labels: Record<string, string>;
  time: number;
  acks: Record<string, { status: string; result: string; time: number }>;
}

export interface MetricPoint {
  x: number;
  min: number | string | null;
  max: number | string | null;
  last: number | string | null;
  ema?: number | string | null;
  count: number;
  nan?: number;
}

export interface RunMetrics {
  id: string;
  project: string;
  name: string;
  key: string;
  metric: string;
  labels: Record<string, string>;
  total_points: number;
  points: MetricPoint[];
}

// One series of GET /api/v1/runs/{id}/history (full resolution, by step).
export interface HistorySeries {
  key: string;
  metric: string;
  labels: Record<string, string>; // rank and host; empty for a rankless series
  steps: number[];
  timestamps: number[];
  values: (number | string | null)[];
}

// A native histogram as /api/v1/query and /api/v1/query_range write it;
// a bucket is [boundary rule, lower, upper, count] with rule 0: (lower,
// upper], 1: [lower, upper), 2: (lower, upper), 3: [lower, upper].
export type PromBucket = [number, string, string, string];
export interface PromHistogram {
  count: string;
  sum: string;
  buckets?: PromBucket[];
}

// A series of an instant (value / histogram) or range (values / histograms)
// result; a series may hold floats and histograms both.
export interface PromSeries {
  metric: Record<string, string>;
  value?: [number, string];
  values?: [number, string][];
  histogram?: [number, PromHistogram];
  histograms?: [number, PromHistogram][];
}

// A native histogram as numbers, buckets in the order the API wrote them.
export interface NativeBucket {
  rule: number;
  lower: number;
  upper: number;
  count: number;
}
export interface NativeHistogram {
  count: number;
  sum: number;
  buckets: NativeBucket[];
}

// Parses a histogram object of the query API; null when it is not one.
// Counts and bounds may be strings ("+Inf", "NaN") or numbers.
export function parseHistogram(v: unknown): NativeHistogram | null {
  if (!v || typeof v !== "object" || Array.isArray(v)) return null;
  const o = v as { count?: unknown; sum?: unknown; buckets?: unknown };
  const count = num(o.count as string), sum = num(o.sum as string);
  if (count === null || sum === null) return null;
  const buckets: NativeBucket[] = [];
  if (o.buckets !== undefined && o.buckets !== null) {
    if (!Array.isArray(o.buckets)) return null;
    for (const b of o.buckets) {
      if (!Array.isArray(b) || b.length < 4) return null;
      const rule = Number(b[0]), lower = num(b[1]), upper = num(b[2]), c = num(b[3]);
      if (!(rule >= 0 && rule <= 3) || lower === null || upper === null || c === null) return null;
      buckets.push({ rule, lower, upper, count: c });
    }
  }
  return { count, sum, buckets };
}

// The float and histogram points of a series of any result type, each by
// time; malformed points are dropped (a float value that is no number is null).
export function seriesPoints(s: PromSeries): { floats: [number, number | null][]; hists: [number, NativeHistogram][] } {
  const floats: [number, number | null][] = [];
  const hists: [number, NativeHistogram][] = [];
  for (const p of s.values ?? (s.value ? [s.value] : [])) if (Array.isArray(p)) floats.push([Number(p[0]), num(p[1])]);
  for (const p of s.histograms ?? (s.histogram ? [s.histogram] : [])) {
    const hist = Array.isArray(p) ? parseHistogram(p[1]) : null;
    if (hist) hists.push([Number(p[0]), hist]);
  }
  return { floats, hists };
}

// A bucket's bounds with its boundary rule: "(0.5, 1]", "[-1, -0.5)".
export function bucketText(b: NativeBucket, fmt: (v: number) => string = String): string {
  return (b.rule === 1 || b.rule === 3 ? "[" : "(") + fmt(b.lower) + ", " + fmt(b.upper) + (b.rule === 0 || b.rule === 3 ? "]" : ")");
}

export interface QueryResult {
  resultType: "vector" | "matrix" | "scalar" | "string";
  result: PromSeries[] | [number, string];
}

export function num(v: number | string | null | undefined): number | null {
  if (v === null || v === undefined) return null;
  if (typeof v === "number") return v;
  if (v === "NaN") return NaN;
  if (v === "Inf" || v === "+Inf") return Infinity;
  if (v === "-Inf") return -Infinity;
  const n = Number(v);
  return Number.isNaN(n) ? null : n;
}

export function listRuns(params: Params): Promise<Run[]> {
  return getData<Run[]>("/api/v1/runs", params);
}
export function getRun(id: string): Promise<Run> {
  return getData<Run>("/api/v1/runs/" + encodeURIComponent(id));
}
export function runMetrics(params: Params, signal?: AbortSignal): Promise<RunMetrics[]> {
  return getData<RunMetrics[]>("/api/v1/runs/metrics", params, signal);
}
export function runHistory(id: string, params: Params, signal?: AbortSignal): Promise<HistorySeries[]> {
  return getData<HistorySeries[]>("/api/v1/runs/" + encodeURIComponent(id) + "/history", params, signal);
}
export function instantQuery(query: string, time?: number): Promise<QueryResult> {
  return getData<QueryResult>("/api/v1/query", { query, time });
}
export function rangeQuery(query: string, start: number, end: number, step: number): Promise<QueryResult> {
  return getData<QueryResult>("/api/v1/query_range", { query, start, end, step });
}

// ---- rich values and artifacts (docs/runs-api.md) ----

export type MediaKind = "histogram" | "image" | "text" | "table";

// One rich key of a run: GET /api/v1/runs/media/keys?ids=a,b.
export interface MediaKey {
  run: string;
  key: string;
  kind: MediaKind;
  steps: number;
  first_step: number | null;
  last_step: number | null;
}

export type Bucket = [number | string, number | string, number | string]; // lower, upper, count

// One step of a histogram key: GET /api/v1/runs/histograms.
export interface HistogramEntry {
  run: string;
  rank: number | null;
  step: number;
  timestamp: number;
  buckets: Bucket[];
}

export type TableCell = string | number | boolean | null;

// One entry of an image, text or table key: GET /api/v1/runs/media.
export interface MediaEntry {
  run: string;
  rank: number | null;
  step: number;
  timestamp: number;
  kind: MediaKind;
  // image
  format?: string;
  width?: number;
  height?: number;
  bytes?: number;
  caption?: string | null;
  url?: string;
  // text
  text?: string;
  // table
  columns?: string[];
  rows?: TableCell[][];
}

// One version of an artifact (GET /api/v1/runs/{id}/artifacts, /api/v1/artifacts).
export interface ArtifactVersion {
  id: number | string;
  project: string;
  name: string;
  type: string;
  version: number | string;
  sha256: string;
  size: number;
  uri?: string | null;
  metadata?: Record<string, unknown> | null;
  stored: boolean;
  deleted: boolean;
  created_time?: number | null;
  producer?: string | null;
  consumers?: string[];
}

export function mediaKeys(ids: string[], signal?: AbortSignal): Promise<MediaKey[]> {
  return getData<MediaKey[]>("/api/v1/runs/media/keys", { ids: ids.join(",") }, signal);
}
export function histograms(params: Params, signal?: AbortSignal): Promise<HistogramEntry[]> {
  return getData<HistogramEntry[]>("/api/v1/runs/histograms", params, signal);
}
export function media(params: Params, signal?: AbortSignal): Promise<MediaEntry[]> {
  return getData<MediaEntry[]>("/api/v1/runs/media", params, signal);
}
export function runArtifacts(id: string): Promise<{ logged: ArtifactVersion[]; used: ArtifactVersion[] }> {
  return getData<{ logged: ArtifactVersion[]; used: ArtifactVersion[] }>("/api/v1/runs/" + encodeURIComponent(id) + "/artifacts");
}
