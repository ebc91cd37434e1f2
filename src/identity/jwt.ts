// JWT callers (jose): the source that turns a verified bearer token into a caller, and the
// verifier. The key material is read when the config loads (and so again on every reload);
// verification is the only per-request work, and a verified token is remembered until it expires
// so a caller's repeat requests cost a map lookup.
import { createPublicKey, createSecretKey, type KeyObject } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import {
  createLocalJWKSet,
  decodeProtectedHeader,
  errors,
  type JSONWebKeySet,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwtVerify,
} from "jose";
import type { Runtime } from "../config/compile.js";
import { bearerToken, isBearerScheme, malformedBearer } from "./bearer.js";
import type { Identification, IdentitySource } from "./caller.js";
import { THROTTLED } from "./throttled.js";

/**
 * JWT callers are a namespace of their own: `sub: bob` is `jwt:bob`, never the API-key client
 * `bob`, so a token cannot inherit a key client's exemption, deny entry, limits or name. Config
 * client ids cannot start with it (the schema refuses them).
 */
export const JWT_CLIENT_PREFIX = "jwt:";

/** Three base64url segments: what a compact JWS looks like, as opposed to an opaque API key. */
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/**
 * A JWT as `Authorization: Bearer`, when the config has identity.jwt. Every bearer token is
 * taken for a JWT, unless API keys may also come as bearer tokens (`bearer: true`) and this one
 * does not look like a JWT: that one is left to the API-key source after it. The only source
 * that answers with a promise, and only for a token not verified before.
 */
export const jwtBearer: IdentitySource = {
  presents: (headers, rt) =>
    rt.identity.jwt !== undefined &&
    headers.authorization !== undefined &&
    isBearerScheme(headers.authorization),
  identify(headers, ipKey, rt, _stored, throttled) {
    const jwt = rt.identity.jwt;
    const auth = headers.authorization;
    if (jwt === undefined || auth === undefined) return undefined;
    const token = bearerToken(auth);
    if (token === undefined) return isBearerScheme(auth) ? malformedBearer() : undefined;
    if (rt.identity.bearer && !JWT_SHAPE.test(token)) return undefined;
    return verified(jwt, token, ipKey, rt, throttled);
  },
};

/**
 * The bearer token beside the API key that names the caller, verified as a JWT as if it stood
 * alone (undefined: no identity.jwt, no Bearer, or a value without a dot). The request stays the key's, and its
 * Authorization goes upstream (unless the route hides credentials): unread, a forged token (alg
 * none, sub admin) would reach an upstream that trusts the gateway to verify its JWTs, beside
 * the cheapest API key. A bearer value without a dot (an upstream's own opaque token) is not the
 * gateway's to read; one with a dot is verified, and an unreadable Bearer is a 401.
 */
export function jwtBesideKey(
  headers: IncomingHttpHeaders,
  ipKey: string,
  rt: Runtime,
  throttled?: boolean,
): Identification | Promise<Identification> | undefined {
  const jwt = rt.identity.jwt;
  const auth = headers.authorization;
  if (jwt === undefined || auth === undefined) return undefined;
  const token = bearerToken(auth);
  // `Bearer <jwt> junk`, `Bearer x, Bearer <jwt>`: some upstream parsers still find the token.
  if (token === undefined) return isBearerScheme(auth) ? malformedBearer() : undefined;
  // Any dotted value is taken for a token: decoders read padded, standard-alphabet and quoted
  // forms that JWT_SHAPE does not match.
  if (!token.includes(".")) return undefined;
  return verified(jwt, token, ipKey, rt, throttled);
}

/**
 * The token's caller. From an address past auth_failures only a token verified before (and not
 * expired since) is answered: no signature is checked for it.
 */
function verified(
  jwt: JwtVerifier,
  token: string,
  ipKey: string,
  rt: Runtime,
  throttled: boolean | undefined,
): Identification | Promise<Identification> {
  if (!throttled) return jwt.verify(token).then((result) => jwtCaller(result, ipKey, rt));
  const known = jwt.cached(token);
  return known ? jwtCaller(known, ipKey, rt) : THROTTLED;
}

/** A verified token's caller on its plan (the token's, else identity.jwt.default_plan). */
function jwtCaller(result: JwtResult, ipKey: string, rt: Runtime): Identification {
  if (!result.ok) return { ok: false, reason: "invalid_jwt", detail: result.detail };
  const { client, tenant, plan: planName, claims } = result.identity;
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
    caller: { kind: "client", id: JWT_CLIENT_PREFIX + client, plan, tenant, ipKey, claims },
    credentialHeader: "authorization",
  };
}

