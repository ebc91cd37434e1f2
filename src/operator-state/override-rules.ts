// What a runtime override may be: which caller may size which limit, and what a new size may say.
// An override keeps its limit's name, algorithm, `by` and key, and replaces only the size, so it
// may size only state that one caller (or one tenant) alone keys on: the rule of a client's
// `limits` in the YAML (config/checks.ts checkClientLimits). Two callers that share one key with
// different sizes would disagree on what it holds: a counter one of them may fill past the
// other's limit. The size itself is checked by the limit's algorithm exactly as the YAML is
// (the schema, then config/checks.ts checkLimit), so an override can say nothing the config
// file could not.
import { checkLimit } from "../config/checks.js";
import { type CompiledPlan, compileLimit, type Runtime } from "../config/compile.js";
import { suggest } from "../config/problems.js";
import { type LimitConfig, limitSchema } from "../config/schema.js";
import { formatDuration, formatRate, parseDuration, type Rate, type WindowLength } from "../config/units.js";
import { ALGORITHMS, type AlgorithmName } from "../limits/algorithms/index.js";
import { plannedLimit } from "../limits/compiled.js";
import type { KeyBy } from "../limits/key-by.js";
import type { PlannedLimit } from "../limits/plan.js";

/** Who an override names: a client (`client:<id>`) or a tenant (`tenant:<id>`). */
export type OverrideScope = "client" | "tenant";

/** One stored override: the size written for the limit, why, and until when. */
export interface OverrideRecord {
  /** The algorithm of the limit when it was set: a reload that changes it leaves the override unapplied. */
  readonly algorithm: AlgorithmName;
  /** The limit's keys as written (`{ burst: 20, rate: "10/s" }`), JSON values. */
  readonly sizes: Readonly<Record<string, unknown>>;
  readonly reason: string;
  /** Epoch ms (the clock of the instance that set it). */
  readonly expiresAtMs: number;
  readonly setAtMs: number;
}

/** What compiling an override needs of the running config (its generation). */
export interface OverrideContext {
  /** calendar.tz, for a calendar window. */
  readonly tz: string;
  /** store.local_fraction: the share one instance grants alone under on_failure: local. */
  readonly localFraction: number;
}

export function overrideContext(rt: Runtime): OverrideContext {
  return { tz: rt.config.calendar.tz, localFraction: rt.config.store.local_fraction };
}

/** The longest an override may last: a temporary raise; a lasting size belongs in the config. */
export const MAX_EXPIRES_IN_MS = 30 * 86_400_000;
/** The shortest: less could not reach every instance before it ended. */
export const MIN_EXPIRES_IN_MS = 1000;
/** The longest `reason`, in characters. */
export const MAX_REASON = 500;

/**
 * Who may size a limit keyed `by`: a client when the key has a caller part (each client its own
 * state), a tenant when it has a tenant part and no caller part (one state per tenant, shared by
 * its clients only, who all get the tenant's override); nobody otherwise (a route budget, a limit
 * per IP or per header value: state that callers of any tenant share).
 */
export function overrideScopeOf(by: KeyBy): OverrideScope | undefined {
  if (by.parts.some((p) => p.kind === "caller")) return "client";
  if (by.parts.some((p) => p.kind === "tenant")) return "tenant";
  return undefined;
}

/** The limit's keys an override may write: its algorithm's, without `by`, `shadow` or `unit`. */
function sizeKeys(algorithm: AlgorithmName): string[] {
  return Object.keys(ALGORITHMS[algorithm].config.keys);
}

/**
 * Algorithms written in more than one form (a token bucket: rate + burst, or limit + window): an
 * override in one form replaces the config's other form whole rather than mixing the two.
 */
const FORMS: Partial<Record<AlgorithmName, readonly (readonly string[])[]>> = {
  token_bucket: [
    ["rate", "burst"],
    ["limit", "window"],
  ],
};

/** A parsed limit's size keys as an override body writes them (`"10/s"`, `"1h"`, `"1 month"`). */
function writtenSizes(
  written: Readonly<Record<string, unknown>>,
  keys: readonly string[],
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const value = written[key];
    if (value === undefined) continue;
    if (key === "rate") out[key] = formatRate(value as Rate);
    else if (key === "window" || key === "lease") out[key] = formatDuration(value as WindowLength);
    else out[key] = value;
  }
  return out;
}

