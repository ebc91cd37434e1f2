// The built gateway against a local HTTPS identity provider with a short max-age: a key the IdP
// rotated in (and the old one dropped) is picked up by the background refresh without a restart
// or a request waiting on a fetch; a reload with the IdP down keeps the keys; --check never
// reaches the IdP.
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI, type GatewayProcess, spawnGateway, writeConfig } from "../support/gateway.js";
import { send } from "../support/http.js";
import { idpKey, TestIdp } from "../support/idp.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

let upstream: TestUpstream;
let idp: TestIdp;
let gw: GatewayProcess | undefined;

// refetch_interval 1h: after the first miss, only the cache headers can bring a new key in.
const yaml = (caFile: string, extra = "") => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: "memory://" }
upstreams: { api: ${upstream.url} }
identity:
  auth_failures: false
  jwt:
    issuer: ${idp.issuer}
    audience: api
    ca_file: ${caFile}
    default_plan: free
    cache_floor: 1s
    refetch_interval: 1h
plans:
  free: { global: { rate: 1000/s, burst: 1000 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
${extra}`;

beforeAll(async () => {
  upstream = await startUpstream();
  idp = await TestIdp.start();
});
afterAll(async () => {
  await gw?.stop();
  await idp.close();
  await upstream.close();
});

const status = async (token: string) =>
  (await send(gw!.url, { path: "/", headers: { authorization: `Bearer ${token}` } })).status;

describe("keys rotated at the identity provider", () => {
  it("--check validates the IdP settings offline: no fetch", () => {
    const file = writeConfig("");
    writeFileSync(join(dirname(file), "ca.pem"), idp.certificate.cert);
    writeFileSync(file, yaml("ca.pem"));
    const before = idp.discoveryFetches + idp.jwksFetches;
    const r = spawnSync(process.execPath, [CLI, "--check", "--config", file], { encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    expect(idp.discoveryFetches + idp.jwksFetches).toBe(before);
  });

  it("a key rotated in with max-age=1 is accepted within seconds, the dropped one refused, without a restart", async () => {
    const a = await idpKey("key-a");
    idp.keys = [a];
    idp.cacheControl = "max-age=1";
    const file = writeConfig("");
    writeFileSync(join(dirname(file), "ca.pem"), idp.certificate.cert);
    gw = await spawnGateway(yaml(join(dirname(file), "ca.pem")));
    expect(await status(await idp.token(a))).toBe(200);
    // Spend the one miss the gate allows per hour, so only the refresh can help from here.
    expect(await status(await idp.token(a, {}, "forged-kid"))).toBe(401);

    const b = await idpKey("key-b");
    idp.keys = [b]; // rotated: b in, a out
    const rotatedAt = performance.now();
    let accepted = 0;
    while (performance.now() - rotatedAt < 5000) {
      if ((await status(await idp.token(b))) === 200) {
        accepted = performance.now() - rotatedAt;
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(accepted, "the rotated key was never accepted").toBeGreaterThan(0);
    expect(accepted).toBeLessThan(3000);
    console.log(`a key rotated in was accepted after ${Math.round(accepted)} ms (max-age=1, cache_floor 1s)`);
    expect(await status(await idp.token(a, { sub: "fresh-token-old-key" }))).toBe(401);
    const ready = await send(gw.adminUrl, { path: "/readyz" });
    expect(ready.json()).toMatchObject({ status: "ready" });
    expect(ready.json().warning).toBeUndefined();
  });

  it("a reload while the IdP fails keeps the keys already fetched (same IdP settings)", async () => {
    const b = idp.keys[0]!;
    idp.failing = true;
    const fetches = idp.jwksFetches + idp.discoveryFetches;
    // A change beside the IdP settings (a new audience), applied by SIGHUP.
    writeFileSync(
      gw!.configFile,
      readFileSync(gw!.configFile, "utf8").replace(
        "audience: api",
        "audience: api\n    clock_tolerance: 10s",
      ),
    );
    gw!.child.kill("SIGHUP");
    await until(() => gw!.lines.some((l) => l.msg === "config reloaded"));
    expect(await status(await idp.token(b, { sub: "after-reload" }))).toBe(200);
    const ready = await send(gw!.adminUrl, { path: "/readyz" });
    expect(ready.status).toBe(200);
    // A reload starts no fetch of its own: only the refresh timer asks (and fails).
    expect(idp.jwksFetches + idp.discoveryFetches).toBe(fetches);
    idp.failing = false;
  });
});

async function until(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 50));
  }
}
