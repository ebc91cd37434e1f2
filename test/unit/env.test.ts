import { describe, expect, it } from "vitest";
import { substituteEnv, toSourceOffset } from "../../src/config/env.js";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import { countingText } from "./support/growth.js";

describe("env substitution", () => {
  it("substitutes set variables and defaults", () => {
    const r = substituteEnv("a: ${A}\nb: ${B:-fallback}\nc: ${C:-}", { A: "one" });
    expect(r.text).toBe("a: one\nb: fallback\nc: ");
    expect(r.problems).toEqual([]);
  });

  it("uses the default when the variable is empty, as sh and docker compose do", () => {
    expect(substituteEnv("x: ${X:-d}", { X: "" }).text).toBe("x: d");
    expect(substituteEnv("x: ${X:-d}", { X: "set" }).text).toBe("x: set");
  });

  it("keeps an empty variable without a default as empty, not an error", () => {
    const r = substituteEnv("x: '${X}'", { X: "" });
    expect(r.text).toBe("x: ''");
    expect(r.problems).toEqual([]);
  });

  it("names a missing variable and where it is", () => {
    const r = substituteEnv("a: 1\nsecret: ${JWT_SECRET}", {});
    expect(r.problems).toEqual([{ offset: 13, message: expect.stringContaining("JWT_SECRET is not set") }]);
  });

  it("refuses malformed placeholders", () => {
    expect(substituteEnv("x: ${1BAD}", {}).problems[0]?.message).toMatch(/not a valid placeholder/);
  });

  it("leaves placeholders in comments alone", () => {
    const r = substituteEnv("a: 1 # uses ${UNSET}\n# ${ALSO_UNSET}\nb: '#${B:-x}'", {});
    expect(r.problems).toEqual([]);
    expect(r.text).toBe("a: 1 # uses ${UNSET}\n# ${ALSO_UNSET}\nb: '#x'");
  });

  it("maps offsets in the substituted text back to the file", () => {
    const source = "a: ${LONG_NAME}\nb: bad";
    const r = substituteEnv(source, { LONG_NAME: "v" });
    const inOutput = r.text.indexOf("bad");
    expect(toSourceOffset(r.substitutions, inOutput)).toBe(source.indexOf("bad"));
    // Inside a substituted value, the placeholder is the position.
    expect(toSourceOffset(r.substitutions, r.text.indexOf("v"))).toBe(source.indexOf("${"));
  });

  it("maps offsets through many placeholders, empty values and defaults included", () => {
    const source = "a: ${E}${E}x${LONG:-dflt}y${E}\nb: ${B}bad";
    const r = substituteEnv(source, { E: "", B: "vv" });
    expect(r.text).toBe("a: xdflty\nb: vvbad");
    for (const [out, src] of [
      [r.text.indexOf("x"), source.indexOf("x")],
      [r.text.indexOf("dflt"), source.indexOf("${LONG")],
      [r.text.indexOf("y"), source.indexOf("y")],
      [r.text.indexOf("vv"), source.indexOf("${B}")],
      [r.text.indexOf("bad"), source.indexOf("bad")],
    ] as const) {
      expect(toSourceOffset(r.substitutions, out)).toBe(src);
    }
  });

  it("a # inside quotes or a placeholder's default is not a comment; one after a space is", () => {
    const r = substituteEnv('a: "x #${A}" ${B:-#} # ${C}\nb: ${A}', { A: "1" });
    expect(r.problems).toEqual([]);
    expect(r.text).toBe('a: "x #1" # # ${C}\nb: 1');
  });
});

describe("env substitution of a large file is linear", () => {
  // Each placeholder used to be searched for a comment from its line's start, and each unset
  // variable located by splitting the whole text before it: 80,000 placeholders on one line
  // took over a minute. What is measured is work, not time (the machine may be busy): the
  // characters read from the source (support/growth.ts), which a linear pass reads a few times
  // each however many placeholders there are, and a rescan per placeholder once per placeholder.
  // Four times the placeholders must read about four times as much, not sixteen.
  const N = 80_000;
  const yamlOf = (n: number) => `store: { url: "memory://" }\nadmin: { token: "${"${TOK}".repeat(n)}" }\n`;
  const yaml = yamlOf(N);
  /** Characters `run` reads from the text of `n` placeholders, checking it got what `text` gets. */
  const readFrom = <T>(text: string, run: (text: string) => T): number => {
    const counted = countingText(text);
    expect(run(counted.text)).toEqual(run(text));
    return counted.read();
  };
  /**
   * `run` on the text of N placeholders, then of N / 4: how many times as many characters the
   * first read, and how many it read per character of its text.
   */
  const work = (textOf: (n: number) => string, run: (text: string) => unknown) => {
    const text = textOf(N);
    const big = readFrom(text, run);
    return { growth: big / readFrom(textOf(N / 4), run), perChar: big / text.length };
  };

  it("80,000 placeholders on one line substitute and load in work linear in their number", () => {
    const r = substituteEnv(yaml, { TOK: "x" });
    expect(r.text).toContain(`"${"x".repeat(N)}"`);
    expect(r.substitutions).toHaveLength(N);
    const loaded = loadConfigText(yaml, "gw.yaml", { TOK: "x" });
    expect(loaded.ok).toBe(false); // no upstreams or routes: only the cost matters here
    expect(work(yamlOf, (text) => substituteEnv(text, { TOK: "x" })).growth).toBeLessThan(5);
    // A few reads of each character, however many placeholders.
    const loading = work(yamlOf, (text) => loadConfigText(text, "gw.yaml", { TOK: "x" }));
    expect(loading.growth).toBeLessThan(5);
    expect(loading.perChar).toBeLessThan(10);
  });

  it("80,000 unset variables are each reported at their own column, in work linear in their number", () => {
    const r = loadConfigText(yaml, "gw.yaml", {});
    expect(r.ok).toBe(false);
    if (r.ok) return;
    const message = "environment variable TOK is not set; set it, or give a default with ${TOK:-default}";
    expect(r.problems).toHaveLength(N);
    const first = yaml.split("\n")[1]!.indexOf("${TOK}") + 1;
    expect(formatProblem(r.problems[0]!)).toBe(`gw.yaml:2:${first}: ${message}`);
    expect(formatProblem(r.problems[N - 1]!)).toBe(`gw.yaml:2:${first + 6 * (N - 1)}: ${message}`);
    expect(r.problems.every((p, i) => p.line === 2 && p.column === first + 6 * i)).toBe(true);
    const loading = work(yamlOf, (text) => loadConfigText(text, "gw.yaml", {}));
    expect(loading.growth).toBeLessThan(5);
    expect(loading.perChar).toBeLessThan(10);
  });

  it("a `${` that never closes, 80,000 times, is left as text without scanning to the end each time", () => {
    const unclosed = (n: number) => `a: "${"${".repeat(n)}"\n`;
    const source = unclosed(N);
    const r = substituteEnv(source, {});
    expect(r.text).toBe(source);
    expect(r.problems).toEqual([]);
    const substituting = work(unclosed, (text) => substituteEnv(text, {}));
    expect(substituting.growth).toBeLessThan(5);
    expect(substituting.perChar).toBeLessThan(10);
  });
});
