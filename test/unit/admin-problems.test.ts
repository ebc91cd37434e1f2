// The admin API answers its errors from the same problem table as the gateway, and its 500 says
// nothing internal: the error goes to the log under a request id, and only the id goes back.

import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { createAdminHandler } from "../../src/admin/server.js";
import type { Runtime } from "../../src/config/compile.js";
import { PROBLEMS, type ProblemCode } from "../../src/http/problem.js";
import type { Store } from "../../src/limits/stores/contract.js";
import { Metrics } from "../../src/observability/metrics.js";
import { fakeRequest, fakeResponse, Lines } from "./support/fake-http.js";
import { runtimeOf } from "./support/proxy-fakes.js";

const yaml = (token: string) => `
store: { url: "memory://" }
upstreams: { api: "http://127.0.0.1:1" }
admin: { token: "${token}" }
clients: [{ id: acme, key: acme-key, plan: free }]
plans: { free: { routes: { default: { rate: 1/s, burst: 10 } } } }
routes: [{ name: default, match: { path: /api }, upstream: api }]
`;
const withToken = runtimeOf(yaml("s3cret-admin-token-0123456789"));
const withoutToken = runtimeOf(yaml(""));
const AUTH = { authorization: "Bearer s3cret-admin-token-0123456789" };

function handler(runtime: () => Runtime, flushDenials: () => Promise<void> = async () => {}) {
  const lines = new Lines();
  const admin = createAdminHandler({
    runtime,
    // Never read: every answer here comes before the store, or from a failed flush.
    store: () => ({}) as Store,
    limiter: () => ({ flushDenials, forgetDenials: () => {} }),
    metrics: new Metrics(),
    reload: async () => ({ ok: true, version: "v", changed: false, restartRequired: [] }),
    describeStoreError: () => "limit store unreachable at 10.0.0.1:6379 (connection refused)",
    logger: pino({ level: "info" }, lines),
  });
  return { admin, lines };
}

async function ask(
  admin: ReturnType<typeof handler>["admin"],
  method: string,
  url: string,
  headers: Record<string, string> = {},
) {
  const res = fakeResponse();
  const pairs: [string, string][] = [["host", "admin"], ...Object.entries(headers)];
  await admin(fakeRequest({ method, url, headers: pairs }), res);
  return res;
}

describe("admin API problems", () => {
  it.each<[string, () => Runtime, string, string, Record<string, string>, ProblemCode]>([
    ["the operator API without a token", () => withoutToken, "GET", "/admin/config", {}, "admin_disabled"],
    ["no credential", () => withToken, "GET", "/admin/config", {}, "unauthorized"],
    ["an endpoint that does not exist", () => withToken, "GET", "/admin/nothing", AUTH, "no_endpoint"],
    ["a path outside /admin that does not exist", () => withToken, "GET", "/nothing", {}, "no_endpoint"],
    [
      "a method an endpoint does not take",
      () => withToken,
      "PUT",
      "/admin/config",
      AUTH,
      "method_not_allowed",
    ],
    ["GET /admin/reload", () => withToken, "GET", "/admin/reload", AUTH, "method_not_allowed"],
    ["a caller name that is not one", () => withToken, "GET", "/admin/callers/nobody", AUTH, "bad_caller"],
    [
      "a caller name that is not UTF-8",
      () => withToken,
      "GET",
      "/admin/callers/client:%80",
      AUTH,
      "bad_caller",
    ],
    ["an IP caller that is no address", () => withToken, "GET", "/admin/callers/ip:nope", AUTH, "bad_caller"],
    [
      "a client not in the config",
      () => withToken,
      "GET",
      "/admin/callers/client:ghost",
      AUTH,
      "unknown_caller",
    ],
  ])("%s", async (_what, runtime, method, url, headers, code) => {
    const res = await ask(handler(runtime).admin, method, url, headers);
    expect(res.statusCode).toBe(PROBLEMS[code].status);
    expect(res.headers["content-type"]).toBe("application/problem+json");
    expect(res.json()).toMatchObject({ type: PROBLEMS[code].type, title: PROBLEMS[code].title });
  });

  it("a store that fails an admin read: 503 store-unavailable in the operator's words", async () => {
    const { admin } = handler(
      () => withToken,
      () => Promise.reject(new Error("Stream isn't writeable")),
    );
    const res = await ask(admin, "GET", "/admin/callers/client:acme", AUTH);
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({
      type: PROBLEMS.store_unavailable.type,
      detail: "limit store unreachable at 10.0.0.1:6379 (connection refused)",
    });
  });

  it("a reload refused: 400 config-refused with the file's errors", async () => {
    const lines = new Lines();
    const admin = createAdminHandler({
      runtime: () => withToken,
      store: () => {
        throw new Error("unused");
      },
      limiter: () => ({ flushDenials: async () => {}, forgetDenials: () => {} }),
      metrics: new Metrics(),
      reload: async () => ({
        ok: false,
        problems: [
          { file: "gw.yaml", line: 1, column: 1, path: "routes", message: "at least one route is needed" },
        ],
      }),
      logger: pino({ level: "info" }, lines),
    });
    const res = await ask(admin, "POST", "/admin/reload", AUTH);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ type: PROBLEMS.config_refused.type, errors: [expect.any(String)] });
  });

  it("a bug: 500 internal-error naming the request id only; the error goes to the log", async () => {
    const secret = "cannot read /etc/tollgate/secret-key.pem";
    const { admin, lines } = handler(() => {
      throw new Error(secret);
    });
    const res = await ask(admin, "GET", "/admin/config", { ...AUTH, "x-request-id": "op-42" });
    expect(res.statusCode).toBe(500);
    expect(res.headers["x-request-id"]).toBe("op-42");
    expect(res.body).not.toContain("secret-key");
    expect(res.json()).toEqual({
      type: PROBLEMS.internal_error.type,
      title: "Internal Server Error",
      status: 500,
      detail: "the admin API failed to handle this request; see the gateway's log for request_id op-42",
    });
    expect(lines.lines).toEqual([
      expect.objectContaining({
        msg: "admin request failed",
        request_id: "op-42",
        path: "/admin/config",
        err: expect.objectContaining({ message: secret }),
      }),
    ]);
  });
});
