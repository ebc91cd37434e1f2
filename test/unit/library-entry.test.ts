// The library entry, `tollgate`, is the limiter and its stores: loading it must not load the
// gateway's dependencies (undici, pino, prom-client), which a program that only limits would
// carry for nothing. `tollgate/client` loads nothing at all.
//
// How it is seen without a build: vitest runs src/ through its own module runner but imports
// packages and Node builtins with Node's native import, so a resolve hook registered in this
// worker (a fresh process per test file) sees every one of them. The gateway's entry is loaded
// last, as the control: if the hook stopped seeing undici there, the checks before it would prove
// nothing, and the test fails instead of passing vacuously.
import { register } from "node:module";
import { MessageChannel } from "node:worker_threads";
import { afterAll, describe, expect, it } from "vitest";

const GATEWAY_ONLY = ["pino", "prom-client", "undici"];

// Runs in the loader thread: posts each resolved URL, and answers a null to a flush, after every
// URL posted before it (one port delivers in order).
const HOOK = `let port;
export function initialize(data) {
  port = data.port;
  port.on("message", () => port.postMessage(null));
}
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  port.postMessage(resolved.url);
  return resolved;
}`;

const { port1, port2 } = new MessageChannel();
let resolved: string[] = [];
let flushed: (() => void) | undefined;
port1.on("message", (url: string | null) => {
  if (url === null) flushed?.();
  else resolved.push(url);
});
register(`data:text/javascript,${encodeURIComponent(HOOK)}`, {
  parentURL: import.meta.url,
  data: { port: port2 },
  transferList: [port2],
});
afterAll(() => port1.close());

/** What Node resolved while `load` ran: package names under node_modules/, builtins as `node:x`. */
async function resolvedWhile(load: () => Promise<unknown>): Promise<string[]> {
  resolved = [];
  await load();
  await new Promise<void>((done) => {
    flushed = done;
    port1.postMessage("flush");
  });
  const names = resolved.map((url) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1] ?? url);
  return [...new Set(names)].sort();
}

describe("the package's entries load only what they need", () => {
  it("tollgate/client loads no package and no Node builtin", async () => {
    expect(await resolvedWhile(() => import("../../src/client/index.js"))).toEqual([]);
  });

  it("tollgate loads none of the gateway's dependencies", async () => {
    const loaded = await resolvedWhile(() => import("../../src/index.js"));
    expect(loaded).toContain("ioredis"); // the hook saw the library load its store's client
    expect(loaded.filter((name) => GATEWAY_ONLY.includes(name))).toEqual([]);
  });

  it("tollgate/gateway loads them (the control: the hook sees what an entry loads)", async () => {
    const loaded = await resolvedWhile(() => import("../../src/gateway/index.js"));
    expect(loaded).toEqual(expect.arrayContaining(GATEWAY_ONLY));
  });
});