/**
 * The size an override's `sizes` make of `base`: the keys it gives, the rest as the config
 * writes the limit now (so a reload that changes them changes the override's limit too). A size
 * stored in full (every key given) is itself.
 */
export function mergedSizes(
  base: PlannedLimit,
  sizes: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const algorithm = base.spec.algorithm;
  const configured = base.written ? writtenSizes(base.written, sizeKeys(algorithm)) : {};
  const forms = FORMS[algorithm] ?? [];
  const given = forms.find((form) => form.some((k) => Object.hasOwn(sizes, k)));
  if (given) for (const form of forms) if (form !== given) for (const k of form) delete configured[k];
  // The keys it gives first, in its order: the answer reads as the operator wrote it.
  const merged: Record<string, unknown> = { ...sizes };
  for (const [k, v] of Object.entries(configured)) if (!Object.hasOwn(merged, k)) merged[k] = v;
  return merged;
}

/** Keys of a limit an override may not give, and why (each keeps the limit's own). */
const KEPT: Readonly<Record<string, string>> = {
  by: "an override sizes the limit for this caller; how it is keyed stays the config's: remove by",
  shadow: "an override sizes the limit; whether it is a shadow limit stays the config's: remove shadow",
  unit: "an override sizes the limit; what it counts (unit) stays the config's: remove unit",
  unlimited:
    "an override sizes the limit and cannot lift it: give a larger size instead (or add the caller to exempt.clients in the config)",
};

/**
 * `base` with `record`'s size, keyed and named as `base` is; or why it cannot be (the limit's
 * algorithm changed since, or the size no longer passes its checks).
 */
export function overriddenLimit(
  base: PlannedLimit,
  record: Pick<OverrideRecord, "algorithm" | "sizes">,
  context: OverrideContext,
): PlannedLimit | { why: string } {
  const algorithm = base.spec.algorithm;
  if (record.algorithm !== algorithm)
    return {
      why: `${base.spec.name} is now ${ALGORITHMS[algorithm].config.what}; the override sizes ${ALGORITHMS[record.algorithm].config.what}: set it again`,
    };
  const problems: string[] = [];
  const parsed = parseSize(base, mergedSizes(base, record.sizes), problems);
  if (!parsed) return { why: problems.join("; ") };
  const spec = compileLimit(base.spec.name, parsed, { tz: context.tz });
  if (!spec || spec.algorithm !== algorithm) return { why: `the size does not compile to ${algorithm}` };
  return plannedLimit(spec, context.localFraction, base.by, base.tenantOnly, parsed);
}

/** `sizes` as the YAML would read them for `base` (its algorithm, shadow and unit), or problems. */
function parseSize(
  base: PlannedLimit,
  sizes: Readonly<Record<string, unknown>>,
  problems: string[],
): LimitConfig | undefined {
  const { spec } = base;
  const written: Record<string, unknown> = { algorithm: spec.algorithm, ...sizes };
  if (spec.shadow) written.shadow = true;
  if (spec.unit !== undefined) written.unit = spec.unit;
  const parsed = limitSchema.safeParse(written);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const at = issue.path.map(String).join(".");
      problems.push(`${at || "size"}: ${issue.message}`);
    }
    return undefined;
  }
  const before = problems.length;
  checkLimit([], parsed.data, (_path, message) => problems.push(message));
  return problems.length === before ? parsed.data : undefined;
}

/** What a PUT body becomes once it passed every check. */
export interface ValidOverride {
  record: OverrideRecord;
  /** The limit as the caller's requests will be checked against it. */
  limit: PlannedLimit;
}

/** Why a PUT was refused: one problem per line of the body that needs fixing. */
export interface RefusedOverride {
  problems: string[];
}

/**
 * A PUT body for `base` (found by name, and allowed for this caller: overridable()), read as the
 * YAML would read the limit, plus `expires_in` (required, 1s to 30d) and `reason` (required).
 */
