// The tokens a response reports, read from its body as it passes to the client.
//
// A meter is made per response from its Content-Type and the route's usage fields: a JSON body
// is one document, an event stream one document per event (sse.ts). The scanners keep no part
// of the body, so a meter costs the same for 1 kB and for 100 MB, and units() can be asked at any
// moment: when the stream ends, or when the client leaves and what was reported so far is the
// best estimate. Nothing here throws on what an upstream sends.
import type { UsageFields } from "./fields.js";
import { compileWatch, JsonScanner, MAX_REPORTED_UNITS, type WatchTree } from "./json-scan.js";
import { SseScanner } from "./sse.js";

/** Same cap as MAX_POST_CHARGE in src/proxy/post-charge.ts (a test holds them equal). */
export { MAX_REPORTED_UNITS };

export interface UsageMeter {
  /** Every body chunk as it passes to the client; never throws, bounded memory and CPU. */
  write(chunk: Buffer): void;
  /** The tokens reported so far (what to charge if the stream ends or the client leaves now);
   *  undefined when nothing valid was reported. A whole number in [0, MAX_REPORTED_UNITS]. */
  units(): number | undefined;
}

export type BodyKind = "json" | "event-stream";

// RFC 9110 §8.3.1: type "/" subtype, then parameters after ";", compared case-insensitively.
const JSON_SUFFIX = /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+\+json$/;

/** Which scanner reads a body of this Content-Type, or null when it cannot carry usage. */
export function bodyKind(contentType: string | undefined): BodyKind | null {
  if (contentType === undefined) return null;
  const semicolon = contentType.indexOf(";");
  const media = (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase();
  if (media === "text/event-stream") return "event-stream";
  if (media === "application/json" || JSON_SUFFIX.test(media)) return "json";
  return null;
}

/** The fields compiled once per UsageFields object (a route's is built once per config). */
interface Plan {
  tree: WatchTree;
  /** Each alternative as the ids of its paths. */
  sums: readonly (readonly number[])[];
}

const plans = new WeakMap<UsageFields, Plan>();

function planFor(fields: UsageFields): Plan {
  let plan = plans.get(fields);
  if (plan === undefined) {
    const tree = compileWatch(fields.flat());
    let next = 0;
    const sums = fields.map((sum) => sum.map(() => tree.ids[next++]!));
    plan = { tree, sums };
    plans.set(fields, plan);
  }
  return plan;
}

/** null when the content type is neither JSON nor text/event-stream (nothing to read). */
export function usageMeter(contentType: string | undefined, fields: UsageFields): UsageMeter | null {
  const kind = bodyKind(contentType);
  if (kind === null) return null;
  const { tree, sums } = planFor(fields);
  // NaN: not reported. A path's last countable value replaces the earlier ones.
  const values = new Float64Array(tree.pathCount).fill(Number.NaN);
  const json = new JsonScanner(tree, values);
  const units = () => unitsOf(sums, values);
  if (kind === "json") return { write: (chunk) => json.write(chunk, 0, chunk.length), units };
  const sse = new SseScanner(json);
  return { write: (chunk) => sse.write(chunk), units };
}

/** The first alternative whose every path was reported, summed and capped. */
function unitsOf(sums: readonly (readonly number[])[], values: Float64Array): number | undefined {
  for (const ids of sums) {
    let total = 0;
    let complete = true;
    for (const id of ids) {
      // id -1: an empty path, which parseUsageFields never makes and nothing can report.
      const value = id < 0 ? Number.NaN : values[id]!;
      if (Number.isNaN(value)) {
        complete = false;
        break;
      }
      total += value;
    }
    if (complete) return Math.min(total, MAX_REPORTED_UNITS);
  }
  return undefined;
}
