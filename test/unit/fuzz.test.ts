// Hostile input never throws: each parser returns a result or its typed refusal for any input.
// fast-check drives arbitrary strings, byte soups and near-miss spellings through them.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compileRuntime } from "../../src/config/compile.js";
import { PositionedDocument } from "../../src/config/document.js";
import { substituteEnv } from "../../src/config/env.js";
import { loadConfigText } from "../../src/config/load.js";
import { parseDuration, parseRate, parseSize } from "../../src/config/units.js";
import { framingProblem, hostValueProblem, MAX_REQUEST_HEADERS } from "../../src/http/request-framing.js";
import { type Identification, identifyCaller } from "../../src/identity/caller.js";
import {
  parseForwarded,
  parseNode,
  parseXForwardedFor,
  resolveClientIp,
} from "../../src/identity/forwarded.js";
import { CidrSet, formatIp, parseCidr, parseIp } from "../../src/identity/ip.js";
import { plainRequestHead } from "../../src/proxy/upgrade.js";
import { normalizeTarget } from "../../src/routing/normalize.js";

const RUNS = { numRuns: 1000 };

/** Strings made of the characters that matter to each parser, plus anything at all. */
const pathy = fc.oneof(
  fc.string({
    unit: fc.constantFrom(
      "/",
      ".",
      "%",
      "2",
      "e",
      "E",
      "f",
      "F",
      "c",
      "0",
      "a",
      ";",
      "\\",
      "?",
      "#",
      "\u0000",
      "é",
      "~",
    ),
    maxLength: 40,
  }),
  fc.string({ unit: "binary", maxLength: 60 }),
  fc.string({ maxLength: 80 }),
);
const forwardy = fc.oneof(
  fc.string({
    unit: fc.constantFrom(
      ",",
      ";",
      "=",
      '"',
      "[",
      "]",
      ":",
      ".",
      "1",
      "f",
      "for",
      "unknown",
      "_x",
      " ",
      "\t",
      "::ffff:",
      "2001:db8::",
    ),
    maxLength: 30,
  }),
  fc.string({ unit: "binary", maxLength: 60 }),
  // Huge and non-ASCII.
  fc.string({ unit: "grapheme", maxLength: 200 }),
  fc.string({ unit: fc.constantFrom("1.2.3.4, ", '"', "\\", "é", "%"), minLength: 500, maxLength: 4000 }),
);

