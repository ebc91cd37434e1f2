// `listen` with TLS (issue 16), without a socket: the two spellings of `listen`, the certificate
// and key read and checked at load with the position of the key that names them (what `--check`
// prints), the reload's view of a changed certificate, and the pieces that make an HTTP/2 stream
// read as an HTTP/1.1 request to the pipeline (framing, body, forwarded headers, the compat
// subclasses). The certificates are made by the openssl CLI into a temporary directory.
import { execFileSync } from "node:child_process";
import { EventEmitter } from "node:events";
import { writeFileSync } from "node:fs";
import { METHODS } from "node:http";
import { join } from "node:path";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { loadListenerTls } from "../../src/config/listener-tls.js";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import { splitRestartOnly } from "../../src/config/restart.js";
import { H2Request, H2Response } from "../../src/gateway/h2-compat.js";
import { runtimeOf } from "../../src/gateway/reload-decision.js";
import { H2_SERVER_OPTIONS } from "../../src/gateway/tls.js";
import { framingProblem, MAX_REQUEST_HEADERS } from "../../src/http/request-framing.js";
import { hasBody, upstreamRequestHeaders } from "../../src/proxy/headers.js";
import { makeCertificate, type TestCertificate } from "../support/certs.js";

let cert: TestCertificate;
let other: TestCertificate;
let dir: string;

beforeAll(() => {
  cert = makeCertificate();
  dir = join(cert.certFile, "..");
  other = makeCertificate("other", dir);
});

const yaml = (listen: string) => `${listen}
store: { url: "memory://" }
upstreams: { api: http://127.0.0.1:3000 }
routes:
  - { name: default, match: { path: / }, upstream: api }
`;
const tlsListen = (certFile: string, keyFile: string, address = "0.0.0.0:8443") =>
  `listen:\n  address: "${address}"\n  tls:\n    cert_file: ${certFile}\n    key_file: ${keyFile}`;
/** Loaded as if the config file sat beside the certificates, so relative names resolve there. */
const load = (text: string) => loadConfigText(text, join(dir, "gateway.yaml"), {});
const problems = (text: string) => {
  const r = load(text);
  return r.ok ? [] : r.problems.map(formatProblem);
};

