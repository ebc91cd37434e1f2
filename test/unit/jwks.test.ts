// An identity provider's keys with fake time and a fake IdP: the cache headers decide when the
// keys are fetched again (in the background, never on a request), an unknown kid refetches at
// most once per interval however many arrive, a failed fetch keeps the last keys, and /readyz
// says which of these holds.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { exportJWK, type JWK, SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import { withKeys } from "../../src/admin/readiness.js";
import { keysLifetime } from "../../src/identity/idp/cache-lifetime.js";
import { FetchError, type FetchJson, unfetchableUrl } from "../../src/identity/idp/fetch-json.js";
import { RemoteKeySets } from "../../src/identity/idp/key-sets.js";
import { RefetchGate } from "../../src/identity/idp/refetch-gate.js";
import { RemoteJwks } from "../../src/identity/idp/remote-jwks.js";
import { type RemoteKeysSpec, specSource } from "../../src/identity/idp/spec.js";
import { JwtVerifier } from "../../src/identity/jwt-verifier.js";

const bounds = { floorMs: 60_000, ceilingMs: 86_400_000 };
const T0 = Date.parse("2026-12-04T00:00:00Z");

describe("keysLifetime: the IdP's cache headers, bounded", () => {
  it.each([
    ["max-age", { "cache-control": "public, max-age=300" }, 300_000, "max-age"],
    [
      "max-age less the Age a cache in front spent",
      { "cache-control": "max-age=300", age: "100" },
      200_000,
      "max-age",
    ],
    ["a quoted max-age", { "cache-control": 'max-age="120"' }, 120_000, "max-age"],
    [
      "max-age wins over Expires",
      { "cache-control": "max-age=600", expires: "Thu, 01 Jan 1970 00:00:00 GMT" },
      600_000,
      "max-age",
    ],
    ["no-store: the floor", { "cache-control": "no-store" }, 60_000, "no-store"],
    ["no-cache: the floor", { "cache-control": "no-cache, max-age=900" }, 60_000, "no-store"],
    ["max-age=0: the floor", { "cache-control": "max-age=0" }, 60_000, "max-age"],
    ["an unreadable max-age is stale, not guessed", { "cache-control": "max-age=soon" }, 60_000, "max-age"],
    ["two max-ages are stale", { "cache-control": "max-age=10000, max-age=20000" }, 60_000, "max-age"],
    ["a year: the ceiling", { "cache-control": "max-age=31536000" }, 86_400_000, "max-age"],
    // RFC 9111 §1.2.2: past 2^31 is 2^31; it was read as unreadable, so polled at the floor.
    ["20 digits: the ceiling", { "cache-control": "max-age=99999999999999999999" }, 86_400_000, "max-age"],
    [
      "Expires, relative to the IdP's own Date (its clock may be off)",
      { expires: "Fri, 04 Dec 2026 01:00:00 GMT", date: "Fri, 04 Dec 2026 00:30:00 GMT" },
      1_800_000,
      "expires",
    ],
    [
      "Expires without Date: relative to now",
      { expires: "Fri, 04 Dec 2026 00:10:00 GMT" },
      600_000,
      "expires",
    ],
    ["an invalid Expires (0) is already expired", { expires: "0" }, 60_000, "expires"],
    ["no header: five minutes", {}, 300_000, "default"],
  ])("%s", (_, headers, lifetimeMs, from) => {
    expect(keysLifetime(headers, T0, bounds)).toEqual({ lifetimeMs, from });
  });
});

describe("RefetchGate", () => {
  it("lets one fetch through per interval", () => {
    const gate = new RefetchGate(30_000);
    expect(gate.tryPass(T0)).toBe(true);
    expect(gate.tryPass(T0 + 1)).toBe(false);
    expect(gate.tryPass(T0 + 29_999)).toBe(false);
    expect(gate.nextAtMs()).toBe(T0 + 30_000);
    expect(gate.tryPass(T0 + 30_000)).toBe(true);
    expect(gate.tryPass(T0 + 59_999)).toBe(false);
  });
});

