// GET /admin/usage/{caller} and GET /admin/usage, asked through the admin handler as an operator
// asks them, over the in-process ledger at a fixed time: the answer's shape, the default period
// (the current month of calendar.tz), how callers and IP addresses are read, every 400 naming its
// fix, paging, HEAD, and a store failure as a 503.

import { describe, expect, it } from "vitest";
import { usageEndpoints } from "../../src/admin/endpoints/usage.js";
import { createAdminHandler } from "../../src/admin/server.js";
import { fromStoreDescribedBy } from "../../src/admin/store-failure.js";
import type { Store } from "../../src/limits/stores/contract.js";
import { Metrics } from "../../src/observability/metrics.js";
import type { UsageEntry, UsageLedger } from "../../src/usage/ledger.js";
import { MemoryLedger } from "../../src/usage/memory-ledger.js";
import { expectProblem } from "./support/problems.js";
import { fakeRequest, fakeResponse, runtimeOf } from "./support/proxy-fakes.js";

const TOKEN = "s3cret-admin-token-0123456789";
const rt = runtimeOf(`
store: { url: "memory://", prefix: "tg:" }
upstreams: { api: "http://127.0.0.1:1" }
admin: { token: "${TOKEN}" }
calendar: { tz: Europe/Berlin }
routes:
  - { name: chat, match: { path: /v1/chat }, upstream: api }
`);
/** 2026-11-30 23:30 UTC: 1 December 00:30 in Berlin. */
const NOW = Date.UTC(2026, 10, 30, 23, 30);

function ledgerWith(entries: UsageEntry[]): MemoryLedger {
  const ledger = new MemoryLedger({
    settings: () => ({ prefix: "tg:", tz: "Europe/Berlin", retentionMs: 90 * 86_400_000 }),
    now: () => NOW,
  });
  for (const e of entries) void ledger.record(e);
  return ledger;
}

const at = (caller: string, tokens: number, tenant?: string): UsageEntry => ({
  caller,
  tenant,
  limits: ["chat.monthly"],
  tokens,
  atMs: NOW,
});

const ledger = ledgerWith([
  at("client:alice", 100, "acme"),
  at("client:alice", 20, "acme"),
  at("client:bob", 5, "acme"),
  at("ip:2001:db8::/64", 1),
  at("client:carol", 7, "globex"),
]);

function admin(usage: Pick<UsageLedger, "read" | "listPage"> = ledger) {
  return createAdminHandler({
    runtime: () => rt,
    store: () => ({}) as Store,
    limiter: () => ({ flushDenials: async () => {}, forgetDenials: () => {} }),
    usage: () => usage,
    metrics: new Metrics(),
    reload: async () => ({ ok: true, version: "v", changed: false, restartRequired: [] }),
    describeStoreError: () => "limit store unreachable at 127.0.0.1:6390 (connection refused)",
  });
}

async function ask(url: string, method = "GET", usage?: Pick<UsageLedger, "read" | "listPage">) {
  const res = fakeResponse();
  const headers: [string, string][] = [
    ["host", "admin"],
    ["authorization", `Bearer ${TOKEN}`],
  ];
  await admin(usage)(fakeRequest({ method, url, headers }), res);
  return res;
}

describe("GET /admin/usage/{caller}", () => {
  it("answers a caller's tokens and requests per budget in a month or a day", async () => {
    const res = await ask("/admin/usage/client:alice?period=2026-12");
    expect(res.statusCode).toBe(200);
    expect(res.headers["cache-control"]).toBe("no-store");
    expect(res.json()).toEqual({
      caller: "client:alice",
      period: "2026-12",
      tenant: "acme",
      limits: { "chat.monthly": { tokens: 120, requests: 2 } },
    });
    expect((await ask("/admin/usage/client:alice?period=2026-12-01")).json()).toMatchObject({
      period: "2026-12-01",
      limits: { "chat.monthly": { tokens: 120, requests: 2 } },
    });
    // Berlin's November ended before these requests.
    expect((await ask("/admin/usage/client:alice?period=2026-11")).json()).toMatchObject({ limits: {} });
  });

  it("reads a tenant as the sum of its clients, and a caller never recorded as no limits", async () => {
    expect((await ask("/admin/usage/tenant:acme?period=2026-12")).json()).toEqual({
      caller: "tenant:acme",
      period: "2026-12",
      limits: { "chat.monthly": { tokens: 125, requests: 3 } },
    });
    const res = await ask("/admin/usage/client:nobody?period=2026-12");
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ caller: "client:nobody", period: "2026-12", limits: {} });
  });

  it("reads an IPv6 address as the prefix its requests were recorded under", async () => {
    for (const caller of ["ip:2001:db8::1", "ip:2001:db8::/64", "ip:2001:DB8:0:0:ffff::9"]) {
      expect((await ask(`/admin/usage/${caller}?period=2026-12`)).json()).toEqual({
        caller: "ip:2001:db8::/64",
        period: "2026-12",
        limits: { "chat.monthly": { tokens: 1, requests: 1 } },
      });
    }
  });

  it("defaults to the current month of calendar.tz", async () => {
    const { show } = usageEndpoints({
      runtime: () => rt,
      usage: () => ledger,
      fromStore: fromStoreDescribedBy(() => "down"),
      now: () => NOW,
    });
    const res = fakeResponse();
    await show({ req: fakeRequest(), res, params: { caller: "client:alice" }, query: new URLSearchParams() });
    expect(res.json()).toMatchObject({ period: "2026-12", limits: { "chat.monthly": { tokens: 120 } } });
  });

  it("refuses a caller, or a period, it cannot read, naming the fix", async () => {
    expectProblem(
      await ask("/admin/usage/alice?period=2026-12"),
      "bad_caller",
      "name the caller as client:<id>, tenant:<id> or ip:<address>",
    );
    expectProblem(await ask("/admin/usage/"), "bad_caller");
    expectProblem(
      await ask("/admin/usage/ip:not-an-ip"),
      "bad_caller",
      '"not-an-ip" is not an IP address: name the caller as ip:<address>',
    );
    for (const period of ["2026-13", "2026-02-30", "12-2026", "2026-W49", "", "2026-12-01T00"]) {
      expectProblem(
        await ask(`/admin/usage/client:alice?period=${encodeURIComponent(period)}`),
        "bad_usage_query",
        `period "${period}" is neither a month nor a day: write ?period=YYYY-MM (2026-12) or ?period=YYYY-MM-DD (2026-12-01)`,
      );
    }
  });

  it("answers HEAD like GET, and a failing store with a 503 in the operator's words", async () => {
    expect((await ask("/admin/usage/client:alice?period=2026-12", "HEAD")).statusCode).toBe(200);
    const down: Pick<UsageLedger, "read" | "listPage"> = {
      read: () => Promise.reject(new Error("ECONNREFUSED")),
      listPage: () => Promise.reject(new Error("ECONNREFUSED")),
    };
    for (const url of ["/admin/usage/client:alice", "/admin/usage?by=tenant"]) {
      expectProblem(
        await ask(url, "GET", down),
        "store_unavailable",
        "limit store unreachable at 127.0.0.1:6390 (connection refused)",
      );
    }
    const put = await ask("/admin/usage/client:alice", "PUT");
    expect(put.statusCode).toBe(405);
    expect(put.headers.allow).toBe("GET, HEAD");
  });
});

