// The console's server side on a real admin listener: its files under a strict CSP, signing in
// with an admin token for an HttpOnly SameSite=Strict cookie, the admin API answering that
// cookie with the token's scope, every action refused without the session's CSRF token, signing
// out ending the session, and a token a reload removes ending its sessions. The page itself is
// driven by Chromium in test/e2e/console.test.ts.
import { readFileSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const OPS = "ops-token-for-the-console-tests-0123456789";
const VIEWER = "viewer-token-for-the-console-tests-0123456789";

const yaml = (upstream: string, tokens: string) => `
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  tokens:
${tokens}
log: { level: warn, requests: false }
store: { url: "memory://" }
upstreams: { api: ${upstream} }
clients:
  - { id: acme, key: acme-key, plan: free }
plans:
  free: { global: { rate: 1/s, burst: 5 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`;
const BOTH = `    - { name: ops, token: ${OPS}, scope: write }\n    - { name: viewer, token: ${VIEWER}, scope: read }`;

let upstream: TestUpstream;
let gw: InProcessGateway;

beforeAll(async () => {
  upstream = await startUpstream();
  gw = await startGateway(yaml(upstream.url, BOTH));
});
afterAll(async () => {
  await gw?.stop();
  await upstream?.close();
});

async function signIn(
  token: string,
): Promise<{ cookie: string; csrf: string; setCookie: string; scope: string }> {
  const r = await send(gw.adminUrl, {
    method: "POST",
    path: "/admin/ui/session",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token }),
  });
  expect(r.status, r.body).toBe(200);
  const setCookie = String(r.headers["set-cookie"]);
  const body = r.json() as { csrf: string; scope: string };
  return { cookie: setCookie.split(";")[0]!, csrf: body.csrf, setCookie, scope: body.scope };
}

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

describe("the console's files", () => {
  it("are served under a CSP that allows no inline script, and hold none", async () => {
    for (const path of ["/admin/ui/", "/admin/ui"]) {
      const r = await send(gw.adminUrl, { path });
      expect(r.status).toBe(200);
      expect(r.headers["content-type"]).toBe("text/html; charset=utf-8");
      expect(r.headers["content-security-policy"]).toBe(CSP);
      expect(r.headers["x-frame-options"]).toBe("DENY");
      // Every script is a file of this origin; no handler is written in the markup.
      expect(r.body.match(/<script\b[^>]*>/g)).toEqual(['<script type="module" src="/admin/ui/app.js">']);
      expect(r.body).not.toMatch(/\son[a-z]+=/i);
    }
    const js = await send(gw.adminUrl, { path: "/admin/ui/app.js" });
    expect(js.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    // Nothing the gateway answers is parsed as HTML by the page.
    expect(js.body).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/);
    expect(js.body).not.toMatch(/localStorage|sessionStorage/);
    expect((await send(gw.adminUrl, { path: "/admin/ui/../config/gateway.yaml" })).status).toBe(404);
    expect((await send(gw.adminUrl, { path: "/admin/ui/package.json" })).status).toBe(404);
  });

  it("are not served where the admin API is off", async () => {
    const off = await startGateway(yaml(upstream.url, "    []").replace("  tokens:\n    []\n", ""));
    try {
      const r = await send(off.adminUrl, { path: "/admin/ui/" });
      expect(r.status).toBe(404);
      expect(r.json().type).toMatch(/admin-disabled$/);
    } finally {
      await off.stop();
    }
  });
});

