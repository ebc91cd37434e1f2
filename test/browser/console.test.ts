/// <reference lib="dom" />
// The console in a real headless Chromium (Debian's /usr/bin/chromium through puppeteer-core),
// against two gateway instances on one real Redis. A caller is flooded on instance A and shows
// on the Now page without a reload; its page shows remaining 0 and the denial; an override made
// from the page raises the caller's RateLimit-Limit on instance B within a second and shows in
// the audit page; a read token sees no action and a forged request gets 403; a caller id made of
// markup renders as text; and the page raises no CSP violation or script error on the way.
// `npm run docs:console` (CONSOLE_SCREENSHOTS=1) also writes a screenshot of each page to
// docs/console/.
import { existsSync, mkdirSync } from "node:fs";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayProcess, spawnGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const OPS = "ops-token-for-the-console-browser-0123456789";
const VIEWER = "viewer-token-for-the-console-browser-0123456789";
const SHOTS = process.env.CONSOLE_SCREENSHOTS
  ? new URL("../../docs/console/", import.meta.url).pathname
  : undefined;

const yaml = (redisUrl: string, upstreamUrl: string) => `
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  tokens:
    - { name: ops, token: ${OPS}, scope: write }
    - { name: viewer, token: ${VIEWER}, scope: read }
log: { level: info, requests: false }
store: { url: "${redisUrl}", prefix: "console:" }
identity: { api_key: { header: x-api-key } }
upstreams: { api: ${upstreamUrl} }
clients:
  - { id: acme, key: acme-key-0123456789, plan: free, tenant: acme-inc }
  - { id: quiet, key: quiet-key-0123456789, plan: free }
plans:
  free:
    global: { rate: 1/h, burst: 5 }
    tenant: { algorithm: fixed_window, limit: 10000, window: 1 month }
routes: [{ name: api, match: { path: / }, upstream: api }]
`;

let redis: RedisProcess;
let upstream: TestUpstream;
let a: GatewayProcess;
let b: GatewayProcess;
let browser: Browser;
let page: Page;
/** What the page said that it should not have: script errors, CSP violations, dialogs. */
const trouble: string[] = [];
const dialogs: string[] = [];

const acme = (gw: GatewayProcess) =>
  send(gw.url, { path: "/x", headers: { "x-api-key": "acme-key-0123456789" } });

async function shot(name: string): Promise<void> {
  if (!SHOTS) return;
  if (!existsSync(SHOTS)) mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: `${SHOTS}${name}.png`, fullPage: true });
}

async function signIn(token: string): Promise<void> {
  await page.goto(`${a.adminUrl}/admin/ui/`);
  await page.waitForSelector("#token");
  await page.type("#token", token);
  await page.click("#sign-in button");
  await page.waitForSelector("#nav:not([hidden])");
}

