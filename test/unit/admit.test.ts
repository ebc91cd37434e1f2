// The admit stage, driven with fake requests: what it refuses, with which problem and label, in
// which order, and what it learns about a request it lets through. No server, no Redis, no clock.
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { MAX_REQUEST_HEADERS } from "../../src/http/request-framing.js";
import { admit } from "../../src/proxy/admit.js";
import { type Admitted, Refusal, type RequestContext } from "../../src/proxy/context.js";
import { contextFor, counter, fakeRequest, fakeResponse, runtimeOf, testEnv } from "./support/proxy-fakes.js";

const rt = runtimeOf(`
store: { url: "memory://" }
upstreams: { api: "http://127.0.0.1:1" }
identity:
  api_key: { header: x-api-key, bearer: true }
  trusted_proxies: [10.0.0.0/8]
  auth_failures: { limit: 2, window: 1m }
clients:
  - { id: acme, key: acme-key, plan: free, tenant: acme }
  - { id: blocked, key: blocked-key, plan: free }
  - { id: vip, key: vip-key, plan: free }
plans:
  anonymous: { routes: { default: { rate: 1/s, burst: 10 } } }
  free: { routes: { default: { rate: 1/s, burst: 10 } } }
routes:
  - { name: login, match: { path: /login, methods: [POST] }, upstream: api }
  - { name: default, match: { path: /api }, upstream: api, max_body: 1kb }
deny: { ips: [198.51.100.0/24], clients: [blocked] }
exempt: { ips: [192.0.2.1/32], clients: [vip] }
`);

const HOST: [string, string] = ["Host", "gw.test"];

function run(init: Parameters<typeof fakeRequest>[0], env = testEnv()) {
  const res = fakeResponse();
  const ctx = contextFor(env, rt, fakeRequest(init), res);
  return { ctx, res, env, admission: admit(ctx, env) };
}

/** The refusal admit gave synchronously. */
function refusalOf(admission: ReturnType<typeof admit>): Refusal {
  expect(admission).toBeInstanceOf(Refusal);
  return admission as Refusal;
}

function admittedOf(admission: ReturnType<typeof admit>, ctx: RequestContext): Admitted {
  expect(admission).toBe(ctx);
  return admission as Admitted;
}

