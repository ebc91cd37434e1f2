import { describe, expect, it } from "vitest";
import { normalizeTarget } from "../../src/routing/normalize.js";

function path(target: string): string {
  const r = normalizeTarget(target);
  if (!r.ok) throw new Error(`refused ${target}: ${r.reason}`);
  return r.path;
}

describe("path normalisation", () => {
  it.each([
    ["/login", "/login"],
    ["//login", "/login"],
    ["/./login", "/login"],
    ["/x/../login", "/login"],
    ["/%6Cogin", "/login"],
    ["/%6cogin", "/login"],
    ["/login/", "/login/"],
    ["/a//b///c", "/a/b/c"],
    ["/a/b/..", "/a/"],
    ["/a/./b/.", "/a/b/"],
    ["/../../login", "/login"],
    ["/%2e%2e/login", "/login"],
    ["/x/%2E%2E/login", "/login"],
    ["/login;jsessionid=1", "/login"],
    ["/login;a/x;b", "/login/x"],
    ["/caf%c3%a9", "/caf%C3%A9"],
    ["/a%20b", "/a%20b"],
    ["/v1/file.json", "/v1/file.json"],
    ["/", "/"],
    ["http://example.com/login", "/login"],
  ])("%s → %s", (input, expected) => expect(path(input)).toBe(expected));

  it("keeps the query and lower-cases only the match key", () => {
    const r = normalizeTarget("/V1/Search/?q=A%2FB");
    expect(r).toEqual({ ok: true, path: "/V1/Search/", query: "?q=A%2FB", matchPath: "/v1/search" });
  });

  it.each([
    ["/a%2Fb", "encoded slash"],
    ["/a%2fb", "encoded slash"],
    ["/a%5Cb", "encoded backslash"],
    ["/a\\b", "backslash"],
    ["/login%00", "NUL"],
    ["/a%0Ab", "encoded newline"],
    ["/%C0%AFlogin", "overlong UTF-8"],
    ["/%E0%80%AF", "overlong UTF-8 (3 bytes)"],
    ["/%ff", "invalid UTF-8"],
    ["/%zz", "bad percent"],
    ["/%4", "truncated percent"],
    ["/a b", "raw space"],
    ["/a\u00e9", "raw non-ASCII"],
    ["*", "asterisk-form"],
    ["login", "no leading slash"],
    ["/a?b#frag", "fragment"],
  ])("refuses %s (%s)", (input) => expect(normalizeTarget(input).ok).toBe(false));
});