describe("GET /admin/usage", () => {
  it("lists every client and IP of the period, or every tenant", async () => {
    const clients = await ask("/admin/usage?period=2026-12&by=client");
    expect(clients.json()).toEqual({
      period: "2026-12",
      by: "client",
      callers: [
        {
          caller: "client:alice",
          period: "2026-12",
          tenant: "acme",
          limits: { "chat.monthly": { tokens: 120, requests: 2 } },
        },
        {
          caller: "client:bob",
          period: "2026-12",
          tenant: "acme",
          limits: { "chat.monthly": { tokens: 5, requests: 1 } },
        },
        {
          caller: "client:carol",
          period: "2026-12",
          tenant: "globex",
          limits: { "chat.monthly": { tokens: 7, requests: 1 } },
        },
        {
          caller: "ip:2001:db8::/64",
          period: "2026-12",
          limits: { "chat.monthly": { tokens: 1, requests: 1 } },
        },
      ],
      next_cursor: null,
    });
    expect((await ask("/admin/usage?period=2026-12-01&by=tenant")).json()).toEqual({
      period: "2026-12-01",
      by: "tenant",
      callers: [
        {
          caller: "tenant:acme",
          period: "2026-12-01",
          limits: { "chat.monthly": { tokens: 125, requests: 3 } },
        },
        {
          caller: "tenant:globex",
          period: "2026-12-01",
          limits: { "chat.monthly": { tokens: 7, requests: 1 } },
        },
      ],
      next_cursor: null,
    });
    expect((await ask("/admin/usage?period=2026-11&by=tenant")).json()).toMatchObject({ callers: [] });
  });

  it("pages with limit and next_cursor", async () => {
    const first = (await ask("/admin/usage?period=2026-12&limit=3")).json();
    expect(first).toMatchObject({ by: "client", next_cursor: "3" });
    expect((first.callers as { caller: string }[]).map((c) => c.caller)).toEqual([
      "client:alice",
      "client:bob",
      "client:carol",
    ]);
    const rest = (await ask("/admin/usage?period=2026-12&limit=3&cursor=3")).json();
    expect(rest).toMatchObject({ callers: [{ caller: "ip:2001:db8::/64" }], next_cursor: null });
  });

  it("refuses a by, a cursor, a limit or a period it cannot read, naming the fix", async () => {
    expectProblem(
      await ask("/admin/usage?period=2026-12&by=caller"),
      "bad_usage_query",
      'by "caller" is not client or tenant: write ?by=client or ?by=tenant',
    );
    expectProblem(
      await ask("/admin/usage?cursor=abc"),
      "bad_usage_query",
      'cursor "abc" is not one this API gave: pass the next_cursor of the previous answer, or leave it out to start',
    );
    // One past the largest unsigned 64-bit number: Redis would refuse it as an error.
    expectProblem(await ask("/admin/usage?cursor=18446744073709551616"), "bad_usage_query");
    for (const limit of ["0", "1001", "-1", "1.5", "ten", ""]) {
      expectProblem(
        await ask(`/admin/usage?limit=${limit}`),
        "bad_usage_query",
        `limit "${limit}" is not a number of callers from 1 to 1000: write e.g. ?limit=100`,
      );
    }
    expectProblem(await ask("/admin/usage?period=2026-1"), "bad_usage_query");
  });

  it("needs the admin token like every /admin path", async () => {
    const res = fakeResponse();
    await admin()(fakeRequest({ url: "/admin/usage", headers: [["host", "admin"]] }), res);
    expect(res.statusCode).toBe(401);
  });
});
