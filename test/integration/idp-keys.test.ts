// JWT keys from a real local HTTPS identity provider (test/support/idp.ts, its own CA): found by
// OIDC discovery, a rotated-in key accepted without a restart, a flood of forged kids held to one
// fetch per interval, an IdP that fails keeping the last keys (and /readyz saying so), and the
// fetches the gateway refuses: too slow, an untrusted certificate, another issuer.
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { Agent } from "node:http";
import { dirname, join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { makeCertificate } from "../support/certs.js";
import { type InProcessGateway, metricValue, startGateway, writeConfig } from "../support/gateway.js";
import { send } from "../support/http.js";
import { idpKey, TestIdp } from "../support/idp.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

/** A config whose identity.jwt has `jwt` (indented four), the IdP's CA beside it as idp-ca.pem. */
const config = (upstreamUrl: string, jwt: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: warn }
store: { url: "memory://" }
upstreams: { api: ${upstreamUrl} }
identity:
  auth_failures: false
  jwt:
${jwt}
    audience: api
    default_plan: free
    ca_file: idp-ca.pem
plans:
  free: { global: { rate: 1000/s, burst: 100000 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`;

let upstream: TestUpstream;
const gateways: InProcessGateway[] = [];
const idps: TestIdp[] = [];

/** A gateway on `jwt`, trusting `ca` (PEM) for its IdP. */
async function gatewayFor(jwt: string, ca: string): Promise<InProcessGateway> {
  // startGateway writes the config into a new directory: the CA goes in first, beside it.
  const file = writeConfig("");
  writeFileSync(join(dirname(file), "idp-ca.pem"), ca);
  const yaml = config(upstream.url, jwt).replace(
    "ca_file: idp-ca.pem",
    `ca_file: ${join(dirname(file), "idp-ca.pem")}`,
  );
  const gw = await startGateway(yaml);
  gateways.push(gw);
  return gw;
}

async function idp(): Promise<TestIdp> {
  const started = await TestIdp.start();
  idps.push(started);
  return started;
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const readyz = async (gw: InProcessGateway) => (await send(gw.adminUrl, { path: "/readyz" })).json();
const detail = async (gw: InProcessGateway, token: string) => {
  const r = await send(gw.url, { path: "/", headers: bearer(token) });
  return r.status === 200 ? 200 : `${r.status} ${r.json().detail}`;
};

beforeAll(async () => {
  upstream = await startUpstream();
});
afterEach(async () => {
  await Promise.all(gateways.splice(0).map((g) => g.stop()));
  await Promise.all(idps.splice(0).map((i) => i.close()));
});
afterAll(async () => {
  await upstream.close();
});

describe("keys from an identity provider", () => {
  it("finds the keys by discovery, accepts a key rotated in since, and 10,000 forged kids fetch at most once", async () => {
    const provider = await idp();
    const a = await idpKey("a");
    provider.keys = [a];
    const gw = await gatewayFor(
      `    issuer: ${provider.issuer}\n    refetch_interval: 1m`,
      provider.certificate.cert,
    );
    expect(await readyz(gw)).toMatchObject({ status: "ready" });
    expect(provider.discoveryFetches).toBe(1);
    expect(provider.jwksFetches).toBe(1);
    expect(await detail(gw, await provider.token(a))).toBe(200);
    // Another issuer's token is refused though its key is the IdP's.
    expect(await detail(gw, await provider.token(a, { iss: "https://elsewhere" }))).toBe(
      "401 the JWT's issuer is not the one this gateway accepts",
    );

    // The IdP rotates: b signs from now on. Its first token's unknown kid fetches once.
    const b = await idpKey("b");
    provider.keys = [b, a];
    expect(await detail(gw, await provider.token(b))).toBe(200);
    expect(provider.jwksFetches).toBe(2);

    // A flood of forged kids within the interval (the rotation's fetch began it): no fetch at
    // all. 500 through the proxy, then 10,000 straight into the gateway's verifier (the same
    // key set; HTTP would make this test take seconds more and prove nothing else).
    const [, body, signature] = (await provider.token(a)).split(".");
    const agent = new Agent({ keepAlive: true, maxSockets: 32 });
    const forged = () =>
      `${Buffer.from(JSON.stringify({ alg: "ES256", kid: randomBytes(8).toString("hex") })).toString("base64url")}.${body}.${signature}`;
    const statuses = new Map<number, number>();
    for (let batch = 0; batch < 1; batch++) {
      const replies = await Promise.all(
        Array.from({ length: 500 }, () => send(gw.url, { path: "/", headers: bearer(forged()), agent })),
      );
      for (const r of replies) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    }
    agent.destroy();
    expect(Object.fromEntries(statuses)).toEqual({ 401: 500 });
    const verifier = gw.gateway.currentRuntime.identity.jwt!;
    const results = await Promise.all(Array.from({ length: 10_000 }, () => verifier.verify(forged())));
    expect(new Set(results.map((r) => (r.ok ? "ok" : r.detail)))).toEqual(
      new Set(["no key of this gateway matches the JWT's kid"]),
    );
    expect(provider.jwksFetches).toBe(2);
    expect(await metricValue(gw.adminUrl, /tollgate_jwks_fetches_total\{outcome="ok"\} (\d+)/)).toBe(2);
    expect(await metricValue(gw.adminUrl, /tollgate_jwks_key_age_seconds (-?\d+)/)).toBeGreaterThanOrEqual(0);
  });

  it("an IdP that fails keeps the last keys: tokens pass, /readyz is ready with a warning", async () => {
    const provider = await idp();
    const a = await idpKey("a");
    provider.keys = [a];
    provider.cacheControl = "max-age=1";
    const gw = await gatewayFor(
      `    jwks_url: ${provider.issuer}/jwks\n    issuer: ${provider.issuer}\n    cache_floor: 1s\n    refetch_interval: 1s`,
      provider.certificate.cert,
    );
    expect(await detail(gw, await provider.token(a))).toBe(200);
    provider.failing = true;
    const fetches = provider.jwksFetches;
    // The refresh at 0.8 s fails, then one a second: wait for two failures.
    await until(
      async () =>
        (await metricValue(gw.adminUrl, /tollgate_jwks_fetches_total\{outcome="status"\} (\d+)/)) >= 2,
    );
    expect(provider.jwksFetches).toBe(fetches); // 503s are not counted as served JWKS
    expect(await detail(gw, await provider.token(a, { sub: "after-outage" }))).toBe(200);
    const ready = await send(gw.adminUrl, { path: "/readyz" });
    expect(ready.status).toBe(200);
    expect(ready.json().warning).toMatch(
      new RegExp(
        `^the JWT keys \\(jwks_url ${provider.issuer}/jwks\\) fetched at \\S+ keep serving, past their expiry at \\S+: the last fetch failed: answered 503, not 200`,
      ),
    );
    // Down altogether (connection refused): the same keys still serve.
    const signed = await provider.token(a, { sub: "idp-gone" });
    await provider.close();
    idps.splice(idps.indexOf(provider), 1);
    await until(
      async () =>
        (await metricValue(gw.adminUrl, /tollgate_jwks_fetches_total\{outcome="network"\} (\d+)/)) >= 1,
    );
    expect(await detail(gw, signed)).toBe(200);
    expect((await readyz(gw)).warning).toMatch(/the last fetch failed: connect ECONNREFUSED/);
  });

  it("a gateway whose IdP is slow starts within the deadline, not ready, and refuses tokens with the reason", async () => {
    const provider = await idp();
    const a = await idpKey("a");
    provider.keys = [a];
    provider.delayMs = 5000;
    const started = performance.now();
    const gw = await gatewayFor(
      `    issuer: ${provider.issuer}\n    fetch_timeout: 300ms`,
      provider.certificate.cert,
    );
    expect(performance.now() - started).toBeLessThan(3000);
    const ready = await send(gw.adminUrl, { path: "/readyz" });
    expect(ready.status).toBe(503);
    expect(ready.json().reason).toMatch(
      new RegExp(
        `^the JWT keys \\(issuer ${provider.issuer}\\) were never fetched: no complete answer within 300 ms \\(at `,
      ),
    );
    expect(await detail(gw, await provider.token(a))).toBe(
      "401 the gateway has not yet fetched its identity provider's keys; try again shortly",
    );
    // The one at start, and the one the first token's miss was let make.
    expect(await metricValue(gw.adminUrl, /tollgate_jwks_fetches_total\{outcome="timeout"\} (\d+)/)).toBe(2);
    expect(await metricValue(gw.adminUrl, /tollgate_jwks_key_age_seconds (-?\d+)/)).toBe(-1);
  });

  it("refuses an IdP whose certificate its ca_file does not sign, and a discovery document naming another issuer", async () => {
    const provider = await idp();
    provider.keys = [await idpKey("a")];
    const untrusted = await gatewayFor(`    issuer: ${provider.issuer}`, makeCertificate("other-ca").cert);
    const refused = await readyz(untrusted);
    expect(refused.status).toBe("not ready");
    expect(refused.reason).toMatch(
      /were never fetched: the TLS certificate is refused: .*\(DEPTH_ZERO_SELF_SIGNED_CERT\); trust its CA with ca_file/,
    );
    expect(provider.discoveryFetches).toBe(0);

    provider.discoveryIssuer = "https://127.0.0.1:1";
    const impostor = await gatewayFor(`    issuer: ${provider.issuer}`, provider.certificate.cert);
    expect((await readyz(impostor)).reason).toMatch(
      `names issuer "https://127.0.0.1:1", not "${provider.issuer}": refused`,
    );
    expect(provider.jwksFetches).toBe(0);
  });
});

async function until(check: () => Promise<boolean>, timeoutMs = 8000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 100));
  }
}
