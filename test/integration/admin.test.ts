// The admin listener against hostile or careless input: a caller name that is not valid
// percent-encoding is a 400 problem, never a 500; /metrics passes Prometheus' naming lint.
import { execFile, spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DRAIN_MAX_MS } from "../../src/http/unread-body.js";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { answeredEarly, pumpBody, trickleBody } from "../support/raw.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const TOKEN = "admin-token-for-admin-tests";
const run = promisify(execFile);

let upstream: TestUpstream;
let gw: InProcessGateway;
const admin = (path: string, method = "GET") =>
  send(gw.adminUrl, { method, path, headers: { authorization: `Bearer ${TOKEN}` } });

beforeAll(async () => {
  upstream = await startUpstream();
  gw = await startGateway(`
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: ${TOKEN} }
log: { level: warn, requests: false }
store: { url: "memory://" }
upstreams: { api: ${upstream.url} }
clients:
  - { id: acme, key: acme-key, plan: free }
plans:
  free: { global: { rate: 1/s, burst: 5 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`);
});
afterAll(async () => {
  await gw?.stop();
  await upstream?.close();
});

describe("GET /admin/callers/<caller> with a malformed escape", () => {
  it.each([
    ["a truncated UTF-8 sequence", "/admin/callers/client:%E0%A4%A"],
    ["a lone continuation byte", "/admin/callers/client:%80"],
    ["a bare percent sign", "/admin/callers/client:100%"],
    ["an overlong encoding", "/admin/callers/client:%C0%AF"],
  ])("%s is a 400 problem+json, GET and DELETE alike", async (_what, path) => {
    for (const method of ["GET", "DELETE"]) {
      const r = await admin(path, method);
      expect(r.status, r.body).toBe(400);
      expect(r.headers["content-type"]).toBe("application/problem+json");
      expect(r.json()).toMatchObject({
        status: 400,
        title: "Bad Request",
        detail: expect.stringContaining("not valid percent-encoded UTF-8"),
      });
    }
  });

  it("a malformed escape in the query string is not an error either", async () => {
    const r = await admin("/admin/callers/client:acme?plan=%E0%A4%A");
    expect(r.status, r.body).toBe(200);
    expect(r.json()).toMatchObject({ caller: "client:acme", plan: "free" });
  });

  it("a well-formed escape still names the caller", async () => {
    const r = await admin("/admin/callers/client%3Aacme");
    expect(r.status, r.body).toBe(200);
    expect(r.json()).toMatchObject({ caller: "client:acme" });
  });
});

/** `# TYPE name type` of every family /metrics exposes. */
async function families(): Promise<{ name: string; type: string }[]> {
  // Something of every kind has happened, so labelled families have samples.
  await send(gw.url, { path: "/x", headers: { "x-api-key": "acme-key" } });
  const text = (await send(gw.adminUrl, { path: "/metrics" })).body;
  return [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => ({ name: m[1]!, type: m[2]! }));
}

describe("/metrics naming (what promtool check metrics enforces)", () => {
  it("no gauge ends in _total, and every counter does", async () => {
    const all = await families();
    expect(all.length).toBeGreaterThan(20);
    const gaugesWithTotal = all.filter((f) => f.type !== "counter" && f.name.endsWith("_total"));
    expect(gaugesWithTotal.map((f) => `${f.name} (${f.type})`)).toEqual([]);
    const countersWithout = all.filter((f) => f.type === "counter" && !f.name.endsWith("_total"));
    expect(countersWithout.map((f) => f.name)).toEqual([]);
    // The per-type gauges that carried the same numbers are still there.
    expect(all.map((f) => f.name)).toContain("tollgate_nodejs_active_handles");
  });

  const promtool = process.env.PROMTOOL ?? "promtool";
  const hasPromtool = spawnSync(promtool, ["--version"]).status === 0;
  it.skipIf(!hasPromtool)(
    "promtool check metrics accepts the scrape (when promtool is on PATH)",
    async () => {
      await families();
      const text = (await send(gw.adminUrl, { path: "/metrics" })).body;
      const r = spawnSync(promtool, ["check", "metrics"], { input: text, encoding: "utf8" });
      expect(`${r.stdout}${r.stderr}`).toBe("");
      expect(r.status).toBe(0);
    },
  );
});

