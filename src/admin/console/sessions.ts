// The console's sessions: an operator signs in once with an admin token, and the browser holds
// only a random session id in an HttpOnly cookie (never the token: not in a URL, not in
// localStorage). Each session carries a CSRF secret the page sends back on every action, and
// the token it was opened with, by digest, so a token a reload removes or rescopes ends or
// narrows its sessions at once. Kept in this process: a console behind a load balancer needs
// sticky sessions, or signing in again on another instance.
import { randomBytes, timingSafeEqual } from "node:crypto";
import type { AdminScope, AdminToken } from "../../config/admin-tokens.js";

/** The request header a console action carries its session's CSRF token in. */
export const CSRF_HEADER = "x-tollgate-csrf";

/** Whom a session acts as: its token's name and scope (auth.ts's AdminPrincipal, which it is). */
export interface SessionPrincipal {
  readonly name: string;
  readonly scope: AdminScope;
}

export const SESSION_COOKIE = "tollgate_console";
/** A session ends this long after its last use… */
export const SESSION_IDLE_MS = 30 * 60_000;
/** …and this long after it began, however busy. */
export const SESSION_MAX_MS = 8 * 60 * 60_000;
/** Sessions kept at most; the least recently used goes first. */
export const SESSIONS_MAX = 1000;
/**
 * Sessions one token may hold; its own least recently used goes first. Without it, a read
 * token signing in a thousand times in 3 s pushed an operator's idle session out of the
 * shared pool (found by an attack pass).
 */
export const SESSIONS_PER_TOKEN = 50;

interface Session {
  id: string;
  csrf: string;
  tokenDigest: Buffer;
  startedAtMs: number;
  usedAtMs: number;
}

export interface OpenedSession {
  id: string;
  csrf: string;
  principal: SessionPrincipal;
}

export type SessionAccess =
  | { kind: "none" }
  | { kind: "allowed"; principal: SessionPrincipal; csrf: string }
  | { kind: "bad-csrf"; principal: SessionPrincipal };

const random = () => randomBytes(32).toString("base64url");

/** Whether two strings are equal, in time that does not depend on where they differ. */
function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export class ConsoleSessions {
  private readonly sessions = new Map<string, Session>();

  constructor(private readonly now: () => number = Date.now) {}

  get size(): number {
    return this.sessions.size;
  }

  open(token: AdminToken): OpenedSession {
    const now = this.now();
    const session: Session = {
      id: random(),
      csrf: random(),
      tokenDigest: token.digest,
      startedAtMs: now,
      usedAtMs: now,
    };
    // A Map iterates in insertion order and each use re-inserts: the first is the least recent.
    const own = [...this.sessions.values()].filter((s) => s.tokenDigest.equals(token.digest));
    for (const old of own.slice(0, Math.max(0, own.length - SESSIONS_PER_TOKEN + 1)))
      this.sessions.delete(old.id);
    this.sessions.set(session.id, session);
    while (this.sessions.size > SESSIONS_MAX) this.sessions.delete(this.sessions.keys().next().value!);
    return { id: session.id, csrf: session.csrf, principal: { name: token.name, scope: token.scope } };
  }

  close(id: string): void {
    this.sessions.delete(id);
  }

  /**
   * What the session `id` may do now: as its token's current name and scope, if that token is
   * still configured and the session has not ended. A method other than GET and HEAD needs
   * `csrf` to be the session's secret.
   */
  access(
    id: string | undefined,
    method: string | undefined,
    csrf: string | undefined,
    tokens: readonly AdminToken[],
  ): SessionAccess {
    if (id === undefined) return { kind: "none" };
    const session = this.sessions.get(id);
    if (!session) return { kind: "none" };
    const now = this.now();
    const token = tokens.find((t) => timingSafeEqual(t.digest, session.tokenDigest));
    if (!token || now - session.usedAtMs > SESSION_IDLE_MS || now - session.startedAtMs > SESSION_MAX_MS) {
      this.sessions.delete(id);
      return { kind: "none" };
    }
    const principal: SessionPrincipal = { name: token.name, scope: token.scope as AdminScope };
    const reading = method === "GET" || method === "HEAD";
    if (!reading && (csrf === undefined || !sameSecret(csrf, session.csrf)))
      return { kind: "bad-csrf", principal };
    session.usedAtMs = now;
    this.sessions.delete(id);
    this.sessions.set(id, session);
    return { kind: "allowed", principal, csrf: session.csrf };
  }
}

/** The session id a request's Cookie header carries, if any. */
export function sessionIdOf(cookie: string | undefined): string | undefined {
  if (!cookie) return undefined;
  for (const part of cookie.split(";")) {
    const eq = part.indexOf("=");
    if (eq !== -1 && part.slice(0, eq).trim() === SESSION_COOKIE)
      return part.slice(eq + 1).trim() || undefined;
  }
  return undefined;
}

/** The Set-Cookie value that opens (or, with id "", ends) a session. */
export function sessionCookie(id: string, secure: boolean): string {
  const attributes = ["Path=/admin", "HttpOnly", "SameSite=Strict", ...(secure ? ["Secure"] : [])];
  if (id === "") attributes.push("Max-Age=0");
  return [`${SESSION_COOKIE}=${id}`, ...attributes].join("; ");
}