describe("unfetchableUrl", () => {
  it.each([
    ["https://idp.example.com/jwks", undefined],
    ["http://127.0.0.1:8080/jwks", undefined],
    ["http://[::1]:8080/jwks", undefined],
    ["http://localhost/jwks", undefined],
    [
      "http://idp.example.com/jwks",
      "http:// is accepted only on a loopback address (127.0.0.1, ::1, localhost): anyone on the path could replace the keys; use https://idp.example.com/jwks",
    ],
    ["ftp://idp.example.com/jwks", "ftp:// is not a scheme keys are fetched over: use https://"],
    ["idp.example.com/jwks", '"idp.example.com/jwks" is not an absolute URL (expected https://host/path)'],
  ])("%s", (url, why) => expect(unfetchableUrl(url)).toBe(why));
});

/** A signing key with its public JWK. */
function signingKey(kid: string) {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  return {
    kid,
    privateKey,
    jwk: async (): Promise<JWK> => ({ ...(await exportJWK(publicKey)), kid, alg: "ES256", use: "sig" }),
  };
}
type SigningKey = ReturnType<typeof signingKey>;

const ISSUER = "https://idp.test";
const sign = (key: SigningKey, nowMs: number, kid = key.kid) =>
  new SignJWT({ sub: "user-1", plan: "free", iss: ISSUER, aud: "api" })
    .setProtectedHeader({ alg: "ES256", kid })
    .setIssuedAt(Math.floor(nowMs / 1000))
    .setExpirationTime(Math.floor(nowMs / 1000) + 3600)
    .sign(key.privateKey);

/** An IdP in memory: what it serves, how often it was asked, and whether it answers. */
class FakeIdp {
  keys: SigningKey[] = [];
  cacheControl = "max-age=600";
  down = false;
  fetches = 0;
  discoveryIssuer = ISSUER;
  /** Resolves a fetch when the test says so, to hold one in flight. */
  hold: Promise<void> | undefined;
  readonly urls: string[] = [];
  readonly fetchJson: FetchJson = async (url) => {
    this.urls.push(url.href);
    if (url.pathname === "/.well-known/openid-configuration")
      return { json: { issuer: this.discoveryIssuer, jwks_uri: `${ISSUER}/jwks` }, headers: {} };
    this.fetches++;
    await this.hold;
    if (this.down) throw new FetchError("network", "connect ECONNREFUSED 10.0.0.1:443");
    return {
      json: { keys: await Promise.all(this.keys.map((k) => k.jwk())) },
      headers: { "cache-control": this.cacheControl },
    };
  };
}

/** Timers run by the test's clock. */
class FakeTime {
  nowMs = T0;
  private timers: { atMs: number; run: () => void; cancelled: boolean }[] = [];
  readonly now = () => this.nowMs;
  readonly schedule = (run: () => void, delayMs: number) => {
    const timer = { atMs: this.nowMs + delayMs, run, cancelled: false };
    this.timers.push(timer);
    return {
      cancel: () => {
        timer.cancelled = true;
      },
    };
  };
  /** Moves the clock, running each timer that falls due, and lets the fetches it starts end. */
  async advance(ms: number): Promise<void> {
    const until = this.nowMs + ms;
    for (;;) {
      const due = this.timers
        .filter((t) => !t.cancelled && t.atMs <= until)
        .sort((a, b) => a.atMs - b.atMs)[0];
      if (!due) break;
      due.cancelled = true;
      this.nowMs = due.atMs;
      due.run();
      await flush();
    }
    this.nowMs = until;
  }
}
const flush = () => new Promise((r) => setImmediate(r));

const spec: RemoteKeysSpec = {
  issuer: ISSUER,
  fetchTimeoutMs: 5000,
  refetchIntervalMs: 30_000,
  cacheFloorMs: 60_000,
  cacheCeilingMs: 86_400_000,
};

function setup(overrides: Partial<RemoteKeysSpec> = {}) {
  const idp = new FakeIdp();
  const time = new FakeTime();
  const outcomes: string[] = [];
  const jwks = new RemoteJwks(
    { ...spec, ...overrides },
    { fetchJson: idp.fetchJson, now: time.now, schedule: time.schedule, onFetch: (o) => outcomes.push(o) },
  );
  const verifier = new JwtVerifier(
    { remote: { ...spec, ...overrides } },
    { issuer: ISSUER, audience: "api", clockToleranceMs: 5000, claims: { client: "sub", plan: "plan" } },
  );
  verifier.useRemoteKeys(jwks.getKey);
  const verify = async (token: string) => {
    const r = await verifier.verify(token, time.nowMs);
    return r.ok ? "ok" : r.detail;
  };
  return { idp, time, jwks, verify, outcomes };
}