export const HMAC_ALGORITHMS = ["HS256", "HS384", "HS512"] as const;
const RSA_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"];
const ASYMMETRIC_ALGORITHMS = [...RSA_ALGORITHMS, "ES256", "ES384", "ES512", "EdDSA", "Ed25519"];

/** What a verified token says about its caller, by the configured claim names. */
export interface JwtIdentity {
  client: string;
  tenant: string | undefined;
  plan: string | undefined;
  /** The whole verified payload: limits keyed `by: claim:<name>` read it (limits/key-by.ts). */
  claims: Readonly<Record<string, unknown>>;
}

export type JwtResult = { ok: true; identity: JwtIdentity } | { ok: false; detail: string };

export interface JwtKeySource {
  secret?: string;
  publicKeyPem?: string;
  jwks?: JSONWebKeySet;
}

export interface JwtOptions {
  issuer?: string;
  audience?: string;
  clockToleranceMs: number;
  claims: { client: string; tenant?: string; plan?: string };
}

/** Remembered verified tokens; bounded, and owned by one verifier (one config). */
const CACHE_MAX = 10_000;

export class JwtVerifier {
  readonly algorithms: readonly string[];
  private readonly key: KeyObject | JWTVerifyGetKey;
  private readonly cache = new Map<string, { result: JwtResult; expiresAtMs: number }>();

  /** Throws a plain Error naming what is wrong with the key material (the loader positions it). */
  constructor(
    source: JwtKeySource,
    private readonly options: JwtOptions,
  ) {
    if (source.secret !== undefined) {
      this.key = createSecretKey(Buffer.from(source.secret, "utf8"));
      this.algorithms = HMAC_ALGORITHMS;
    } else if (source.publicKeyPem !== undefined) {
      const key = createPublicKey(source.publicKeyPem);
      this.key = key;
      this.algorithms = algorithmsFor(key);
    } else if (source.jwks !== undefined) {
      if (!Array.isArray(source.jwks.keys) || source.jwks.keys.length === 0) {
        throw new Error('the JWKS has no keys (expected {"keys": [...]})');
      }
      this.key = createLocalJWKSet(source.jwks);
      this.algorithms = ASYMMETRIC_ALGORITHMS;
    } else {
      throw new Error("no key: give secret, public_key_file or jwks_file");
    }
  }

  /** A token verified before and still valid, without checking anything; undefined: not known. */
  cached(token: string, nowMs: number = Date.now()): JwtResult | undefined {
    const cached = this.cache.get(token);
    return cached && nowMs <= cached.expiresAtMs ? cached.result : undefined;
  }

  /** Resolves, never rejects: a bad token is a result with the reason a client may read. */
  async verify(token: string, nowMs: number = Date.now()): Promise<JwtResult> {
    const cached = this.cache.get(token);
    if (cached && nowMs <= cached.expiresAtMs) return cached.result;
    if (cached) this.cache.delete(token);

    let header: ReturnType<typeof decodeProtectedHeader>;
    try {
      header = decodeProtectedHeader(token);
    } catch {
      return { ok: false, detail: "the bearer token is not a well-formed JWT" };
    }
    if (header.alg === undefined || header.alg.toLowerCase() === "none") {
      return { ok: false, detail: "unsigned JWTs (alg: none) are not accepted" };
    }
    if (!this.algorithms.includes(header.alg)) {
      return {
        ok: false,
        detail: `the JWT's algorithm ${header.alg} does not fit this gateway's key (accepted: ${this.algorithms.join(", ")})`,
      };
    }
    let payload: JWTPayload;
    try {
      const verified =
        typeof this.key === "function"
          ? await jwtVerify(token, this.key, this.verifyOptions(nowMs))
          : await jwtVerify(token, this.key, this.verifyOptions(nowMs));
      payload = verified.payload;
    } catch (err) {
      return { ok: false, detail: describeFailure(err) };
    }
    const result = this.identityFrom(payload);
    if (result.ok) this.remember(token, result, payload);
    return result;
  }