describe("a body the admin listener answered without reading (no token, a refusal)", () => {
  it("a huge body pumped after a 401 is cut once answered (it read 7 GB in 15 s before)", async () => {
    let written = () => 0;
    const reply = await answeredEarly(
      gw.adminUrl,
      "POST /admin/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\nContent-Length: 100000000000\r\n\r\n",
      (socket) => {
        written = pumpBody(socket);
      },
    );
    expect(reply.text).toMatch(/^HTTP\/1\.1 401 /);
    expect(reply.closedMs).toBeLessThan(DRAIN_MAX_MS + 1000);
    expect(written()).toBeLessThan(256 * 1024 * 1024);
  });

  it("a short body trickled after a 401 is cut at DRAIN_MAX_MS, not at the request timeout", async () => {
    const reply = await answeredEarly(
      gw.adminUrl,
      "POST /admin/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n",
      (socket) => trickleBody(socket),
    );
    expect(reply.text).toMatch(/^HTTP\/1\.1 401 /);
    expect(reply.closedMs).toBeGreaterThanOrEqual(DRAIN_MAX_MS - 100);
    expect(reply.closedMs).toBeLessThan(DRAIN_MAX_MS + 1000);
  });
});

describe("an admin body past the 64 KiB an admin request may be", () => {
  const MiB = 1024 * 1024;
  const head = (framing: string) =>
    `POST /admin/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\n${framing}\r\n`;
  const tooLarge = /^HTTP\/1\.1 413 [\s\S]*body-too-large[\s\S]*larger than 65536 bytes/;

  it("1 MiB from curl gets its 413 problem, not a reset (the request was destroyed before its answer)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tollgate-admin-body-"));
    const file = join(dir, "body.json");
    writeFileSync(file, JSON.stringify({ client: "acme", plan: "free", pad: "x".repeat(MiB) }));
    // Asynchronously: the gateway runs in this process, and spawnSync would stop it answering.
    const curl = await run(
      "curl",
      [
        "-sS",
        "--max-time",
        "10",
        "-o",
        "-",
        "-w",
        "\n%{http_code}",
        "-X",
        "POST",
        "-H",
        `authorization: Bearer ${TOKEN}`,
        "-H",
        "content-type: application/json",
        "--data-binary",
        `@${file}`,
        `${gw.adminUrl}/admin/keys`,
      ],
      { encoding: "utf8" },
    );
    expect(curl.stderr).toBe("");
    const cut = curl.stdout.lastIndexOf("\n");
    const [body, status] = [curl.stdout.slice(0, cut), curl.stdout.slice(cut + 1)];
    expect(status).toBe("413");
    expect(JSON.parse(body)).toMatchObject({
      status: 413,
      type: expect.stringContaining("body-too-large"),
      detail: expect.stringContaining("larger than 65536 bytes"),
    });
  });

  it("an endpoint that reads no body refuses an announced 1 MiB one too, and says the connection closes", async () => {
    const reply = await answeredEarly(
      gw.adminUrl,
      `POST /admin/reload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Length: ${MiB}\r\n\r\n`,
      (socket) => {
        socket.write(Buffer.alloc(MiB, 32));
      },
    );
    expect(reply.text).toMatch(tooLarge);
    expect(reply.text).toMatch(/\r\nConnection: close\r\n/i);
  });

  it("announced or chunked, the 413 is written before the connection closes, and the listener keeps serving", async () => {
    const announced = await answeredEarly(gw.adminUrl, head(`Content-Length: ${MiB}\r\n`), (socket) => {
      socket.write(Buffer.alloc(MiB, 32));
    });
    expect(announced.text).toMatch(tooLarge);
    // Chunked: found too large only once 64 KiB have arrived, in the middle of reading it.
    const chunked = await answeredEarly(gw.adminUrl, head("Transfer-Encoding: chunked\r\n"), (socket) => {
      const chunk = Buffer.alloc(16 * 1024, 32);
      for (let i = 0; i < 64; i++)
        socket.write(Buffer.concat([Buffer.from("4000\r\n"), chunk, Buffer.from("\r\n")]));
      socket.write("0\r\n\r\n");
    });
    expect(chunked.text).toMatch(tooLarge);
    expect(chunked.closedMs).toBeLessThan(DRAIN_MAX_MS + 1000);
    expect((await admin("/admin/keys?client=acme")).status).toBe(200);
  });
});
