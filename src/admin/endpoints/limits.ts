// GET (and HEAD) /admin/limits/{name}?key=…: one limit's state for the values `key` gives, read
// at cost 0 (nothing consumed); DELETE resets that one key. For the limits no caller view shows
// in full: a route budget (`search.total`), a limit kept per header, claim or path segment
// (`search.per-org?key=acme`), or a caller's key for one value (`free.models?key=client:bob&key=gpt-4`).
// The key is built as the limiter builds it (../limit-key.ts).
import type { Runtime } from "../../config/compile.js";
import type { LimitCheck } from "../../limits/spec.js";
import type { Inspector } from "../../limits/stores/contract.js";
import type { AuditLog } from "../../operator-state/audit.js";
import { audited } from "../audited.js";
import { type LimitKeyLookup, limitKeyOf } from "../limit-key.js";
import { limitState } from "../limit-view.js";
import { replyProblem, sendJson } from "../reply.js";
import { type ResetDeps, resetState } from "../reset-state.js";
import type { AdminHandler, AdminRequest } from "../router.js";
import { type FoundLimit, findLimit, limitNames } from "../runtime-limits.js";

export interface LimitEndpointDeps extends ResetDeps {
  runtime: () => Runtime;
  store: () => Pick<Inspector, "peek" | "reset">;
  /** Where a reset is recorded, by the token that asked for it. */
  audit: Pick<AuditLog, "write">;
}

/** How many names a 404 lists before it stops. */
const NAMES_SHOWN = 20;

type Resolved = FoundLimit & Extract<LimitKeyLookup, { ok: true }>;

export function limitEndpoints(deps: LimitEndpointDeps): { show: AdminHandler; reset: AdminHandler } {
  /** The limit and its key, or undefined when the request was answered with a problem. */
  function lookup({ res, params, query }: AdminRequest): Resolved | undefined {
    const rt = deps.runtime();
    const name = params.name!;
    const found = findLimit(rt, name);
    if (!found) {
      const names = limitNames(rt);
      const listed = names.slice(0, NAMES_SHOWN).join(", ") + (names.length > NAMES_SHOWN ? ", …" : "");
      replyProblem(
        res,
        "unknown_limit",
        names.length === 0
          ? `no limit "${name}": the running config has no limits`
          : `no limit "${name}" in the running config; its limits: ${listed}`,
      );
      return undefined;
    }
    const keyed = limitKeyOf(rt, found, query.getAll("key"), { tenant: query.get("tenant") ?? undefined });
    if (!keyed.ok) {
      replyProblem(res, "bad_limit", keyed.detail);
      return undefined;
    }
    return { ...found, ...keyed };
  }

  async function show(request: AdminRequest): Promise<void> {
    const found = lookup(request);
    if (!found) return;
    const { limit, key, values, routes, override } = found;
    const check: LimitCheck = { key, spec: limit.spec, cost: 0 };
    const [view] = await deps.fromStore(() => deps.store().peek([check]));
    const { name, ...state } = limitState(check, view!);
    sendJson(request.res, 200, {
      name,
      by: limit.by.text,
      routes,
      values,
      window_seconds: limit.windowSeconds,
      ...state,
      ...(override ? { override: true } : {}),
    });
  }

  async function reset(request: AdminRequest): Promise<void> {
    const found = lookup(request);
    if (!found) return;
    const { key, limit } = found;
    const deleted = await resetState(deps, [key]);
    // The limit as the operator named it: its name, and the values of `?key=` that chose the key.
    const keys = request.query.getAll("key");
    const target = keys.length === 0 ? limit.spec.name : `${limit.spec.name}?key=${keys.join("&key=")}`;
    await audited(deps.audit, request, "DELETE /admin/limits", target);
    sendJson(request.res, 200, { name: limit.spec.name, key, reset: true, keys_deleted: deleted });
  }

  return { show, reset };
}