describe("listen", () => {
  it("is a host:port, or a mapping whose tls names a certificate and key relative to the config", () => {
    const plain = load(yaml("listen: 127.0.0.1:8080"));
    if (!plain.ok) throw new Error(JSON.stringify(plain.problems));
    expect(runtimeOf(plain).listen).toEqual({ address: "127.0.0.1:8080", tls: undefined });
    const mapping = load(yaml('listen: { address: "127.0.0.1:8080" }'));
    if (!mapping.ok) throw new Error(JSON.stringify(mapping.problems));
    expect(runtimeOf(mapping).listen).toEqual({ address: "127.0.0.1:8080", tls: undefined });

    const tls = load(yaml(tlsListen("server.crt", "server.key")));
    if (!tls.ok) throw new Error(JSON.stringify(tls.problems));
    const listen = runtimeOf(tls).listen;
    expect(listen.address).toBe("0.0.0.0:8443");
    expect(listen.tls).toMatchObject({
      certFile: cert.certFile,
      keyFile: cert.keyFile,
      cert: cert.cert,
      key: cert.key,
      fingerprint: cert.fingerprint,
    });
    expect(Date.parse(listen.tls!.notAfter)).toBeGreaterThan(Date.now());
  });

  it("refuses what is neither, with the position of what is wrong", () => {
    expect(problems(yaml("listen: 8080"))).toEqual([
      `${join(dir, "gateway.yaml")}:1:9: listen: expected host:port such as 0.0.0.0:8080, or a mapping { address, tls: { cert_file, key_file } }`,
    ]);
    expect(problems(yaml('listen: { address: "0.0.0.0:1", tls: { cert_file: a.crt } }'))).toEqual([
      expect.stringMatching(/:1:38: listen\.tls: key_file is required$/),
    ]);
    expect(problems(yaml('listen: { adress: "0.0.0.0:1" }'))).toContainEqual(
      expect.stringMatching(/unknown key "adress"; did you mean "address"\?/),
    );
  });

  it.each([
    [
      "a certificate file that is not there",
      "missing.crt",
      "server.key",
      "cert_file",
      /cannot read .*missing\.crt: no such file/,
    ],
    [
      "a key file that is not there",
      "server.crt",
      "missing.key",
      "key_file",
      /cannot read .*missing\.key: no such file/,
    ],
    [
      "a certificate file with no certificate",
      "server.key",
      "server.key",
      "cert_file",
      /holds no PEM certificate/,
    ],
    ["a key file with no key", "server.crt", "server.crt", "key_file", /holds no PEM private key/],
    [
      "a key of another certificate",
      "server.crt",
      "other.key",
      "key_file",
      /does not belong to the first certificate of .*server\.crt/,
    ],
  ])(
    "refuses %s at the key that names it (as --check prints it)",
    (_case, certFile, keyFile, key, message) => {
      const found = problems(yaml(tlsListen(certFile, keyFile)));
      expect(found).toHaveLength(1);
      const line = key === "cert_file" ? 4 : 5;
      expect(found[0]).toMatch(new RegExp(`gateway\\.yaml:${line}:\\d+: listen\\.tls\\.${key}: `));
      expect(found[0]).toMatch(message);
    },
  );

  it("refuses an encrypted key, saying how to write it plain", () => {
    const encrypted = join(dir, "encrypted.key");
    execFileSync("openssl", [
      "pkey",
      "-in",
      cert.keyFile,
      "-aes256",
      "-passout",
      "pass:secret",
      "-out",
      encrypted,
    ]);
    expect(problems(yaml(tlsListen("server.crt", "encrypted.key")))).toEqual([
      expect.stringMatching(
        /:5:\d+: listen\.tls\.key_file: .*encrypted\.key is encrypted; give the key without a passphrase/,
      ),
    ]);
  });

  it("warns of a certificate that has expired, and still loads it", () => {
    const config = load(yaml(tlsListen("server.crt", "server.key")));
    if (!config.ok) throw new Error("config");
    const later = loadListenerTls(config.config, join(dir, "gateway.yaml"), Date.now() + 3 * 86_400_000);
    expect(later).toMatchObject({
      ok: true,
      warnings: [{ key: "cert_file", message: expect.stringMatching(/server\.crt expired on /) }],
    });
  });

  it("is part of the config's version, so a new certificate in the same files is a change a reload applies", () => {
    const files = tlsListen("rotating.crt", "rotating.key");
    writeFileSync(join(dir, "rotating.crt"), cert.cert);
    writeFileSync(join(dir, "rotating.key"), cert.key);
    const first = load(yaml(files));
    writeFileSync(join(dir, "rotating.crt"), other.cert);
    writeFileSync(join(dir, "rotating.key"), other.key);
    const second = load(yaml(files));
    if (!first.ok || !second.ok) throw new Error("config");
    expect(second.version).not.toBe(first.version);
    expect(second.tls?.fingerprint).toBe(other.fingerprint);
  });

  it("needs a restart for a new address or for TLS on or off, not for other certificate files", () => {
    const at = (listen: string) => {
      const r = load(yaml(listen));
      if (!r.ok) throw new Error(JSON.stringify(r.problems));
      return r.config;
    };
    const current = at(tlsListen("server.crt", "server.key"));
    const otherFiles = splitRestartOnly(current, at(tlsListen("other.crt", "other.key")));
    expect(otherFiles.restartRequired).toEqual([]);
    expect(otherFiles.config.listen).toMatchObject({ tls: { cert_file: "other.crt" } });
    expect(
      splitRestartOnly(current, at(tlsListen("server.crt", "server.key", "0.0.0.0:9443"))).restartRequired,
    ).toEqual(["listen"]);
    const off = splitRestartOnly(current, at('listen: "0.0.0.0:8443"'));
    expect(off.restartRequired).toEqual(["listen"]);
    expect(off.config.listen).toEqual(current.listen);
    expect(
      splitRestartOnly(at('listen: "0.0.0.0:8443"'), at('listen: { address: "0.0.0.0:8443" }'))
        .restartRequired,
    ).toEqual([]);
  });
});

