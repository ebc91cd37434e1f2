// JWT callers through a real gateway: the token's claims choose client, tenant and plan; a bad
// token is a 401 that says why; an API key beside a JWT wins; key files reload with the config.
import { generateKeyPairSync } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { exportJWK, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { createLogger } from "../../src/observability/log.js";
import { type InProcessGateway, LogSink, startGateway, writeConfig } from "../support/gateway.js";
import { send } from "../support/http.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const SECRET = "integration-secret-integration-secret-42";
const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });

const config = (upstreamUrl: string, jwt: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: warn }
store: { url: "memory://" }
upstreams: { api: ${upstreamUrl} }
identity:
  api_key: { header: x-api-key, bearer: false }
  jwt:
${jwt}
    issuer: https://auth.example.com
    audience: api
    claims: { client: sub, tenant: org, plan: tier }
    default_plan: free
clients:
  - { id: keyed, key: the-api-key, plan: pro }
plans:
  free: { global: { rate: 1/m, burst: 2 } }
  pro: { global: { rate: 1/m, burst: 50 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`;

let upstream: TestUpstream;
let gw: InProcessGateway;
const now = () => Math.floor(Date.now() / 1000);
const token = (claims: Record<string, unknown>, secret = SECRET) =>
  new SignJWT({ iss: "https://auth.example.com", aud: "api", exp: now() + 300, ...claims })
    .setProtectedHeader({ alg: "HS256" })
    .sign(Buffer.from(secret));
const bearer = async (claims: Record<string, unknown>, secret?: string) => ({
  authorization: `Bearer ${await token(claims, secret)}`,
});

beforeAll(async () => {
  upstream = await startUpstream();
  gw = await startGateway(config(upstream.url, `    secret: ${SECRET}`));
});
afterAll(async () => {
  await gw?.stop();
  await upstream.close();
});

describe("JWT callers", () => {
  it("a valid token's claims give client, tenant and plan, forwarded upstream and limited by that plan", async () => {
    const headers = await bearer({ sub: "user-7", org: "acme", tier: "pro" });
    const r = await send(gw.url, { path: "/x", headers });
    expect(r.status).toBe(200);
    expect(r.headers["ratelimit-policy"]).toContain('"pro.global";q=50');
    const seen = upstream.received.at(-1)!;
    expect(seen.headers["tollgate-client"]).toBe("jwt:user-7");
    expect(seen.headers["tollgate-tenant"]).toBe("acme");
    expect(seen.headers["tollgate-plan"]).toBe("pro");
  });

  it("a token without a plan claim gets default_plan, and its own bucket", async () => {
    const headers = await bearer({ sub: "user-8" });
    const codes = [];
    for (let i = 0; i < 3; i++) codes.push((await send(gw.url, { path: "/x", headers })).status);
    expect(codes).toEqual([200, 200, 429]);
  });

  it.each([
    ["expired", { sub: "u", exp: now() - 60 }, undefined, "the JWT has expired"],
    ["not yet valid", { sub: "u", nbf: now() + 60 }, undefined, "not valid yet"],
    ["wrong issuer", { sub: "u", iss: "https://evil" }, undefined, "issuer"],
    ["wrong audience", { sub: "u", aud: "other" }, undefined, "audience"],
    ["bad signature", { sub: "u" }, "some-other-secret-some-other-secret-0", "signature does not verify"],
    ["a plan that does not exist", { sub: "u", tier: "platinum" }, undefined, 'plan "platinum"'],
  ])("%s → 401 naming the reason", async (_name, claims, secret, reason) => {
    const r = await send(gw.url, { path: "/x", headers: await bearer(claims, secret) });
    expect(r.status).toBe(401);
    expect(r.headers["content-type"]).toBe("application/problem+json");
    expect(r.json<{ detail: string }>().detail).toContain(reason);
  });

  it("alg none is a 401", async () => {
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
    const unsigned = `${b64({ alg: "none" })}.${b64({ sub: "u", iss: "https://auth.example.com", aud: "api" })}.`;
    const r = await send(gw.url, { path: "/x", headers: { authorization: `Bearer ${unsigned}` } });
    expect(r.status).toBe(401);
    expect(r.json<{ detail: string }>().detail).toContain("alg: none");
  });

  it("an API key beside a JWT wins: the request is the key's client", async () => {
    const headers = { ...(await bearer({ sub: "user-9", tier: "free" })), "x-api-key": "the-api-key" };
    const r = await send(gw.url, { path: "/x", headers });
    expect(r.status).toBe(200);
    expect(upstream.received.at(-1)!.headers["tollgate-client"]).toBe("keyed");
    // Beside a bearer value that is not a JWT (an upstream's own token): the key decides, the
    // value is not the gateway's to read, and goes upstream.
    const withOpaque = { authorization: "Bearer not-a-jwt", "x-api-key": "the-api-key" };
    expect((await send(gw.url, { path: "/x", headers: withOpaque })).status).toBe(200);
    expect(upstream.received.at(-1)!.headers.authorization).toBe("Bearer not-a-jwt");
  });

  it("a forged JWT beside a valid API key is a 401: never forwarded unread", async () => {
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
    const forged = `${b64({ alg: "none", typ: "JWT" })}.${b64({ sub: "admin", iss: "https://auth.example.com", aud: "api" })}.`;
    const before = upstream.received.length;
    const r = await send(gw.url, {
      path: "/x",
      headers: { authorization: `Bearer ${forged}`, "x-api-key": "the-api-key" },
    });
    expect(r.status).toBe(401);
    expect(r.json<{ detail: string }>().detail).toContain("alg: none");
    // Shapes some upstream parsers still read a token from: after junk, behind another
    // credential in a list, padded base64.
    for (const authorization of [
      `Bearer ${forged} x`,
      `Basic Zm9vOmJhcg==, Bearer ${forged}`,
      `Bearer ${forged.replaceAll(".", "=.")}`,
    ]) {
      const refused = await send(gw.url, {
        path: "/x",
        headers: { authorization, "x-api-key": "the-api-key" },
      });
      expect(refused.status).toBe(401);
    }
    expect(upstream.received.length).toBe(before);
  });
});

describe("JWT key files", () => {
  const signRs = (kid: string, key = privateKey) =>
    new SignJWT({ sub: "svc", iss: "https://auth.example.com", aud: "api", exp: now() + 300 })
      .setProtectedHeader({ alg: "RS256", kid })
      .sign(key);

  it("a public_key_file is read relative to the config; a missing one is refused at its key", () => {
    const file = writeConfig(config(upstream.url, "    public_key_file: keys/jwt.pem"));
    const missing = loadConfigText(readFileSync(file, "utf8"), file, {});
    expect(missing.ok).toBe(false);
    expect(!missing.ok && missing.problems[0]).toMatchObject({
      path: "identity.jwt.public_key_file",
      message: expect.stringContaining("no such file"),
    });
    mkdirSync(join(dirname(file), "keys"));
    writeFileSync(join(dirname(file), "keys", "jwt.pem"), publicKey.export({ type: "spki", format: "pem" }));
    const loaded = loadConfigText(readFileSync(file, "utf8"), file, {});
    expect(loaded.ok && loaded.jwt?.algorithms).toContain("RS256");
  });

  it("a jwks_file is re-read on reload: a rotated key takes over, the old one is refused", async () => {
    const file = writeConfig(config(upstream.url, "    jwks_file: jwks.json"));
    const jwksFile = join(dirname(file), "jwks.json");
    const writeJwks = async (kid: string, key = publicKey) =>
      writeFileSync(jwksFile, JSON.stringify({ keys: [{ ...(await exportJWK(key)), kid, alg: "RS256" }] }));
    await writeJwks("k1");
    const gateway = await Gateway.start({
      configFile: file,
      env: {},
      logger: createLogger("warn", new LogSink()),
    });
    const url = `http://127.0.0.1:${gateway.proxyAddress!.port}`;
    try {
      const old = await signRs("k1");
      const first = await send(url, { path: "/x", headers: { authorization: `Bearer ${old}` } });
      expect(first.status, first.body).toBe(200);
      const next = generateKeyPairSync("rsa", { modulusLength: 2048 });
      await writeJwks("k2", next.publicKey);
      expect(await gateway.reload("admin")).toMatchObject({ ok: true });
      const rotated = await signRs("k2", next.privateKey);
      expect((await send(url, { path: "/x", headers: { authorization: `Bearer ${rotated}` } })).status).toBe(
        200,
      );
      const refused = await send(url, {
        path: "/x",
        headers: { authorization: `Bearer ${await signRs("k1")}` },
      });
      expect(refused.status).toBe(401);
      expect(refused.json<{ detail: string }>().detail).toContain("kid");
    } finally {
      await gateway.stop(500);
    }
  });

  /** A token of the `pro` plan (burst 50), so the checks below never run into a limit. */
  const signPro = (kid: string, key = privateKey) =>
    new SignJWT({ sub: "svc", tier: "pro", iss: "https://auth.example.com", aud: "api", exp: now() + 300 })
      .setProtectedHeader({ alg: "RS256", kid })
      .sign(key);

  /**
   * Starts a watching gateway on `file`. `reloaded()` waits until the running config's version
   * changes (the watch debounces for 200 ms); `statuses` answers the status of each token.
   */
  async function watchingGateway(file: string) {
    const gateway = await Gateway.start({
      configFile: file,
      env: {},
      logger: createLogger("warn", new LogSink()),
    });
    const url = `http://127.0.0.1:${gateway.proxyAddress!.port}`;
    const statuses = async (...tokens: string[]) => {
      const out: number[] = [];
      for (const t of tokens) {
        out.push((await send(url, { path: "/x", headers: { authorization: `Bearer ${t}` } })).status);
      }
      return out;
    };
    let seen = gateway.currentRuntime.version;
    const reloaded = async (what: string) => {
      const deadline = Date.now() + 3000;
      while (gateway.currentRuntime.version === seen) {
        if (Date.now() > deadline) throw new Error(`${what}: no reload within 3 s`);
        await new Promise((r) => setTimeout(r, 25));
      }
      seen = gateway.currentRuntime.version;
    };
    return { gateway, statuses, reloaded };
  }

  const jwksOf = async (kid: string, key = publicKey) =>
    JSON.stringify({ keys: [{ ...(await exportJWK(key)), kid, alg: "RS256" }] });

  it.each([
    ["in the config's directory", (configDir: string) => join(configDir, "jwks.json")],
    ["in another directory", () => join(mkdtempSync(join(tmpdir(), "tollgate-keys-")), "jwks.json")],
  ])(
    "a jwks_file %s reloads when it changes, without SIGHUP: a new key works, a removed one is refused",
    async (_where, place) => {
      const file = writeConfig(config(upstream.url, "    jwks_file: PLACEHOLDER"));
      const jwksFile = place(dirname(file));
      writeFileSync(file, readFileSync(file, "utf8").replace("PLACEHOLDER", jwksFile));
      writeFileSync(jwksFile, await jwksOf("k1"));
      const { gateway, statuses, reloaded } = await watchingGateway(file);
      try {
        const next = generateKeyPairSync("rsa", { modulusLength: 2048 });
        const [old, rotated] = [await signPro("k1"), await signPro("k2", next.privateKey)];
        expect(await statuses(old, rotated)).toEqual([200, 401]);
        // Replaced the way editors and deploy tools do: a sibling renamed over it. The YAML does
        // not change; the version (which covers the key file) does.
        writeFileSync(`${jwksFile}.tmp`, await jwksOf("k2", next.publicKey));
        renameSync(`${jwksFile}.tmp`, jwksFile);
        await reloaded("after the JWKS was replaced");
        expect(await statuses(old, rotated)).toEqual([401, 200]);
        // Written in place, too.
        writeFileSync(jwksFile, await jwksOf("k1"));
        await reloaded("after the JWKS was rewritten");
        expect(await statuses(old, rotated)).toEqual([200, 401]);
      } finally {
        await gateway.stop(500);
      }
    },
  );

  it("a public_key_file reloads when it changes, without SIGHUP", async () => {
    const file = writeConfig(config(upstream.url, "    public_key_file: jwt.pem"));
    const pem = join(dirname(file), "jwt.pem");
    writeFileSync(pem, publicKey.export({ type: "spki", format: "pem" }));
    const { gateway, statuses, reloaded } = await watchingGateway(file);
    try {
      const next = generateKeyPairSync("rsa", { modulusLength: 2048 });
      const [old, rotated] = [await signPro("any"), await signPro("any", next.privateKey)];
      expect(await statuses(old, rotated)).toEqual([200, 401]);
      writeFileSync(pem, next.publicKey.export({ type: "spki", format: "pem" }));
      await reloaded("after the PEM changed");
      expect(await statuses(old, rotated)).toEqual([401, 200]);
    } finally {
      await gateway.stop(500);
    }
  });

  it("a reload that names another key file watches that one instead", async () => {
    const file = writeConfig(config(upstream.url, "    jwks_file: a/jwks.json"));
    const dir = dirname(file);
    mkdirSync(join(dir, "a"));
    mkdirSync(join(dir, "b"));
    writeFileSync(join(dir, "a", "jwks.json"), await jwksOf("k1"));
    writeFileSync(join(dir, "b", "jwks.json"), await jwksOf("k1"));
    const { gateway, statuses, reloaded } = await watchingGateway(file);
    try {
      const next = generateKeyPairSync("rsa", { modulusLength: 2048 });
      const [old, rotated] = [await signPro("k1"), await signPro("k2", next.privateKey)];
      writeFileSync(file, readFileSync(file, "utf8").replace("a/jwks.json", "b/jwks.json"));
      await reloaded("after the config named b/jwks.json");
      expect(gateway.currentRuntime.keyFile).toBe(join(dir, "b", "jwks.json"));
      writeFileSync(join(dir, "b", "jwks.json"), await jwksOf("k2", next.publicKey));
      await reloaded("after b/jwks.json changed");
      expect(await statuses(old, rotated)).toEqual([401, 200]);
    } finally {
      await gateway.stop(500);
    }
  });
});
