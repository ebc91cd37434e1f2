// What the proxy's stages need around a request, without a server: a runtime compiled from YAML,
// a fixed clock, a logger that keeps its lines, real metrics. No socket, no Redis, no wall clock.
import type { IncomingMessage, ServerResponse } from "node:http";
import { pino } from "pino";
import { compileRuntime, type Runtime } from "../../../src/config/compile.js";
import { loadConfigText } from "../../../src/config/load.js";
import { AuthFailureThrottle } from "../../../src/identity/auth-failures.js";
import { Metrics } from "../../../src/observability/metrics.js";
import { SustainedDenials } from "../../../src/observability/sustained.js";
import { BodyMemory } from "../../../src/proxy/body-memory.js";
import { CallerShares } from "../../../src/proxy/caller-share.js";
import {
  type Generation,
  type ProxyEnv,
  RequestContext,
  type RequestLimiter,
} from "../../../src/proxy/context.js";
import { fakeResponse, Lines } from "./fake-http.js";

export { type FakeResponse, fakeRequest, fakeResponse, Lines } from "./fake-http.js";

export function runtimeOf(yaml: string): Runtime {
  const loaded = loadConfigText(yaml, "gw.yaml", {});
  if (!loaded.ok) throw new Error(`fixture config invalid: ${JSON.stringify(loaded.problems)}`);
  return compileRuntime(loaded.config, { file: "gw.yaml", version: loaded.version });
}

export const NOW = Date.UTC(2030, 0, 1);

export interface TestEnv extends ProxyEnv {
  lines: Lines;
  /** Moves both clocks. */
  advance(ms: number): void;
}

export function testEnv(): TestEnv {
  const lines = new Lines();
  let now = NOW;
  let monotonic = 1000;
  return {
    metrics: new Metrics(),
    logger: pino({ level: "info" }, lines),
    inFlight: { count: 0 },
    sustained: new SustainedDenials(() => 60_000, { onSustained: () => {}, onCount: () => {} }),
    authFailures: new AuthFailureThrottle(),
    bodyMemory: new BodyMemory(),
    callerShares: new CallerShares(),
    clock: { now: () => now, monotonic: () => monotonic },
    lines,
    advance(ms: number) {
      now += ms;
      monotonic += ms;
    },
  };
}

/** A limiter that must not be asked (admit and respond never do). */
export const UNUSED_LIMITER: RequestLimiter = {
  check: () => {
    throw new Error("the limiter was asked");
  },
  postCharge: () => {
    throw new Error("the limiter was asked");
  },
  settle: () => {
    throw new Error("the limiter was asked");
  },
};

/** A request context as the pipeline builds one: counted in flight. */
export function contextFor(
  env: TestEnv,
  runtime: Runtime,
  req: IncomingMessage,
  res: ServerResponse = fakeResponse(),
  limiter: RequestLimiter = UNUSED_LIMITER,
): RequestContext {
  const gen: Generation = { runtime, limiter };
  env.inFlight.count++;
  return new RequestContext(gen, req, res, "req-1", env.clock.monotonic());
}

/** The value of one labelled series of a counter, from the registry. */
export async function counter(
  env: ProxyEnv,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const metric = env.metrics.registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  const hit = values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return hit?.value ?? 0;
}