describe("admit refuses", () => {
  it("CONNECT with 405, Allow, and the connection closed", () => {
    const r = refusalOf(run({ method: "CONNECT", url: "example.com:443", headers: [HOST] }).admission);
    expect(r).toMatchObject({ code: "method_not_allowed", decision: "bad_request" });
    expect(r.headers).toEqual({
      allow: "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
      connection: "close",
    });
  });

  it.each([
    ["no Host on HTTP/1.1", [] as [string, string][], "an HTTP/1.1 request needs a Host header"],
    ["two Host fields", [HOST, ["host", "evil.test"]], "more than one Host header"],
    [
      "two Authorization fields",
      [HOST, ["Authorization", "Bearer a"], ["authorization", "Bearer b"]],
      "more than one Authorization header",
    ],
    ["a Transfer-Encoding not ending in chunked", [HOST, ["Transfer-Encoding", "gzip"]], "Transfer-Encoding"],
  ])("%s as bad_request (never bad_path), closing the connection", (_what, headers, detail) => {
    const r = refusalOf(run({ url: "/api", headers: headers as [string, string][] }).admission);
    expect(r.code).toBe("bad_request");
    expect(r.decision).toBe("bad_request");
    expect(r.detail).toContain(detail);
    expect(r.headers).toEqual({ connection: "close" });
  });

  it("a request line without an HTTP version (HTTP/0.9) as bad_request, closing the connection", () => {
    const r = refusalOf(run({ url: "/api", headers: [HOST], httpVersion: "0.9" }).admission);
    expect(r).toMatchObject({ code: "bad_request", decision: "bad_request" });
    expect(r.detail).toContain("no HTTP version");
    expect(r.headers).toEqual({ connection: "close" });
  });

  it("too many header fields with 431", () => {
    const headers: [string, string][] = [HOST];
    for (let i = 0; i < MAX_REQUEST_HEADERS; i++) headers.push([`x-pad-${i}`, "1"]);
    const r = refusalOf(run({ url: "/api", headers }).admission);
    expect(r.code).toBe("headers_too_large");
  });

  it("an unusable path as bad_path, and only that", () => {
    const r = refusalOf(run({ url: "/api/%zz", headers: [HOST] }).admission);
    expect(r).toMatchObject({ code: "bad_path", decision: "bad_request" });
    expect(r.detail).toMatch(/^the request path cannot be used: /);
  });

  it("a path no route matches, naming method and path", () => {
    const { admission, ctx } = run({ url: "/nowhere?q=1", headers: [HOST] });
    expect(refusalOf(admission)).toMatchObject({
      code: "no_route",
      decision: "no_route",
      detail: "no route matches GET /nowhere",
    });
    expect(ctx.path).toBe("/nowhere");
    expect(ctx.routeName).toBe("");
  });

  it("a method the route does not take as no route", () => {
    expect(refusalOf(run({ url: "/login", headers: [HOST] }).admission).code).toBe("no_route");
  });

  it("a connection without a usable peer address as bad_request", () => {
    const r = refusalOf(run({ url: "/api", headers: [HOST], remoteAddress: undefined }).admission);
    expect(r).toMatchObject({ code: "bad_request", decision: "bad_request" });
    expect(r.detail).toBe("the connection has no usable peer address");
  });

  it("a denied address before its credential is read (a valid key is not told from an invalid one)", () => {
    for (const key of ["acme-key", "no-such-key"]) {
      const { admission, ctx } = run({
        url: "/api",
        headers: [HOST, ["x-api-key", key]],
        remoteAddress: "198.51.100.9",
      });
      expect(refusalOf(admission)).toMatchObject({ code: "caller_denied", decision: "caller_denied" });
      expect(ctx.caller).toBeUndefined();
    }
  });

  it("a denied address behind a trusted proxy, read from X-Forwarded-For", () => {
    const r = run({
      url: "/api",
      headers: [HOST, ["X-Forwarded-For", "198.51.100.9"]],
      remoteAddress: "10.1.2.3",
    }).admission;
    expect(refusalOf(r).code).toBe("caller_denied");
  });

  it("an unknown key with 401, counting the failure; past the limit, known keys still pass and others get 429 unread", async () => {
    const env = testEnv();
    const unknown = { url: "/api", headers: [HOST, ["x-api-key", "guess"]] as [string, string][] };
    for (let i = 0; i < 2; i++) {
      const r = refusalOf(run(unknown, env).admission);
      expect(r).toMatchObject({ code: "unauthorized", decision: "unauthorized" });
    }
    expect(await counter(env, "tollgate_auth_failures_total", { reason: "unknown_key" })).toBe(2);
    env.advance(20_000);
    // A key the config holds is told valid by a hash and a map: a flood from a shared address
    // does not lock it out.
    const { admission, ctx } = run({ url: "/api", headers: [HOST, ["x-api-key", "acme-key"]] }, env);
    expect(admittedOf(admission, ctx).caller).toMatchObject({ kind: "client", id: "acme" });
    // Anything it cannot tell valid so cheaply is refused before it is looked up.
    const throttled = refusalOf(run(unknown, env).admission);
    expect(throttled).toMatchObject({
      code: "quota_exceeded",
      decision: "auth_throttled",
      retryAfterSeconds: 40,
      detail:
        "More than 2 invalid credentials came from this address; a credential this gateway has not served before is refused for 40 s.",
    });
    expect(await counter(env, "tollgate_auth_failures_total", { reason: "throttled" })).toBe(1);
    // A throttled request is not counted as one more failure.
    expect(await counter(env, "tollgate_auth_failures_total", { reason: "unknown_key" })).toBe(2);
    // A request without a credential is not throttled: it has nothing to guess with.
    expect(run({ url: "/api", headers: [HOST] }, env).admission).not.toBeInstanceOf(Refusal);
    env.advance(40_000);
    expect(refusalOf(run(unknown, env).admission)).toMatchObject({ code: "unauthorized" });
  });

  it("past the limit, a stored key this instance has served passes; one it has not is never looked up", async () => {
    const env = testEnv();
    const looked: string[] = [];
    const served = createHash("sha256").update("tg_served").digest("hex");
    const acme = rt.clientsByKeyHash.values().next().value!;
    env.storedKeys = {
      cached: (hash) => (hash === served ? { kind: "client", client: acme } : undefined),
      find: (hash) => {
        looked.push(hash);
        return hash === served ? { kind: "client", client: acme } : { kind: "unknown", throttled: false };
      },
    };
    for (let i = 0; i < 2; i++)
      refusalOf(run({ url: "/api", headers: [HOST, ["x-api-key", `bad-${i}`]] }, env).admission);
    expect(looked).toHaveLength(2);
    const { admission, ctx } = run({ url: "/api", headers: [HOST, ["x-api-key", "tg_served"]] }, env);
    expect(admittedOf(admission, ctx).caller).toMatchObject({ kind: "client", id: "acme" });
    expect(
      refusalOf(run({ url: "/api", headers: [HOST, ["x-api-key", "tg_never_seen"]] }, env).admission),
    ).toMatchObject({
      decision: "auth_throttled",
    });
    expect(looked).toHaveLength(2);
  });

  it("a denied client with 403, after it is known (the log names it)", () => {
    const { admission, ctx } = run({ url: "/api", headers: [HOST, ["x-api-key", "blocked-key"]] });
    expect(refusalOf(admission)).toMatchObject({ code: "caller_denied", decision: "caller_denied" });
    expect(ctx.caller).toMatchObject({ kind: "client", id: "blocked" });
  });

  it("a body announced larger than max_body with 413, before any limit, closing the connection", () => {
    const r = refusalOf(run({ url: "/api", headers: [HOST, ["Content-Length", "1025"]] }).admission);
    expect(r).toMatchObject({
      code: "body_too_large",
      decision: "bad_request",
      detail: "the request body is larger than 1024 bytes, this route's max_body",
      headers: { connection: "close" },
    });
    expect(run({ url: "/api", headers: [HOST, ["Content-Length", "1024"]] }).admission).not.toBeInstanceOf(
      Refusal,
    );
  });
});

