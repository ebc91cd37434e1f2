// How a write endpoint records what it did: the audit log's entry for this request, under the
// name of the token that authorised it (the guard's principal), never the token itself.
import type { AuditLog } from "../runtime/audit.js";
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
