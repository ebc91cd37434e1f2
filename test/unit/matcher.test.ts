import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hostPatternProblem, normalizeHostPattern, requestHost } from "../../src/routing/host.js";
import { ancestorAt, type MatchableRoute, methodSet, RouteMatcher } from "../../src/routing/matcher.js";
import { normalizeTarget } from "../../src/routing/normalize.js";

interface NamedRoute extends MatchableRoute {
  name: string;
}

const route = (name: string, prefix: string, methods?: string[], host?: string): NamedRoute => ({
  name,
  matchPrefix: (normalizeTarget(prefix) as { matchPath: string }).matchPath,
  methods: methodSet(methods),
  host: host === undefined ? null : normalizeHostPattern(host),
});

const matcher = new RouteMatcher([
  route("default", "/"),
  route("login", "/login", ["POST"]),
  route("video", "/v1/generate/video"),
  route("search", "/v1/search", ["GET"]),
]);

function match(target: string, method = "GET"): string | undefined {
  const n = normalizeTarget(target);
  if (!n.ok) throw new Error(n.reason);
  return matcher.match(n.matchPath, method)?.name;
}

describe("route matching", () => {
  it("takes the longest prefix on segment boundaries", () => {
    expect(match("/v1/generate/video")).toBe("video");
    expect(match("/v1/generate/video/7")).toBe("video");
    expect(match("/v1/generate/videos")).toBe("default");
    expect(match("/v1/generate")).toBe("default");
  });

  it("is case-insensitive and ignores a trailing slash", () => {
    expect(match("/V1/Generate/VIDEO/")).toBe("video");
  });

  it("falls through to a shorter prefix when the method does not match", () => {
    expect(match("/login", "POST")).toBe("login");
    expect(match("/login", "GET")).toBe("default");
    expect(match("/v1/search", "GET")).toBe("search");
    expect(match("/v1/search", "HEAD")).toBe("search");
    expect(match("/v1/search", "POST")).toBe("default");
  });

  it("answers undefined when nothing matches", () => {
    const narrow = new RouteMatcher([route("api", "/api")]);
    expect(narrow.match("/apix", "GET")).toBeUndefined();
    expect(narrow.match("/", "GET")).toBeUndefined();
    expect(narrow.match("/api/x", "GET")?.name).toBe("api");
  });

  it("never reads the Host of a config whose routes name no host", () => {
    expect(matcher.match("/v1/search", "GET", "anything.example.com")?.name).toBe("search");
    expect(matcher.match("/v1/search", "GET", undefined)?.name).toBe("search");
  });
});

