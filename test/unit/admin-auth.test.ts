// Which admin token a request presents, and what its scope lets it do: the pure decision of
// auth.ts, the guard's answers (404, 401, 403 insufficient_scope), and every write route of the
// operator API refused to a read token, read from the route table so a new one is covered too.
import { describe, expect, it } from "vitest";
import {
  authenticate,
  decideAccess,
  requireAdminToken,
  scopeAllows,
  scopeNeeded,
} from "../../src/admin/auth.js";
import { type AdminDeps, createAdminHandler, operatorRoutes } from "../../src/admin/server.js";
import { compileAdminTokens } from "../../src/config/admin-tokens.js";
import { PROBLEMS } from "../../src/http/problem.js";
import type { Store } from "../../src/limits/stores/contract.js";
import { Metrics } from "../../src/observability/metrics.js";
import { fakeRequest, fakeResponse, runtimeOf } from "./support/proxy-fakes.js";

const OPS = "ops-token-0123456789abcdef";
const VIEWER = "viewer-token-0123456789abcdef";
const tokens = compileAdminTokens({
  tokens: [
    { name: "ops", token: OPS, scope: "write" },
    { name: "viewer", token: VIEWER, scope: "read" },
  ],
});

describe("scopes", () => {
  it("GET and HEAD need read; every other method, known or not, needs write", () => {
    for (const m of ["GET", "HEAD"]) expect(scopeNeeded(m)).toBe("read");
    for (const m of ["DELETE", "POST", "PUT", "PATCH", "OPTIONS", "PROPFIND", "get", "", undefined])
      expect(scopeNeeded(m), String(m)).toBe("write");
  });

  it("write covers read; read covers only read", () => {
    expect(scopeAllows("write", "write")).toBe(true);
    expect(scopeAllows("write", "read")).toBe(true);
    expect(scopeAllows("read", "read")).toBe(true);
    expect(scopeAllows("read", "write")).toBe(false);
  });
});

describe("authenticate", () => {
  it("names the token presented, whichever of the list it is", () => {
    expect(authenticate(`Bearer ${OPS}`, tokens)).toEqual({ name: "ops", scope: "write" });
    expect(authenticate(`bearer\t${VIEWER} `, tokens)).toEqual({ name: "viewer", scope: "read" });
  });

  it("nobody for a wrong, partial, empty or differently-schemed token", () => {
    for (const header of [
      undefined,
      "",
      "Bearer ",
      `Bearer ${OPS}x`,
      `Bearer ${OPS.slice(0, -1)}`,
      `Basic ${OPS}`,
    ])
      expect(authenticate(header, tokens), String(header)).toBeUndefined();
  });

  it("compares with every token: the first listed wins only when both match", () => {
    // The config refuses a token given twice; the guard still answers one name for it.
    const twice = compileAdminTokens({
      tokens: [
        { name: "a", token: "same-token", scope: "read" },
        { name: "b", token: "same-token", scope: "write" },
      ],
    });
    expect(authenticate("Bearer same-token", twice)).toEqual({ name: "a", scope: "read" });
  });

  it("admin.token alone is one write token named admin; empty is none", () => {
    const legacy = compileAdminTokens({ token: OPS });
    expect(legacy.map((t) => [t.name, t.scope])).toEqual([["admin", "write"]]);
    expect(authenticate(`Bearer ${OPS}`, legacy)).toEqual({ name: "admin", scope: "write" });
    expect(compileAdminTokens({ token: "" })).toEqual([]);
    expect(compileAdminTokens({})).toEqual([]);
  });

  it("keeps only hashes of the tokens, never their text", () => {
    expect(JSON.stringify(tokens.map((t) => ({ ...t, digest: t.digest.toString("latin1") })))).not.toContain(
      OPS,
    );
  });
});

describe("decideAccess", () => {
  it.each([
    ["no tokens", "GET", `Bearer ${OPS}`, [], "disabled"],
    ["no credential", "GET", undefined, tokens, "unauthenticated"],
    ["a wrong token, even on a read", "GET", "Bearer nope", tokens, "unauthenticated"],
    ["a read token reading", "GET", `Bearer ${VIEWER}`, tokens, "allowed"],
    ["a read token on HEAD", "HEAD", `Bearer ${VIEWER}`, tokens, "allowed"],
    ["a read token on DELETE", "DELETE", `Bearer ${VIEWER}`, tokens, "forbidden"],
    ["a read token on POST", "POST", `Bearer ${VIEWER}`, tokens, "forbidden"],
    ["a read token on PUT", "PUT", `Bearer ${VIEWER}`, tokens, "forbidden"],
    ["a read token on PATCH", "PATCH", `Bearer ${VIEWER}`, tokens, "forbidden"],
    ["a write token on DELETE", "DELETE", `Bearer ${OPS}`, tokens, "allowed"],
    ["a write token reading", "GET", `Bearer ${OPS}`, tokens, "allowed"],
  ] as const)("%s: %s", (_what, method, header, list, kind) => {
    expect(decideAccess(method, header, list).kind).toBe(kind);
  });

  it("a forbidden request says who it was and which scope it needed", () => {
    expect(decideAccess("DELETE", `Bearer ${VIEWER}`, tokens)).toEqual({
      kind: "forbidden",
      principal: { name: "viewer", scope: "read" },
      needed: "write",
    });
  });
});

