// No route bypass through path tricks: every spelling of a limited route is that route (and so
// limited) or a 400, never another route; and the upstream is sent only the normalised path.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { rawGet } from "../support/raw.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const config = (upstreamUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: warn }
store: { url: "memory://" }
upstreams: { api: ${upstreamUrl} }
plans:
  anonymous:
    global: { rate: 1/s, burst: 100000 }
    routes:
      secret-write: { limit: 0 }
routes:
  - { name: secret-write, match: { path: /v1/secret, methods: [POST] }, upstream: api }
  - { name: secret-read, match: { path: /v1/secret, methods: [GET] }, upstream: api }
  - { name: default, match: { path: / }, upstream: api }
`;

/** Spellings of /v1/secret: each must be that route, or refused. */
const SPELLINGS = [
  "/v1/secret",
  "/V1/SECRET",
  "/v1/Secret",
  "//v1/secret",
  "/v1//secret",
  "///v1///secret",
  "/./v1/secret",
  "/v1/./secret",
  "/x/../v1/secret",
  "/v1/x/../secret",
  "/../v1/secret",
  "/../../../v1/secret",
  "/%2e%2e/v1/secret",
  "/%2E/v1/secret",
  "/v1/%2e/secret",
  "/%76%31/secret",
  "/v1/%73ecret",
  "/v1/%53%45%43%52%45%54",
  "/v1/sec%72et",
  "/v1/secret/",
  "/v1/secret/.",
  "/v1/secret/x/..",
  "/v1/secret/%2e%2e/secret",
  "/v1/secret/x",
  "/v1/secret;a=b",
  "/v1;x=1/secret",
  "/v1/secret;/x",
  "/v1/secret?a=1",
  "http://evil.example/v1/secret",
  "/v1%2Fsecret",
  "/v1%2fsecret",
  "/%2Fv1/secret",
  "/v1/secret%00",
  "/v1/secret%00.json",
  "/v1%5Csecret",
  "/v1\\secret",
  "\\v1\\secret",
  "/%C0%AFv1/secret",
  "/v1/%c0%ae%c0%ae/secret",
  "/v1/secret#frag",
  "/v1/secret%",
  "/v1/sec%zzret",
];

let upstream: TestUpstream;
let gw: InProcessGateway;
beforeAll(async () => {
  upstream = await startUpstream();
  gw = await startGateway(config(upstream.url));
});
afterAll(async () => {
  await gw?.stop();
  await upstream.close();
});

describe(`${SPELLINGS.length} spellings of a limited route`, () => {
  it.each(SPELLINGS)(
    "POST %s is the limited route (429) or a 400, and never reaches the upstream",
    async (target) => {
      const before = upstream.received.length;
      const reply = await rawGet(gw.url, target, "POST");
      expect([429, 400]).toContain(reply.status);
      if (reply.status === 429)
        expect(reply.text).toContain('"violated-policies":["anonymous.secret-write"]');
      expect(upstream.received.length).toBe(before);
    },
  );

  it.each(SPELLINGS)("GET %s reaches the upstream only as the normalised path", async (target) => {
    const before = upstream.received.length;
    const reply = await rawGet(gw.url, target);
    if (reply.status === 400) {
      expect(upstream.received.length).toBe(before);
      return;
    }
    expect(reply.status).toBe(200);
    const seen = upstream.received.at(-1)!.url;
    const path = seen.split("?")[0]!;
    expect(path.toLowerCase()).toMatch(/^\/v1\/secret(\/|\/x)?$/);
  });
});
