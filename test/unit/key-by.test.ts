import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { CompiledPlan } from "../../src/config/compile.js";
import type { Caller } from "../../src/identity/caller.js";
import {
  type KeyBy,
  type KeyedRequest,
  type KeyPart,
  keyBy,
  parseKeyBy,
  pathSegment,
  queryValue,
  valueText,
} from "../../src/limits/key-by.js";
import { requestLimitKey } from "../../src/limits/state-keys.js";

const plan = { name: "free", limitsByRoute: new Map(), limits: [] } as unknown as CompiledPlan;
const bob: Caller = { kind: "client", id: "bob", plan, tenant: undefined, ipKey: "192.0.2.1" };
const carol: Caller = { kind: "client", id: "carol", plan, tenant: "acme", ipKey: "192.0.2.2" };
const anon: Caller = { kind: "anonymous", plan: undefined, ipKey: "2001:db8::/64" };
const jwtDan: Caller = {
  kind: "client",
  id: "jwt:dan",
  plan,
  tenant: "acme",
  ipKey: "192.0.2.3",
  claims: { sub: "dan", org: "o-1", n: 7, nested: { a: 1 } },
};

const by = (written: string | string[]): KeyBy => {
  const parsed = parseKeyBy(written);
  if ("error" in parsed) throw new Error(parsed.error);
  return parsed;
};
const request = (headers: Record<string, string>, path = "/v1/reports/r-17", query = ""): KeyedRequest => ({
  headers,
  path,
  query,
});
const key = (b: KeyBy, name: string, caller: Caller, req?: KeyedRequest, route = "reports") =>
  requestLimitKey("tg:", b, name, caller, route, req);

describe("by: parsing", () => {
  it("reads every form, lower-casing header names", () => {
    expect(by("route").parts).toEqual([{ kind: "route" }]);
    expect(by("header:X-Org-Id").parts).toEqual([{ kind: "header", name: "x-org-id" }]);
    expect(by(["caller", "query:model", "claim:https://x.example/org", "segment:3"]).text).toBe(
      "[caller, query:model, claim:https://x.example/org, segment:3]",
    );
    expect(by("tenant").scope).toBe("tenant");
    expect(by(["header:x", "ip"]).tagPart).toEqual({ kind: "ip" });
  });

  it.each([
    ["header:x org", /not a header name/],
    ["header:", /not a header name/],
    ["segment:0", /segment:0 names no path segment/],
    ["segment:33", /n from 1 to 32/],
    ["cookie:sid", /not a key part/],
    ["callers", /not a key part/],
  ])("refuses %s", (written, message) => {
    const parsed = parseKeyBy(written);
    expect("error" in parsed && parsed.error).toMatch(message);
  });

  it("names the list entry that is wrong, and a part listed twice", () => {
    expect(parseKeyBy(["caller", "nope"])).toMatchObject({ at: 1 });
    expect(parseKeyBy(["header:a", "header:A"])).toMatchObject({ at: 1, error: /listed twice/ });
    expect(parseKeyBy([])).toMatchObject({ error: /at least one/ });
  });
});

