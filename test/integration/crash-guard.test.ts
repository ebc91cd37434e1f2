// A throw inside the request pipeline costs that request a 500, never the process, and the
// in-flight count that shutdown waits on stays exact.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import { Metrics } from "../../src/admin/metrics.js";
import { SustainedDenials } from "../../src/admin/sustained.js";
import { compileRuntime, type Runtime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { Limiter } from "../../src/limits/limiter.js";
import { MemoryStore } from "../../src/limits/stores/memory.js";
import { createLogger } from "../../src/log.js";
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
    runtime: () => broken,
    limiter: () => new Limiter(new MemoryStore({ sweepIntervalMs: 0 }), "t:"),
    pools: new UpstreamPools(),
    metrics: new Metrics(),
    logger: createLogger("info", logs),
    inFlight,
    sustained: new SustainedDenials(() => 60_000, { onSustained: () => {}, onCount: () => {} }),
    tunnels: new Set(),
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