describe("RemoteJwks", () => {
  it("a key the IdP rotated in after the last fetch is accepted: its unknown kid fetches once", async () => {
    const { idp, time, jwks, verify } = setup();
    const a = signingKey("a");
    const b = signingKey("b");
    idp.keys = [a];
    await jwks.start();
    expect(await verify(await sign(a, time.nowMs))).toBe("ok");
    await time.advance(60_000);
    idp.keys = [b, a]; // the IdP rotates: b signs from now on
    expect(await verify(await sign(b, time.nowMs))).toBe("ok");
    expect(idp.fetches).toBe(2);
    // Known from now on: no more fetches.
    expect(await verify(await sign(b, time.nowMs))).toBe("ok");
    expect(idp.fetches).toBe(2);
  });

  it("10,000 random kids cause at most one fetch per interval, shared while in flight", async () => {
    const { idp, time, jwks, verify } = setup();
    const a = signingKey("a");
    idp.keys = [a];
    await jwks.start();
    let release!: () => void;
    idp.hold = new Promise((r) => {
      release = r;
    });
    // Forged tokens: a signed one with its header's kid replaced (the kid is looked up first).
    const [, body, signature] = (await sign(a, time.nowMs)).split(".");
    const forged = () => {
      const header = { alg: "ES256", kid: randomBytes(8).toString("hex") };
      return `${Buffer.from(JSON.stringify(header)).toString("base64url")}.${body}.${signature}`;
    };
    const tokens = Array.from({ length: 10_000 }, forged);
    const answers = tokens.map((t) => verify(t));
    await flush();
    expect(idp.fetches).toBe(2); // the start, and one for all the misses in flight
    release();
    const details = new Set(await Promise.all(answers));
    expect(details).toEqual(new Set(["no key of this gateway matches the JWT's kid"]));
    idp.hold = undefined;
    // Within the interval, misses do not fetch at all; past it, one more may.
    await time.advance(29_000);
    await Promise.all(tokens.slice(0, 100).map((t) => verify(t)));
    expect(idp.fetches).toBe(2);
    await time.advance(1_000);
    await Promise.all(tokens.slice(0, 100).map((t) => verify(t)));
    expect(idp.fetches).toBe(3);
  });

  it("keys are refreshed in the background before their max-age ends, and a key the IdP dropped goes", async () => {
    const { idp, time, jwks, verify } = setup();
    const a = signingKey("a");
    const b = signingKey("b");
    idp.keys = [a, b];
    idp.cacheControl = "max-age=120";
    await jwks.start();
    const old = await sign(a, time.nowMs);
    expect(await verify(old)).toBe("ok");
    expect(jwks.status()).toMatchObject({ state: "fresh", expiresAtMs: T0 + 120_000, keyCount: 2 });
    idp.keys = [b];
    await time.advance(95_000);
    expect(idp.fetches).toBe(1); // not yet: the refresh is at 80% of the lifetime
    await time.advance(1_000);
    expect(idp.fetches).toBe(2); // at 96 s, by the timer, no request waiting on it
    expect(jwks.status()).toMatchObject({ state: "fresh", fetchedAtMs: T0 + 96_000, keyCount: 1 });
    // A token of the dropped key, never verified before: its kid is unknown now.
    const dropped = await sign(a, time.nowMs);
    expect(await verify(dropped)).toBe("no key of this gateway matches the JWT's kid");
  });

  it("an IdP that is down keeps the last keys, ready with a warning; none ever fetched: not ready", async () => {
    const { idp, time, jwks, verify, outcomes } = setup();
    const a = signingKey("a");
    idp.keys = [a];
    idp.cacheControl = "max-age=100";
    await jwks.start();
    idp.down = true;
    await time.advance(200_000); // the refresh at 80 s fails, then every 30 s
    expect(outcomes[0]).toBe("ok");
    expect(outcomes.slice(1).every((o) => o === "network")).toBe(true);
    expect(outcomes.length).toBeGreaterThan(3);
    expect(await verify(await sign(a, time.nowMs))).toBe("ok");
    const status = jwks.status();
    expect(status).toMatchObject({
      state: "stale",
      lastError: { message: "connect ECONNREFUSED 10.0.0.1:443" },
    });
    const r = withKeys({ ready: true }, status);
    expect(r.ready).toBe(true);
    expect(r.warning).toMatch(
      /^the JWT keys \(issuer https:\/\/idp\.test\) fetched at 2026-12-04T00:00:00\.000Z keep serving, past their expiry at 2026-12-04T00:01:40\.000Z: the last fetch failed: connect ECONNREFUSED/,
    );
    idp.down = false;
    await time.advance(30_000);
    expect(jwks.status()).toMatchObject({ state: "fresh" });
    expect(withKeys({ ready: true }, jwks.status())).toEqual({ ready: true });

    const never = setup();
    never.idp.down = true;
    await never.jwks.start();
    const none = withKeys({ ready: true }, never.jwks.status());
    expect(none.ready).toBe(false);
    expect(none.reason).toMatch(
      /^the JWT keys \(issuer https:\/\/idp\.test\) were never fetched: connect ECONNREFUSED 10\.0\.0\.1:443 \(at /,
    );
    expect(await never.verify(await sign(a, never.time.nowMs))).toBe(
      "the gateway has not yet fetched its identity provider's keys; try again shortly",
    );
  });

  it("a discovery document naming another issuer is refused, and no key comes from it", async () => {
    const { idp, jwks, verify, time } = setup();
    const a = signingKey("a");
    idp.keys = [a];
    idp.discoveryIssuer = "https://evil.test";
    await jwks.start();
    expect(jwks.status()).toMatchObject({
      state: "none",
      lastError: {
        message:
          'the discovery document at https://idp.test/.well-known/openid-configuration names issuer "https://evil.test", not "https://idp.test": refused',
      },
    });
    expect(idp.fetches).toBe(0);
    expect(await verify(await sign(a, time.nowMs))).toBe(
      "the gateway has not yet fetched its identity provider's keys; try again shortly",
    );
  });

  it("a token's own jku or jwk header is never fetched nor trusted: keys come from the IdP only", async () => {
    const { idp, time, jwks, verify } = setup();
    const a = signingKey("a");
    const evil = signingKey("evil");
    idp.keys = [a];
    await jwks.start();
    const token = await new SignJWT({ sub: "admin", plan: "free", iss: ISSUER, aud: "api" })
      .setProtectedHeader({ alg: "ES256", kid: "evil", jku: "https://evil.test/jwks", jwk: await evil.jwk() })
      .setExpirationTime(Math.floor(time.nowMs / 1000) + 600)
      .sign(evil.privateKey);
    expect(await verify(token)).toBe("no key of this gateway matches the JWT's kid");
    expect(idp.urls.every((u) => u.startsWith(ISSUER))).toBe(true);
  });

  it("a verifier whose keys were never bound refuses with the reason (--check, a bare compile)", async () => {
    const verifier = new JwtVerifier({ remote: spec }, { clockToleranceMs: 0, claims: { client: "sub" } });
    const r = await verifier.verify(await sign(signingKey("a"), T0));
    expect(r).toEqual({
      ok: false,
      detail: "the gateway has not yet fetched its identity provider's keys; try again shortly",
    });
  });
});

describe("withKeys: /readyz with the IdP's keys", () => {
  it("adds the keys' reason to the store's, and leaves a config without remote keys alone", () => {
    const none = { source: "jwks_url https://idp.test/jwks", state: "none" as const };
    expect(
      withKeys({ ready: false, reason: "limit store unreachable at 10.0.0.5:6379 (timeout)" }, none),
    ).toEqual({
      ready: false,
      reason:
        "limit store unreachable at 10.0.0.5:6379 (timeout); the JWT keys (jwks_url https://idp.test/jwks) were never fetched: the first fetch is under way",
    });
    expect(withKeys({ ready: true, reason: "x; no route fails closed" }, undefined)).toEqual({
      ready: true,
      reason: "x; no route fails closed",
    });
  });
});

describe("RemoteKeySets across reloads", () => {
  const verifierOf = (remote: RemoteKeysSpec | undefined) =>
    new JwtVerifier(remote ? { remote } : { secret: "s".repeat(32) }, {
      issuer: ISSUER,
      audience: "api",
      clockToleranceMs: 5000,
      claims: { client: "sub", plan: "plan" },
    });

  it("the same IdP settings keep the fetched keys; other settings start a new set; none stops it", async () => {
    const idp = new FakeIdp();
    const time = new FakeTime();
    const a = signingKey("a");
    idp.keys = [a];
    const sets = new RemoteKeySets({ fetchJson: idp.fetchJson, now: time.now, schedule: time.schedule });
    const first = verifierOf(spec);
    sets.bind(first);
    await sets.firstFetch();
    expect(idp.fetches).toBe(1);
    idp.down = true; // a reload during an outage
    const reloaded = verifierOf({ ...spec });
    sets.bind(reloaded);
    await sets.firstFetch();
    expect(idp.fetches).toBe(1);
    expect((await reloaded.verify(await sign(a, time.nowMs), time.nowMs)).ok).toBe(true);
    idp.down = false;
    sets.bind(verifierOf({ ...spec, refetchIntervalMs: 10_000 }));
    await sets.firstFetch();
    expect(idp.fetches).toBe(2);
    sets.bind(verifierOf(undefined));
    expect(sets.status()).toBeUndefined();
    await time.advance(86_400_000);
    expect(idp.fetches).toBe(2); // stopped: no refresh timer left behind
  });

  it("new settings for the same IdP during its outage keep serving its keys; another IdP does not", async () => {
    const idp = new FakeIdp();
    const time = new FakeTime();
    const a = signingKey("a");
    idp.keys = [a];
    const sets = new RemoteKeySets({ fetchJson: idp.fetchJson, now: time.now, schedule: time.schedule });
    sets.bind(verifierOf(spec));
    await sets.firstFetch();
    idp.down = true;
    // What an operator changes during an IdP incident: its CA, its deadline.
    const reloaded = verifierOf({ ...spec, ca: "-----BEGIN CERTIFICATE-----", fetchTimeoutMs: 9000 });
    sets.bind(reloaded);
    await sets.firstFetch();
    expect(idp.fetches).toBe(2);
    expect((await reloaded.verify(await sign(a, time.nowMs), time.nowMs)).ok).toBe(true);
    expect(sets.status()?.state).toBe("fresh");
    const elsewhere = verifierOf({ ...spec, jwksUrl: "https://other-idp.test/jwks" });
    sets.bind(elsewhere);
    await sets.firstFetch();
    expect(sets.status()?.state).toBe("none");
  });
});

describe("a JWKS giving one kid to two keys", () => {
  it("is held, and /readyz warns that tokens with that kid are refused", async () => {
    const idp = new FakeIdp();
    const time = new FakeTime();
    idp.keys = [signingKey("k1"), signingKey("k1"), signingKey("k2")];
    const sets = new RemoteKeySets({ fetchJson: idp.fetchJson, now: time.now, schedule: time.schedule });
    const verifier = new JwtVerifier(
      { remote: spec },
      { issuer: ISSUER, audience: "api", clockToleranceMs: 5000, claims: { client: "sub", plan: "plan" } },
    );
    sets.bind(verifier);
    await sets.firstFetch();
    expect(sets.status()).toMatchObject({ state: "fresh", keyCount: 3, duplicateKids: ["k1"] });
    expect(withKeys({ ready: true }, sets.status()).warning).toBe(
      'the JWKS holds several keys under kid "k1": tokens with that kid are refused',
    );
    sets.stop();
  });
});

describe("specSource: where the keys come from, as /readyz shows it unauthenticated", () => {
  it("hides a URL's credentials and query", () => {
    expect(
      specSource({ ...spec, issuer: undefined, jwksUrl: "https://user:s3cret@idp.test/jwks?access_token=T" }),
    ).toBe("jwks_url https://idp.test/jwks (credentials and query hidden)");
    expect(specSource({ ...spec, issuer: undefined, jwksUrl: "https://idp.test/jwks" })).toBe(
      "jwks_url https://idp.test/jwks",
    );
  });
});
