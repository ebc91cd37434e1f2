// The keys of one identity provider, fetched and cached for the JWT verifier. Fetched at start,
// then again in the background before the IdP's cache headers say they expire (never on a
// request's path); a token whose kid the cached set lacks may ask for one fetch, at most one per
// refetch interval (refetch-gate.ts) and shared by every request missing at that moment. A fetch
// that fails keeps the last good keys: an IdP that is down does not turn every caller into a
// 401, it only delays a rotation. Before the first good fetch every token is refused with a
// reason, and status() says why for /readyz.
import {
  type CryptoKey,
  createLocalJWKSet,
  errors,
  type FlattenedJWSInput,
  type JSONWebKeySet,
  type JWSHeaderParameters,
} from "jose";
import { keysLifetime } from "./cache-lifetime.js";
import { FetchError, type FetchJson, type FetchOutcome, unfetchableUrl } from "./fetch-json.js";
import { RefetchGate } from "./refetch-gate.js";
import { type RemoteKeysSpec, specSource } from "./spec.js";

/** Raised to the verifier when no key set was ever fetched: the 401's detail is its message. */
export class KeysUnavailableError extends Error {
  constructor() {
    super("the gateway has not yet fetched its identity provider's keys; try again shortly");
    this.name = "KeysUnavailableError";
  }
}

export interface KeysStatus {
  source: string;
  /** none: no key set fetched yet; fresh: within its lifetime; stale: kept past it, the IdP failing. */
  state: "none" | "fresh" | "stale";
  fetchedAtMs?: number;
  expiresAtMs?: number;
  keyCount?: number;
  /** The last fetch's failure, cleared by the next success. */
  lastError?: { message: string; atMs: number };
  /** Kids the held JWKS gives to more than one key (jose refuses tokens naming them); at most 3. */
  duplicateKids?: string[];
}

export interface RemoteJwksDeps {
  fetchJson: FetchJson;
  now: () => number;
  /** setTimeout in production (unref'd); the tests drive it. */
  schedule: (run: () => void, delayMs: number) => { cancel(): void };
  onFetch?: (outcome: FetchOutcome) => void;
  onFailure?: (message: string, kept: boolean) => void;
}

/** A refresh starts when this share of the lifetime has passed, so the keys never expire unrefreshed. */
const REFRESH_AT = 0.8;

type GetKey = (header: JWSHeaderParameters, token: FlattenedJWSInput) => Promise<CryptoKey>;

/** A fetched key set, opaque outside this module. */
export type HeldKeys = Held;

interface Held {
  getKey: GetKey;
  fetchedAtMs: number;
  expiresAtMs: number;
  keyCount: number;
  duplicateKids: string[];
}

export class RemoteJwks {
  private held: Held | undefined;
  private lastError: { message: string; atMs: number } | undefined;
  private inFlight: Promise<void> | undefined;
  private jwksUrl: URL | undefined;
  private readonly gate: RefetchGate;
  private timer: { cancel(): void } | undefined;
  private stopped = false;
  /** Aborts a fetch in flight when the set stops, so no socket outlives the config that wanted it. */
  private readonly abort = new AbortController();

  constructor(
    private readonly spec: RemoteKeysSpec,
    private readonly deps: RemoteJwksDeps,
    /** Keys a set for the same IdP already held (key-sets.ts), used until this one fetches. */
    inherited?: HeldKeys,
  ) {
    this.held = inherited;
    this.gate = new RefetchGate(spec.refetchIntervalMs);
    if (spec.jwksUrl !== undefined) this.jwksUrl = new URL(spec.jwksUrl);
  }

  /** The first fetch; resolves (never rejects) when it ends, whatever it brought. */
  start(): Promise<void> {
    return this.refresh();
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
    this.abort.abort();
  }

  /** jose's key resolver: the key for this token's header, refetching once for an unknown kid. */
  readonly getKey: GetKey = async (header, token) => {
    const held = this.held;
    if (held !== undefined) {
      try {
        return await held.getKey(header, token);
      } catch (err) {
        if (!(err instanceof errors.JWKSNoMatchingKey)) throw err;
      }
    }
    // A miss: join the fetch in flight, or start one if the gate lets it through.
    if (this.inFlight === undefined && !this.gate.tryPass(this.deps.now())) {
      if (this.held === undefined) throw new KeysUnavailableError();
      throw new errors.JWKSNoMatchingKey();
    }
    await (this.inFlight ?? this.fetchNow());
    if (this.held === undefined) throw new KeysUnavailableError();
    return this.held.getKey(header, token);
  };

  /** The keys held, for a set that replaces this one (undefined before any fetch). */
  heldKeys(): HeldKeys | undefined {
    return this.held;
  }

  status(): KeysStatus {
    const source = specSource(this.spec);
    const lastError = this.lastError;
    const held = this.held;
    if (held === undefined) return { source, state: "none", ...(lastError ? { lastError } : {}) };
    return {
      source,
      state: this.deps.now() < held.expiresAtMs ? "fresh" : "stale",
      fetchedAtMs: held.fetchedAtMs,
      expiresAtMs: held.expiresAtMs,
      keyCount: held.keyCount,
      ...(lastError ? { lastError } : {}),
      ...(held.duplicateKids.length > 0 ? { duplicateKids: held.duplicateKids } : {}),
    };
  }