describe("route matching by host", () => {
  const hosted = new RouteMatcher([
    route("any-search", "/v1/search"),
    route("wild-search", "/v1/search", undefined, "*.example.com"),
    route("deep-search", "/v1/search", undefined, "*.eu.example.com"),
    route("api-search", "/v1/search", undefined, "api.example.com"),
    route("api-post", "/v1/search", ["POST"], "API.Example.com."),
    route("api-root", "/", undefined, "api.example.com"),
    route("other-root", "/", ["GET"], "other.test"),
    route("fallback", "/"),
    route("com", "/v1/only-com", undefined, "*.com"),
  ]);
  const byHost = (path: string, host: string | undefined, method = "GET") =>
    hosted.match(path, method, host)?.name;

  it.each([
    // [why, path, Host, method, route]
    ["an exact host", "/v1/search", "api.example.com", "GET", "api-search"],
    ["methods first among one host's routes", "/v1/search", "api.example.com", "POST", "api-post"],
    ["the port ignored", "/v1/search", "api.example.com:8443", "GET", "api-search"],
    ["case ignored", "/v1/search", "API.EXAMPLE.COM", "GET", "api-search"],
    ["a trailing dot ignored", "/v1/search", "api.example.com.", "GET", "api-search"],
    ["a trailing dot and a port", "/v1/search", "Api.Example.Com.:80", "GET", "api-search"],
    ["a wildcard, one label below", "/v1/search", "b.example.com", "GET", "wild-search"],
    ["a wildcard, two labels below", "/v1/search", "a.b.example.com", "GET", "wild-search"],
    ["a longer suffix before a shorter one", "/v1/search", "x.eu.example.com", "GET", "deep-search"],
    ["a wildcard never takes its own name", "/v1/search", "example.com", "GET", "any-search"],
    ["a wildcard never takes a look-alike", "/v1/search", "badexample.com", "GET", "any-search"],
    ["another host falls back to the host-less route", "/v1/search", "elsewhere.test", "GET", "any-search"],
    ["no Host (HTTP/1.0) takes host-less routes only", "/v1/search", undefined, "GET", "any-search"],
    ["an empty Host takes host-less routes only", "/v1/search", "", "GET", "any-search"],
    ["the longest prefix before the host", "/v1/search/x", "api.example.com", "GET", "api-search"],
    [
      "a host-less longer prefix beats a host route on a shorter one",
      "/v1/search",
      "other.test",
      "GET",
      "any-search",
    ],
    [
      "a shorter prefix of the host when no longer prefix matches",
      "/v2",
      "api.example.com",
      "GET",
      "api-root",
    ],
    ["a host route skipped for its methods", "/v2", "other.test", "POST", "fallback"],
    ["a host route taking its methods", "/v2", "other.test", "GET", "other-root"],
    [
      "an exact host falls under a wildcard for the prefixes it lacks",
      "/v1/only-com",
      "api.example.com",
      "GET",
      "com",
    ],
    ["a one-label wildcard", "/v1/only-com", "x.com", "GET", "com"],
    [
      "a wildcard's own chain: *.eu.example.com falls under *.com",
      "/v1/only-com",
      "x.eu.example.com",
      "GET",
      "com",
    ],
    ["an IPv6 literal keeps its colons", "/v1/search", "[::1]:8080", "GET", "any-search"],
  ])("%s", (_why, path, host, method, expected) => {
    expect(byHost(path, host, method)).toBe(expected);
  });

  it("an exact host route skipped for its method goes to the wildcard of the same prefix, then host-less", () => {
    const m = new RouteMatcher([
      route("exact-post", "/a", ["POST"], "x.example.com"),
      route("wild-get", "/a", ["GET"], "*.example.com"),
      route("any", "/a"),
    ]);
    expect(m.match("/a", "POST", "x.example.com")?.name).toBe("exact-post");
    expect(m.match("/a", "GET", "x.example.com")?.name).toBe("wild-get");
    expect(m.match("/a", "PUT", "x.example.com")?.name).toBe("any");
    expect(m.match("/a", "POST", "y.example.com")?.name).toBe("any");
  });

  it("answers undefined when only routes of other hosts exist", () => {
    const m = new RouteMatcher([route("api", "/", undefined, "api.example.com")]);
    expect(m.match("/x", "GET", "www.example.com")).toBeUndefined();
    expect(m.match("/x", "GET", undefined)).toBeUndefined();
    expect(m.match("/x", "GET", "api.example.com")?.name).toBe("api");
  });
});

/**
 * The matcher before hosts, kept as the reference: the longest prefix on segment boundaries,
 * then on one prefix the routes naming methods before catch-alls, in file order.
 */
function referenceMatch(routes: readonly NamedRoute[], matchPath: string, method: string) {
  const covers = (prefix: string) =>
    prefix === "/" || matchPath === prefix || matchPath.startsWith(`${prefix}/`);
  const rank = (r: NamedRoute) => [-r.matchPrefix.length, r.methods ? 0 : 1];
  const candidates = routes
    .map((r, i) => ({ r, i }))
    .filter(({ r }) => covers(r.matchPrefix) && (r.methods === null || r.methods.has(method)))
    .sort((a, b) => {
      const [pa, ma] = rank(a.r);
      const [pb, mb] = rank(b.r);
      return pa! - pb! || ma! - mb! || a.i - b.i;
    });
  return candidates[0]?.r;
}

