// Editing the YAML under traffic: valid edits apply without a restart, invalid ones are refused
// with their position and the previous config keeps serving; nothing in flight is dropped.
import { renameSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayProcess, spawnGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const TOKEN = "admin-secret-token";

// caller_share 100%: one bulk caller holds 1000 requests at once on purpose.
const yaml = (burst: number, extra = "", connections = 128) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: \${ADMIN_TOKEN} }
log: { level: info, requests: false }
store: { url: memory:// }
upstreams:
  api: { url: \${UPSTREAM_URL}, connections: ${connections}, caller_share: 100% }
clients:
  - { id: c1, key: k1, plan: p }
  - { id: bulk, key: bulk-key, plan: big }
plans:
  p: { global: { rate: 1/m, burst: ${burst} } }
  big: { global: { rate: 100000/s, burst: 100000 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
${extra}`;

let upstream: TestUpstream;
let gw: GatewayProcess;
let file: string;

/** Replaces the file the way editors do: write a sibling, then rename over it. */
function edit(text: string): void {
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
}

const limitOf = async (key = "k1") =>
  (await send(gw.url, { path: "/x", headers: { "x-api-key": key } })).headers["ratelimit-limit"];

async function until<T>(
  what: string,
  probe: () => Promise<T>,
  ok: (v: T) => boolean,
  ms = 2000,
): Promise<number> {
  const start = performance.now();
  for (;;) {
    const v = await probe();
    if (ok(v)) return performance.now() - start;
    if (performance.now() - start > ms)
      throw new Error(`${what} not seen within ${ms} ms (last: ${String(v)})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits until no reload has been logged for 600 ms. */
async function settled(): Promise<void> {
  const reloads = () => gw.lines.filter((l) => String(l.msg).startsWith("config reload")).length;
  for (let seen = -1; seen !== reloads(); ) {
    seen = reloads();
    await new Promise((r) => setTimeout(r, 600));
  }
}

const admin = (method: string, token?: string) =>
  send(gw.adminUrl, {
    method,
    path: "/admin/reload",
    headers: token ? { authorization: `Bearer ${token}` } : {},
  });

beforeAll(async () => {
  upstream = await startUpstream();
  gw = await spawnGateway(yaml(3), { UPSTREAM_URL: upstream.url, ADMIN_TOKEN: TOKEN });
  file = String(gw.lines.find((l) => l.msg === "tollgate listening")?.config);
});
afterAll(async () => {
  await gw?.stop();
  await upstream.close();
});

describe("hot reload", () => {
  it("applies a valid edit within 2 s, without a restart", async () => {
    expect(await limitOf()).toBe("3");
    edit(yaml(5));
    const took = await until("the new burst", limitOf, (v) => v === "5");
    expect(took).toBeLessThan(2000);
    expect(gw.child.exitCode).toBeNull();
  });

  it.each([
    ["broken YAML", () => yaml(7).replace("plans:", "plans: [oops"), /:\d+:\d+: /],
    [
      "an unknown key (a typo)",
      () => yaml(7).replace("burst: 7", "brust: 7"),
      /:12:\d+: plans\.p\.global: unknown key "brust"; did you mean "burst"\?/,
    ],
    [
      "a route naming an unknown upstream",
      () => yaml(7).replace("upstream: api }", "upstream: apx }"),
      /:15:\d+: routes\[0\]\.upstream: unknown upstream "apx"/,
    ],
  ])("refuses %s with its position; the old limits keep holding", async (_what, text, expected) => {
    const before = gw.lines.filter(
      (l) => l.msg === "config reload refused; the previous config keeps serving",
    ).length;
    edit(text());
    await until(
      "the refusal in the log",
      async () =>
        gw.lines.filter((l) => l.msg === "config reload refused; the previous config keeps serving").length,
      (n) => n > before,
    );
    const refusal = gw.lines
      .filter((l) => l.msg === "config reload refused; the previous config keeps serving")
      .at(-1)!;
    expect((refusal.problems as string[]).join("\n")).toMatch(expected);
    expect(await limitOf()).toBe("5");
    const metrics = (await send(gw.adminUrl, { path: "/metrics" })).body;
    expect(metrics).toMatch(/tollgate_config_reloads_total\{result="error"\} [1-9]/);
    edit(yaml(5)); // back to the last good file
  });

  it("POST /admin/reload needs the token, answers 400 with the errors or 200 with the version", async () => {
    expect((await admin("POST")).status).toBe(401);
    expect((await admin("POST", "wrong-token")).status).toBe(401);
    expect((await admin("GET", TOKEN)).status).toBe(405);
    const logged = JSON.stringify(gw.lines);
    expect(logged).not.toContain(TOKEN);

    writeFileSync(file, yaml(5).replace("burst: 5", "burst: five"));
    const refused = await admin("POST", TOKEN);
    expect(refused.status).toBe(400);
    expect(refused.json<{ errors: string[] }>().errors[0]).toMatch(
      /:12:\d+: plans\.p\.global\.burst: .*expected number/,
    );

    writeFileSync(file, yaml(6));
    const ok = await admin("POST", TOKEN);
    expect(ok.status).toBe(200);
    expect(ok.json()).toMatchObject({ status: "reloaded", version: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(await limitOf()).toBe("6");
  });

  it("reloads on SIGHUP", async () => {
    // Reloads run on a worker thread: let those the previous test's writes started finish, or
    // one of them could read this test's file first and leave the signal nothing to change.
    await settled();
    writeFileSync(file, yaml(8));
    gw.child.kill("SIGHUP");
    await until("burst 8", limitOf, (v) => v === "8");
    // The log line travels on stdout, beside (not before) the responses that show the change.
    await until(
      "the reload's log line",
      async () => gw.lines.some((l) => l.msg === "config reloaded" && l.trigger === "signal"),
      (v) => v,
    );
  });

  it("reports settings that need a restart instead of half-applying them", async () => {
    edit(yaml(8).replace("store: { url: memory:// }", 'store: { url: memory://, prefix: "other:" }'));
    await until(
      "the restart notice",
      async () => gw.lines.some((l) => l.msg === "config reloaded; some settings only apply after a restart"),
      (v) => v,
    );
    const line = gw.lines.findLast(
      (l) => l.msg === "config reloaded; some settings only apply after a restart",
    )!;
    expect(line.restart_required).toEqual(["store.prefix"]);
    edit(yaml(8));
  });

  it("completes 1000 requests in flight across a reload that also replaces the upstream pool", async () => {
    upstream.handle = (_req, res) => setTimeout(() => res.end("slow"), 300);
    const inFlight = Array.from({ length: 1000 }, () =>
      send(gw.url, { path: "/slow", headers: { "x-api-key": "bulk-key" }, timeoutMs: 30_000 }),
    );
    await new Promise((r) => setTimeout(r, 150));
    writeFileSync(file, yaml(9, "", 64));
    expect((await admin("POST", TOKEN)).status).toBe(200);
    const replies = await Promise.all(inFlight);
    upstream.handle = null;
    expect(replies.filter((r) => r.status === 200)).toHaveLength(1000);
    expect(await limitOf()).toBe("9");
  });
});

describe("a large reload under traffic", () => {
  it("reloading a 320 KB config (2,000 plans × 2,000 routes) never stops the traffic", async () => {
    // The file is parsed and validated on a worker thread; the event loop only swaps the
    // runtime in. Before, this reload blocked every request for seconds.
    let big = `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: \${ADMIN_TOKEN} }
log: { level: info, requests: false }
store: { url: memory:// }
upstreams: { api: \${UPSTREAM_URL} }
clients:
  - { id: c1, key: k1, plan: plan-0 }
plans:
`;
    for (let p = 0; p < 2000; p++) {
      big += `  plan-${p}: { global: { rate: 100000/s, burst: 100000 }, routes: { route-${p}: { limit: 100000, window: 1m } } }\n`;
    }
    big += "routes:\n";
    for (let r = 0; r < 2000; r++)
      big += `  - { name: route-${r}, match: { path: /r${r} }, upstream: api }\n`;
    expect(big.length).toBeGreaterThan(300_000);
    const large = await spawnGateway(big, { UPSTREAM_URL: upstream.url, ADMIN_TOKEN: TOKEN });
    try {
      const probe = () => send(large.url, { path: "/r0/x", headers: { "x-api-key": "k1" } });
      expect((await probe()).status).toBe(200);
      const largeFile = String(large.lines.find((l) => l.msg === "tollgate listening")?.config);
      writeFileSync(largeFile, `${big}# edited\n`);
      let reloading = true;
      const reload = send(large.adminUrl, {
        method: "POST",
        path: "/admin/reload",
        headers: { authorization: `Bearer ${TOKEN}` },
        timeoutMs: 30_000,
      }).finally(() => {
        reloading = false;
      });
      let slowest = 0;
      let answered = 0;
      while (reloading) {
        const r = await probe();
        expect(r.status).toBe(200);
        slowest = Math.max(slowest, r.ms);
        answered++;
      }
      const result = await reload;
      expect(result.status, result.body).toBe(200);
      expect(result.json()).toMatchObject({ changed: true });
      expect(answered).toBeGreaterThan(1);
      expect(slowest).toBeLessThan(1000);
    } finally {
      await large.stop();
    }
  });
});
