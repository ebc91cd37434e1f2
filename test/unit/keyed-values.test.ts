// A request is refused when a field its route's limits key by could be read by the upstream
// under another value than the one counted (proxy/keyed-values.ts).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  forgedTrustedHeader,
  keyedValueProblem,
  methodOverrideProblem,
} from "../../src/proxy/keyed-values.js";

const route = { keyedHeaders: ["x-org-id", "x-model"], keyedQuery: ["model"] };
const raw = (...pairs: [string, string][]) => pairs.flat();
const problem = (headers: [string, string][], query = "") => keyedValueProblem(route, raw(...headers), query);

describe("keyed values an upstream could read differently", () => {
  it("pass one copy of each keyed field, whatever else comes", () => {
    expect(
      problem(
        [
          ["Host", "a"],
          ["X-Org-Id", "acme"],
          ["x-model", "m"],
          ["x_other", "1"],
        ],
        "?model=a&b=1;c=2",
      ),
    ).toBe(undefined);
    expect(problem([["Connection", "keep-alive, x-other"]], "?model=a%3Bb")).toBeUndefined();
    expect(
      keyedValueProblem({ keyedHeaders: [], keyedQuery: [] }, raw(["x-org-id", "a"], ["x-org-id", "b"]), ""),
    ).toBe(undefined);
  });

  it.each([
    [
      "a header twice, in any case",
      [
        ["x-org-id", "a"],
        ["X-ORG-ID", "b"],
      ],
      "",
      /more than once/,
    ],
    ["an underscore spelling (WSGI reads it as the header)", [["x_org_id", "acme"]], "", /read as x-org-id/],
    [
      "both spellings",
      [
        ["x-org-id", "a"],
        ["X_Org_Id", "b"],
      ],
      "",
      /read as x-org-id/,
    ],
    [
      "a keyed header named in Connection",
      [["Connection", "close, X-Model"]],
      "",
      /lists x-model in Connection/,
    ],
    [
      "an underscore spelling in Connection",
      [["connection", "x_org_id"]],
      "",
      /lists x-org-id in Connection/,
    ],
    ["a parameter twice", [], "?model=a&model=b", /more than once/],
    ["a parameter encoded twice", [], "?model=a&%6dodel=b", /more than once/],
    ["a parameter behind a ;", [], "?model=fresh;model=victim", /more than once/],
    ["a raw ; inside the value", [], "?model=a;b", /holds a ";"/],
    ["another case", [], "?MODEL=x", /read as "model"/],
    ["an array spelling", [], "?model[]=x", /read as "model"/],
    ["an encoded array spelling", [], "?model%5B%5D=x", /read as "model"/],
    ["a dotted spelling (PHP reads it as the header)", [["x.org.id", "acme"]], "", /read as x-org-id/],
    ["a dotted spelling in Connection", [["connection", "X.Model"]], "", /lists x-model in Connection/],
    ["a name behind a space (PHP drops leading spaces)", [], "?+model=x", /read as "model"/],
    ["a name behind an encoded space", [], "?%20model=x", /read as "model"/],
  ] as [string, [string, string][], string, RegExp][])("refuse %s", (_name, headers, query, message) => {
    expect(problem(headers, query)).toMatch(message);
  });

  it.each([
    ["user.id=u1"],
    ["user+id=u1"],
    ["user%20id=u1"],
    ["user[id=u1"],
    ["%20user_id=u1"],
    ["USER.ID=u1"],
    ["user_id%00=u1"],
    ["user_id%00junk=u1"],
    ["user_id[0]=u1"],
    ["user_id[a]=u1"],
  ])("refuse ?user_id=u2&%s: PHP reads that name as user_id too", (other) => {
    const perUser = { keyedHeaders: [], keyedQuery: ["user_id"] };
    expect(keyedValueProblem(perUser, [], `?user_id=u2&${other}`)).toMatch(/read as "user_id"/);
    expect(keyedValueProblem(perUser, [], "?user_id=u2&user[id]=u1")).toBeUndefined();
  });

  it("never throw, and pass only requests with one unambiguous copy of each keyed field (fuzz)", () => {
    const name = fc.constantFrom(
      "x-org-id",
      "X-Org-Id",
      "x_org_id",
      "X_ORG_ID",
      "x.org.id",
      "X.Org_Id",
      "x-model",
      "connection",
      "host",
      "x-other",
    );
    const value = fc.oneof(
      fc.constantFrom("close", "x-org-id", "keep-alive, x_model", ""),
      fc.string({ maxLength: 12 }),
    );
    const queryPart = fc.oneof(
      fc.constantFrom(
        "model=a",
        "MODEL=b",
        "model[]=c",
        "%6dodel=d",
        "model=e;f",
        "+model=g",
        "%20model=h",
        "model=%3B",
        "x=1",
        "model",
        "",
      ),
      fc.string({ maxLength: 10 }),
    );
    fc.assert(
      fc.property(
        fc.array(fc.tuple(name, value), { maxLength: 6 }),
        fc.array(queryPart, { maxLength: 5 }),
        fc.constantFrom("&", ";"),
        (headers, parts, sep) => {
          const query = parts.length ? `?${parts.join(sep)}` : "";
          const answer = problem(headers, query);
          if (answer !== undefined) return;
          // Passed: each keyed header at most once, under its own name, never hop-by-hop.
          for (const keyed of route.keyedHeaders) {
            const spellings = headers.filter(([n]) => n.toLowerCase().replace(/[_.]/g, "-") === keyed);
            expect(spellings.length).toBeLessThanOrEqual(1);
            if (spellings[0]) expect(spellings[0][0].toLowerCase()).toBe(keyed);
            for (const [n, v] of headers) {
              if (n.toLowerCase() !== "connection") continue;
              expect(v.split(",").map((t) => t.trim().toLowerCase().replace(/[_.]/g, "-"))).not.toContain(
                keyed,
              );
            }
          }
          // …and the keyed parameter once, whichever of & and ; an upstream splits on.
          const copies = (query.slice(1).split(/[&;]/) as string[]).filter((p) => {
            const n = p.split("=")[0]!;
            let decoded = n;
            try {
              decoded = decodeURIComponent(n.replace(/\+/g, " "));
            } catch {}
            return decoded.toLowerCase().replace(/^ +/, "").replace(/\[\]$/, "") === "model";
          });
          expect(copies.length).toBeLessThanOrEqual(1);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it.each([
    ["?_method=DELETE"],
    ["?a=1&_METHOD=put"],
    ["?%5Fmethod=DELETE"],
    ["?.method=DELETE"],
    ["?_method[]=x"],
    ["?_method"],
  ])("refuse %s: a method override some frameworks honour", (query) => {
    expect(methodOverrideProblem(query)).toMatch(/another method/);
  });

  it.each([[""], ["?"], ["?method=x"], ["?my_method=x"], ["?a=_method"]])("pass %s", (query) => {
    expect(methodOverrideProblem(query)).toBeUndefined();
  });
});

describe("a keyed header holding a list", () => {
  it("is refused like two lines of it: an upstream may read either member", () => {
    expect(problem([["x-org-id", "acme, acme"]])).toMatch(/holds a list of values/);
    expect(problem([["x-org-id", "acme,other"]])).toMatch(/holds a list of values/);
    expect(problem([["x-org-id", "acme"]])).toBeUndefined();
  });

  it("is not looked for in a one-value field whose grammar holds commas, nor in a field nobody keys by", () => {
    const ua = { keyedHeaders: ["user-agent"], keyedQuery: [] };
    const chrome =
      "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36";
    expect(keyedValueProblem(ua, raw(["User-Agent", chrome]), "")).toBeUndefined();
    expect(problem([["accept", "text/html, application/json"]])).toBeUndefined();
  });

  it("never lets a keyed value with a comma through, whatever surrounds it (property)", () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (left, right) => {
        expect(problem([["x-model", `${left},${right}`]])).toBeDefined();
      }),
    );
  });
});

describe("trusted_headers", () => {
  it("finds a trusted proxy's header in any spelling an upstream folds onto it", () => {
    expect(forgedTrustedHeader(["x-org"], raw(["Host", "a"], ["X-Org", "acme"]))).toBe("x-org");
    expect(forgedTrustedHeader(["x-org"], raw(["x_org", "acme"]))).toBe("x-org");
    expect(forgedTrustedHeader(["x-org"], raw(["x-orgs", "acme"]))).toBeUndefined();
  });
});
