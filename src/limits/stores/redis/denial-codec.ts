// How denial records are written in Redis, and only here: the record check.lua is given with a
// request, and the entries of a caller's denial log. Existing logs keep reading the same.
import type { LimitCheck, LimitSpec } from "../../spec.js";
import type { Denial, DenialRecord } from "../contract.js";

/** One log entry, as check.lua writes it: "<ms>\t<route>\t<limit,limit>". */
export function encodeDenial(d: Denial): string {
  return `${Math.floor(d.atMs)}\t${d.route}\t${d.limits.join(",")}`;
}

export function decodeDenial(entry: string): Denial {
  const [at, route, limits] = entry.split("\t");
  return { atMs: Number(at), route: route ?? "", limits: limits ? limits.split(",") : [] };
}

/** The "<route>\t<names…>" of one route and list of limits. */
interface Tail {
  route: string;
  specs: readonly LimitSpec[];
  text: string;
}

/**
 * Tails kept per first limit: one per route and list of limits that starts with it (a plan's
 * limits on each route, with or without a tenant's). Past it the oldest is dropped.
 */
const MAX_TAILS_PER_SPEC = 32;

/**
 * check.lua's denial record, "<caller>\t<route>\t<limit 1 name>\t<limit 2 name>…" with the names
 * of the request's checks in order: sent with every check, so that a denial is recorded by the
 * call that decides it. The "<route>\t<names>" tail is the same for every request of a route
 * and list of limits, so it is built once and found again by the identity of the checks' specs
 * (compiled once per configuration): a request pays for one concatenation, as it always did.
 */
export class DenialTexts {
  private readonly tails = new WeakMap<LimitSpec, Tail[]>();

  text(denial: DenialRecord, checks: readonly LimitCheck[]): string {
    return `${denial.caller}\t${this.tail(denial.route, checks)}`;
  }

  private tail(route: string, checks: readonly LimitCheck[]): string {
    const first = checks[0];
    if (!first) return route;
    let tails = this.tails.get(first.spec);
    if (!tails) {
      tails = [];
      this.tails.set(first.spec, tails);
    }
    for (const t of tails) if (t.route === route && sameSpecs(t.specs, checks)) return t.text;
    let text = route;
    for (const c of checks) text += `\t${c.spec.name}`;
    if (tails.length >= MAX_TAILS_PER_SPEC) tails.shift();
    tails.push({ route, specs: checks.map((c) => c.spec), text });
    return text;
  }
}

function sameSpecs(specs: readonly LimitSpec[], checks: readonly LimitCheck[]): boolean {
  if (specs.length !== checks.length) return false;
  for (let i = 0; i < specs.length; i++) if (specs[i] !== checks[i]!.spec) return false;
  return true;
}
