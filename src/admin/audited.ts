// How a write endpoint records what it did: the audit log's entry for this request, under the
// name of the token that authorised it (the guard's principal), never the token itself.
import type { AuditLog } from "../operator-state/audit.js";
import type { AdminRequest } from "./router.js";

/**
 * Appends `action` on `target` by the request's token to the audit log. Call it after the write
 * took effect and before answering, so the entry is listed by the time the operator reads the
 * answer. Never rejects; it waits at most the store timeout.
 */
export function audited(
  audit: Pick<AuditLog, "write">,
  request: Pick<AdminRequest, "principal">,
  action: string,
  target: string,
): Promise<void> {
  // Behind the operator API's guard there is always a principal; "" marks a test's bare router.
  return audit.write({ token: request.principal?.name ?? "", action, target });
}

/** The most of one operator-written part (limits, a reason) a target quotes: the rest is "…". */
export const TARGET_PART_MAX = 160;

/** `text` cut to `max` characters, the cut marked "…". */
export function clip(text: string, max = TARGET_PART_MAX): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * A created key as the audit names it: its id and everything that decides what it may do
 * (`key_x (client:c1, plan pro, tenant t1, limits {"global":{"unlimited":true}}, expires_in 30d)`),
 * so a reviewer sees an unlimited key without looking it up. Never the key itself.
 */
export function keyTarget(
  id: string,
  spec: { client: string; plan: string; tenant?: string | undefined; limits?: unknown; expiresIn?: string },
): string {
  const parts = [`client:${spec.client}`, `plan ${spec.plan}`];
  if (spec.tenant !== undefined) parts.push(`tenant ${spec.tenant}`);
  if (spec.limits !== undefined) parts.push(`limits ${clip(JSON.stringify(spec.limits))}`);
  parts.push(spec.expiresIn === undefined ? "no expiry" : `expires_in ${spec.expiresIn}`);
  return `${id} (${parts.join(", ")})`;
}

/**
 * An override as the audit names it: caller, limit, the size written, how long, and why
 * (`client:acme/pro.global {burst: 20, rate: 10/s} for 3s: launch week`).
 */
export function overrideTarget(
  caller: string,
  name: string,
  sizes: Readonly<Record<string, unknown>>,
  lasts: string,
  reason: string,
): string {
  const size = Object.entries(sizes)
    .map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join(", ");
  return `${caller}/${name} {${clip(size)}} for ${lasts}: ${clip(reason)}`;
}
