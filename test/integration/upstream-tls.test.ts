// TLS to https:// upstreams (issue 16): targets verified against `ca_file`, a client certificate
// from `cert_file`/`key_file`, `servername`, `insecure`; WebSocket handshakes to them over TLS
// with the same settings. A certificate that does not verify is a 502, and the upstream never
// sees a byte of cleartext: its port sniffs the first byte of every connection. The config
// checks (positions, http-only upstreams, the insecure warning) are at the end.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer as createHttpsServer, type Server as HttpsServer } from "node:https";
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";

const dir = mkdtempSync(join(tmpdir(), "tollgate-upstream-tls-"));

function openssl(args: string[]): void {
  execFileSync("openssl", args, { stdio: "ignore" });
}

/** A CA: key and self-signed certificate. */
function makeCa(name: string): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  openssl([
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    key,
    "-out",
    cert,
    "-days",
    "1",
    "-subj",
    `/CN=${name}`,
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign",
  ]);
  return { cert, key };
}

/** A leaf certificate signed by `ca`, for localhost and 127.0.0.1. */
function makeLeaf(name: string, ca: { cert: string; key: string }): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const ext = join(dir, `${name}.ext`);
  openssl([
    "req",
    "-new",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    key,
    "-out",
    csr,
    "-subj",
    `/CN=${name}`,
  ]);
  writeFileSync(ext, "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
  openssl([
    "x509",
    "-req",
    "-in",
    csr,
    "-CA",
    ca.cert,
    "-CAkey",
    ca.key,
    "-CAcreateserial",
    "-out",
    cert,
    "-days",
    "1",
    "-extfile",
    ext,
  ]);
  return { cert, key };
}

interface TlsUpstream {
  url: string;
  /** Connections whose first byte was not a TLS handshake. */
  plaintext: string[];
  /** Requests served, with the CN of the client certificate the upstream was given, if any. */
  requests: { url: string; client: string | null }[];
  /** Health checks served (GET /healthz), kept apart from the requests. */
  probes: number;
  upgrades: string[];
  close(): Promise<void>;
}

/**
 * An https server behind a sniffer: every connection's first bytes are looked at before TLS
 * takes it, so cleartext (the old tunnel's bug) is recorded, not merely refused.
 */
async function startTlsUpstream(
  server: { cert: string; key: string },
  clientCa: string,
): Promise<TlsUpstream> {
  const up: TlsUpstream = {
    url: "",
    plaintext: [],
    requests: [],
    probes: 0,
    upgrades: [],
    close: async () => {},
  };
  const https: HttpsServer = createHttpsServer(
    {
      cert: readFileSync(server.cert),
      key: readFileSync(server.key),
      ca: readFileSync(clientCa),
      requestCert: true,
      rejectUnauthorized: false,
    },
    (req, res) => {
      const socket = req.socket as TLSSocket;
      const peer = socket.authorized ? socket.getPeerCertificate() : null;
      if (req.url === "/healthz") up.probes++;
      else up.requests.push({ url: req.url!, client: (peer?.subject?.CN as string | undefined) ?? null });
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ url: req.url }));
    },
  );
  https.on("upgrade", (req, socket: Socket) => {
    up.upgrades.push(req.url!);
    socket.on("error", () => {});
    socket.end("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
  });
  https.on("tlsClientError", () => {});
  const sockets = new Set<Socket>();
  const front: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    socket.once("data", (first: Buffer) => {
      // 0x16: a TLS record of type handshake (a ClientHello).
      if (first[0] !== 0x16) {
        up.plaintext.push(first.toString("latin1").split("\r\n")[0]!);
        socket.destroy();
        return;
      }
      // TLS goes on, untouched, to the https server (a TLS server reads a socket's handle
      // directly, so it cannot be handed one whose first bytes were already read).
      const inner = connect((https.address() as AddressInfo).port, "127.0.0.1");
      sockets.add(inner);
      inner.on("close", () => sockets.delete(inner));
      inner.on("error", () => socket.destroy());
      inner.write(first);
      socket.pipe(inner);
      inner.pipe(socket);
      socket.on("close", () => inner.destroy());
      inner.on("close", () => socket.destroy());
    });
  });
  await new Promise<void>((resolve) => https.listen(0, "127.0.0.1", resolve));
  await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve));
  up.url = `https://127.0.0.1:${(front.address() as AddressInfo).port}`;
  up.close = async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => front.close(resolve));
    https.close();
  };
  return up;
}

/** A raw WebSocket handshake through the gateway: the status line of its answer. */
function handshake(base: string, path: string): Promise<string> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    let got = "";
    socket.on("data", (chunk: Buffer) => {
      got += chunk.toString("latin1");
      if (got.includes("\r\n")) {
        socket.destroy();
        resolve(got.split("\r\n")[0]!);
      }
    });
    socket.on("error", reject);
    socket.on("close", () => resolve(got.split("\r\n")[0] ?? ""));
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    );
  });
}

