// A throw inside the request pipeline costs that request a 500, never the process, and the
// in-flight count that shutdown waits on stays exact.

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import { compileRuntime, type Runtime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { AuthFailureThrottle } from "../../src/identity/auth-failures.js";
import { Limiter } from "../../src/limits/limiter.js";
import { MemoryStore } from "../../src/limits/stores/memory.js";
import { createLogger } from "../../src/observability/log.js";
import { Metrics } from "../../src/observability/metrics.js";
import { SustainedDenials } from "../../src/observability/sustained.js";
import { createPipeline } from "../../src/proxy/pipeline.js";
import { UpstreamPools } from "../../src/proxy/upstreams.js";
import { LogSink } from "../support/gateway.js";
import { send } from "../support/http.js";

const YAML = `
store: { url: memory:// }
upstreams: { api: http://127.0.0.1:1 }
routes: [{ name: default, match: { path: / }, upstream: api }]
`;

let server: Server;
let url: string;
const inFlight = { count: 0 };
const logs = new LogSink();

beforeAll(async () => {
  const loaded = loadConfigText(YAML, "gw.yaml", {});
  if (!loaded.ok) throw new Error("fixture config invalid");
  const real = compileRuntime(loaded.config, { file: "gw.yaml", version: loaded.version });
  // A runtime whose route table throws: a stand-in for any bug below the handler.
  const broken = {
    ...real,
    routes: {
      match: () => {
        throw new Error("boom");
      },
    },
  } as unknown as Runtime;
  const pipeline = createPipeline({
    generation: () => ({
      runtime: broken,
      limiter: new Limiter({ store: new MemoryStore({ sweepIntervalMs: 0 }), prefix: "t:" }),
    }),
    pools: new UpstreamPools(),
    metrics: new Metrics(),
    logger: createLogger("info", logs),
    inFlight,
    sustained: new SustainedDenials(() => 60_000, { onSustained: () => {}, onCount: () => {} }),
    tunnels: new Set(),
    authFailures: new AuthFailureThrottle(),
  });
  server = createServer(pipeline.handle);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.close();
});

it("answers 500 problem+json, logs the error, and keeps serving", async () => {
  for (let i = 0; i < 3; i++) {
    const r = await send(url, { path: "/x" });
    expect(r.status).toBe(500);
    expect(r.headers["content-type"]).toBe("application/problem+json");
    expect(r.json()).toMatchObject({ status: 500, title: "Internal Server Error" });
  }
  expect(inFlight.count).toBe(0);
  expect(logs.lines.filter((l) => l.msg === "request handler failed")).toHaveLength(3);
});

// Issue 13.11: a route named 検索 (before the config refused such names) put a value Node cannot
// send into RateLimit-Policy; allowed requests hung for good and denied ones answered 500. The
// config now refuses it; a header that still cannot be sent must cost the header, not the answer.
it("a rate-limit header that cannot be sent costs the header, never the answer", async () => {
  const upstream = createServer((_req, res) => res.end("upstream"));
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
  const loaded = loadConfigText(
    `
store: { url: memory:// }
upstreams: { api: http://127.0.0.1:${(upstream.address() as AddressInfo).port} }
plans: { anonymous: { routes: { search: { limit: 1, window: 1h } } } }
routes: [{ name: search, match: { path: / }, upstream: api }]
`,
    "gw.yaml",
    {},
  );
  if (!loaded.ok) throw new Error("fixture config invalid");
  // What validation now refuses, put in after it: a route name outside Latin-1.
  loaded.config.routes[0]!.name = "検索";
  loaded.config.plans.anonymous!.routes = { 検索: loaded.config.plans.anonymous!.routes.search! };
  const rt = compileRuntime(loaded.config, { file: "gw.yaml", version: loaded.version });
  const gwInFlight = { count: 0 };
  const generation = {
    runtime: rt,
    limiter: new Limiter({ store: new MemoryStore({ sweepIntervalMs: 0 }), prefix: "t:" }),
  };
  const pipeline = createPipeline({
    generation: () => generation,
    pools: new UpstreamPools(),
    metrics: new Metrics(),
    logger: createLogger("info", new LogSink()),
    inFlight: gwInFlight,
    sustained: new SustainedDenials(() => 60_000, { onSustained: () => {}, onCount: () => {} }),
    tunnels: new Set(),
    authFailures: new AuthFailureThrottle(),
  });
  const gw = createServer(pipeline.handle);
  await new Promise<void>((r) => gw.listen(0, "127.0.0.1", r));
  const gwUrl = `http://127.0.0.1:${(gw.address() as AddressInfo).port}`;
  try {
    const allowed = await send(gwUrl, { path: "/x", timeoutMs: 3000 });
    expect(allowed.status).toBe(200);
    expect(allowed.body).toBe("upstream");
    const denied = await send(gwUrl, { path: "/x", timeoutMs: 3000 });
    expect(denied.status).toBe(429);
    expect(denied.json()).toMatchObject({ status: 429 });
    expect(gwInFlight.count).toBe(0);
  } finally {
    gw.close();
    upstream.close();
  }
});
