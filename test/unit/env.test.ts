import { describe, expect, it } from "vitest";
import { substituteEnv, toSourceOffset } from "../../src/config/env.js";

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
});