describe("the guard's answers", () => {
  const guard = requireAdminToken(() => tokens);
  const ask = (method: string, authorization?: string) => {
    const res = fakeResponse();
    const headers: [string, string][] = [["host", "admin"]];
    if (authorization) headers.push(["authorization", authorization]);
    const passed = guard(fakeRequest({ method, url: "/admin/reload", headers }), res);
    return { passed, res };
  };

  it("two Authorization lines: 401 whichever comes first, as the proxy listener refuses them", () => {
    for (const pair of [
      [`Bearer ${VIEWER}`, `Bearer ${OPS}`],
      [`Bearer ${OPS}`, `Bearer ${VIEWER}`],
      [`Bearer ${OPS}`, `Bearer ${OPS}`],
    ]) {
      const res = fakeResponse();
      const headers: [string, string][] = [
        ["host", "admin"],
        ["Authorization", pair[0]!],
        ["authorization", pair[1]!],
      ];
      expect(guard(fakeRequest({ method: "GET", url: "/admin/config", headers }), res)).toBe(false);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toMatchObject({ detail: expect.stringContaining("send one Authorization header") });
    }
  });

  it("a read token on a write: 403 insufficient_scope naming the scope needed, RFC 6750's header", () => {
    const { passed, res } = ask("POST", `Bearer ${VIEWER}`);
    expect(passed).toBe(false);
    expect(res.statusCode).toBe(403);
    expect(res.headers["content-type"]).toBe("application/problem+json");
    expect(res.json()).toEqual({
      type: PROBLEMS.insufficient_scope.type,
      title: "Forbidden",
      status: 403,
      detail: 'the token "viewer" has scope read; POST needs scope write: use a token with scope write',
      required_scope: "write",
    });
    expect(res.headers["www-authenticate"]).toBe(
      'Bearer realm="tollgate-admin", error="insufficient_scope", scope="write"',
    );
    expect(res.body).not.toContain(VIEWER);
  });

  it("passes the principal on; stays 401 without a known token and 404 without any", () => {
    expect(ask("GET", `Bearer ${VIEWER}`).passed).toEqual({ name: "viewer", scope: "read" });
    expect(ask("DELETE", `Bearer ${OPS}`).passed).toEqual({ name: "ops", scope: "write" });
    const unknown = ask("DELETE", "Bearer nope");
    expect(unknown.res.statusCode).toBe(401);
    const none = requireAdminToken(() => []);
    const res = fakeResponse();
    expect(none(fakeRequest({ method: "GET", url: "/admin/config" }), res)).toBe(false);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ type: PROBLEMS.admin_disabled.type });
  });
});

describe("every write route of the operator API, from its route table", () => {
  const rt = runtimeOf(`
store: { url: "memory://" }
upstreams: { api: "http://127.0.0.1:1" }
admin:
  tokens:
    - { name: ops, token: ${OPS}, scope: write }
    - { name: viewer, token: ${VIEWER}, scope: read }
clients: [{ id: acme, key: acme-key, plan: free }]
plans: { free: { global: { rate: 1/s, burst: 10 } } }
routes: [{ name: default, match: { path: /api }, upstream: api }]
`);
  let reloads = 0;
  const deps: AdminDeps = {
    runtime: () => rt,
    store: () => ({}) as Store,
    limiter: () => ({ flushDenials: async () => {}, forgetDenials: () => {} }),
    // Present, so the usage routes are in the table too.
    usage: () => ({ read: async () => ({}) as never, listPage: async () => ({}) as never }),
    metrics: new Metrics(),
    reload: async () => {
      reloads++;
      return { ok: true, version: "v", changed: false, restartRequired: [] };
    },
  };
  const writes = operatorRoutes(deps).filter((r) => r.method !== "GET" && r.method !== "HEAD");
  /** A path the pattern matches: each parameter replaced by a plausible value. */
  const pathOf = (pattern: string) =>
    pattern.replace(/\{(\w+)(\.\.\.)?\}/g, (_m, name: string) =>
      name === "caller" ? "client:acme" : name === "name" ? "free.global" : "x",
    );

  it("has write routes to check (the table is read, not empty)", () => {
    expect(writes.map((r) => `${r.method} ${r.pattern}`)).toEqual(
      expect.arrayContaining([
        "DELETE /admin/callers/{caller...}",
        "DELETE /admin/limits/{name}",
        "POST /admin/reload",
      ]),
    );
  });

  it("answers each with 403 to a read token, before the endpoint runs", async () => {
    const admin = createAdminHandler(deps);
    for (const route of writes) {
      const res = fakeResponse();
      const headers: [string, string][] = [
        ["host", "admin"],
        ["authorization", `Bearer ${VIEWER}`],
      ];
      await admin(fakeRequest({ method: route.method, url: pathOf(route.pattern), headers }), res);
      expect(res.statusCode, `${route.method} ${route.pattern}`).toBe(403);
      expect(res.json()).toMatchObject({ required_scope: "write" });
    }
    expect(reloads).toBe(0);
  });
});
