// Step phases of a distributed run (issue 19): where each rank's step time
// goes, and which ranks straggle. Pure functions over the runs API's series
// (step_phase/<name> keys, the clients' phase timers, in seconds per step);
// the Run page (pages/run.ts) draws what they compute.

export const PHASE_PREFIX = "step_phase/";
// The phases the clients name, in the order a step runs them; any other
// name comes after these, alphabetically.
export const KNOWN_PHASES = ["data", "forward", "backward", "optimizer", "comm"];
// Waiting for the other ranks at the all-reduce: a straggler waits less
// there, so it is left out of a step time made of phases (as the
// trainwatch:step_time_seconds recording rule does, rules/training.rules.yml).
export const WAIT_PHASE = "comm";
// TrainingStragglerRank's factor: a rank above 1.2 x the median of its run's ranks.
export const STRAGGLER_FACTOR = 1.2;
export const STRAGGLER_ALERT = "TrainingStragglerRank";

// "step_phase/forward" -> "forward"; null for any other key.
export function phaseOf(key: string): string | null {
  return key.startsWith(PHASE_PREFIX) && key.length > PHASE_PREFIX.length ? key.slice(PHASE_PREFIX.length) : null;
}

// A key that logs the step time: step_time_seconds, step_time, train/step_time...
// (the names the recording rule matches).
export function isStepTimeKey(key: string): boolean {
  return /(^|[/_:.])step_time(_seconds)?$/.test(key);
}

// The step-time key of a run's keys: step_time_seconds if logged, else the
// first other step-time key in alphabetical order; null when none.
export function stepTimeKey(keys: Iterable<string>): string | null {
  const all = [...keys].filter(isStepTimeKey).sort();
  return all.includes("step_time_seconds") ? "step_time_seconds" : (all[0] ?? null);
}

// Phase names in a stable order: the known ones as a step runs them, then the others alphabetically.
export function orderPhases(names: Iterable<string>): string[] {
  const known = (p: string) => {
    const i = KNOWN_PHASES.indexOf(p);
    return i < 0 ? KNOWN_PHASES.length : i;
  };
  return [...new Set(names)].sort((a, b) => known(a) - known(b) || a.localeCompare(b));
}

// A colour per phase that does not depend on which other phases a run
// logs: a known phase always gets its own palette entry, the others the
// entries after those, in order.
export function phaseColors(phases: string[], palette: string[]): Map<string, string> {
  const out = new Map<string, string>();
  let next = KNOWN_PHASES.length;
  for (const p of phases) {
    const i = KNOWN_PHASES.indexOf(p);
    out.set(p, palette[(i >= 0 ? i : next++) % palette.length]);
  }
  return out;
}

// The mean of the finite values; null when there are none.
export function mean(values: ArrayLike<number | null>): number | null {
  let sum = 0, n = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || !Number.isFinite(v)) continue;
    sum += v;
    n++;
  }
  return n ? sum / n : null;
}

// The median of the finite values (the mean of the two middle ones for an
// even count, as PromQL's quantile(0.5) interpolates); null when none.
export function median(values: Iterable<number | null>): number | null {
  const xs = [...values].filter((v): v is number => v !== null && Number.isFinite(v)).sort((a, b) => a - b);
  if (!xs.length) return null;
  const m = xs.length >> 1;
  return xs.length % 2 ? xs[m] : (xs[m - 1] + xs[m]) / 2;
}

// Ranks by number; the rankless series ("") first, other labels after the numbers.
export function compareRanks(a: string, b: string): number {
  const na = a === "" ? -1 : Number(a), nb = b === "" ? -1 : Number(b);
  const fa = Number.isFinite(na), fb = Number.isFinite(nb);
  if (fa && fb && na !== nb) return na - nb;
  if (fa !== fb) return fa ? -1 : 1;
  return a.localeCompare(b);
}

// One key's values of one rank over the window (rank "" for a rankless series).
export interface RankSeries {
  key: string;
  rank: string;
  host: string;
  values: ArrayLike<number | null>;
}

export interface RankPhases {
  rank: string;
  host: string;
  phases: Map<string, number>; // mean seconds per step, by phase (only phases with a finite value)
  total: number; // the sum of the phase means: the bar's length
  stepTime: number | null; // mean of the step-time key, when the rank logs one
  steps: number; // the most values any of the rank's phase series had
}

