// strip_prefix and rewrite (issue 16): the path an upstream receives, the route it was matched
// on unchanged, and what --check refuses.
import { describe, expect, it } from "vitest";
import { compileRuntime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import { normalizeTarget } from "../../src/routing/normalize.js";
import { compileRewrite, rewritePath } from "../../src/routing/rewrite.js";

const strip = (from: string) => compileRewrite(from, true, undefined)!;
const replace = (from: string, prefix: string) => compileRewrite(from, false, prefix)!;

describe("rewritePath", () => {
  it.each([
    ["/v1/billing", "/"],
    ["/v1/billing/", "/"],
    ["/v1/billing/x", "/x"],
    ["/v1/billing/x/", "/x/"],
    ["/v1/billing/invoices/7", "/invoices/7"],
  ])("strip_prefix on /v1/billing: %s → %s", (path, sent) => {
    expect(rewritePath(path, strip("/v1/billing"))).toBe(sent);
  });

  it.each([
    ["/v1/billing", "/billing"],
    ["/v1/billing/", "/billing/"],
    ["/v1/billing/x", "/billing/x"],
    ["/v1/billing/a/b", "/billing/a/b"],
  ])("rewrite /v1/billing → /billing: %s → %s", (path, sent) => {
    expect(rewritePath(path, replace("/v1/billing", "/billing"))).toBe(sent);
  });

  it("cuts the prefix by its length from the normalised path, keeping the client's case", () => {
    // Matching is case-insensitive, the path sent is not: /V1/Billing/Report matched /v1/billing.
    const target = normalizeTarget("/V1//Billing/./Report?Q=1");
    expect(target).toMatchObject({ ok: true, path: "/V1/Billing/Report", query: "?Q=1" });
    const { path } = target as { path: string };
    expect(rewritePath(path, strip("/v1/billing"))).toBe("/Report");
    expect(rewritePath(path, replace("/v1/billing", "/Billing"))).toBe("/Billing/Report");
    // Percent-encoded bytes stay encoded: the length cut is the same in both spellings.
    const encoded = normalizeTarget("/caf%C3%A9/x") as { path: string; matchPath: string };
    expect(rewritePath(encoded.path, strip(encoded.matchPath.slice(0, "/caf%c3%a9".length)))).toBe("/x");
  });

  it("a rewrite to / is a strip; a prefix written with a trailing slash does not double it", () => {
    expect(rewritePath("/v1/billing/x", replace("/v1/billing", "/"))).toBe("/x");
    expect(rewritePath("/v1/billing", replace("/v1/billing", "/"))).toBe("/");
    expect(rewritePath("/v1/billing/x", replace("/v1/billing", "/billing/"))).toBe("/billing/x");
  });

  it("a route of / has no prefix to drop: a strip keeps the path, a rewrite is prepended", () => {
    expect(rewritePath("/x/y", strip("/"))).toBe("/x/y");
    expect(rewritePath("/", strip("/"))).toBe("/");
    expect(rewritePath("/x", replace("/", "/billing"))).toBe("/billing/x");
  });

  it("refuses a path that is not below the prefix on a segment boundary (a caller's bug)", () => {
    expect(() => rewritePath("/v1/billingx", strip("/v1/billing"))).toThrow(/not below/);
    expect(() => rewritePath("/v1/bill", strip("/v1/billing"))).toThrow(/not below/);
    expect(() => rewritePath("/v2/billing/x", strip("/v1/billing"))).toThrow(/not below/);
  });

  it("neither key: no rewrite", () => {
    expect(compileRewrite("/v1/billing", false, undefined)).toBeNull();
  });
});

const head = `store: { url: "memory://" }
upstreams: { api: http://127.0.0.1:3000/base }
routes:
`;

/** Errors and warnings in file order, as `tollgate --check` prints them. */
function report(yaml: string): string[] {
  const r = loadConfigText(yaml, "gw.yaml", {});
  return [...(r.ok ? [] : r.problems), ...r.warnings]
    .sort((a, b) => a.line - b.line || a.column - b.column)
    .map(formatProblem);
}

describe("strip_prefix and rewrite in the config", () => {
  it("compiles onto the route, whose match and name are unchanged", () => {
    const r = loadConfigText(
      `${head}  - { name: billing, match: { path: /V1/Billing }, upstream: api, rewrite: { prefix: /billing } }
  - { name: files, match: { path: /files }, upstream: api, strip_prefix: true }
  - { name: plain, match: { path: /plain }, upstream: api }
`,
      "gw.yaml",
      {},
    );
    if (!r.ok) throw new Error(r.problems.map(formatProblem).join("\n"));
    const rt = compileRuntime(r.config, { file: "gw.yaml", version: "1" });
    const [billing, files, plain] = rt.routeList;
    expect(billing).toMatchObject({
      matchPrefix: "/v1/billing",
      rewrite: { from: "/v1/billing", to: "/billing" },
    });
    expect(files).toMatchObject({ rewrite: { from: "/files", to: "" } });
    expect(plain!.rewrite).toBeNull();
    expect(rt.routes.match("/v1/billing/x", "GET")).toBe(billing);
    // The upstream URL's own path stays in front of what is sent.
    expect(billing!.upstream.basePath).toBe("/base");
  });

  it("refuses strip_prefix and rewrite together", () => {
    expect(
      report(
        `${head}  - { name: b, match: { path: /v1/b }, upstream: api, strip_prefix: true, rewrite: { prefix: /b } }\n`,
      ),
    ).toEqual([
      "gw.yaml:4:69: routes[0].strip_prefix: give strip_prefix or rewrite, not both: each replaces the matched prefix (rewrite: { prefix: / } strips it too)",
    ]);
    // strip_prefix: false beside a rewrite says nothing.
    expect(
      report(
        `${head}  - { name: b, match: { path: /v1/b }, upstream: api, strip_prefix: false, rewrite: { prefix: /b } }\n`,
      ),
    ).toEqual([]);
  });

  it.each([
    ["billing", "rewrite.prefix: rewrite.prefix is a path: it starts with /"],
    ['"/billing?x=1"', 'rewrite.prefix: "/billing?x=1" is not a plain path (it has a query)'],
    ['"/a/%2F"', 'rewrite.prefix: "/a/%2F" is not a plain path (an encoded slash or backslash in the path)'],
    [
      "/billing/",
      'rewrite.prefix: "/billing/" is sent to the upstream as written, so it must be a normalised path without a trailing slash (dot segments resolved, "//" merged, ";parameters" dropped); write "/billing"',
    ],
    [
      '"/a//b/./c"',
      'rewrite.prefix: "/a//b/./c" is sent to the upstream as written, so it must be a normalised path without a trailing slash (dot segments resolved, "//" merged, ";parameters" dropped); write "/a/b/c"',
    ],
    [
      '"/bill%69ng"',
      'rewrite.prefix: "/bill%69ng" is sent to the upstream as written, so it must be a normalised path without a trailing slash (dot segments resolved, "//" merged, ";parameters" dropped); write "/billing"',
    ],
  ])("refuses rewrite.prefix %s, at its position", (prefix, message) => {
    const problems = report(
      `${head}  - { name: b, match: { path: /v1/b }, upstream: api, rewrite: { prefix: ${prefix} } }\n`,
    );
    expect(problems).toEqual([`gw.yaml:4:74: routes[0].${message}`]);
  });

  it("keeps the case of a prefix as written", () => {
    expect(
      report(
        `${head}  - { name: b, match: { path: /v1/b }, upstream: api, rewrite: { prefix: /Billing/V2 } }\n`,
      ),
    ).toEqual([]);
  });

  it("warns that stripping / does nothing, and so does rewriting it to /", () => {
    expect(
      report(`${head}  - { name: all, match: { path: / }, upstream: api, strip_prefix: true }\n`),
    ).toEqual([
      "gw.yaml:4:67: warning: routes[0].strip_prefix: this route's match.path is /: there is no prefix to strip, so strip_prefix does nothing",
    ]);
    expect(
      report(`${head}  - { name: all, match: { path: / }, upstream: api, rewrite: { prefix: / } }\n`),
    ).toEqual([
      "gw.yaml:4:72: warning: routes[0].rewrite.prefix: this route's match.path is /: there is no prefix to replace, so rewrite.prefix / does nothing",
    ]);
    // Prepending a prefix to every path of a route of / does something.
    expect(
      report(`${head}  - { name: all, match: { path: / }, upstream: api, rewrite: { prefix: /v2 } }\n`),
    ).toEqual([]);
  });
});
