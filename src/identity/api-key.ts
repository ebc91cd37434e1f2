// The API-key source: a key in the configured header (`identity.api_key.header`), or with
// `bearer: true` as `Authorization: Bearer <key>`, looked up by its sha256 among the configured
// clients, then among the keys issued at runtime (POST /admin/keys, through `StoredKeyLookup`).
// Synchronous for YAML keys and cached stored keys: this is the hot path, no promise and nothing
// allocated beyond the answer. Only a stored key not cached yet waits for the store.
import { createHash, hash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { Identification } from "../model/caller.js";
import type { IdentityView } from "../model/identity.js";
import type { CompiledClient } from "../model/plan.js";
import { identifyAnonymous } from "./anonymous.js";
import { bearerToken, isBearerScheme, malformedBearer } from "./bearer.js";
import type { IdentitySource, StoredKeyAnswer, StoredKeyLookup } from "./source.js";
import { THROTTLED } from "./throttled.js";

export type { StoredKeyAnswer, StoredKeyLookup };

/** The API key a request presents, or undefined; an array means the header was sent twice. */
export function presentedKey(headers: IncomingHttpHeaders, rt: IdentityView): string | string[] | undefined {
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
  identify(headers, ipKey, rt, stored, throttled) {
    const key = headers[rt.identity.header];
    if (key === undefined) return undefined;
    if (Array.isArray(key)) {
      return { ok: false, reason: "ambiguous_key", detail: `send the ${rt.identity.header} header once` };
    }
    return identifyByKey(key, rt.identity.header, ipKey, rt, stored, throttled);
  },
};

/**
 * A key as `Authorization: Bearer` (`bearer: true`). After the JWT source, which leaves it the
 * bearer tokens that do not look like a JWT.
 */
export const apiKeyBearer: IdentitySource = {
  presents: (headers, rt) =>
    rt.identity.bearer && headers.authorization !== undefined && isBearerScheme(headers.authorization),
  identify(headers, ipKey, rt, stored, throttled) {
    const auth = headers.authorization;
    if (!rt.identity.bearer || !auth) return undefined;
    const key = bearerToken(auth);
    if (key === undefined) return isBearerScheme(auth) ? malformedBearer() : undefined;
    return identifyByKey(key, "authorization", ipKey, rt, stored, throttled);
  },
};

function identifyByKey(
  key: string,
  credentialHeader: string,
  ipKey: string,
  rt: IdentityView,
  stored: StoredKeyLookup | undefined,
  throttled: boolean | undefined,
): Identification | Promise<Identification> {
  // Compared by hash: config never holds a usable key in memory, and a timing difference in a
  // map lookup reveals nothing about a key whose hash the attacker cannot steer.
  const cache = keyCacheOf(rt);
  const cached = cache.get(key);
  if (cached) return asClient(cached, credentialHeader, ipKey);
  const hash = sha256Hex(key);
  const client = rt.clientsByKeyHash.get(hash);
  if (client) {
    if (cache.size >= KEY_CACHE_MAX) cache.clear();
    cache.set(key, client);
    return asClient(client, credentialHeader, ipKey);
  }
  // An address past auth_failures gets what is known here, never a store lookup: a stored key
  // this instance has served passes, any other is refused unread.
  if (throttled) {
    const known = stored?.cached(hash, rt);
    return known?.kind === "client" || known?.kind === "unusable"
      ? fromStored(known, credentialHeader, ipKey, rt)
      : THROTTLED;
  }
  if (!stored) return unknownKey(ipKey, rt, false);
  const answer = stored.find(hash, ipKey, rt);
  return answer instanceof Promise
    ? answer.then((a) => fromStored(a, credentialHeader, ipKey, rt))
    : fromStored(answer, credentialHeader, ipKey, rt);
}

function asClient(client: CompiledClient, credentialHeader: string, ipKey: string): Identification {
  return {
    ok: true,
    caller: { kind: "client", id: client.id, plan: client.plan, tenant: client.tenant, ipKey },
    credentialHeader,
  };
}

function fromStored(
  answer: StoredKeyAnswer,
  credentialHeader: string,
  ipKey: string,
  rt: IdentityView,
): Identification {
  switch (answer.kind) {
    case "client":
      return asClient(answer.client, credentialHeader, ipKey);
    case "unknown":
      return unknownKey(ipKey, rt, answer.throttled);
    case "unusable":
      return { ok: false, reason: "key_unusable", detail: answer.detail };
    case "unavailable":
      return answer.closed
        ? {
            ok: false,
            reason: "key_store_unavailable",
            detail: "the API key could not be checked: the key store is unreachable; retry shortly",
          }
        : unknownKey(ipKey, rt, false);
  }
}

const UNKNOWN_KEY: Identification = { ok: false, reason: "unknown_key", detail: "the API key is not valid" };
const UNCHECKED_KEY: Identification = {
  ok: false,
  reason: "unknown_key",
  detail:
    "the API key is not valid, or was not checked: this address presented too many unknown keys; retry in a few seconds",
};

function unknownKey(ipKey: string, rt: IdentityView, throttled: boolean): Identification {
  if (rt.identity.onUnknown === "reject") return throttled ? UNCHECKED_KEY : UNKNOWN_KEY;
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
const keyCaches = new WeakMap<IdentityView, Map<string, CompiledClient>>();

function keyCacheOf(rt: IdentityView): Map<string, CompiledClient> {
  let cache = keyCaches.get(rt);
  if (!cache) {
    cache = new Map();
    keyCaches.set(rt, cache);
  }
  return cache;
}
