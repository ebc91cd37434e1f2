// GET /admin/audit?limit=100: the audit log (operator-state/audit.ts), newest first: every write made
// through the admin API within the retention, by token name, action and target. A read like any
// other: a read token may see it.
import type { AuditLog } from "../../operator-state/audit.js";
import { replyProblem, sendJson } from "../reply.js";
import type { AdminHandler } from "../router.js";
import type { FromStore } from "../store-failure.js";

export const AUDIT_LIST_DEFAULT = 100;
/** Most entries one answer lists. */
export const AUDIT_LIST_MAX = 1000;

export interface AuditEndpointDeps {
  audit: () => Pick<AuditLog, "list">;
  fromStore: FromStore;
}

/** `limit` from the query: the default when absent, else a whole number in 1..AUDIT_LIST_MAX, else null. */
export function auditLimit(text: string | null): number | null {
  if (text === null) return AUDIT_LIST_DEFAULT;
  if (!/^[0-9]{1,7}$/.test(text)) return null;
  const n = Number(text);
  return n >= 1 && n <= AUDIT_LIST_MAX ? n : null;
}

export function listAudit(deps: AuditEndpointDeps): AdminHandler {
  return async ({ res, query }) => {
    const limit = auditLimit(query.get("limit"));
    if (limit === null) {
      replyProblem(res, "bad_audit_query", `limit is a whole number from 1 to ${AUDIT_LIST_MAX}`);
      return;
    }
    const entries = await deps.fromStore(() => deps.audit().list(limit));
    sendJson(res, 200, {
      entries: entries.map((e) => ({ time: e.time, token: e.token, action: e.action, target: e.target })),
    });
  };
}