  private verifyOptions(nowMs: number) {
    return {
      algorithms: [...this.algorithms],
      issuer: this.options.issuer,
      audience: this.options.audience,
      clockTolerance: Math.round(this.options.clockToleranceMs / 1000),
      currentDate: new Date(nowMs),
    };
  }

  private identityFrom(payload: JWTPayload): JwtResult {
    const { claims } = this.options;
    const client = claimText(payload, claims.client);
    if (!client.ok) return client;
    if (client.value === undefined) return { ok: false, detail: `the JWT has no "${claims.client}" claim` };
    const tenant =
      claims.tenant === undefined
        ? { ok: true as const, value: undefined }
        : claimText(payload, claims.tenant);
    if (!tenant.ok) return tenant;
    const plan =
      claims.plan === undefined ? { ok: true as const, value: undefined } : claimText(payload, claims.plan);
    if (!plan.ok) return plan;
    return {
      ok: true,
      identity: {
        client: client.value,
        tenant: tenant.value,
        plan: plan.value,
        claims: Object.freeze({ ...payload }),
      },
    };
  }

  private remember(token: string, result: JwtResult, payload: JWTPayload): void {
    // Without exp a token never expires by itself; remember it for a minute at most, so a
    // reload (a new verifier) or a minute revokes it from this cache.
    const expiresAtMs =
      typeof payload.exp === "number"
        ? Math.min(payload.exp * 1000 + this.options.clockToleranceMs, Date.now() + 60_000)
        : Date.now() + 60_000;
    if (this.cache.size >= CACHE_MAX) this.cache.clear();
    this.cache.set(token, { result, expiresAtMs });
  }
}

/** Characters a claim may carry: it becomes a key part and an upstream header value. */
const CLAIM_TEXT = /^[A-Za-z0-9._~@+=:\-/]{1,256}$/;

function claimText(
  payload: JWTPayload,
  name: string,
): { ok: true; value: string | undefined } | { ok: false; detail: string } {
  const value = payload[name];
  if (value === undefined) return { ok: true, value: undefined };
  if (typeof value !== "string" && typeof value !== "number") {
    return { ok: false, detail: `the JWT's "${name}" claim must be a string` };
  }
  const text = String(value);
  if (!CLAIM_TEXT.test(text)) {
    return {
      ok: false,
      detail: `the JWT's "${name}" claim holds characters this gateway does not forward (letters, digits and . _ ~ @ + = : - / only, at most 256)`,
    };
  }
  return { ok: true, value: text };
}

/** The algorithms a public key can verify: the key's type decides, never the token. */
export function algorithmsFor(key: KeyObject): string[] {
  switch (key.asymmetricKeyType) {
    case "rsa":
      return RSA_ALGORITHMS;
    case "rsa-pss":
      return ["PS256", "PS384", "PS512"];
    case "ec": {
      const curve = key.asymmetricKeyDetails?.namedCurve;
      if (curve === "prime256v1") return ["ES256"];
      if (curve === "secp384r1") return ["ES384"];
      if (curve === "secp521r1") return ["ES512"];
      throw new Error(`EC curve ${curve} is not supported for JWTs (use P-256, P-384 or P-521)`);
    }
    case "ed25519":
      return ["EdDSA", "Ed25519"];
    default:
      throw new Error(`a ${key.asymmetricKeyType} key cannot verify JWTs (use RSA, EC or Ed25519)`);
  }
}

function describeFailure(err: unknown): string {
  if (err instanceof errors.JWTExpired) return "the JWT has expired";
  if (err instanceof errors.JWTClaimValidationFailed) {
    switch (err.claim) {
      case "nbf":
        return "the JWT is not valid yet (nbf is in the future)";
      case "iss":
        return "the JWT's issuer is not the one this gateway accepts";
      case "aud":
        return "the JWT's audience is not the one this gateway accepts";
      case "iat":
        return "the JWT's iat claim is not valid";
      default:
        return `the JWT's "${err.claim}" claim is not valid`;
    }
  }
  if (err instanceof errors.JWSSignatureVerificationFailed) return "the JWT's signature does not verify";
  if (err instanceof errors.JWKSNoMatchingKey) return "no key of this gateway matches the JWT's kid";
  if (err instanceof errors.JWKSMultipleMatchingKeys) return "several keys match the JWT; give it a kid";
  if (err instanceof errors.JOSEAlgNotAllowed) return "the JWT's algorithm does not fit this gateway's key";
  return "the bearer token is not a valid JWT";
}