describe("by: keys", () => {
  it("keeps today's keys for a lone caller, tenant or ip", () => {
    expect(key(by("caller"), "free.global", carol)).toBe("tg:{t:acme}:c:carol:free.global");
    expect(key(by("tenant"), "free.tenant", carol)).toBe("tg:{t:acme}:free.tenant");
    expect(key(by("ip"), "free.search", bob)).toBe("tg:{ip:192.0.2.1}:free.search");
  });

  it("a route budget is one key whoever calls", () => {
    const k = key(by("route"), "search.total", bob, undefined, "search");
    expect(k).toBe("tg:{search.total:r=search}");
    expect(key(by("route"), "search.total", anon, request({}), "search")).toBe(k);
  });

  it("keys by header, query, claim and segment; with the caller, in the caller's slot", () => {
    const req = request({ "x-org-id": "acme", "x-model": "gpt-4o" }, "/v1/reports/r-17", "?model=a%2Fb");
    expect(key(by("header:x-org-id"), "search.per-org", bob, req)).toBe(
      "tg:{search.per-org:h.x-org-id=acme}",
    );
    expect(key(by("segment:3"), "free.reports", bob, req)).toBe("tg:{free.reports:s.3=r-17}");
    expect(key(by("query:model"), "free.q", bob, req)).toBe("tg:{free.q:q.model=a/b}");
    expect(key(by("claim:org"), "free.c", jwtDan, req)).toBe("tg:{free.c:j.org=o-1}");
    expect(key(by("claim:n"), "free.c", jwtDan, req)).toBe("tg:{free.c:j.n=7}");
    expect(key(by(["caller", "header:x-model"]), "free.models", carol, req)).toBe(
      "tg:{t:acme}:c:carol:free.models:h.x-model=gpt-4o",
    );
  });

  it("a missing value is keyed by the caller, never skipped or shared", () => {
    const none = request({}, "/v1");
    expect(key(by("header:x-org-id"), "s.per-org", bob, none)).toBe("tg:{s.per-org:h.x-org-id@client%3abob}");
    expect(key(by("header:x-org-id"), "s.per-org", anon, none)).toBe(
      "tg:{s.per-org:h.x-org-id@ip%3a2001%3adb8%3a%3a/64}",
    );
    expect(key(by("segment:3"), "free.reports", bob, none)).toBe("tg:{free.reports:s.3@client%3abob}");
    // A blank header is no value; a non-JWT caller has no claims; an object claim is no text.
    expect(key(by("header:x-org-id"), "s.per-org", bob, request({ "x-org-id": "  " }))).toContain("@client");
    expect(key(by("claim:org"), "free.c", bob, none)).toBe("tg:{free.c:j.org@client%3abob}");
    expect(key(by("claim:nested"), "free.c", jwtDan, none)).toContain("@client%3ajwt%3adan");
    // Nothing at all to read (the library's check, a test): still the caller.
    expect(key(by("header:x-org-id"), "s.per-org", bob)).toBe("tg:{s.per-org:h.x-org-id@client%3abob}");
    // A value cannot pose as a fallback: "@" only ever follows a part's label.
    expect(key(by("header:x-org-id"), "s.per-org", bob, request({ "x-org-id": "@client:bob" }))).toBe(
      "tg:{s.per-org:h.x-org-id=@client%3abob}",
    );
  });

  it("escapes structure and hashes what is long or not printable ASCII", () => {
    expect(valueText("a{b}c:d%e#f")).toBe("a%7bb%7dc%3ad%25e%23f");
    expect(valueText("x".repeat(64))).toBe("x".repeat(64));
    expect(valueText("x".repeat(65))).toMatch(/^#[A-Za-z0-9_-]{22}$/);
    expect(valueText("café")).toMatch(/^#/);
    expect(valueText("a b")).toMatch(/^#/);
    // Escaping that would pass the bound is hashed instead.
    expect(valueText("{".repeat(30))).toMatch(/^#/);
  });

  it("reads segments and query values as an upstream would", () => {
    expect(pathSegment("/v1/reports/r-17", 1)).toBe("v1");
    expect(pathSegment("/v1/reports/r-17", 3)).toBe("r-17");
    expect(pathSegment("/v1/reports/", 3)).toBeUndefined();
    expect(pathSegment("/v1", 2)).toBeUndefined();
    // Decoded as an upstream decodes it: one id, one budget, however it is spelt.
    expect(pathSegment("/v2/reports/a%3Ab", 3)).toBe("a:b");
    expect(pathSegment("/v2/reports/a%40b%2C", 3)).toBe("a@b,");
    expect(pathSegment("/v2/reports/R-17", 3)).toBe("R-17");
    expect(queryValue("?model=gpt%2D4&x=1", "model")).toBe("gpt-4");
    expect(queryValue("?model=", "model")).toBeUndefined();
    expect(queryValue("", "model")).toBeUndefined();
  });
});

// --- The property: distinct (limit, values) never share a key; no key grows past the bound ----

const NAMES = [
  "free.global",
  "free.reports",
  "search.total",
  "search.per-org",
  "a-very-long_plan.route.name-x",
];
const part: fc.Arbitrary<KeyPart> = fc.oneof(
  fc.constantFrom<KeyPart>({ kind: "caller" }, { kind: "tenant" }, { kind: "ip" }, { kind: "route" }),
  fc.constantFrom("x-org-id", "x-model", "a#b%c").map((name): KeyPart => ({ kind: "header", name })),
  fc.constantFrom("model", "org").map((name): KeyPart => ({ kind: "query", name })),
  fc.constantFrom("org", "https://x.example/tier").map((name): KeyPart => ({ kind: "claim", name })),
  fc.integer({ min: 1, max: 4 }).map((index): KeyPart => ({ kind: "segment", index })),
);
const parts = fc.uniqueArray(part, { minLength: 1, maxLength: 4, selector: (p) => JSON.stringify(p) });
/** Values a client or a token can send: structure characters, unicode, long strings, empties. */
const value = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.string({ unit: fc.constantFrom("{", "}", ":", "%", "#", "@", "=", "a", "/", " "), maxLength: 80 }),
  fc.string({ unit: "grapheme", maxLength: 20 }),
  fc.string({ minLength: 60, maxLength: 300 }),
);
/** What config/schema.ts and a JWT's claims let an id be (CALLER_ID). */
const callerId = fc.string({
  unit: fc.constantFrom(..."abcXYZ019._~@+=:-/"),
  minLength: 1,
  maxLength: 256,
});
const callerArb: fc.Arbitrary<Caller> = fc.oneof(
  fc
    .record({ id: callerId, tenant: fc.option(callerId, { nil: undefined }) })
    .map(({ id, tenant }): Caller => ({ kind: "client", id, plan, tenant, ipKey: "192.0.2.9", claims: {} })),
  fc
    .constantFrom("192.0.2.1", "2001:db8::/64")
    .map((ipKey): Caller => ({ kind: "anonymous", plan: undefined, ipKey })),
);
const requestArb = fc.record({
  header: fc.dictionary(fc.constantFrom("x-org-id", "x-model", "a#b%c"), value),
  query: fc.dictionary(fc.constantFrom("model", "org"), value),
  claims: fc.dictionary(fc.constantFrom("org", "https://x.example/tier"), value),
  segments: fc.array(
    value.filter((v) => !v.includes("/")),
    { maxLength: 5 },
  ),
});

type Drawn = { caller: Caller; req: KeyedRequest };
type Drawing = {
  header: Record<string, string>;
  query: Record<string, string>;
  claims: Record<string, string>;
  segments: string[];
};
function drawn(caller: Caller, r: Drawing): Drawn {
  const claimed: Caller = caller.kind === "client" ? { ...caller, claims: r.claims } : caller;
  return {
    caller: claimed,
    req: {
      headers: r.header,
      path: `/${r.segments.join("/")}`,
      query: `?${new URLSearchParams(r.query).toString()}`,
    },
  };
}

/** What the key is meant to tell apart: the limit and each part's value (or the caller standing in). */
function identity(name: string, b: KeyBy, d: Drawn, route: string): string {
  const callerId = d.caller.kind === "client" ? `client:${d.caller.id}` : `ip:${d.caller.ipKey}`;
  const seen = b.parts.map((p) => {
    switch (p.kind) {
      case "caller":
        return d.caller.kind === "client" && d.caller.tenant !== undefined
          ? `${d.caller.tenant}/${callerId}`
          : callerId;
      case "tenant":
        return d.caller.kind === "client" && d.caller.tenant !== undefined
          ? `t=${d.caller.tenant}`
          : `@${callerId}`;
      case "ip":
        return `ip=${d.caller.ipKey}`;
      case "route":
        return route;
      default: {
        const v = partOf(p, d);
        return v === undefined ? `@${callerId}` : `=${v}`;
      }
    }
  });
  return JSON.stringify([name, b.text, seen]);
}

function partOf(p: KeyPart, d: Drawn): string | undefined {
  const nonBlank = (v: unknown) => (typeof v === "string" && v.trim() !== "" ? v : undefined);
  switch (p.kind) {
    case "header": {
      const v = d.req.headers[p.name];
      return typeof v === "string" && v.trim() !== "" ? v : undefined;
    }
    case "query":
      return queryValue(d.req.query, p.name);
    case "claim":
      return d.caller.kind === "client" ? nonBlank(d.caller.claims?.[p.name]) : undefined;
    case "segment":
      return pathSegment(d.req.path, p.index);
    default:
      return undefined;
  }
}

describe("by: the key property", () => {
  it("distinct limits and values never share a state key; every key is bounded and has one hash tag", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            name: fc.constantFrom(...NAMES),
            parts,
            caller: callerArb,
            r: requestArb,
            route: fc.constantFrom("search", "reports"),
          }),
          { minLength: 2, maxLength: 12 },
        ),
        (draws) => {
          const byOfName = new Map<string, KeyBy>();
          const seen = new Map<string, string>();
          for (const d of draws) {
            // One config gives one name one `by`.
            const b = byOfName.get(d.name) ?? keyBy(d.parts);
            byOfName.set(d.name, b);
            const drawnOne = drawn(d.caller, d.r);
            const k = requestLimitKey("tg:", b, d.name, drawnOne.caller, d.route, drawnOne.req);
            const body = k.slice("tg:".length);
            expect(body.length).toBeLessThanOrEqual(200);
            expect(body.split("{").length - 1).toBe(1);
            expect(body.split("}").length - 1).toBe(1);
            expect(body.startsWith("{")).toBe(true);
            const id = identity(d.name, b, drawnOne, d.route);
            const before = seen.get(k);
            if (before !== undefined) expect(before).toBe(id);
            seen.set(k, id);
          }
        },
      ),
      { numRuns: 400 },
    );
  });
});
