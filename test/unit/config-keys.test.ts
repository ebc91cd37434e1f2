// A list, a mapping or an alias written as a key is a positioned config problem, found before the
// document becomes data, so the YAML library never stringifies it with a warning on stderr
// ("Keys with collection values will be stringified"), which the fuzz test used to print.
import { afterEach, describe, expect, it, vi } from "vitest";
import { loadConfigText } from "../../src/config/load.js";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("keys that are not plain words", () => {
  it.each([
    ["a flow sequence", "listen: 127.0.0.1:0\n[a, b]: 1\n", 2, 1],
    ["a flow mapping", "listen: 127.0.0.1:0\nplans: { { x: 1 }: 2 }\n", 2, 10],
    ["an explicit key", "listen: 127.0.0.1:0\n? [x]\n: y\n", 2, 3],
    ["a pair in a flow sequence", "routes: [ [x]: y ]\n", 1, 11],
  ])("%s is a problem at the key, without a warning", (_what, text, line, column) => {
    const warn = vi.spyOn(process, "emitWarning");
    const r = loadConfigText(text, "gw.yaml", {});
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems).toContainEqual(
      expect.objectContaining({
        line,
        column,
        message: "a key must be a plain word, not a list, a mapping or an alias",
      }),
    );
    expect(warn).not.toHaveBeenCalled();
  });

  it("plain keys, quoted ones included, are still just keys", () => {
    const warn = vi.spyOn(process, "emitWarning");
    const r = loadConfigText(
      [
        '"listen": 127.0.0.1:0',
        'store: { "url": "memory://" }',
        'upstreams: { api: "http://127.0.0.1:1" }',
        "routes: [{ name: d, match: { path: / }, upstream: api }]",
        "",
      ].join("\n"),
      "gw.yaml",
      {},
    );
    expect(r.ok, JSON.stringify(!r.ok && r.problems)).toBe(true);
    expect(warn).not.toHaveBeenCalled();
  });
});
