// The admin listener as composed in src/admin/server.ts: which path reaches which endpoint, and
// the answers the listener has always given at its edges (a 405 outside /admin before the path
// is looked at and without Allow, the 405 details, a caller name with slashes in it).

import { describe, expect, it } from "vitest";
import { type AdminDeps, createAdminHandler } from "../../src/admin/server.js";
import type { Store } from "../../src/limits/stores/contract.js";
import { Metrics } from "../../src/observability/metrics.js";
import { expectProblem as expectProblemShared } from "./support/problems.js";
import { fakeRequest, fakeResponse, runtimeOf } from "./support/proxy-fakes.js";

const TOKEN = "s3cret-admin-token-0123456789";
const rt = runtimeOf(`
store: { url: "redis://10.0.0.5:6379" }
upstreams: { api: "http://127.0.0.1:1" }
admin: { token: "${TOKEN}" }
clients: [{ id: acme, key: acme-key, plan: free }]
plans: { free: { routes: { default: { rate: 1/s, burst: 10 } } } }
routes: [{ name: default, match: { path: /api }, upstream: api, on_failure: closed }]
`);

function handler(overrides: Partial<AdminDeps> = {}) {
  return createAdminHandler({
    runtime: () => rt,
    store: () => ({ ping: async () => {} }) as Store,
    limiter: () => ({ flushDenials: async () => {}, forgetDenials: () => {} }),
    metrics: new Metrics(),
    reload: async () => ({ ok: true, version: "v", changed: false, restartRequired: [] }),
    ...overrides,
  });
}

async function ask(method: string, url: string, options: { auth?: boolean; deps?: Partial<AdminDeps> } = {}) {
  const res = fakeResponse();
  const headers: [string, string][] = [["host", "admin"]];
  if (options.auth) headers.push(["authorization", `Bearer ${TOKEN}`]);
  await handler(options.deps)(fakeRequest({ method, url, headers }), res);
  return res;
}

describe("outside /admin: no token, GET or HEAD only", () => {
  it("/healthz answers while the process runs, to GET and HEAD", async () => {
    for (const method of ["GET", "HEAD"]) {
      const res = await ask(method, "/healthz?probe=1");
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ status: "ok" });
    }
  });

  it("/readyz: 503 with the store's address when it fails and a route fails closed", async () => {
    const res = await ask("GET", "/readyz", {
      deps: {
        store: () => ({ ping: () => Promise.reject(new Error("connect ECONNREFUSED")) }) as unknown as Store,
      },
    });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({
      status: "not ready",
      reason: expect.stringContaining("10.0.0.5:6379"),
      config_version: rt.version,
    });
    expect((await ask("GET", "/readyz")).json()).toEqual({ status: "ready", config_version: rt.version });
  });

  it("/metrics: the registry's text, or the one metricsText gives", async () => {
    const own = await ask("GET", "/metrics");
    expect(own.statusCode).toBe(200);
    expect(own.headers["content-type"]).toMatch(/^text\/plain/);
    expect(own.body).toContain("tollgate_requests_total");
    const given = await ask("GET", "/metrics", {
      deps: { metricsText: async () => ({ text: "up 1\n", contentType: "text/plain; version=0.0.4" }) },
    });
    expect(given.body).toBe("up 1\n");
  });

  it("another method: 405 use GET without Allow, on any path, known or not", async () => {
    for (const path of ["/healthz", "/nothing", "/"]) {
      const res = await ask("POST", path);
      expectProblemExact(res, "method_not_allowed", "use GET");
      expect(res.headers.allow).toBeUndefined();
    }
  });

  it("an unknown path: 404 no-endpoint", async () => {
    expectProblemExact(await ask("GET", "/nothing?x"), "no_endpoint", "no admin endpoint /nothing");
    expectProblemExact(await ask("GET", "/adminx"), "no_endpoint", "no admin endpoint /adminx");
  });
});

describe("the operator API", () => {
  it("/admin itself is behind the token, then 404", async () => {
    expect((await ask("GET", "/admin")).statusCode).toBe(401);
    expectProblemExact(await ask("GET", "/admin", { auth: true }), "no_endpoint", "no admin endpoint /admin");
  });

  it("each endpoint's 405 names what to use, and Allow its methods", async () => {
    for (const [method, path, allow, detail] of [
      ["PUT", "/admin/callers/client:acme", "GET, DELETE", "use GET or DELETE"],
      ["HEAD", "/admin/config", "GET", "use GET"],
      ["POST", "/admin/denials/top", "GET", "use GET"],
      ["GET", "/admin/reload", "POST", "use POST /admin/reload"],
    ] as const) {
      const res = await ask(method, path, { auth: true });
      expectProblemExact(res, "method_not_allowed", detail);
      expect(res.headers.allow).toBe(allow);
    }
  });

  it("a caller name is everything after /admin/callers/, slashes included", async () => {
    expectProblemExact(
      await ask("GET", "/admin/callers/client:a/b", { auth: true }),
      "unknown_caller",
      'no client "a/b" in the config or in a stored API key the config can serve (for a JWT caller, add ?plan=<plan>&tenant=<tenant>)',
    );
    expectProblemExact(
      await ask("GET", "/admin/callers/", { auth: true }),
      "bad_caller",
      "name the caller as client:<id>, tenant:<id> or ip:<address>",
    );
    expectProblemExact(
      await ask("GET", "/admin/callers", { auth: true }),
      "no_endpoint",
      "no admin endpoint /admin/callers",
    );
  });

  it("a caller name that is not UTF-8 is a 400 whatever the method", async () => {
    for (const method of ["GET", "DELETE", "PUT"]) {
      expectProblemExact(
        await ask(method, "/admin/callers/client:%80", { auth: true }),
        "bad_caller",
        "the caller name is not valid percent-encoded UTF-8; name the caller as client:<id>, tenant:<id> or ip:<address>",
      );
    }
  });

  it("reaches each endpoint", async () => {
    expect((await ask("GET", "/admin/config", { auth: true })).json()).toMatchObject({ version: rt.version });
    expect((await ask("POST", "/admin/reload", { auth: true })).json()).toMatchObject({ status: "reloaded" });
  });
});

const expectProblemExact = (
  res: Parameters<typeof expectProblemShared>[0],
  code: Parameters<typeof expectProblemShared>[1],
  detail: string,
) => expectProblemShared(res, code, detail, true);