  /** A fetch outside the gate (start, the refresh timer); joins one in flight. */
  private refresh(): Promise<void> {
    return this.inFlight ?? this.fetchNow();
  }

  private fetchNow(): Promise<void> {
    const run = this.fetchOnce().finally(() => {
      this.inFlight = undefined;
    });
    this.inFlight = run;
    return run;
  }

  private async fetchOnce(): Promise<void> {
    let nextMs: number;
    try {
      const held = await this.fetchKeys();
      if (this.stopped) return;
      this.held = held;
      this.lastError = undefined;
      this.deps.onFetch?.("ok");
      nextMs = (held.expiresAtMs - held.fetchedAtMs) * REFRESH_AT;
    } catch (err) {
      if (this.stopped) return;
      const failure =
        err instanceof FetchError ? err : new FetchError("invalid", (err as Error).message ?? String(err));
      this.lastError = { message: failure.message, atMs: this.deps.now() };
      this.deps.onFetch?.(failure.outcome);
      this.deps.onFailure?.(failure.message, this.held !== undefined);
      // The IdP may have moved its JWKS: the next attempt asks its discovery document again.
      if (this.spec.issuer !== undefined) this.jwksUrl = undefined;
      // Asked again after the refetch interval, the IdP's next answer brings the keys back.
      nextMs = this.spec.refetchIntervalMs;
    }
    this.timer?.cancel();
    this.timer = this.deps.schedule(() => void this.refresh(), nextMs);
  }

  private async fetchKeys(): Promise<Held> {
    const { fetchTimeoutMs: deadlineMs, ca } = this.spec;
    const jwksUrl = this.jwksUrl ?? (await this.discover());
    const fetched = await this.deps.fetchJson(jwksUrl, { deadlineMs, ca, signal: this.abort.signal });
    const receivedMs = this.deps.now();
    const jwks = checkedJwks(fetched.json);
    const { lifetimeMs } = keysLifetime(fetched.headers, receivedMs, {
      floorMs: this.spec.cacheFloorMs,
      ceilingMs: this.spec.cacheCeilingMs,
    });
    return {
      getKey: createLocalJWKSet(jwks) as GetKey,
      fetchedAtMs: receivedMs,
      expiresAtMs: receivedMs + lifetimeMs,
      keyCount: jwks.keys.length,
      duplicateKids: duplicateKids(jwks),
    };
  }

  /** The jwks_uri of the issuer's discovery document, once its `issuer` is checked. */
  private async discover(): Promise<URL> {
    const issuer = this.spec.issuer!;
    const url = new URL(`${issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`);
    const { json } = await this.deps.fetchJson(url, {
      deadlineMs: this.spec.fetchTimeoutMs,
      ca: this.spec.ca,
      signal: this.abort.signal,
    });
    const doc = json as { issuer?: unknown; jwks_uri?: unknown } | null;
    if (doc === null || typeof doc !== "object")
      throw new FetchError("invalid", `${url.href} is not a JSON object`);
    // OIDC Discovery §4.3: the issuer must be exactly the one asked for, or a document served by
    // another tenant (or an attacker's host) could hand over its keys.
    if (doc.issuer !== issuer)
      throw new FetchError(
        "invalid",
        `the discovery document at ${url.href} names issuer ${JSON.stringify(doc.issuer)}, not ${JSON.stringify(issuer)}: refused`,
      );
    if (typeof doc.jwks_uri !== "string")
      throw new FetchError("invalid", `the discovery document at ${url.href} has no jwks_uri`);
    const why = unfetchableUrl(doc.jwks_uri);
    if (why !== undefined) throw new FetchError("invalid", `its jwks_uri: ${why}`);
    this.jwksUrl = new URL(doc.jwks_uri);
    return this.jwksUrl;
  }
}

/** A JWKS as jose reads it: {"keys": [objects with kty]}, not empty. */
function checkedJwks(json: unknown): JSONWebKeySet {
  const keys = (json as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys))
    throw new FetchError("invalid", 'the answer is not a JWKS (expected {"keys": [...]})');
  if (keys.length === 0) throw new FetchError("invalid", "the JWKS has no keys");
  if (
    !keys.every(
      (k) => k !== null && typeof k === "object" && typeof (k as { kty?: unknown }).kty === "string",
    )
  )
    throw new FetchError("invalid", "the JWKS holds an entry that is not a key (each needs a kty)");
  return { keys } as JSONWebKeySet;
}

/** Kids given to more than one key (an IdP's mistake that makes jose refuse their tokens). */
function duplicateKids(jwks: JSONWebKeySet): string[] {
  const seen = new Set<string>();
  const twice = new Set<string>();
  for (const key of jwks.keys) {
    if (typeof key.kid !== "string" || key.use === "enc") continue;
    if (seen.has(key.kid)) twice.add(key.kid.slice(0, 64));
    seen.add(key.kid);
  }
  return [...twice].slice(0, 3);
}
