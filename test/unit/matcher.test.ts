import { describe, expect, it } from "vitest";
import { methodSet, RouteMatcher } from "../../src/routing/matcher.js";
import { normalizeTarget } from "../../src/routing/normalize.js";

const route = (name: string, prefix: string, methods?: string[]) => ({
  name,
  matchPrefix: (normalizeTarget(prefix) as { matchPath: string }).matchPath,
  methods: methodSet(methods),
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
});