describe("never throws on hostile input", () => {
  it("path normalisation: a path that normalises to itself, or a refusal", () => {
    fc.assert(
      fc.property(pathy, (target) => {
        const r = normalizeTarget(target);
        if (!r.ok) {
          expect(typeof r.reason).toBe("string");
          return;
        }
        expect(r.path.startsWith("/")).toBe(true);
        expect(r.path).not.toMatch(/\/\.\.?(\/|$)|\/\/|\\|%2[fF]|%00/);
        // Normalising the result again changes nothing: one request, one path.
        const again = normalizeTarget(r.path + r.query);
        expect(again).toMatchObject({ ok: true, path: r.path, matchPath: r.matchPath });
      }),
      RUNS,
    );
  });

  it("forwarding headers: a caller IP is always an address (the peer's at worst)", () => {
    const proxies = new CidrSet(["127.0.0.0/8", "10.0.0.0/8", "::1/128"].map((c) => parseCidr(c)!));
    const peer = parseIp("127.0.0.1")!;
    fc.assert(
      fc.property(forwardy, (value) => {
        for (const kind of ["x-forwarded-for", "forwarded"] as const) {
          const ip = resolveClientIp(peer, value, kind, proxies);
          expect(parseIp(formatIp(ip))).not.toBeNull();
        }
        for (const hop of [...parseXForwardedFor(value), ...parseForwarded(value), parseNode(value)]) {
          if (hop !== null) expect(hop.length === 4 || hop.length === 16).toBe(true);
        }
      }),
      RUNS,
    );
  });

  it("Forwarded: nothing a client writes before its proxy's element can replace it", () => {
    // The client controls everything left of the element our trusted proxy appends (unbalanced
    // quotes, escapes, commas, semicolons, non-ASCII, huge values); the proxy appends a
    // well-formed `for=` with an untrusted address. That address must be the caller whatever
    // came before, whether the proxy appended a field line or extended the client's line.
    const proxies = new CidrSet(["127.0.0.0/8", "10.0.0.0/8"].map((c) => parseCidr(c)!));
    const peer = parseIp("127.0.0.1")!;
    const clientText = fc.oneof(
      fc.string({
        unit: fc.constantFrom('"', "\\", ",", ";", "=", "for", "10.0.0.7", " ", "[", "]", ":", "é", "\u0000"),
        maxLength: 40,
      }),
      fc.string({ maxLength: 3000 }),
    );
    const real = fc.tuple(fc.integer({ min: 11, max: 99 }), fc.integer({ min: 0, max: 255 }));
    fc.assert(
      fc.property(clientText, real, fc.boolean(), fc.boolean(), (client, [a, b], sameLine, quote) => {
        const address = `${a}.${b}.7.8`;
        const element = quote ? `for="${address}"` : `for=${address}`;
        const value = sameLine ? [`${client}, ${element}`] : [client, element];
        expect(formatIp(resolveClientIp(peer, value, "forwarded", proxies))).toBe(address);
      }),
      RUNS,
    );
  });

  it("Authorization: a caller only for the exact key, a refusal otherwise, never an exception", async () => {
    const loaded = loadConfigText(
      `store: { url: "memory://" }
upstreams: { api: http://127.0.0.1:1 }
identity:
  api_key: { bearer: true }
  jwt: { secret: "an-hs256-secret-of-at-least-32-characters!", default_plan: p }
clients: [{ id: alice, key: key-alice, plan: p }]
plans: { anonymous: {}, p: {} }
routes: [{ name: default, match: { path: / }, upstream: api }]
`,
      "gw.yaml",
      {},
    );
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    const rt = compileRuntime(loaded.config, { file: "gw.yaml", version: "1", jwt: loaded.jwt });
    const auth = fc.oneof(
      fc.string({
        unit: fc.constantFrom(
          "Bearer",
          "bearer",
          " ",
          "\t",
          "key-alice",
          ".",
          "eyJ",
          "a",
          '"',
          "\\",
          "é",
          "=",
        ),
        maxLength: 12,
      }),
      fc.string({ unit: "binary", maxLength: 200 }),
      fc.string({ minLength: 5000, maxLength: 20_000 }).map((t) => `Bearer ${t}`),
    );
    await fc.assert(
      fc.asyncProperty(auth, async (authorization) => {
        const result: Identification = await identifyCaller({ authorization }, "ip:1.2.3.4", rt);
        if (result.ok && result.caller.kind === "client") {
          // Only the exact key, or a token the secret signed (which random text never is).
          expect(authorization).toMatch(/^Bearer[ \t]+key-alice[ \t]*$/i);
          expect(result.caller.id).toBe("alice");
        } else if (!result.ok) {
          expect(result.detail.length).toBeGreaterThan(0);
        }
        // A readable Bearer credential is never silently anonymous.
        if (result.ok && result.caller.kind === "anonymous")
          expect(authorization).not.toMatch(/^Bearer(\s|$)/i);
      }),
      { numRuns: 500 },
    );
  });

  it("request framing: a refusal or null for any head, and a 431 past the field count", () => {
    const name = fc.constantFrom(
      "Host",
      "host",
      "HOST",
      "Authorization",
      "authorization",
      "X-A",
      "Transfer-Encoding",
    );
    const value = fc.string({ unit: fc.constantFrom("chunked", ",", " ", "gzip", "x", "é"), maxLength: 6 });
    fc.assert(
      fc.property(fc.array(fc.tuple(name, value), { maxLength: 120 }), fc.boolean(), (fields, http11) => {
        const raw = fields.flat();
        const headers: Record<string, string> = {};
        for (const [n, v] of fields) headers[n.toLowerCase()] ??= v;
        const r = framingProblem(raw, headers, 1, http11 ? 1 : 0);
        const hosts = fields.filter(([n]) => n.toLowerCase() === "host").length;
        const auths = fields.filter(([n]) => n.toLowerCase() === "authorization").length;
        if (fields.length > MAX_REQUEST_HEADERS) expect(r?.code).toBe("headers_too_large");
        else if (hosts > 1 || auths > 1) expect(r?.code).toBe("bad_request");
        if (r === null) expect(hosts <= 1 && auths <= 1 && fields.length <= MAX_REQUEST_HEADERS).toBe(true);
      }),
      RUNS,
    );
  });

  it("Host: only names of letters, digits, - and _ (or an IP literal) and a port pass", () => {
    const label = fc.string({ unit: fc.constantFrom("a", "Z", "0", "-", "_"), minLength: 1, maxLength: 6 });
    const name = fc.array(label, { minLength: 1, maxLength: 4 }).map((l) => l.join("."));
    const port = fc.option(fc.integer({ min: 0, max: 65_535 }), { nil: undefined });
    fc.assert(
      fc.property(name, fc.boolean(), port, (host, dot, p) => {
        expect(hostValueProblem(`${host}${dot ? "." : ""}${p === undefined ? "" : `:${p}`}`)).toBeNull();
      }),
      RUNS,
    );
    // Anything with a character an upstream may read as a separator, an escape or another host.
    const any = fc.string({
      unit: fc.constantFrom(
        "a",
        ".",
        ":",
        ",",
        "@",
        "%",
        "/",
        "\\",
        " ",
        "\t",
        "ａ",
        "。",
        "[",
        "]",
        "1",
        "_",
      ),
      maxLength: 12,
    });
    fc.assert(
      fc.property(any, (host) => {
        if (hostValueProblem(host) !== null) return;
        expect(host).toMatch(/^[A-Za-z0-9._:[\]-]*$/);
        // A bracketed literal, or a name without empty labels; then at most a numeric port.
        const rest = host.startsWith("[") ? host.slice(host.indexOf("]") + 1) : host;
        expect(rest).toMatch(/^(?:[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.?)?(?::[0-9]+)?$/);
      }),
      RUNS,
    );
    expect(hostValueProblem("api.example.com:65536")).not.toBeNull();
    expect(hostValueProblem("[::1]:8080")).toBeNull();
    expect(hostValueProblem("")).toBeNull();
  });

  it("an upgrade served plain: the rebuilt head never asks to upgrade and keeps every other field", () => {
    const token = fc.string({ unit: fc.constantFrom("a", "B", "-", "_", "1"), minLength: 1, maxLength: 8 });
    const name = fc.oneof(
      token,
      fc.constantFrom("Upgrade", "upgrade", "HTTP2-Settings", "Connection", "Host"),
    );
    const value = fc.string({
      unit: fc.constantFrom("h2c", "Upgrade", "upgrade", ",", " ", "HTTP2-Settings", "keep-alive", "x", "é"),
      maxLength: 8,
    });
    fc.assert(
      fc.property(fc.array(fc.tuple(name, value), { maxLength: 30 }), (fields) => {
        const head = plainRequestHead("GET", "/a?b", 1, fields.flat());
        expect(head.startsWith("GET /a?b HTTP/1.1\r\n")).toBe(true);
        expect(head.endsWith("\r\n\r\n")).toBe(true);
        const lines = head.slice(0, -4).split("\r\n").slice(1);
        for (const line of lines) {
          const [n, v] = [line.slice(0, line.indexOf(":")), line.slice(line.indexOf(":") + 2)];
          expect(["upgrade", "http2-settings"]).not.toContain(n.toLowerCase());
          if (n.toLowerCase() === "connection") {
            expect(v.split(",").map((t) => t.trim().toLowerCase())).not.toContain("upgrade");
          }
        }
        const kept = fields.filter(
          ([n]) => !["upgrade", "http2-settings", "connection"].includes(n.toLowerCase()),
        );
        for (const [n, v] of kept) expect(lines).toContain(`${n}: ${v}`);
      }),
      RUNS,
    );
  });

  it("env substitution: text and problems, never an exception", () => {
    const source = fc.string({
      unit: fc.constantFrom("$", "{", "}", ":", "-", "A", "_", "1", "\n", " ", "x"),
      maxLength: 40,
    });
    fc.assert(
      fc.property(
        source,
        fc.dictionary(fc.constantFrom("A", "A_1", "X"), fc.string({ maxLength: 5 })),
        (text, env) => {
          const r = substituteEnv(text, env);
          expect(typeof r.text).toBe("string");
          expect(Array.isArray(r.problems)).toBe(true);
        },
      ),
      RUNS,
    );
  });

  it("units: a number or null", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 20 }), (text) => {
        for (const parse of [parseDuration, parseRate, parseSize]) {
          const v = parse(text);
          expect(v === null || typeof v === "number" || typeof v === "object").toBe(true);
        }
      }),
      RUNS,
    );
  });

  it("config loader: a config or positioned problems, for any text", () => {
    const yamlish = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.string({
        unit: fc.constantFrom(
          "listen: ",
          "routes:",
          "\n",
          "  - ",
          "{",
          "}",
          "[",
          "]",
          ": ",
          "x",
          "1",
          "&a",
          "*a",
          "!!js",
          "${X}",
          "'",
          '"',
          "#",
          "\t",
          "- { name: a, match: { path: / }, upstream: api }",
          "upstreams: { api: http://127.0.0.1:1 }",
          "store: { url: memory:// }",
        ),
        maxLength: 30,
      }),
    );
    fc.assert(
      fc.property(yamlish, (text) => {
        const r = loadConfigText(text, "fuzz.yaml", {});
        if (r.ok) return;
        expect(r.problems.length).toBeGreaterThan(0);
        for (const p of r.problems) {
          expect(p.file).toBe("fuzz.yaml");
          expect(p.line).toBeGreaterThanOrEqual(1);
          expect(p.column).toBeGreaterThanOrEqual(1);
          expect(typeof p.message).toBe("string");
        }
      }),
      { numRuns: 1000 },
    );
  });

  it("YAML syntax errors: never the text of a token, wherever a stray bracket leaves it", () => {
    const SECRET = "s3cret-token-value";
    const text = fc.string({
      unit: fc.constantFrom(
        "token: ",
        "\\q",
        "%YAML ",
        "%TAG ",
        "!<",
        "!!",
        ">",
        '"',
        `"${SECRET}"`,
        `'${SECRET}'`,
        SECRET,
        "\n",
        "  ",
        "- ",
        "{",
        "}",
        "[",
        "]",
        ", ",
        ": ",
        "? ",
        "|",
        "&a ",
        "!t ",
        "%",
        "@",
        "`",
      ),
      maxLength: 40,
    });
    fc.assert(
      fc.property(text, (t) => {
        for (const p of new PositionedDocument("f.yaml", t, t, []).syntaxProblems()) {
          expect(p.message).not.toContain(SECRET);
          expect(p.message).not.toContain("\n");
        }
      }),
      RUNS,
    );
  });
});