describe("a config without hosts matches as before hosts", () => {
  const segment = fc.constantFrom("a", "b", "c");
  const path = fc.array(segment, { maxLength: 4 }).map((s) => `/${s.join("/")}`);
  const methods = fc.option(fc.subarray(["GET", "POST", "PUT"], { minLength: 1 }), { nil: undefined });
  const routes = fc
    .array(fc.tuple(path, methods), { maxLength: 8 })
    .map((list) => list.map(([p, m], i) => route(`r${i}`, p, m)));

  it("picks the route the reference picks, whatever the Host", () => {
    fc.assert(
      fc.property(
        routes,
        path,
        fc.constantFrom("GET", "HEAD", "POST", "PUT", "DELETE"),
        fc.option(fc.domain(), { nil: undefined }),
        (list, requestPath, method, host) => {
          const matchPath = (normalizeTarget(requestPath) as { matchPath: string }).matchPath;
          expect(new RouteMatcher(list).match(matchPath, method, host)).toBe(
            referenceMatch(list, matchPath, method),
          );
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe("host patterns and Host headers", () => {
  it.each([
    ["api.example.com", undefined],
    ["*.example.com", undefined],
    ["*.com", undefined],
    ["API.Example.COM.", undefined],
    ["10.0.0.1", undefined],
    ["internal_svc.local", undefined],
    ["https://api.example.com", "a route host has no scheme"],
    ["api.example.com/v1", "a route host has no path"],
    ["api.example.com:8443", "a route host has no port"],
    ["[::1]", "an IPv6 address cannot be a route host"],
    ["::1", "an IPv6 address cannot be a route host"],
    ["*", '"*" alone would match every host'],
    ["a.*.example.com", '"*" may only be a whole first label'],
    ["*example.com", '"*" may only be a whole first label'],
    ["**.example.com", '"*" may only be a whole first label'],
    ["*.*.example.com", '"*" may only be a whole first label'],
    ["api..example.com", "has an empty label"],
    [".example.com", "has an empty label"],
    ["", "has an empty label"],
    ["-api.example.com", '"-api" is not a host label'],
    ["api example.com", '"api example" is not a host label'],
    [`${"a".repeat(64)}.com`, "is not a host label"],
    [`${"a.".repeat(127)}com`, "at most 253 characters"],
  ])("%j", (written, problem) => {
    const found = hostPatternProblem(written);
    if (problem === undefined) expect(found).toBeUndefined();
    else expect(found).toContain(problem);
  });

  it("spells a pattern lower-case without a trailing dot", () => {
    expect(normalizeHostPattern("*.Example.COM.")).toBe("*.example.com");
    expect(normalizeHostPattern("api.example.com")).toBe("api.example.com");
  });

  it.each([
    ["api.example.com", "api.example.com"],
    ["API.example.com:8080", "api.example.com"],
    ["api.example.com.", "api.example.com"],
    ["api.example.com.:443", "api.example.com"],
    ["[::1]:8080", "[::1]"],
    ["[::1]", "[::1]"],
    ["", undefined],
    [":80", undefined],
    [undefined, undefined],
  ])("reads the Host %j as %j", (header, name) => {
    expect(requestHost(header)).toBe(name);
  });
});

describe("deep paths", () => {
  it("start the walk at the deepest configured prefix: the ancestors below it are never hashed", () => {
    expect(ancestorAt("/a/b/c", 2)).toBe("/a/b");
    expect(ancestorAt("/a/b", 2)).toBe("/a/b");
    expect(ancestorAt("/a", 3)).toBe("/a");
    expect(ancestorAt("/a/b/c", 0)).toBe("/");
    expect(ancestorAt("/a/b/c", 1)).toBe("/a");
  });

  it("still find the longest prefix of a path of thousands of segments", () => {
    const m = new RouteMatcher([route("root", "/"), route("deep", "/v1/x/y"), route("v1", "/v1")]);
    const deep = `/v1/x/y${"/a".repeat(8000)}`;
    expect(m.match(deep, "GET")?.name).toBe("deep");
    expect(m.match(`/v1/x${"/a".repeat(8000)}`, "GET")?.name).toBe("v1");
    expect(m.match(`/zz${"/a".repeat(8000)}`, "GET")?.name).toBe("root");
  });
});
