// A limit keyed by what a client writes: a keyed header holding a list is refused like two lines
// of it, and a header a route says a trusted proxy sets is refused from anyone else, so a client
// cannot pick its budget by writing another value (or `acme, acme`, which was keyed apart from
// `acme`).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

let upstream: TestUpstream;
let direct: InProcessGateway;
let proxied: InProcessGateway;

const config = (trusted: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: warn, requests: false }
store: { url: "memory://" }
upstreams: { api: ${upstream.url} }
identity: { trusted_proxies: [${trusted}] }
clients:
  - { id: a, key: key-a, plan: free }
plans:
  free:
    routes:
      orgs: { limit: 2, window: 1h, by: [caller, "header:x-org"] }
routes:
  - { name: orgs, match: { path: /orgs }, upstream: api }
  - name: billing
    match: { path: /billing }
    upstream: api
    trusted_headers: [x-org]
    limits: { per-org: { limit: 2, window: 1h, by: "header:x-org" } }
`;

beforeAll(async () => {
  upstream = await startUpstream();
  direct = await startGateway(config("10.0.0.0/8"));
  proxied = await startGateway(config("127.0.0.1/32"));
});
afterAll(async () => {
  await direct?.stop();
  await proxied?.stop();
  await upstream?.close();
});

const get = (gw: InProcessGateway, path: string, org: string) =>
  send(gw.url, { path, headers: { "x-api-key": "key-a", "x-org": org } });

describe("a keyed header's value", () => {
  it("is one value: a list in one line is a 400 naming why, and takes nothing", async () => {
    const list = await get(direct, "/orgs", "acme, acme");
    expect(list.status).toBe(400);
    expect(list.json().detail).toContain("holds a list of values");
    expect((await get(direct, "/orgs", "acme")).status).toBe(200);
    expect((await get(direct, "/orgs", "acme")).status).toBe(200);
    expect((await get(direct, "/orgs", "acme")).status).toBe(429);
  });
});

describe("trusted_headers", () => {
  it("refuses the header from a peer that is not a trusted proxy, before any limit", async () => {
    const forged = await get(direct, "/billing", "acme");
    expect(forged.status).toBe(400);
    expect(forged.json().detail).toContain("set by a trusted proxy");
    // Without it the request is served (its budget keyed under the caller, the missing value).
    const plain = await send(direct.url, { path: "/billing", headers: { "x-api-key": "key-a" } });
    expect(plain.status).toBe(200);
  });

  it("takes it from a trusted proxy, and keys the shared budget by it", async () => {
    expect((await get(proxied, "/billing", "acme")).status).toBe(200);
    expect((await get(proxied, "/billing", "acme")).status).toBe(200);
    expect((await get(proxied, "/billing", "acme")).status).toBe(429);
    expect((await get(proxied, "/billing", "other")).status).toBe(200);
  });
});