let ca: { cert: string; key: string };
let wrongCa: { cert: string; key: string };
let clientCert: { cert: string; key: string };
let upstream: TlsUpstream;
let gw: InProcessGateway;
const rotatingCa = join(dir, "rotating-ca.crt");

beforeAll(async () => {
  ca = makeCa("test-ca");
  wrongCa = makeCa("other-ca");
  const serverCert = makeLeaf("upstream", ca);
  const clientCa = makeCa("client-ca");
  clientCert = makeLeaf("gateway-client", clientCa);
  upstream = await startTlsUpstream(serverCert, clientCa.cert);
  const u = upstream.url;
  writeFileSync(rotatingCa, readFileSync(wrongCa.cert));
  gw = await startGateway(`
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
store: { url: "memory://" }
upstreams:
  verified: { url: ${u}, ca_file: ${ca.cert}, connect_timeout: 1s }
  system: { url: ${u}, connect_timeout: 1s }
  wrong: { url: ${u}, ca_file: ${wrongCa.cert}, connect_timeout: 1s }
  unverified: { url: ${u}, insecure: true }
  mtls: { url: ${u}, ca_file: ${ca.cert}, cert_file: ${clientCert.cert}, key_file: ${clientCert.key} }
  named: { url: ${u}, ca_file: ${ca.cert}, servername: localhost }
  misnamed: { url: ${u}, ca_file: ${ca.cert}, servername: elsewhere.test }
  rotating: { url: ${u}, ca_file: ${rotatingCa} }
  probed: { url: ${u}, ca_file: ${ca.cert}, health: { path: /healthz, interval: 100ms, timeout: 100ms } }
  misprobed: { url: ${u}, ca_file: ${wrongCa.cert}, health: { path: /healthz, interval: 100ms, timeout: 100ms } }
routes:
  - { name: verified, match: { path: /verified }, upstream: verified, strip_prefix: true }
  - { name: system, match: { path: /system }, upstream: system, strip_prefix: true }
  - { name: wrong, match: { path: /wrong }, upstream: wrong, strip_prefix: true }
  - { name: unverified, match: { path: /unverified }, upstream: unverified, strip_prefix: true }
  - { name: mtls, match: { path: /mtls }, upstream: mtls, strip_prefix: true }
  - { name: named, match: { path: /named }, upstream: named, strip_prefix: true }
  - { name: misnamed, match: { path: /misnamed }, upstream: misnamed, strip_prefix: true }
  - { name: rotating, match: { path: /rotating }, upstream: rotating, strip_prefix: true }
  - { name: probed, match: { path: /probed }, upstream: probed, strip_prefix: true }
  - { name: misprobed, match: { path: /misprobed }, upstream: misprobed, strip_prefix: true }
headers: [ietf]
`);
});

afterAll(async () => {
  await gw?.stop();
  await upstream?.close();
});

describe("requests to an https upstream", () => {
  it("verify the target against ca_file", async () => {
    const before = upstream.requests.length;
    const r = await send(gw.url, { path: "/verified/a" });
    expect(r.status).toBe(200);
    expect(upstream.requests.slice(before).map((q) => q.url)).toEqual(["/a"]);
  });

  it("are a 502 problem when the certificate does not verify: system CAs, or the wrong ca_file", async () => {
    const before = upstream.requests.length;
    for (const path of ["/system/a", "/wrong/a"]) {
      const r = await send(gw.url, { path });
      expect(r.status).toBe(502);
      expect(r.headers["content-type"]).toContain("application/problem+json");
    }
    expect(upstream.requests.length).toBe(before);
    expect(upstream.plaintext).toEqual([]);
  });

  it("accept any certificate with insecure: true", async () => {
    expect((await send(gw.url, { path: "/unverified/a" })).status).toBe(200);
  });

  it("present cert_file and key_file to an upstream that asks for a client certificate", async () => {
    const before = upstream.requests.length;
    expect((await send(gw.url, { path: "/mtls/a" })).status).toBe(200);
    expect((await send(gw.url, { path: "/verified/b" })).status).toBe(200);
    expect(upstream.requests.slice(before).map((q) => q.client)).toEqual(["gateway-client", null]);
  });

  it("check the certificate against servername", async () => {
    expect((await send(gw.url, { path: "/named/a" })).status).toBe(200);
    expect((await send(gw.url, { path: "/misnamed/a" })).status).toBe(502);
  });

  it("use a new ca_file after a reload, though the YAML is unchanged", async () => {
    expect((await send(gw.url, { path: "/rotating/a" })).status).toBe(502);
    writeFileSync(rotatingCa, readFileSync(ca.cert));
    expect(await gw.gateway.reload("admin")).toMatchObject({ ok: true, changed: true });
    expect((await send(gw.url, { path: "/rotating/a" })).status).toBe(200);
    expect(await handshake(gw.url, "/rotating/socket")).toBe("HTTP/1.1 101 Switching Protocols");
  });
});

