// The JWT verifier (jose): the key material is read when the config loads (and so again on every
// reload), or, for an identity provider's keys (issuer discovery or jwks_url), fetched by the
// gateway (idp/key-sets.ts) and handed over with useRemoteKeys; verification is the only per-request work, and a verified token is remembered until
// it expires so a caller's repeat requests cost a map lookup. It knows nothing of callers or
// plans (jwt.ts makes a caller of what it verified), so the compiled model can name it.
import { createPublicKey, createSecretKey, type KeyObject } from "node:crypto";
import {
  type CryptoKey,
  createLocalJWKSet,
  decodeProtectedHeader,
  errors,
  type FlattenedJWSInput,
  type JSONWebKeySet,
  type JWSHeaderParameters,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwtVerify,
} from "jose";
import { KeysUnavailableError } from "./idp/remote-jwks.js";
import type { RemoteKeysSpec } from "./idp/spec.js";

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
  /** An identity provider's keys, fetched by the gateway, not the loader. */
  remote?: RemoteKeysSpec;
}

type RemoteGetKey = (header: JWSHeaderParameters, token: FlattenedJWSInput) => Promise<CryptoKey>;

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
  /** Where the keys are fetched from, when they are; the gateway binds them (useRemoteKeys). */
  readonly remote: RemoteKeysSpec | undefined;
  private readonly key: KeyObject | JWTVerifyGetKey;
  private remoteKeys: RemoteGetKey | undefined;
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
    } else if (source.remote !== undefined) {
      // Until the gateway binds the fetched keys (never, in --check or a bare compile), every
      // token is refused with the reason.
      this.key = (header, token) => {
        if (this.remoteKeys === undefined) throw new KeysUnavailableError();
        return this.remoteKeys(header, token as FlattenedJWSInput);
      };
      this.algorithms = ASYMMETRIC_ALGORITHMS;
    } else {
      throw new Error("no key: give secret, public_key_file, jwks_file, jwks_url or issuer");
    }
    this.remote = source.remote;
  }

  /** The identity provider's keys (idp/remote-jwks.ts), for a verifier built with `remote`. */
  useRemoteKeys(getKey: RemoteGetKey): void {
    this.remoteKeys = getKey;
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
  if (err instanceof KeysUnavailableError) return err.message;
  if (err instanceof errors.JWKSMultipleMatchingKeys) return "several keys match the JWT; give it a kid";
  if (err instanceof errors.JOSEAlgNotAllowed) return "the JWT's algorithm does not fit this gateway's key";
  return "the bearer token is not a valid JWT";
}