describe("HTTP/2 framing (request-framing.ts)", () => {
  const h2 = (fields: [string, string][], authority: string | undefined = "api.example.com") => {
    const headers: Record<string, string> = { ":method": "GET", ":path": "/", ":scheme": "https" };
    if (authority !== undefined) headers[":authority"] = authority;
    const raw: string[] = [];
    for (const [n, v] of fields) {
      headers[n] = v;
      raw.push(n, v);
    }
    if (headers.host === undefined && authority !== undefined) headers.host = authority;
    return framingProblem(raw, headers, 2, 0, "/");
  };

  it("refuses connection-specific fields, and a TE other than trailers", () => {
    for (const name of ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"]) {
      expect(h2([[name, "x"]])?.detail, name).toMatch(/connection-specific/);
    }
    expect(h2([["te", "gzip"]])?.code).toBe("bad_request");
    expect(h2([["te", "trailers"]])).toBeNull();
  });

  it("takes only the methods an HTTP/1.1 request line may carry: a lower-case method cannot miss a route's methods", () => {
    const method = (m: string) => {
      const headers = { ":method": m, ":path": "/", ":scheme": "https", ":authority": "api.example.com" };
      return framingProblem([], headers, 2, 0, "/");
    };
    for (const m of ["post", "Post", "pOST", "get", "delete", "FOO", "GET ", "PO ST"]) {
      expect(method(m), m).toMatchObject({
        code: "bad_request",
        detail: expect.stringMatching(/case-sensitive/),
      });
    }
    for (const m of ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "PROPFIND"]) {
      expect(method(m), m).toBeNull();
    }
    // Any :method a client sends: refused unless an HTTP/1.1 request line could carry it.
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.constantFrom(...METHODS).map((m) => m.toLowerCase()),
        ),
        (m) => {
          expect(method(m) === null).toBe(METHODS.includes(m));
        },
      ),
    );
  });

  it("refuses a Host naming another host than :authority; the same host with another port is the same", () => {
    expect(h2([["host", "other.example.com"]])?.detail).toMatch(/:authority/);
    expect(h2([["host", "API.example.com:443"]])).toBeNull();
    expect(h2([])).toBeNull();
    // No authority at all is allowed (RFC 9113 §8.3.1), as HTTP/1.0 without Host is.
    expect(h2([], undefined)).toBeNull();
  });

  it("measures the header block as HTTP/2 does, and refuses one past 16 KiB with a 431", () => {
    expect(h2([["x-big", "b".repeat(16 * 1024 - 100)]])).toBeNull();
    expect(h2([["x-big", "b".repeat(16 * 1024)]])?.code).toBe("headers_too_large");
    // HTTP/1.1's block is measured by Node's parser (the listener's maxHeaderSize).
    expect(framingProblem(["host", "x", "x-big", "b".repeat(17_000)], { host: "x" }, 1, 1)).toBeNull();
  });

  it("lets Node's own limit on header fields sit above the gateway's, so the gateway's 431 is what a client sees", () => {
    expect(H2_SERVER_OPTIONS.maxHeaderListPairs).toBeGreaterThan(MAX_REQUEST_HEADERS + 5);
  });
});

