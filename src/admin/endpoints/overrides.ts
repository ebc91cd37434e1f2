// Runtime overrides (operator-state/overrides.ts): PUT /admin/overrides/{caller}/{name} sizes one limit
// for one caller until it expires, GET shows it, GET /admin/overrides/{caller} lists the caller's,
// DELETE ends it. A caller is `client:<id>` (limits keyed by the caller) or `tenant:<id>` (limits
// keyed by the tenant and not the caller); an override keeps the limit's name, algorithm, `by`
// and key, and its body is the limit's own keys, checked as the YAML's are. Every write is
// audited by the token's name; every read comes from the store, so it shows what every instance
// applies within the propagation bound, whatever this one has heard so far.
import type { Runtime } from "../../config/compile.js";
import { suggest } from "../../config/problems.js";
import { headerSafeName } from "../../config/schema.js";
import { formatDuration } from "../../config/units.js";
import type { AuditLog } from "../../operator-state/audit.js";
import {
  configuredPlan,
  mergedSizes,
  type OverrideRecord,
  type OverrideScope,
  overridable,
  overriddenLimit,
  overrideContext,
  readOverrideBody,
} from "../../operator-state/override-rules.js";
import type { OverrideTable } from "../../operator-state/override-table.js";
import type { Overrides } from "../../operator-state/overrides.js";
import { audited, overrideTarget } from "../audited.js";
import { parseCallerRef } from "../caller-limits.js";
import { readJsonObject } from "../json-body.js";
import { replyProblem, sendJson } from "../reply.js";
import type { AdminHandler, AdminRequest } from "../router.js";
import { findLimit, limitNames } from "../runtime-limits.js";
import type { FromStore } from "../store-failure.js";

export interface OverrideEndpointDeps {
  runtime: () => Runtime;
  overrides: () => Pick<Overrides, "set" | "remove" | "read"> & {
    table: Pick<OverrideTable, "hasRoomFor">;
  };
  fromStore: FromStore;
  audit: Pick<AuditLog, "write">;
  /** Epoch ms: when an override set now expires (default Date.now). */
  now?: () => number;
}

/** An override as the API shows it: the body's keys, then when it was set and ends, and whether it applies. */
export function overrideView(
  rt: Runtime,
  caller: { kind: OverrideScope; id: string; label: string },
  name: string,
  record: OverrideRecord,
): Record<string, unknown> {
  const status = applies(rt, caller, name, record);
  const base = baseOf(rt, caller, name);
  return {
    name,
    caller: caller.label,
    algorithm: record.algorithm,
    // The whole size its requests get: the override's keys, the rest as the config writes it.
    ...(base && base.spec.algorithm === record.algorithm ? mergedSizes(base, record.sizes) : record.sizes),
    overrides: Object.keys(record.sizes),
    reason: record.reason,
    set_at: new Date(record.setAtMs).toISOString(),
    expires_at: new Date(record.expiresAtMs).toISOString(),
    ...status,
  };
}

/**
 * Whether the running config applies the override, and if so the size its requests are told;
 * otherwise why not (a reload removed the limit, changed its algorithm or its `by`).
 */
function applies(
  rt: Runtime,
  caller: { kind: OverrideScope; id: string },
  name: string,
  record: OverrideRecord,
): { applies: true; quota: number; description: string } | { applies: false; not_applied: string } {
  const found = findLimit(rt, name);
  if (!found) return { applies: false, not_applied: `the running config has no limit "${name}"` };
  const allowed = overridable(rt, caller, found.limit);
  if (!allowed.ok) return { applies: false, not_applied: allowed.detail };
  const limit = overriddenLimit(baseOf(rt, caller, name) ?? found.limit, record, overrideContext(rt));
  if ("why" in limit) return { applies: false, not_applied: limit.why };
  return { applies: true, quota: limit.quota, description: limit.description };
}

/** The limit an override of `caller` starts from: a YAML client's own size of it, else the plan's or route's. */
function baseOf(rt: Runtime, caller: { kind: OverrideScope; id: string }, name: string) {
  if (caller.kind === "client") {
    const own = configuredPlan(rt, caller.id)?.limits.find((l) => l.spec.name === name);
    if (own) return own;
  }
  return findLimit(rt, name)?.limit;
}

type Named = { kind: OverrideScope; id: string; label: string };

/**
 * The ids a caller may have, checked as POST /admin/keys and the YAML check a client id or a
 * tenant: an override for an id no caller can have would be stored and never apply, and its
 * text would reach Redis keys and the audit as sent. (The `jwt:` prefix a key's client may not
 * take is allowed: JWT callers are clients an override may size.)
 */
const ID_SCHEMAS = {
  client: headerSafeName("a client id", "Tollgate-Client"),
  tenant: headerSafeName("a tenant", "Tollgate-Tenant"),
} as const;

