// Who is calling: an API key's client, or an anonymous caller known by IP.
import { createHash, hash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { CompiledClient, CompiledPlan, Runtime } from "../config/compile.js";

export type Caller =
  | { kind: "client"; id: string; plan: CompiledPlan; tenant: string | undefined; ipKey: string }
  | { kind: "anonymous"; plan: CompiledPlan | undefined; ipKey: string };

export type Identification =
  | { ok: true; caller: Caller }
  | { ok: false; reason: "unknown_key" | "ambiguous_key" | "credential_required"; detail: string };

const BEARER = /^Bearer[ \t]+([^\s]+)[ \t]*$/i;

/** The API key a request presents, or undefined; an array means the header was sent twice. */
export function presentedKey(headers: IncomingHttpHeaders, rt: Runtime): string | string[] | undefined {
  const value = headers[rt.identity.header];
  if (value !== undefined) return value;
  if (!rt.identity.bearer) return undefined;
  const auth = headers.authorization;
  if (!auth) return undefined;
  return BEARER.exec(auth)?.[1];
}

/** crypto.hash is one call without a Hash object (Node ≥ 20.12); fall back where it is missing. */
const sha256Hex: (text: string) => string =
  typeof hash === "function"
    ? (text) => hash("sha256", text, "hex")
    : (text) => createHash("sha256").update(text).digest("hex");

/**
 * Presented key → client, for valid keys only, so the sha256 is computed once per key rather
 * than per request. Bounded (invalid keys never enter, so a flood of random keys cannot grow
 * it) and owned by one runtime, so a reload that revokes a key also forgets it here.
 */
const KEY_CACHE_MAX = 10_000;
const keyCaches = new WeakMap<Runtime, Map<string, CompiledClient>>();

function lookupClient(rt: Runtime, key: string): CompiledClient | undefined {
  let cache = keyCaches.get(rt);
  if (!cache) {
    cache = new Map();
    keyCaches.set(rt, cache);
  }
  const cached = cache.get(key);
  if (cached) return cached;
  const client = rt.clientsByKeyHash.get(sha256Hex(key));
  if (client) {
    if (cache.size >= KEY_CACHE_MAX) cache.clear();
    cache.set(key, client);
  }
  return client;
}

export function identifyCaller(headers: IncomingHttpHeaders, ipKey: string, rt: Runtime): Identification {
  const key = presentedKey(headers, rt);
  if (Array.isArray(key)) {
    return { ok: false, reason: "ambiguous_key", detail: `send the ${rt.identity.header} header once` };
  }
  if (key !== undefined) {
    // Compared by hash: config never holds a usable key in memory, and a timing difference in a
    // map lookup reveals nothing about a key whose hash the attacker cannot steer.
    const client = lookupClient(rt, key);
    if (client)
      return {
        ok: true,
        caller: { kind: "client", id: client.id, plan: client.plan, tenant: client.tenant, ipKey },
      };
    if (rt.identity.onUnknown === "reject") {
      return { ok: false, reason: "unknown_key", detail: "the API key is not valid" };
    }
  }
  if (!rt.anonymousPlan && rt.clientsByKeyHash.size > 0) {
    return {
      ok: false,
      reason: "credential_required",
      detail: `an API key is required (header ${rt.identity.header}${rt.identity.bearer ? " or Authorization: Bearer" : ""})`,
    };
  }
  return { ok: true, caller: { kind: "anonymous", plan: rt.anonymousPlan, ipKey } };
}