// Mean seconds per phase for each rank that logged a phase, sorted by rank.
// `stepKey` is the run's step-time key (stepTimeKey), or null.
export function rankPhases(series: RankSeries[], stepKey: string | null): RankPhases[] {
  const byRank = new Map<string, RankPhases>();
  const get = (s: RankSeries) => {
    let r = byRank.get(s.rank);
    if (!r) byRank.set(s.rank, (r = { rank: s.rank, host: s.host, phases: new Map(), total: 0, stepTime: null, steps: 0 }));
    if (!r.host && s.host) r.host = s.host;
    return r;
  };
  for (const s of series) {
    const phase = phaseOf(s.key);
    if (phase === null) continue;
    const r = get(s);
    r.steps = Math.max(r.steps, s.values.length);
    const m = mean(s.values);
    if (m !== null) r.phases.set(phase, m);
  }
  for (const s of series) {
    if (stepKey === null || s.key !== stepKey || !byRank.has(s.rank)) continue;
    get(s).stepTime = mean(s.values);
  }
  const out = [...byRank.values()].filter((r) => r.phases.size > 0);
  for (const r of out) r.total = [...r.phases.values()].reduce((a, b) => a + b, 0);
  return out.sort((a, b) => compareRanks(a.rank, b.rank));
}

export interface RankVerdict {
  rank: string;
  host: string;
  time: number | null; // the step time compared (see StragglerReport.basis)
  ratio: number | null; // time / median
  straggler: boolean;
  // The phase whose mean exceeds the ranks' median of that phase the most
  // (what makes the rank slow), and by how many seconds; null when none does.
  slowPhase: string | null;
  slowPhaseExcess: number | null;
}

export interface StragglerReport {
  // "step_time": every rank's mean step-time key; "phases": the sum of its
  // phases but the wait phase (comm), or of all phases when it times no other.
  basis: "step_time" | "phases";
  median: number | null;
  factor: number;
  ranks: RankVerdict[]; // in the order of `ranks`
  stragglers: RankVerdict[];
}

// The ranks above `factor` x the median step time of the run's ranks
// (TrainingStragglerRank's test, on the window's means).
export function findStragglers(ranks: RankPhases[], factor = STRAGGLER_FACTOR): StragglerReport {
  const basis = ranks.length > 0 && ranks.every((r) => r.stepTime !== null && Number.isFinite(r.stepTime)) ? "step_time" : "phases";
  const working = ranks.some((r) => [...r.phases.keys()].some((p) => p !== WAIT_PHASE));
  const timeOf = (r: RankPhases): number | null => {
    if (basis === "step_time") return r.stepTime;
    let t = 0;
    for (const [p, v] of r.phases) if (!working || p !== WAIT_PHASE) t += v;
    return t;
  };
  const times = ranks.map(timeOf);
  const med = median(times);
  const phaseMedians = new Map<string, number>();
  for (const p of new Set(ranks.flatMap((r) => [...r.phases.keys()]))) {
    const m = median(ranks.map((r) => r.phases.get(p) ?? null));
    if (m !== null) phaseMedians.set(p, m);
  }
  const verdicts = ranks.map((r, i): RankVerdict => {
    const time = times[i];
    const ratio = time !== null && med !== null && med > 0 ? time / med : null;
    let slowPhase: string | null = null, slowPhaseExcess: number | null = null;
    for (const [p, v] of r.phases) {
      const excess = v - (phaseMedians.get(p) ?? v);
      if (excess > 0 && (slowPhaseExcess === null || excess > slowPhaseExcess)) {
        slowPhase = p;
        slowPhaseExcess = excess;
      }
    }
    return { rank: r.rank, host: r.host, time, ratio, straggler: ratio !== null && ratio > factor, slowPhase, slowPhaseExcess };
  });
  return { basis, median: med, factor, ranks: verdicts, stragglers: verdicts.filter((v) => v.straggler) };
}

// An alert as /api/v1/alerts answers it.
export interface RuleAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: string;
  activeAt?: string;
  value?: string;
}

export interface StragglerAlert {
  rank: string;
  host: string;
  state: string; // "firing" or "pending"
  activeAt?: string;
  value: number | null; // the rank's step time when it fired
  summary: string;
}

// The TrainingStragglerRank alerts of one run, one per rank (a firing one
// before a pending one), sorted by rank.
export function stragglerAlerts(alerts: RuleAlert[], project: string, runName: string): StragglerAlert[] {
  const byRank = new Map<string, StragglerAlert>();
  for (const a of alerts) {
    const l = a.labels;
    if (l.alertname !== STRAGGLER_ALERT || l.run !== runName || (l.project && l.project !== project)) continue;
    const rank = l.rank ?? "";
    const have = byRank.get(rank);
    if (have && (have.state === "firing" || a.state !== "firing")) continue;
    const v = a.value === undefined ? NaN : Number(a.value);
    byRank.set(rank, {
      rank,
      host: l.host ?? "",
      state: a.state,
      activeAt: a.activeAt,
      value: Number.isFinite(v) ? v : null,
      summary: a.annotations.description ?? a.annotations.summary ?? "",
    });
  }
  return [...byRank.values()].sort((a, b) => compareRanks(a.rank, b.rank));
}