export function readOverrideBody(
  base: PlannedLimit,
  body: unknown,
  nowMs: number,
  context: OverrideContext,
  routeCosts: ReadonlyMap<string, number> = new Map(),
): ValidOverride | RefusedOverride {
  const { spec } = base;
  const algorithm = spec.algorithm;
  const takes = ALGORITHMS[algorithm].config.takes;
  const example = exampleOf(algorithm);
  if (typeof body !== "object" || body === null || Array.isArray(body))
    return {
      problems: [
        `send a JSON object: the new size of ${spec.name} (${takes}), expires_in and reason, e.g. ${example}`,
      ],
    };
  const problems: string[] = [];
  const own = sizeKeys(algorithm);
  const known = [...own, "expires_in", "reason"];
  const sizes: Record<string, unknown> = {};
  let expiresInMs: number | undefined;
  let reason: string | undefined;
  for (const [key, value] of Object.entries(body)) {
    if (key === "expires_in") expiresInMs = readExpiresIn(value, problems);
    else if (key === "reason") reason = readReason(value, problems);
    else if (key === "algorithm") {
      if (value !== algorithm)
        problems.push(
          `algorithm: ${spec.name} is ${ALGORITHMS[algorithm].config.what}, and an override keeps its algorithm (its state is kept in that algorithm's form): remove algorithm, or change it in the config`,
        );
    } else if (Object.hasOwn(KEPT, key)) problems.push(KEPT[key]!);
    else if (own.includes(key)) sizes[key] = value;
    else if (Object.hasOwn(limitSchema.shape, key))
      problems.push(
        `${key} does not apply to ${spec.name}, ${ALGORITHMS[algorithm].config.what}: it takes ${takes}`,
      );
    else {
      const hint = suggest(key, known);
      problems.push(
        `unknown key "${key}"${hint ? `; did you mean "${hint}"?` : `: ${spec.name} takes ${takes}, expires_in and reason`}`,
      );
    }
  }
  if (!Object.hasOwn(body, "expires_in"))
    problems.push(
      `expires_in is required: how long the override lasts (${formatDuration(MIN_EXPIRES_IN_MS)} to ${formatDuration(MAX_EXPIRES_IN_MS)}), e.g. "2h"; it ends by itself`,
    );
  if (!Object.hasOwn(body, "reason"))
    problems.push(
      'reason is required: why the override exists, e.g. "launch week", shown with it and audited',
    );
  let limit: PlannedLimit | undefined;
  if (Object.keys(sizes).length === 0) {
    problems.push(
      `give the new size of ${spec.name}: any of ${takes}, the rest staying as configured, e.g. ${example}`,
    );
  } else {
    const parsed = parseSize(base, mergedSizes(base, sizes), problems);
    if (parsed) {
      const compiled = compileLimit(spec.name, parsed, { tz: context.tz });
      if (!compiled || compiled.algorithm !== algorithm) {
        // `limit: 0` is a fixed window that denies everything whatever the algorithm.
        problems.push(
          `limit: 0 would make ${spec.name} a fixed window that denies everything, but it is ${ALGORITHMS[algorithm].config.what} and its key holds that algorithm's state: give the smallest size it takes instead, or add the caller to deny.clients in the config`,
        );
      } else {
        limit = plannedLimit(compiled, context.localFraction, base.by, base.tenantOnly, parsed);
        // The most one request may cost and still be admitted (a bucket's burst, a window's limit).
        const capacity = ALGORITHMS[algorithm].config.capacity ? limit.quota : undefined;
        const costly = capacity === undefined ? undefined : costliest(routeCosts, capacity);
        if (costly)
          problems.push(
            `route "${costly.route}" costs ${costly.cost}, more than this size's ${capacity}: its requests could never be admitted; give at least ${costly.cost}`,
          );
      }
    }
  }
  if (problems.length || !limit || expiresInMs === undefined || reason === undefined) return { problems };
  return {
    limit,
    record: { algorithm, sizes, reason, expiresAtMs: nowMs + expiresInMs, setAtMs: nowMs },
  };
}

function costliest(routeCosts: ReadonlyMap<string, number>, capacity: number) {
  let worst: { route: string; cost: number } | undefined;
  for (const [route, cost] of routeCosts)
    if (cost > capacity && (!worst || cost > worst.cost)) worst = { route, cost };
  return worst;
}

function readExpiresIn(value: unknown, problems: string[]): number | undefined {
  const ms = typeof value === "string" ? parseDuration(value) : null;
  if (ms === null) {
    problems.push(
      `expires_in: ${JSON.stringify(value) ?? String(value)} is not a duration: write one such as "90s", "2h" or "7d"`,
    );
    return undefined;
  }
  if (ms < MIN_EXPIRES_IN_MS || ms > MAX_EXPIRES_IN_MS) {
    problems.push(
      ms > MAX_EXPIRES_IN_MS
        ? `expires_in: ${value} is longer than ${formatDuration(MAX_EXPIRES_IN_MS)}, the most an override lasts: it is a temporary size; a lasting one belongs in the config (clients[].limits)`
        : `expires_in: ${value} is shorter than ${formatDuration(MIN_EXPIRES_IN_MS)}, too short to reach every instance: give at least 1s`,
    );
    return undefined;
  }
  return ms;
}

