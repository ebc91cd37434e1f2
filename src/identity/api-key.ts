// The API-key source: a key in the configured header (`identity.api_key.header`), or with
// `bearer: true` as `Authorization: Bearer <key>`, looked up by its sha256 among the configured
// clients. Always synchronous: this is the hot path, no promise and nothing allocated beyond the
// answer.
import { createHash, hash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { CompiledClient, Runtime } from "../config/compile.js";
import { identifyAnonymous } from "./anonymous.js";
import { bearerToken, isBearerScheme, malformedBearer } from "./bearer.js";
import type { Identification, IdentitySource } from "./caller.js";

/** The API key a request presents, or undefined; an array means the header was sent twice. */
export function presentedKey(headers: IncomingHttpHeaders, rt: Runtime): string | string[] | undefined {
  const value = headers[rt.identity.header];
  if (value !== undefined) return value;
  if (!rt.identity.bearer) return undefined;
  const auth = headers.authorization;
  if (!auth) return undefined;
  return bearerToken(auth);
}

/** The key in the configured header. First in the precedence: it wins over any Authorization. */
export const apiKeyHeader: IdentitySource = {
  presents: (headers, rt) => headers[rt.identity.header] !== undefined,
  identify(headers, ipKey, rt) {
    const key = headers[rt.identity.header];
    if (key === undefined) return undefined;
    if (Array.isArray(key)) {
      return { ok: false, reason: "ambiguous_key", detail: `send the ${rt.identity.header} header once` };
    }
    return identifyByKey(key, rt.identity.header, ipKey, rt);
  },
};

/**
 * A key as `Authorization: Bearer` (`bearer: true`). After the JWT source, which leaves it the
 * bearer tokens that do not look like a JWT.
 */
export const apiKeyBearer: IdentitySource = {
  presents: (headers, rt) =>
    rt.identity.bearer && headers.authorization !== undefined && isBearerScheme(headers.authorization),
  identify(headers, ipKey, rt) {
    const auth = headers.authorization;
    if (!rt.identity.bearer || !auth) return undefined;
    const key = bearerToken(auth);
    if (key === undefined) return isBearerScheme(auth) ? malformedBearer() : undefined;
    return identifyByKey(key, "authorization", ipKey, rt);
  },
};

function identifyByKey(key: string, credentialHeader: string, ipKey: string, rt: Runtime): Identification {
  // Compared by hash: config never holds a usable key in memory, and a timing difference in a
  // map lookup reveals nothing about a key whose hash the attacker cannot steer.
  const client = lookupClient(rt, key);
  if (client) {
    return {
      ok: true,
      caller: { kind: "client", id: client.id, plan: client.plan, tenant: client.tenant, ipKey },
      credentialHeader,
    };
  }
  if (rt.identity.onUnknown === "reject") {
    return { ok: false, reason: "unknown_key", detail: "the API key is not valid" };
  }
  return identifyAnonymous(ipKey, rt);
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
