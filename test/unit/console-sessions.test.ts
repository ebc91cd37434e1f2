// The console's sessions (src/admin/console/sessions.ts): bounded per token and in all, ended by
// time, by signing out and by the token leaving the config, and an action only with the CSRF token.
import { describe, expect, it } from "vitest";
import {
  ConsoleSessions,
  SESSION_IDLE_MS,
  SESSION_MAX_MS,
  SESSIONS_PER_TOKEN,
  sessionCookie,
  sessionIdOf,
} from "../../src/admin/console/sessions.js";
import { type AdminToken, tokenDigest } from "../../src/config/admin-tokens.js";

const token = (name: string, scope: "read" | "write"): AdminToken =>
  ({ name, scope, digest: tokenDigest(`${name}-secret`) }) as AdminToken;
const ops = token("ops", "write");
const viewer = token("viewer", "read");

describe("console sessions", () => {
  it("a read token signing in again and again ends only its own oldest sessions", () => {
    const sessions = new ConsoleSessions(() => 0);
    const operator = sessions.open(ops);
    const mine = Array.from({ length: SESSIONS_PER_TOKEN + 10 }, () => sessions.open(viewer));
    expect(sessions.access(operator.id, "GET", undefined, [ops, viewer]).kind).toBe("allowed");
    expect(sessions.access(mine[0]!.id, "GET", undefined, [ops, viewer]).kind).toBe("none");
    expect(sessions.access(mine.at(-1)!.id, "GET", undefined, [ops, viewer]).kind).toBe("allowed");
    expect(sessions.size).toBe(SESSIONS_PER_TOKEN + 1);
  });

  it("ends when idle, when old, or when its token leaves the config; acts only with its CSRF token", () => {
    let now = 0;
    const sessions = new ConsoleSessions(() => now);
    const s = sessions.open(ops);
    expect(sessions.access(s.id, "POST", undefined, [ops]).kind).toBe("bad-csrf");
    expect(sessions.access(s.id, "POST", `${s.csrf}x`, [ops]).kind).toBe("bad-csrf");
    expect(sessions.access(s.id, "POST", s.csrf, [ops])).toMatchObject({
      kind: "allowed",
      principal: { scope: "write" },
    });
    // Rescoped by a reload: the session acts as the token is now.
    expect(sessions.access(s.id, "GET", undefined, [{ ...ops, scope: "read" } as AdminToken])).toMatchObject({
      principal: { scope: "read" },
    });
    for (now = 0; now < SESSION_MAX_MS - SESSION_IDLE_MS; now += SESSION_IDLE_MS - 1)
      expect(sessions.access(s.id, "GET", undefined, [ops]).kind).toBe("allowed");
    now = SESSION_MAX_MS + 1;
    expect(sessions.access(s.id, "GET", undefined, [ops]).kind).toBe("none");
    const idle = sessions.open(ops);
    now += SESSION_IDLE_MS + 1;
    expect(sessions.access(idle.id, "GET", undefined, [ops]).kind).toBe("none");
    const gone = sessions.open(ops);
    expect(sessions.access(gone.id, "GET", undefined, [viewer]).kind).toBe("none");
    expect(sessions.access(gone.id, "GET", undefined, [ops]).kind).toBe("none");
  });

  it("reads its cookie among others, and writes one that JavaScript cannot read", () => {
    expect(sessionIdOf("a=1; tollgate_console=abc; b=2")).toBe("abc");
    expect(sessionIdOf("tollgate_consoleX=abc")).toBeUndefined();
    expect(sessionIdOf(undefined)).toBeUndefined();
    expect(sessionCookie("abc", false)).toBe("tollgate_console=abc; Path=/admin; HttpOnly; SameSite=Strict");
    expect(sessionCookie("abc", true)).toBe(
      "tollgate_console=abc; Path=/admin; HttpOnly; SameSite=Strict; Secure",
    );
    expect(sessionCookie("", false)).toMatch(/Max-Age=0$/);
  });
});
