// The state key of one limit for the values an operator gives (`?key=acme`, `?key=client:bob&
// key=gpt-4`): the values become the Caller and the KeyedRequest a request carrying them would
// have, and the limiter's own requestLimitKey (limits/state-keys.ts) makes the key. So the admin API
// reads and resets the key such a request writes, and there is no second spelling of the layout.
//
// One `key` per part of the limit's `by`, in its order:
// - caller: `client:<id>` (a JWT caller is `client:jwt:<sub>`; add `?tenant=` when it has one)
//   or `ip:<address>` (an anonymous caller);
// - tenant: the tenant; ip: an address, grouped as the limiter groups it (ipv6_prefix);
// - route: the route's name, which may be left out when the limit binds one route only;
// - header, query, claim, segment: the value as the request carries it.
// A request that lacked a value is keyed by its caller for that part: `@client:<id>` or
// `@ip:<address>` asks for that key. A value that itself starts with `@` is written `@@…`.
import type { CompiledClient, Runtime } from "../config/compile.js";
import type { Caller } from "../identity/caller.js";
import { callerIpKey, parseIp, unwrapMapped } from "../identity/ip.js";
import { type KeyBy, type KeyedRequest, type KeyPart, partText } from "../limits/key-by.js";
import type { PlannedLimit } from "../limits/plan.js";
import { requestLimitKey } from "../limits/state-keys.js";
import { overriddenNames, parseCallerRef } from "./caller-limits.js";
import type { FoundLimit } from "./runtime-limits.js";

export type LimitKeyLookup =
  | {
      ok: true;
      key: string;
      /** The limit as it binds the caller named (a client's override, its own size). */
      limit: PlannedLimit;
      /** Each part's value as given (`@client:bob` for a fallback), the route filled in. */
      values: Record<string, string>;
      override: boolean;
    }
  | { ok: false; detail: string };

/** What `?key=` a part takes, as the 400 and the callers endpoint spell it. */
function placeholder(part: KeyPart): string {
  switch (part.kind) {
    case "caller":
      return "<client:id or ip:address>";
    case "tenant":
      return "<tenant>";
    case "ip":
      return "<address>";
    case "route":
      return "<route>";
    case "header":
    case "query":
      return `<${part.name} value>`;
    case "claim":
      return `<${part.name} claim>`;
    case "body":
      return `<body ${part.name}>`;
    case "segment":
      return `<path segment ${part.index}>`;
  }
}

/** Whether the route part may be left out: the limit binds one route, so it can only be that one. */
function routeImplied(found: Pick<FoundLimit, "limit" | "routes">): boolean {
  return found.routes.length === 1 && found.limit.by.parts.some((p) => p.kind === "route");
}

/** The parts `?key=` must name, in order. */
function askedParts(found: Pick<FoundLimit, "limit" | "routes">): readonly KeyPart[] {
  const parts = found.limit.by.parts;
  return routeImplied(found) ? parts.filter((p) => p.kind !== "route") : parts;
}

/** Parts a request may lack (keyed by its caller then): a client without a tenant has none. */
const MAY_BE_MISSING: ReadonlySet<KeyPart["kind"]> = new Set([
  "header",
  "query",
  "claim",
  "body",
  "segment",
  "tenant",
]);

/** `?key=<…>&key=<…>` for a limit; empty when it needs none. */
export function keyQuery(found: Pick<FoundLimit, "limit" | "routes">): string {
  const parts = askedParts(found);
  return parts.length === 0 ? "" : `?${parts.map((p) => `key=${placeholder(p)}`).join("&")}`;
}

/** Whether some part may be missing from a request, and so keyed by the caller instead. */
export function mayLackValues(limit: PlannedLimit): boolean {
  return limit.by.parts.some((p) => MAY_BE_MISSING.has(p.kind));
}

/** The 400's text when the values do not fit the limit's parts. */
function expected(found: FoundLimit, why: string): { ok: false; detail: string } {
  const { by, spec } = found.limit;
  const query = keyQuery(found);
  const hint = mayLackValues(found.limit)
    ? `${query} (@client:<id> or @ip:<address> for a value the requests lacked)`
    : query;
  const routes = by.parts.some((p) => p.kind === "route") ? `; its routes: ${found.routes.join(", ")}` : "";
  return {
    ok: false,
    detail: `${why}${why ? ": " : ""}${spec.name} is kept per ${by.text}: ${hint ? `give ${hint}` : "give no key"}${routes}`,
  };
}

type Who = { kind: "client"; id: string } | { kind: "ip"; ipKey: string };

function whoText(who: Who): string {
  return who.kind === "client" ? `client:${who.id}` : `ip:${who.ipKey}`;
}

/** `ip:<address>` or a bare address, as the limiter keys it. */
function ipKeyOf(rt: Runtime, text: string): string | undefined {
  const bytes = parseIp(text.startsWith("ip:") ? text.slice(3) : text);
  return bytes ? callerIpKey(unwrapMapped(bytes), rt.identity.ipv6Prefix) : undefined;
}

/** `client:<id>` or `ip:<address>`; a tenant is no caller of its own. */
function whoOf(rt: Runtime, text: string): Who | undefined {
  const ref = parseCallerRef(text);
  if (ref?.kind === "client") return { kind: "client", id: ref.id };
  if (ref?.kind !== "ip") return undefined;
  const ipKey = ipKeyOf(rt, ref.id);
  return ipKey === undefined ? undefined : { kind: "ip", ipKey };
}