function readReason(value: unknown, problems: string[]): string | undefined {
  if (typeof value !== "string" || value.trim() === "") {
    problems.push('reason: give a non-empty string saying why, e.g. "launch week"');
    return undefined;
  }
  if (value.length > MAX_REASON) {
    problems.push(`reason: ${value.length} characters; keep it to ${MAX_REASON}`);
    return undefined;
  }
  // Shown in logs and terminals (the CLI): no control characters that could rewrite a line.
  if (/[\u0000-\u001f\u007f]/.test(value)) {
    problems.push("reason: no control characters (newlines, tabs, escapes): one line of text");
    return undefined;
  }
  return value;
}

/** An example body for a limit of `algorithm`, as the 400 shows it. */
function exampleOf(algorithm: AlgorithmName): string {
  const size: Record<AlgorithmName, string> = {
    token_bucket: '"burst": 20, "rate": "10/s"',
    leaky_bucket: '"rate": "10/s", "queue": 20',
    fixed_window: '"limit": 1000, "window": "1h"',
    sliding_window: '"limit": 1000, "window": "1h"',
    sliding_window_counter: '"limit": 1000, "window": "1h"',
    concurrency: '"max_in_flight": 10, "lease": "30s"',
  };
  return `{ ${size[algorithm]}, "expires_in": "2h", "reason": "launch week" }`;
}

/** Whether `caller` may be given an override of `limit`, or why not (a 400's detail). */
export function overridable(
  rt: Runtime,
  caller: { kind: OverrideScope; id: string },
  limit: PlannedLimit,
): { ok: true } | { ok: false; detail: string } {
  const name = limit.spec.name;
  const scope = overrideScopeOf(limit.by);
  if (scope === undefined)
    return {
      ok: false,
      detail: `${name} is keyed by ${limit.by.text}, with no caller or tenant part: it is one budget that callers of any tenant share, and they would disagree on its size; change it in the config instead`,
    };
  if (scope !== caller.kind) {
    return {
      ok: false,
      detail:
        scope === "tenant"
          ? `${name} is keyed by ${limit.by.text}: one budget shared by every client of a tenant, and they would disagree on its size; override it for the tenant: PUT /admin/overrides/tenant:<tenant>/${name}`
          : `${name} is keyed by ${limit.by.text}: each client has its own, which a tenant's size cannot reach; override it per client: PUT /admin/overrides/client:<id>/${name}`,
    };
  }
  if (caller.kind === "client") {
    // A client of the config: the limit must be one its plan has (its own `limits` keep the
    // plan's names). A client the config does not know (a runtime key, a JWT caller) may be on
    // any plan, so any limit a client may size is accepted for it.
    const plan = configuredPlan(rt, caller.id);
    if (plan && !bindsPlan(rt, plan, name)) {
      const mine = overridableNames(rt, plan);
      return {
        ok: false,
        detail: `client ${caller.id} is on plan ${plan.name}, whose requests ${name} never limits${
          mine.length ? `; its limits a client override may size: ${mine.slice(0, 10).join(", ")}` : ""
        }`,
      };
    }
  }
  return { ok: true };
}

/** The plan of the config's client `id` (with its own `limits` compiled in), if the config has it. */
export function configuredPlan(rt: Runtime, id: string): CompiledPlan | undefined {
  for (const client of rt.clientsByKeyHash.values()) if (client.id === id) return client.plan;
  return undefined;
}

/** Whether a limit of this name binds callers of `plan`: its own limits, or a route's own. */
function bindsPlan(rt: Runtime, plan: CompiledPlan, name: string): boolean {
  if (plan.limits.some((l) => l.spec.name === name)) return true;
  return rt.routeList.some((r) => r.limits.some((l) => l.spec.name === name));
}

function overridableNames(rt: Runtime, plan: CompiledPlan): string[] {
  const names = new Set<string>();
  for (const l of plan.limits) if (overrideScopeOf(l.by) === "client") names.add(l.spec.name);
  for (const r of rt.routeList)
    for (const l of r.limits) if (overrideScopeOf(l.by) === "client") names.add(l.spec.name);
  return [...names];
}