describe("admit lets through", () => {
  it("a request with its route, peer, address, caller and upstream path", () => {
    const { admission, ctx } = run({
      url: "/api/v1/../items?q=1",
      headers: [HOST, ["x-api-key", "acme-key"]],
    });
    const a = admittedOf(admission, ctx);
    expect(a.route.name).toBe("default");
    expect(a.routeName).toBe("default");
    expect(a.path).toBe("/api/items");
    expect(a.pathAndQuery).toBe("/api/items?q=1");
    expect(a.peer.text).toBe("203.0.113.7");
    expect(a.peerTrusted).toBe(false);
    expect(a.forwardedFor).toBeUndefined();
    expect(a.caller).toMatchObject({ kind: "client", id: "acme", tenant: "acme" });
    expect(a.credentialHeader).toBe("x-api-key");
    expect(a.exempt).toBe(false);
  });

  it("an anonymous caller known by its address", () => {
    const { admission, ctx } = run({ url: "/api", headers: [HOST] });
    expect(admittedOf(admission, ctx).caller).toMatchObject({ kind: "anonymous", ipKey: "203.0.113.7" });
  });

  it("a trusted proxy's client, by the address it forwards, extending its X-Forwarded-For", () => {
    const { admission, ctx } = run({
      url: "/api",
      headers: [HOST, ["X-Forwarded-For", "192.0.2.50"]],
      remoteAddress: "10.1.2.3",
    });
    const a = admittedOf(admission, ctx);
    expect(a.peerTrusted).toBe(true);
    expect(a.forwardedFor).toBe("192.0.2.50");
    expect(a.ipKey).toBe("192.0.2.50");
    expect(a.peer.text).toBe("10.1.2.3");
  });

  it("exempt callers, by client and by address", () => {
    const byClient = run({ url: "/api", headers: [HOST, ["x-api-key", "vip-key"]] });
    expect(admittedOf(byClient.admission, byClient.ctx).exempt).toBe(true);
    const byIp = run({ url: "/api", headers: [HOST], remoteAddress: "192.0.2.1" });
    expect(admittedOf(byIp.admission, byIp.ctx).exempt).toBe(true);
  });

  it("an Expect: 100-continue request marked to close until it is let in, its keep-alive kept for then", () => {
    const { admission, ctx, res } = run({ url: "/api", headers: [HOST, ["Expect", "100-Continue"]] });
    admittedOf(admission, ctx);
    expect(ctx.keepAliveAfterContinue).toBe(true);
    expect(res.shouldKeepAlive).toBe(false);
    const plain = run({ url: "/api", headers: [HOST] });
    expect(plain.ctx.keepAliveAfterContinue).toBeUndefined();
    expect(plain.res.shouldKeepAlive).toBe(true);
  });
});