/** The values of `?key=` as a request would carry them, then the key that request is limited under. */
export function limitKeyOf(
  rt: Runtime,
  found: FoundLimit,
  given: readonly string[],
  query: { tenant?: string | undefined } = {},
): LimitKeyLookup {
  const by: KeyBy = found.limit.by;
  // The route may be named even where it is implied.
  const parts = given.length === by.parts.length ? by.parts : askedParts(found);
  if (given.length !== parts.length) {
    return expected(
      found,
      `${given.length} key value${given.length === 1 ? "" : "s"} given, ${parts.length} expected`,
    );
  }
  const values: Record<string, string> = {};
  let route = found.routes.length === 1 ? found.routes[0]! : undefined;
  let who: Who | undefined;
  let tenant: string | undefined;
  let tenantMissing = false;
  let ipKey: string | undefined;
  const headers: Record<string, string> = {};
  const params = new URLSearchParams();
  const segments: string[] = [];
  const claims: Record<string, string> = {};
  const body: Record<string, string> = {};

  /** One caller per request: the caller part and every fallback must name the same. */
  const sameWho = (next: Who, part: KeyPart): string | undefined => {
    if (who && whoText(who) !== whoText(next))
      return `${partText(part)} names ${whoText(next)}, another part ${whoText(who)}: a request has one caller`;
    who = next;
    return undefined;
  };

  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    const text = given[i]!;
    const name = partText(part);
    values[name] = text;
    if (text === "") return expected(found, `the value for ${name} is empty`);
    if (part.kind === "caller") {
      const next = whoOf(rt, text);
      if (!next) return expected(found, `"${text}" is not a caller (client:<id> or ip:<address>)`);
      const clash = sameWho(next, part);
      if (clash) return expected(found, clash);
      continue;
    }
    if (part.kind === "ip") {
      ipKey = ipKeyOf(rt, text);
      if (ipKey === undefined) return expected(found, `"${text}" is not an IP address`);
      continue;
    }
    if (part.kind === "route") {
      if (!found.routes.includes(text))
        return expected(found, `${found.limit.spec.name} binds no route "${text}"`);
      route = text;
      continue;
    }
    // The parts a request may lack: a value, or the caller it was keyed by instead.
    if (text.startsWith("@") && !text.startsWith("@@")) {
      const next = whoOf(rt, text.slice(1));
      if (!next) return expected(found, `"${text}" names no caller (@client:<id> or @ip:<address>)`);
      const clash = sameWho(next, part);
      if (clash) return expected(found, clash);
      if (part.kind === "tenant") tenantMissing = true;
      continue;
    }
    const value = text.startsWith("@@") ? text.slice(1) : text;
    values[name] = value;
    switch (part.kind) {
      case "tenant":
        tenant = value;
        break;
      case "header":
        headers[part.name] = value;
        break;
      case "query":
        params.set(part.name, value);
        break;
      case "claim":
        claims[part.name] = value;
        break;
      case "body":
        body[part.name] = value;
        break;
      case "segment":
        if (value.includes("/")) return expected(found, `a path segment holds no "/" ("${value}")`);
        segments[part.index - 1] = value;
        break;
    }
  }
  if (route !== undefined && by.parts.some((p) => p.kind === "route")) values.route = route;

  // The caller such a request had.
  let caller: Caller;
  let client: CompiledClient | undefined;
  const claimed = Object.keys(claims).length > 0;
  if (who?.kind === "ip") {
    const anonymous = whoText(who);
    if (tenant !== undefined) return expected(found, `an anonymous caller (${anonymous}) has no tenant`);
    if (claimed) return expected(found, `an anonymous caller (${anonymous}) has no token claims`);
    if (ipKey !== undefined && ipKey !== who.ipKey)
      return expected(found, `the ip part (${ipKey}) is not the caller's address (${anonymous})`);
    caller = { kind: "anonymous", plan: rt.anonymousPlan, ipKey: who.ipKey };
  } else {
    const id = who?.id ?? "";
    client = who ? [...rt.clientsByKeyHash.values()].find((c) => c.id === id) : undefined;
    if (client && tenant !== undefined && client.tenant !== tenant)
      return expected(
        found,
        `client:${id} is ${client.tenant === undefined ? "in no tenant" : `in tenant ${client.tenant}`}`,
      );
    if (client?.tenant !== undefined && tenantMissing)
      return expected(found, `client:${id} is in tenant ${client.tenant}: its requests never lack one`);
    caller = {
      kind: "client",
      id,
      // The key does not read the plan; only the limiter's choice of limits does.
      plan: client?.plan ?? (undefined as never),
      tenant: tenantMissing ? undefined : (tenant ?? client?.tenant ?? query.tenant),
      ipKey: ipKey ?? "",
      ...(claimed ? { claims } : {}),
    };
  }

  // A configured client's plan limit is its own: the plan's name, and its override's size.
  let limit = found.limit;
  let override = false;
  if (client && found.plan) {
    if (client.plan.name !== found.plan.name) {
      return expected(
        found,
        `client:${client.id} is on plan ${client.plan.name}, and ${limit.spec.name} is plan ${found.plan.name}'s`,
      );
    }
    limit = client.plan.limits.find((l) => l.spec.name === limit.spec.name) ?? limit;
    override = overriddenNames(rt, client.id, client.plan.name).has(limit.spec.name);
  }

  const request: KeyedRequest = {
    headers,
    // Segments not asked for are placeholders: only the ones the limit reads are read.
    path: segments.length === 0 ? "/" : `/${Array.from(segments, (s) => s ?? "-").join("/")}`,
    query: params.size === 0 ? "" : `?${params.toString()}`,
    body,
  };
  const key = requestLimitKey(rt.store.prefix, by, limit.spec.name, caller, route ?? "", request);
  return { ok: true, key, limit, values, override };
}
