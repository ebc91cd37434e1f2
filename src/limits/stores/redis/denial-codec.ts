// How the entries of a caller's denial log are written in Redis, and only here. Existing logs
// keep reading the same.
import type { Denial } from "../contract.js";

/** One log entry: "<ms>\t<route>\t<limit,limit>". */
export function encodeDenial(d: Denial): string {
  return `${Math.floor(d.atMs)}\t${d.route}\t${d.limits.join(",")}`;
}

export function decodeDenial(entry: string): Denial {
  const [at, route, limits] = entry.split("\t");
  return { atMs: Number(at), route: route ?? "", limits: limits ? limits.split(",") : [] };
}