async function signOut(): Promise<void> {
  await page.click("#sign-out");
  await page.waitForSelector("#token");
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`no Chromium at ${CHROMIUM}: apt-get install chromium (or set CHROMIUM)`);
  redis = await startRedis();
  upstream = await startUpstream();
  [a, b] = await Promise.all([
    spawnGateway(yaml(redis.url, upstream.url)),
    spawnGateway(yaml(redis.url, upstream.url)),
  ]);
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1200, height: 800 });
  // A CSP violation is reported to the page as an event: record it from the start.
  await page.evaluateOnNewDocument(() => {
    document.addEventListener("securitypolicyviolation", (e) => {
      console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`);
    });
  });
  page.on("pageerror", (err) => trouble.push(`page error: ${String(err)}`));
  page.on("console", (msg) => {
    // A 4xx the test provokes on purpose (a forged request, an unknown caller) is logged by
    // Chromium as a failed resource; anything else at error level is trouble.
    if (msg.type() === "error" && !msg.text().startsWith("Failed to load resource")) trouble.push(msg.text());
  });
  page.on("dialog", async (dialog) => {
    dialogs.push(`${dialog.type()}: ${dialog.message()}`);
    // confirm() is the console asking before an action: yes. Anything else is not ours.
    if (dialog.type() === "confirm") await dialog.accept();
    else await dialog.dismiss();
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await Promise.all([a?.stop(), b?.stop()]);
  await upstream?.close();
  await redis?.stop();
});

describe("the console in Chromium", () => {
  it("shows a flooded caller on the Now page within 2 s, without a reload", async () => {
    await signIn(OPS);
    await page.waitForSelector("#now");
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push((await acme(a)).status);
    expect(statuses.filter((s) => s === 429)).toHaveLength(15);
    const floodedAt = Date.now();
    await page.waitForFunction(
      () =>
        Array.from(document.querySelectorAll("#now a.caller")).some((el) => el.textContent === "client:acme"),
      { timeout: 2000 },
    );
    const shownMs = Date.now() - floodedAt;
    console.log(`console: the flooded caller on the Now page ${shownMs} ms after the flood`);
    expect(shownMs).toBeLessThan(2000);
    await shot("now");
  });

  it("the caller's page: remaining 0 and its denials", async () => {
    await page.click("#now a.caller");
    await page.waitForSelector('[data-limit="free.global"]');
    expect(await page.$eval('[data-limit="free.global"]', (el) => el.textContent)).toBe("0");
    await page.waitForFunction(() => document.querySelectorAll("#denials tbody tr").length > 0);
    const denial = await page.$eval("#denials tbody tr", (tr) => tr.textContent);
    expect(denial).toContain("free.global");
    await shot("caller");
  });

  it("an override made on the page raises the limit on the other instance within 1 s, and is audited", async () => {
    expect(Number((await acme(b)).headers["ratelimit-limit"])).toBe(5);
    await page.select("#override-limit", "free.global");
    await page.type("#override-size", "50");
    await page.$eval("#override-expires", (el) => {
      (el as HTMLInputElement).value = "1h";
    });
    await page.type("#override-reason", "incident 42: <b>launch</b>");
    await page.click("#override button[type=submit]");
    await page.waitForFunction(() => document.getElementById("status")?.textContent?.startsWith("done"), {
      timeout: 5000,
    });
    const madeAt = Date.now();
    let limit = 0;
    while (Date.now() - madeAt < 3000 && limit !== 50) {
      limit = Number((await acme(b)).headers["ratelimit-limit"]);
      if (limit !== 50) await new Promise((r) => setTimeout(r, 20));
    }
    const tookMs = Date.now() - madeAt;
    console.log(`console: the override on instance B ${tookMs} ms after the page confirmed it`);
    expect(limit).toBe(50);
    expect(tookMs).toBeLessThan(1000);
    expect(dialogs.some((d) => d.startsWith("confirm: Set free.global of client:acme to 50"))).toBe(true);

    await page.goto(`${a.adminUrl}/admin/ui/#/audit`);
    await page.waitForFunction(() =>
      Array.from(document.querySelectorAll("#audit tbody tr")).some((tr) =>
        tr.textContent?.includes("PUT /admin/overrides"),
      ),
    );
    const row = await page.$$eval("#audit tbody tr", (trs) => trs.map((tr) => tr.textContent).join("\n"));
    expect(row).toMatch(/ops.*PUT \/admin\/overrides.*client:acme/);
    await shot("audit");
    // The reason holds markup: shown as text on the caller's page, never as an element.
    await page.goto(`${a.adminUrl}/admin/ui/#/caller/client%3Aacme`);
    await page.waitForFunction(() =>
      document.getElementById("overrides")?.textContent?.includes("incident 42"),
    );
    expect(await page.$eval("#overrides", (el) => el.textContent)).toContain("incident 42: <b>launch</b>");
    expect(await page.$$("#overrides b")).toHaveLength(0);
  });

  it("health and usage pages render", async () => {
    await page.goto(`${a.adminUrl}/admin/ui/#/health`);
    await page.waitForFunction(() => document.querySelectorAll("#health tr").length > 3);
    expect(await page.$eval("#health", (el) => el.textContent)).toContain("config version");
    await shot("health");
    await page.goto(`${a.adminUrl}/admin/ui/#/usage`);
    await page.waitForFunction(() => document.querySelectorAll("#usage-table tbody tr").length > 0);
    expect(await page.$eval("#usage-table", (el) => el.textContent)).toContain("client:acme");
    expect(await page.$eval("#export", (el) => el.getAttribute("href"))).toMatch(
      /^\/admin\/usage\/export\?period=/,
    );
    await shot("usage");
  });

  it("a read token sees no action, and a forged action gets 403", async () => {
    await signOut();
    await signIn(VIEWER);
    await page.goto(`${a.adminUrl}/admin/ui/#/caller/client%3Aacme`);
    await page.waitForSelector('[data-limit="free.global"]');
    expect(await page.$$("button.action, #override, #reset")).toHaveLength(0);
    await page.goto(`${a.adminUrl}/admin/ui/#/health`);
    await page.waitForSelector("#health tr");
    expect(await page.$$("#reload-button")).toHaveLength(0);
    // What a script on the page (or a forged form) could send: the cookie goes, the CSRF token not.
    const forged = await page.evaluate(async () => {
      const r = await fetch("/admin/callers/client%3Aacme", { method: "DELETE", credentials: "same-origin" });
      return { status: r.status, type: (await r.json()).type };
    });
    expect(forged).toEqual({ status: 403, type: "https://tollgate.dev/problems/bad-csrf" });
    // And signed out, the session is gone: the cookie no longer reads anything.
    await signOut();
    const after = await page.evaluate(
      async () => (await fetch("/admin/audit", { credentials: "same-origin" })).status,
    );
    expect(after).toBe(401);
  });

  it("a caller id made of markup renders as text, and nothing runs", async () => {
    await signIn(OPS);
    const id = "<img src=x onerror=alert(1)>";
    await page.goto(`${a.adminUrl}/admin/ui/#/caller/${encodeURIComponent(id)}`);
    await page.waitForFunction(() => document.querySelector("main h1")?.textContent?.startsWith("Caller"));
    await page.waitForFunction(() => (document.getElementById("status")?.textContent ?? "") !== "");
    expect(await page.$eval("main h1", (el) => el.textContent)).toBe(`Caller ${id}`);
    expect(await page.$$("main img, footer img")).toHaveLength(0);
    expect(dialogs.filter((d) => !d.startsWith("confirm:"))).toEqual([]);
  });

  it("raised no CSP violation and no script error on any page", () => {
    expect(trouble).toEqual([]);
  });
});
