// Hostile input never throws: each parser returns a result or its typed refusal for any input.
// fast-check drives arbitrary strings, byte soups and near-miss spellings through them.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { substituteEnv } from "../../src/config/env.js";
import { loadConfigText } from "../../src/config/load.js";
import { parseDuration, parseRate, parseSize } from "../../src/config/units.js";
import {
  parseForwarded,
  parseNode,
  parseXForwardedFor,
  resolveClientIp,
} from "../../src/identity/forwarded.js";
import { CidrSet, formatIp, parseCidr, parseIp } from "../../src/identity/ip.js";
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
});