/** The caller of the path, or undefined once answered 400. */
function callerOf({ res, params }: AdminRequest): Named | undefined {
  const label = params.caller!;
  const ref = parseCallerRef(label);
  if (!ref) {
    replyProblem(
      res,
      "bad_caller",
      "name the caller as client:<id> or tenant:<id> (percent-encode a / in the id)",
    );
    return undefined;
  }
  if (ref.kind === "ip") {
    replyProblem(
      res,
      "bad_caller",
      "an ip:<address> caller is anonymous: its limits are kept per address for anyone calling from there, so only the config sizes them; overrides name client:<id> or tenant:<id>",
    );
    return undefined;
  }
  const checked = ID_SCHEMAS[ref.kind].safeParse(ref.id);
  if (!checked.success) {
    replyProblem(res, "bad_caller", `${ref.kind}:<id>: ${checked.error.issues[0]?.message ?? "not an id"}`);
    return undefined;
  }
  return { kind: ref.kind, id: ref.id, label: `${ref.kind}:${ref.id}` };
}

export function overrideEndpoints(deps: OverrideEndpointDeps): {
  put: AdminHandler;
  show: AdminHandler;
  list: AdminHandler;
  remove: AdminHandler;
} {
  const now = deps.now ?? Date.now;

  async function put(request: AdminRequest): Promise<void> {
    const { req, res, params } = request;
    const caller = callerOf(request);
    if (!caller) return;
    const rt = deps.runtime();
    const name = params.name!;
    const found = findLimit(rt, name);
    if (!found) {
      const hint = suggest(name, limitNames(rt));
      replyProblem(
        res,
        "unknown_limit",
        `the running config has no limit "${name}"${hint ? `; did you mean "${hint}"?` : ""} (limits are named <plan>.<key> or <route>.<name>)`,
      );
      return;
    }
    const allowed = overridable(rt, caller, found.limit);
    if (!allowed.ok) {
      replyProblem(res, "bad_override", allowed.detail);
      return;
    }
    const body = await readJsonObject(req, "bad_override");
    const costs = new Map<string, number>();
    for (const route of rt.routeList)
      if (found.routes.includes(route.name) && !costs.has(route.name)) costs.set(route.name, route.cost);
    const read = readOverrideBody(
      baseOf(rt, caller, name) ?? found.limit,
      body,
      now(),
      overrideContext(rt),
      costs,
    );
    if ("problems" in read) {
      replyProblem(res, "bad_override", read.problems.join("; "), { problems: read.problems });
      return;
    }
    const overrides = deps.overrides();
    if (!overrides.table.hasRoomFor(caller.label, name)) {
      replyProblem(
        res,
        "bad_override",
        "this gateway holds as many overrides as it keeps; remove ones no longer needed (DELETE /admin/overrides/{caller}/{name}), or size the plans in the config",
      );
      return;
    }
    const replaced = await deps.fromStore(() => overrides.set(caller.label, name, read.record));
    const { record } = read;
    await audited(
      deps.audit,
      request,
      "PUT /admin/overrides",
      overrideTarget(
        caller.label,
        name,
        record.sizes,
        formatDuration(record.expiresAtMs - record.setAtMs),
        record.reason,
      ),
    );
    sendJson(res, replaced ? 200 : 201, overrideView(rt, caller, name, read.record));
  }

  async function show(request: AdminRequest): Promise<void> {
    const caller = callerOf(request);
    if (!caller) return;
    const name = request.params.name!;
    const records = await deps.fromStore(() => deps.overrides().read(caller.label));
    const record = records.get(name);
    if (!record) {
      replyProblem(request.res, "no_override", noOverride(caller.label, name, [...records.keys()]));
      return;
    }
    sendJson(request.res, 200, overrideView(deps.runtime(), caller, name, record));
  }

  async function list(request: AdminRequest): Promise<void> {
    const caller = callerOf(request);
    if (!caller) return;
    const records = await deps.fromStore(() => deps.overrides().read(caller.label));
    const rt = deps.runtime();
    sendJson(request.res, 200, {
      caller: caller.label,
      overrides: [...records.keys()].sort().map((name) => overrideView(rt, caller, name, records.get(name)!)),
    });
  }

  async function remove(request: AdminRequest): Promise<void> {
    const caller = callerOf(request);
    if (!caller) return;
    const name = request.params.name!;
    const removed = await deps.fromStore(() => deps.overrides().remove(caller.label, name));
    if (!removed) {
      // Nothing was removed, so nothing is audited: the log lists what changed.
      replyProblem(request.res, "no_override", noOverride(caller.label, name, []));
      return;
    }
    await audited(deps.audit, request, "DELETE /admin/overrides", `${caller.label}/${name}`);
    sendJson(request.res, 200, { name, caller: caller.label, removed: true });
  }

  return { put, show, list, remove };
}

function noOverride(caller: string, name: string, others: string[]): string {
  const hint = suggest(name, others);
  return `${caller} has no override of ${name} in force (never set, removed, or expired)${hint ? `; did you mean "${hint}"?` : ""}`;
}
