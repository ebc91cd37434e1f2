// Who is calling: an API key's client, or an anonymous caller known by IP.
import { createHash, hash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { CompiledClient, CompiledPlan, Runtime } from "../config/compile.js";
import type { JwtResult } from "./jwt.js";

export type Caller =
  | { kind: "client"; id: string; plan: CompiledPlan; tenant: string | undefined; ipKey: string }
  | { kind: "anonymous"; plan: CompiledPlan | undefined; ipKey: string };

export type Identification =
  | {
      ok: true;
      caller: Caller;
      /** The header the caller was identified by (lower case), for `hide_credentials`. */
      credentialHeader: string | undefined;
    }
  | {
      ok: false;
      reason: IdentificationFailure;
      detail: string;
    };

export type IdentificationFailure =
  | "unknown_key"
  | "ambiguous_key"
  | "credential_required"
  | "invalid_jwt"
  | "malformed_credential";

/** Failures that presented a credential which turned out bad: what `auth_failures` counts. */
export function isBadCredential(reason: IdentificationFailure): boolean {
  return reason !== "credential_required";
}

/**
 * JWT callers are a namespace of their own: `sub: bob` is `jwt:bob`, never the API-key client
 * `bob`, so a token cannot inherit a key client's exemption, deny entry, limits or name. Config
 * client ids cannot start with it (the schema refuses them).
 */
export const JWT_CLIENT_PREFIX = "jwt:";

const BEARER = /^Bearer[ \t]+([^\s]+)[ \t]*$/i;
/** Any Authorization in the Bearer scheme, readable or not. */
const BEARER_SCHEME = /^Bearer(?:[ \t]|$)/i;

/** The API key a request presents, or undefined; an array means the header was sent twice. */
export function presentedKey(headers: IncomingHttpHeaders, rt: Runtime): string | string[] | undefined {
  const value = headers[rt.identity.header];
  if (value !== undefined) return value;
  if (!rt.identity.bearer) return undefined;
  const auth = headers.authorization;
  if (!auth) return undefined;
  return BEARER.exec(auth)?.[1];
}

/** Whether the request presents a credential this gateway reads (what `auth_failures` guards). */
export function presentsCredential(headers: IncomingHttpHeaders, rt: Runtime): boolean {
  if (headers[rt.identity.header] !== undefined) return true;
  return (
    (rt.identity.bearer || rt.identity.jwt !== undefined) &&
    headers.authorization !== undefined &&
    BEARER_SCHEME.test(headers.authorization)
  );
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

/** Three base64url segments: what a compact JWS looks like, as opposed to an opaque API key. */
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/**
 * Who is calling. The API key header wins over a JWT: a request that carries both is the key's
 * client, and its Authorization header goes upstream unread. A bearer token is a JWT when the
 * config has identity.jwt, unless API keys may also come as bearer tokens and this one does not
 * look like a JWT. Resolves synchronously except for a JWT not verified before.
 *
 * An `Authorization: Bearer` this gateway reads (bearer keys or JWTs configured) but cannot parse
 * (`Bearer a b`, `Bearer` alone) is a 401: falling through to anonymous would forward a
 * credential nobody checked. Other schemes (Basic, Digest, …) are the upstream's and pass unread.
 */
export function identifyCaller(
  headers: IncomingHttpHeaders,
  ipKey: string,
  rt: Runtime,
): Identification | Promise<Identification> {
  const jwt = rt.identity.jwt;
  const auth = headers.authorization;
  if (headers[rt.identity.header] === undefined && auth !== undefined && (jwt || rt.identity.bearer)) {
    const token = BEARER.exec(auth)?.[1];
    if (token === undefined && BEARER_SCHEME.test(auth)) {
      return {
        ok: false,
        reason: "malformed_credential",
        detail: "the Authorization header is not a readable Bearer credential (expected: Bearer <token>)",
      };
    }
    if (jwt && token !== undefined && (!rt.identity.bearer || JWT_SHAPE.test(token))) {
      return jwt.verify(token).then((result) => jwtCaller(result, ipKey, rt));
    }
  }
  return identifyByKey(headers, ipKey, rt);
}

function jwtCaller(result: JwtResult, ipKey: string, rt: Runtime): Identification {
  if (!result.ok) return { ok: false, reason: "invalid_jwt", detail: result.detail };
  const { client, tenant, plan: planName } = result.identity;
  const name = planName ?? rt.identity.jwtDefaultPlan;
  const plan = name === undefined ? undefined : rt.plans.get(name);
  if (!plan) {
    return {
      ok: false,
      reason: "invalid_jwt",
      detail:
        name === undefined
          ? "the JWT names no plan and this gateway has no default plan for tokens"
          : `the JWT names plan "${name}", which this gateway does not have`,
    };
  }
  return {
    ok: true,
    caller: { kind: "client", id: JWT_CLIENT_PREFIX + client, plan, tenant, ipKey },
    credentialHeader: "authorization",
  };
}

function identifyByKey(headers: IncomingHttpHeaders, ipKey: string, rt: Runtime): Identification {
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
        credentialHeader: headers[rt.identity.header] !== undefined ? rt.identity.header : "authorization",
      };
    if (rt.identity.onUnknown === "reject") {
      return { ok: false, reason: "unknown_key", detail: "the API key is not valid" };
    }
  }
  if (!rt.anonymousPlan && (rt.clientsByKeyHash.size > 0 || rt.identity.jwt)) {
    return {
      ok: false,
      reason: "credential_required",
      detail: rt.identity.jwt
        ? `a credential is required (header ${rt.identity.header}, or a JWT as Authorization: Bearer)`
        : `an API key is required (header ${rt.identity.header}${rt.identity.bearer ? " or Authorization: Bearer" : ""})`,
    };
  }
  return {
    ok: true,
    caller: { kind: "anonymous", plan: rt.anonymousPlan, ipKey },
    credentialHeader: undefined,
  };
}