describe("health checks of an https upstream", () => {
  it("use its TLS settings: passing with its CA, failing with a wrong one", async () => {
    await new Promise((resolve) => setTimeout(resolve, 600));
    const ejected = gw.logs.lines.filter((l) => l.msg === "upstream target ejected");
    expect(ejected.map((l) => l.upstream)).toContain("misprobed");
    expect(ejected.map((l) => l.upstream)).not.toContain("probed");
    expect(upstream.probes).toBeGreaterThan(0);
    expect(upstream.plaintext).toEqual([]);
  });
});

describe("a WebSocket to an https upstream", () => {
  it("is a TLS handshake verified against ca_file", async () => {
    const before = upstream.upgrades.length;
    expect(await handshake(gw.url, "/verified/socket")).toBe("HTTP/1.1 101 Switching Protocols");
    expect(upstream.upgrades.slice(before)).toEqual(["/socket"]);
    expect(upstream.plaintext).toEqual([]);
  });

  it("carries the client certificate to an mTLS upstream", async () => {
    expect(await handshake(gw.url, "/mtls/socket")).toBe("HTTP/1.1 101 Switching Protocols");
  });

  it("is a 502 with the wrong CA, never a cleartext retry", async () => {
    const before = upstream.upgrades.length;
    expect(await handshake(gw.url, "/wrong/socket")).toMatch(/^HTTP\/1\.1 502 /);
    expect(await handshake(gw.url, "/system/socket")).toMatch(/^HTTP\/1\.1 502 /);
    expect(await handshake(gw.url, "/misnamed/socket")).toMatch(/^HTTP\/1\.1 502 /);
    expect(upstream.upgrades.length).toBe(before);
    expect(upstream.plaintext).toEqual([]);
  });
});

describe("--check of upstream TLS", () => {
  const file = join(dir, "gateway.yaml");
  const load = (upstreams: string) =>
    loadConfigText(
      `listen: 127.0.0.1:0\nstore: { url: "memory://" }\nupstreams:\n${upstreams}\nroutes:\n  - { name: r, match: { path: / }, upstream: api }\n`,
      file,
      {},
    );
  const messages = (r: ReturnType<typeof load>) =>
    [...(r.ok ? [] : r.problems), ...r.warnings].map(
      (p) => `${p.line}:${p.column} ${p.severity ?? "error"} ${p.message}`,
    );

  it("refuses a CA file that is missing or holds no certificate, at its key", () => {
    const missing = load(`  api:\n    url: https://api.internal\n    ca_file: nowhere.crt\n`);
    expect(missing.ok).toBe(false);
    expect(messages(missing)).toEqual([
      expect.stringMatching(/^6:5 error cannot read .*nowhere\.crt: no such file$/),
    ]);
    writeFileSync(join(dir, "junk.crt"), "not a certificate\n");
    const junk = load(`  api:\n    url: https://api.internal\n    ca_file: junk.crt\n`);
    expect(messages(junk)).toEqual([
      expect.stringMatching(/^6:5 error .*junk\.crt holds no PEM certificate/),
    ]);
  });

  it("refuses a client key that is not the certificate's, and a certificate without its key", () => {
    const mismatched = load(
      `  api:\n    url: https://api.internal\n    cert_file: ${clientCert.cert}\n    key_file: ${ca.key}\n`,
    );
    expect(messages(mismatched)).toEqual([expect.stringMatching(/^7:5 error the key in .* does not belong/)]);
    const alone = load(`  api:\n    url: https://api.internal\n    cert_file: ${clientCert.cert}\n`);
    expect(messages(alone)).toEqual([
      "6:5 error cert_file needs key_file: give the client certificate and its key together",
    ]);
  });

  it("refuses TLS settings on an upstream whose targets are http", () => {
    const r = load(`  api:\n    targets: [http://a.internal, http://b.internal]\n    ca_file: ${ca.cert}\n`);
    expect(messages(r)).toEqual([
      "6:5 error ca_file applies to https:// targets only, and this upstream's are http",
    ]);
  });

  it("warns about insecure: true, and uses the file", () => {
    const r = load(`  api:\n    url: https://api.internal\n    insecure: true\n`);
    expect(r.ok).toBe(true);
    expect(messages(r)).toEqual([
      expect.stringMatching(/^6:5 warning insecure: true accepts any certificate/),
    ]);
  });

  it("changes the version when only the CA file changes", () => {
    writeFileSync(join(dir, "rotating.crt"), readFileSync(ca.cert));
    const yaml = `  api:\n    url: https://api.internal\n    ca_file: rotating.crt\n`;
    const first = load(yaml);
    writeFileSync(join(dir, "rotating.crt"), readFileSync(wrongCa.cert));
    const second = load(yaml);
    expect(first.ok && second.ok).toBe(true);
    if (first.ok && second.ok) expect(first.version).not.toBe(second.version);
  });
});
