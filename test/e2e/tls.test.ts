// The CLI with `listen.tls`: `--check` reads the certificate and key and says which key is wrong
// where; with `workers: 2` every worker serves TLS (HTTP/2 and HTTP/1.1) on the shared listener,
// and a new certificate written over the files reaches every worker, not only the primary that
// watches them.
import { spawnSync } from "node:child_process";
import { renameSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeCertificate, type TestCertificate } from "../support/certs.js";
import { CLI, type GatewayProcess, spawnGateway, writeConfig } from "../support/gateway.js";
import { h2Connect, h2Request, servedFingerprint } from "../support/h2.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

let redis: RedisProcess;
let upstream: TestUpstream;
let gw: GatewayProcess;
let cert: TestCertificate;
let port: number;

beforeAll(async () => {
  redis = await startRedis();
  upstream = await startUpstream();
  cert = makeCertificate();
  gw = await spawnGateway(`
listen:
  address: 127.0.0.1:0
  tls: { cert_file: ${cert.certFile}, key_file: ${cert.keyFile} }
admin: { listen: 127.0.0.1:0 }
workers: 2
log: { level: info, requests: false }
store: { url: ${redis.url} }
upstreams: { api: ${upstream.url} }
routes:
  - { name: default, match: { path: / }, upstream: api }
`);
  port = Number(new URL(gw.url).port);
}, 30_000);
afterAll(async () => {
  await gw?.stop();
  await upstream?.close();
  await redis?.stop();
});

describe("tollgate --check with listen.tls", () => {
  it("exits 0 for a usable pair, and 2 naming the file, the key and its position otherwise", () => {
    const other = makeCertificate("other");
    const check = (certFile: string, keyFile: string) => {
      const file = writeConfig(`listen:
  address: 127.0.0.1:8443
  tls:
    cert_file: ${certFile}
    key_file: ${keyFile}
store: { url: "memory://" }
upstreams: { api: http://127.0.0.1:3000 }
routes:
  - { name: default, match: { path: / }, upstream: api }
`);
      const r = spawnSync(process.execPath, [CLI, "--check", "--config", file], { encoding: "utf8" });
      return { file, status: r.status, stdout: r.stdout, stderr: r.stderr };
    };
    const good = check(cert.certFile, cert.keyFile);
    expect(good.status).toBe(0);
    expect(good.stdout).toMatch(/^config OK/);
    const mismatched = check(cert.certFile, other.keyFile);
    expect(mismatched.status).toBe(2);
    expect(mismatched.stderr).toBe(
      `${mismatched.file}:5:15: listen.tls.key_file: the key in ${other.keyFile} does not belong to the first certificate of ${cert.certFile} (the server's certificate must come first, then its chain)\n`,
    );
    const missing = check("/nonexistent/server.crt", cert.keyFile);
    expect(missing.stderr).toBe(
      `${missing.file}:4:16: listen.tls.cert_file: cannot read /nonexistent/server.crt: no such file\n`,
    );
  });
});

/** Fingerprints of `n` new connections: the cluster hands them to the workers in turn. */
const fingerprints = (n: number) => Promise.all(Array.from({ length: n }, () => servedFingerprint(port)));

describe("workers: 2 with listen.tls", () => {
  it("says https on its start line, and every worker serves HTTP/2 over TLS", async () => {
    expect(gw.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const deadline = Date.now() + 5000;
    while (gw.lines.filter((l) => l.msg === "worker listening").length < 2 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    const workers = gw.lines.filter((l) => l.msg === "worker listening");
    expect(workers).toHaveLength(2);
    expect(workers.every((l) => String(l.proxy).startsWith("https://"))).toBe(true);
    // Ten connections, so both workers get some; each answers over HTTP/2.
    const statuses = await Promise.all(
      Array.from({ length: 10 }, async () => {
        const session = h2Connect(gw.url);
        const r = await h2Request(session, "/w");
        session.close();
        return r.status;
      }),
    );
    expect(statuses).toEqual(Array(10).fill(200));
    expect(new Set(await fingerprints(10))).toEqual(new Set([cert.fingerprint]));
  });

  it("serves a new certificate from every worker once its files change", async () => {
    const next = makeCertificate("next", dirname(cert.certFile));
    for (const [file, text] of [
      [cert.keyFile, next.key],
      [cert.certFile, next.cert],
    ] as const) {
      writeFileSync(`${file}.tmp`, text);
      renameSync(`${file}.tmp`, file);
    }
    const deadline = Date.now() + 5000;
    let seen = new Set<string>();
    while (Date.now() < deadline) {
      seen = new Set(await fingerprints(10));
      if (seen.size === 1 && seen.has(next.fingerprint)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(seen).toEqual(new Set([next.fingerprint]));
    // One line per worker: the primary, which serves no proxy traffic, has no listener to reload.
    expect(gw.lines.filter((l) => l.msg === "listener certificate reloaded")).toHaveLength(2);
  });
});
