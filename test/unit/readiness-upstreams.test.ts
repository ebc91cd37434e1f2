// /readyz and upstream health: an upstream with no healthy target is named in the reason; the
// gateway stays ready (every instance sees the same targets), and not-ready still means the store.
import { describe, expect, it } from "vitest";
import { readiness } from "../../src/admin/readiness.js";
import { StoreConnectionError } from "../../src/errors.js";
import { runtimeOf } from "./support/proxy-fakes.js";

const rt = runtimeOf(`
store: { url: "redis://10.0.0.5:6379" }
upstreams: { api: "http://127.0.0.1:1", billing: "http://127.0.0.1:2" }
routes:
  - { name: default, match: { path: / }, upstream: api, on_failure: closed }
`);
const up = { ping: async () => {} };
const down = { ping: async () => Promise.reject(new StoreConnectionError("refused")) };
const describeError = () => "limit store at 10.0.0.5:6379 refused the connection";

describe("readiness and upstream targets", () => {
  it("says nothing while every upstream has a healthy target", async () => {
    const counts = () =>
      [["api", { healthy: 1, ejected: 2 }]] as [string, { healthy: number; ejected: number }][];
    expect(await readiness(rt, up, describeError, counts)).toEqual({ ready: true });
  });

  it("names each upstream with none, and stays ready", async () => {
    const counts = () =>
      [
        ["api", { healthy: 0, ejected: 3 }],
        ["billing", { healthy: 2, ejected: 0 }],
      ] as [string, { healthy: number; ejected: number }][];
    expect(await readiness(rt, up, describeError, counts)).toEqual({
      ready: true,
      reason: 'upstream "api" has no healthy target (3 ejected)',
    });
    expect(await readiness(rt, down, describeError, counts)).toEqual({
      ready: false,
      reason:
        'limit store at 10.0.0.5:6379 refused the connection; upstream "api" has no healthy target (3 ejected)',
    });
  });
});