describe("a console session", () => {
  it("is opened by a token for an HttpOnly, SameSite=Strict cookie, never by a form post or a wrong token", async () => {
    const wrong = await send(gw.adminUrl, {
      method: "POST",
      path: "/admin/ui/session",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token: "not-a-token" }),
    });
    expect(wrong.status).toBe(401);
    expect(wrong.headers["set-cookie"]).toBeUndefined();
    // What another site's <form> can send: refused before any token is read.
    const form = await send(gw.adminUrl, {
      method: "POST",
      path: "/admin/ui/session",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: `token=${OPS}`,
    });
    expect(form.status).toBe(400);
    const s = await signIn(OPS);
    expect(s.setCookie).toMatch(
      /^tollgate_console=[A-Za-z0-9_-]{43}; Path=\/admin; HttpOnly; SameSite=Strict$/,
    );
    expect(s.scope).toBe("write");
    expect(s.setCookie).not.toContain(OPS);
  });

  it("reads the admin API with the token's scope, and acts only with the session's CSRF token", async () => {
    const s = await signIn(OPS);
    const read = await send(gw.adminUrl, {
      path: "/admin/callers/client:acme",
      headers: { cookie: s.cookie },
    });
    expect(read.status, read.body).toBe(200);
    const override = (headers: Record<string, string>) =>
      send(gw.adminUrl, {
        method: "PUT",
        path: "/admin/overrides/client:acme/free.global",
        headers: { cookie: s.cookie, "content-type": "application/json", ...headers },
        body: JSON.stringify({ burst: 50, expires_in: "1h", reason: "console test" }),
      });
    const forged = await override({});
    expect(forged.status).toBe(403);
    expect(forged.json().type).toMatch(/bad-csrf$/);
    expect((await override({ "x-tollgate-csrf": "x".repeat(43) })).status).toBe(403);
    const made = await override({ "x-tollgate-csrf": s.csrf });
    expect(made.status, made.body).toBeLessThan(300);
    // The audit names the token the session was opened with.
    const audit = await send(gw.adminUrl, { path: "/admin/audit", headers: { cookie: s.cookie } });
    const entries = (audit.json() as { entries: { time: string }[] }).entries.sort((a, b) =>
      a.time < b.time ? 1 : -1,
    );
    expect(entries[0]).toMatchObject({ token: "ops", action: "PUT /admin/overrides" });
  });

  it("a read token's session sees and cannot act, CSRF token or not", async () => {
    const s = await signIn(VIEWER);
    expect(s.scope).toBe("read");
    expect((await send(gw.adminUrl, { path: "/admin/audit", headers: { cookie: s.cookie } })).status).toBe(
      200,
    );
    const r = await send(gw.adminUrl, {
      method: "DELETE",
      path: "/admin/callers/client:acme",
      headers: { cookie: s.cookie, "x-tollgate-csrf": s.csrf },
    });
    expect(r.status).toBe(403);
    expect(r.json().type).toMatch(/insufficient-scope$/);
  });

  it("ends when signed out (with the CSRF token), and when a reload removes its token", async () => {
    const s = await signIn(OPS);
    const who = await send(gw.adminUrl, { path: "/admin/ui/session", headers: { cookie: s.cookie } });
    expect(who.json()).toEqual({ name: "ops", scope: "write", csrf: s.csrf });
    expect(
      (
        await send(gw.adminUrl, {
          method: "DELETE",
          path: "/admin/ui/session",
          headers: { cookie: s.cookie },
        })
      ).status,
    ).toBe(403);
    const out = await send(gw.adminUrl, {
      method: "DELETE",
      path: "/admin/ui/session",
      headers: { cookie: s.cookie, "x-tollgate-csrf": s.csrf },
    });
    expect(out.status).toBe(200);
    expect(String(out.headers["set-cookie"])).toMatch(/^tollgate_console=; .*Max-Age=0/);
    expect((await send(gw.adminUrl, { path: "/admin/audit", headers: { cookie: s.cookie } })).status).toBe(
      401,
    );

    const viewer = await signIn(VIEWER);
    const file = gw.configFile;
    const before = readFileSync(file, "utf8");
    writeFileSync(file, yaml(upstream.url, `    - { name: ops, token: ${OPS}, scope: write }`));
    try {
      const reload = await send(gw.adminUrl, {
        method: "POST",
        path: "/admin/reload",
        headers: { authorization: `Bearer ${OPS}` },
      });
      expect(reload.status, reload.body).toBe(200);
      expect(
        (await send(gw.adminUrl, { path: "/admin/audit", headers: { cookie: viewer.cookie } })).status,
      ).toBe(401);
    } finally {
      writeFileSync(file, before);
      await send(gw.adminUrl, {
        method: "POST",
        path: "/admin/reload",
        headers: { authorization: `Bearer ${OPS}` },
      });
    }
  });
});

interface HealthAnswer {
  store: { address: string; reachable: boolean; ping_ms: number };
  config: { file: string; version: string };
  last_reload: { ok: boolean; errors?: string[] } | null;
}

describe("GET /admin/health, the Health page's answer", () => {
  it("names the store, its PING, the config in force and the last reload asked for here with its problems", async () => {
    const auth = { authorization: `Bearer ${VIEWER}` };
    const first = (await send(gw.adminUrl, { path: "/admin/health", headers: auth })).json() as HealthAnswer;
    expect(first.store).toMatchObject({ address: "memory", reachable: true });
    expect(first.store.ping_ms).toBeGreaterThanOrEqual(0);
    expect(first.config).toMatchObject({ file: gw.configFile, version: expect.any(String) });
    const before = readFileSync(gw.configFile, "utf8");
    writeFileSync(gw.configFile, before.replace("rate: 1/s", "rate: fast"));
    try {
      const refused = await send(gw.adminUrl, {
        method: "POST",
        path: "/admin/reload",
        headers: { authorization: `Bearer ${OPS}` },
      });
      expect(refused.status).toBe(400);
      const after = (
        await send(gw.adminUrl, { path: "/admin/health", headers: auth })
      ).json() as HealthAnswer;
      expect(after.last_reload).toMatchObject({
        ok: false,
        errors: [expect.stringMatching(/gateway\.yaml:\d+:\d+: plans\.free\.global\.rate/)],
      });
      // The previous config still serves, and says so.
      expect(after.config.version).toBe(first.config.version);
    } finally {
      writeFileSync(gw.configFile, before);
    }
  });
});

describe("a sign-in cut off mid-body", () => {
  it("is dropped quietly, and the listeners keep serving (it took the process down)", async () => {
    const { connect } = await import("node:net");
    const url = new URL(gw.adminUrl);
    for (const framing of ["Content-Length: 100", "Transfer-Encoding: chunked"]) {
      await new Promise<void>((resolve) => {
        const socket = connect(Number(url.port), url.hostname, () => {
          socket.write(
            `POST /admin/ui/session HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${framing}\r\n\r\n${framing.startsWith("Transfer") ? "64\r\n" : ""}{"tok`,
          );
          setTimeout(() => socket.destroy(), 100);
        });
        socket.on("error", () => {});
        socket.on("close", () => resolve());
      });
    }
    await new Promise((r) => setTimeout(r, 100));
    expect((await send(gw.adminUrl, { path: "/healthz" })).status).toBe(200);
    expect((await send(gw.url, { path: "/", headers: { "x-api-key": "acme-key" } })).status).toBeLessThan(
      500,
    );
  });
});