describe("an HTTP/2 request toward the upstream", () => {
  it("has a body unless its HEADERS ended the stream, with or without Content-Length", () => {
    expect(hasBody({ headers: {}, stream: { endAfterHeaders: false } })).toBe(true);
    expect(hasBody({ headers: {}, stream: { endAfterHeaders: true } })).toBe(false);
    expect(hasBody({ headers: { "content-length": "0" }, stream: { endAfterHeaders: false } })).toBe(false);
    expect(hasBody({ headers: {} })).toBe(false);
    expect(hasBody({ headers: { "transfer-encoding": "chunked" } })).toBe(true);
  });

  it("says https in X-Forwarded-Proto and HTTP/2 in Via", () => {
    const ctx = {
      upstreamHost: "api.internal",
      peer: "192.0.2.1",
      peerTrusted: false,
      forwardedFor: undefined,
      identity: { client: undefined, tenant: undefined, plan: undefined },
      requestId: "r1",
      keyHeader: "x-api-key",
    };
    const h2 = upstreamRequestHeaders(
      ["accept", "*/*"],
      { ":method": "GET", host: "gw", accept: "*/*" },
      {
        ...ctx,
        scheme: "https",
      },
    );
    const pairs = (list: string[]) =>
      Object.fromEntries(list.flatMap((v, i) => (i % 2 ? [] : [[v, list[i + 1]]])));
    expect(pairs(h2)).toMatchObject({
      "x-forwarded-proto": "https",
      via: "2 tollgate",
      "x-forwarded-host": "gw",
    });
    expect(pairs(upstreamRequestHeaders([], { host: "gw" }, ctx))).toMatchObject({
      "x-forwarded-proto": "http",
      via: "1.1 tollgate",
    });
  });
});

describe("the compatibility subclasses (h2-compat.ts)", () => {
  /** What Node's compat classes touch of a stream, and what respond() was given. */
  const fakeStream = () =>
    Object.assign(new EventEmitter(), {
      headersSent: false,
      destroyed: false,
      closed: false,
      headRequest: false,
      responded: undefined as Record<string, unknown> | undefined,
      respond(headers: Record<string, unknown>) {
        this.responded = headers;
        this.headersSent = true;
      },
      end() {},
      resume() {},
      pause() {},
    });

  it("gives a request its :authority as Host and leaves the pseudo-headers out of rawHeaders", () => {
    const stream = fakeStream();
    const headers = {
      ":method": "GET",
      ":path": "/x",
      ":authority": "api.example.com",
      ":scheme": "https",
      accept: "a",
    };
    const raw = [
      ":method",
      "GET",
      ":path",
      "/x",
      ":authority",
      "api.example.com",
      ":scheme",
      "https",
      "accept",
      "a",
    ];
    // biome-ignore lint/suspicious/noExplicitAny: a stand-in for Node's ServerHttp2Stream
    const req = new H2Request(stream as any, headers, {}, raw);
    expect(req.headers.host).toBe("api.example.com");
    expect(req.rawHeaders).toEqual(["accept", "a"]);
    expect(req.httpVersionMajor).toBe(2);
    const withHost = new H2Request(
      // biome-ignore lint/suspicious/noExplicitAny: as above
      fakeStream() as any,
      { ":authority": "a.example", host: "b.example" },
      {},
      [":authority", "a.example", "host", "b.example"],
    );
    // Both kept as sent: framing refuses the pair.
    expect(withHost.headers.host).toBe("b.example");
  });

  it("drops the HTTP/1.1 connection fields from a response head and reports a destroyed stream", () => {
    const stream = fakeStream();
    // biome-ignore lint/suspicious/noExplicitAny: as above
    const res = new H2Response(stream as any);
    res.shouldKeepAlive = false;
    res.writeHead(400, {
      connection: "close",
      "keep-alive": "5",
      "content-type": "application/problem+json",
    });
    expect(stream.responded).toMatchObject({ ":status": 400, "content-type": "application/problem+json" });
    expect(stream.responded).not.toHaveProperty("connection");
    expect(stream.responded).not.toHaveProperty("keep-alive");
    expect(res.destroyed).toBe(false);
    stream.destroyed = true;
    expect(res.destroyed).toBe(true);
  });
});
