// What GET /admin/config shows (src/admin/describe-config.ts): the file's own notation for
// rates, durations and sizes, and nothing secret.
import { describe, expect, it } from "vitest";
import { describeConfig, formatRate, formatSize } from "../../src/admin/describe-config.js";
import { runtimeOf } from "./support/proxy-fakes.js";

describe("formatRate", () => {
  it("writes the named periods as units, any other as a duration", () => {
    expect(formatRate({ count: 5, periodMs: 1000 })).toBe("5/s");
    expect(formatRate({ count: 30, periodMs: 60_000 })).toBe("30/m");
    expect(formatRate({ count: 100, periodMs: 3_600_000 })).toBe("100/h");
    expect(formatRate({ count: 1000, periodMs: 86_400_000 })).toBe("1000/d");
    expect(formatRate({ count: 7, periodMs: 10_000 })).toBe("7/10s");
    expect(formatRate({ count: 1, periodMs: 1500 })).toBe("1/1500ms");
  });
});

describe("formatSize", () => {
  it("takes the largest unit that divides the size", () => {
    expect(formatSize(1024 ** 3)).toBe("1gb");
    expect(formatSize(1024 ** 2)).toBe("1mb");
    expect(formatSize(3 * 1024 ** 2)).toBe("3mb");
    expect(formatSize(64 * 1024)).toBe("64kb");
    expect(formatSize(1536 * 1024)).toBe("1536kb");
    expect(formatSize(1500)).toBe("1500b");
    expect(formatSize(0)).toBe("0b");
  });
});

describe("describeConfig", () => {
  const rt = runtimeOf(`
store: { url: "redis://:hunter2-password@10.0.0.5:6379/0", prefix: "tg:", timeout: 100ms }
upstreams: { api: "http://127.0.0.1:1" }
admin: { token: "s3cret-admin-token-0123456789" }
clients: [{ id: acme, key: acme-secret-key, plan: p, tenant: t1 }, { id: solo, key: solo-secret-key, plan: p }]
plans:
  p:
    global: { rate: 5/s, burst: 10 }
    tenant: { rate: 100/h, burst: 100 }
    routes:
      login: { algorithm: sliding_window, limit: 5, window: 15m }
      export: { algorithm: concurrency, max_in_flight: 2, lease: 90s }
routes:
  - { name: login, match: { path: /login, methods: [POST] }, upstream: api, on_failure: closed }
  - { name: export, match: { path: /export, host: "*.Example.com" }, upstream: api, max_body: 1mb, by: tenant }
  - name: default
    match: { path: / }
    upstream: api
    limits: { total: { rate: 500/s, burst: 1000 }, per-org: { limit: 50, window: 1m, by: [caller, "header:x-org-id"] } }
`);
  const body = describeConfig(rt);
  const text = JSON.stringify(body);

  it("writes rates, windows, leases, sizes and timeouts as the file does", () => {
    expect(body.plans).toEqual({
      p: {
        global: { rate: "5/s", burst: 10 },
        tenant: { rate: "100/h", burst: 100 },
        routes: {
          login: { algorithm: "sliding_window", limit: 5, window: "15m" },
          export: { algorithm: "concurrency", max_in_flight: 2, lease: "90s" },
        },
      },
    });
    expect(body.routes.map((r) => [r.name, r.path, r.host, r.methods, r.max_body, r.on_failure])).toEqual([
      ["login", "/login", null, ["POST"], null, "closed"],
      ["export", "/export", "*.example.com", null, "1mb", expect.any(String)],
      ["default", "/", null, null, null, expect.any(String)],
    ]);
    expect(body.routes.map((r) => r.limits)).toEqual([
      {},
      {},
      {
        total: { rate: "500/s", burst: 1000 },
        "per-org": { limit: 50, window: "1m", by: ["caller", "header:x-org-id"] },
      },
    ]);
    expect(body.store).toMatchObject({ kind: "redis", prefix: "tg:", timeout: "100ms" });
    expect(body.clients).toEqual([
      { id: "acme", plan: "p", tenant: "t1" },
      { id: "solo", plan: "p", tenant: null },
    ]);
  });

  it("never shows a key, the admin token or a store password", () => {
    for (const secret of ["acme-secret-key", "solo-secret-key", "s3cret-admin-token", "hunter2-password"])
      expect(text).not.toContain(secret);
    expect(text).not.toMatch(/periodMs|timeout_ms|900000/);
  });
});
