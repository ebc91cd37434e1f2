// The operator API's credentials: the named tokens of `admin.tokens` (or the single `admin.token`,
// a write token named `admin`), each with a scope. Until a token is configured `/admin/*` answers
// 404, so an unconfigured gateway exposes nothing there. Which token a request presents becomes
// its principal: the guard hands it to the handler, which writes its name (never the token) to
// the audit log.

import { timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { type AdminScope, type AdminToken, tokenDigest } from "../config/admin-tokens.js";
import { type ConsoleSessions, CSRF_HEADER, sessionIdOf } from "./console/sessions.js";
import { replyProblem } from "./reply.js";

/** Who an operator request acts as: the token's name and scope. */
export interface AdminPrincipal {
  readonly name: string;
  readonly scope: AdminScope;
}

/** Lets a request through (as whom, when it names someone), or answers it itself and says false. */
export type Guard = (req: IncomingMessage, res: ServerResponse) => boolean | AdminPrincipal;

const REALM = 'Bearer realm="tollgate-admin"';

/**
 * The scope a method needs. GET and HEAD read; every other method is a write, so a method an
 * endpoint takes later (or one no endpoint takes) is never open to a read token by omission.
 */
export function scopeNeeded(method: string | undefined): AdminScope {
  return method === "GET" || method === "HEAD" ? "read" : "write";
}

/** Whether a token of scope `held` may do what needs `needed`: write covers read. */
export function scopeAllows(held: AdminScope, needed: AdminScope): boolean {
  return held === "write" || needed === "read";
}

/**
 * The token `authorization` presents, or undefined. The presented token is hashed once and its
 * hash compared with every configured token's in constant time, all of them, whichever matches:
 * how long this takes says nothing about the presented token or which name it belongs to.
 */
export function authenticate(
  authorization: string | undefined,
  tokens: readonly AdminToken[],
): AdminPrincipal | undefined {
  const presented = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization ?? "")?.[1] ?? "";
  const found = matchingToken(presented, tokens);
  return found && { name: found.name, scope: found.scope };
}

/** The configured token `presented` is (the console's sign-in asks too), compared as above. */
export function matchingToken(presented: string, tokens: readonly AdminToken[]): AdminToken | undefined {
  const digest = tokenDigest(presented);
  let found: AdminToken | undefined;
  for (const token of tokens) {
    const same = timingSafeEqual(digest, token.digest);
    if (same && found === undefined) found = token;
  }
  return presented.length === 0 ? undefined : found;
}

/** What the guard does with a request: a pure decision over the method, the header and the tokens. */
export type Access =
  | { kind: "disabled" }
  | { kind: "unauthenticated" }
  | { kind: "forbidden"; principal: AdminPrincipal; needed: AdminScope }
  | { kind: "allowed"; principal: AdminPrincipal };

export function decideAccess(
  method: string | undefined,
  authorization: string | undefined,
  tokens: readonly AdminToken[],
): Access {
  if (tokens.length === 0) return { kind: "disabled" };
  const principal = authenticate(authorization, tokens);
  if (!principal) return { kind: "unauthenticated" };
  const needed = scopeNeeded(method);
  return scopeAllows(principal.scope, needed)
    ? { kind: "allowed", principal }
    : { kind: "forbidden", principal, needed };
}

/**
 * The guard of every operator path, before the path is looked at: 404 admin-disabled unless a
 * token is configured (`tokens()` is the live config's, read per request so a reload can add,
 * remove or rotate one), 401 unless the request presents one of them, 403 when its scope does
 * not cover the method (RFC 6750's insufficient_scope); otherwise the principal goes on to the
 * handler.
 */
export function requireAdminToken(tokens: () => readonly AdminToken[], sessions?: ConsoleSessions): Guard {
  return (req: IncomingMessage, res: ServerResponse) => {
    const configured = tokens();
    // The console's session cookie, for a request that presents no token. A request with a
    // token is judged by the token alone: a cookie is never a second credential beside it.
    if (sessions && configured.length > 0 && req.headers.authorization === undefined) {
      const csrf = req.headers[CSRF_HEADER];
      const session = sessions.access(
        sessionIdOf(req.headers.cookie),
        req.method,
        typeof csrf === "string" ? csrf : undefined,
        configured,
      );
      if (session.kind === "bad-csrf") {
        replyProblem(
          res,
          "bad_csrf",
          `a console action needs the session's CSRF token in ${CSRF_HEADER}: reload the console page`,
        );
        return false;
      }
      if (session.kind === "allowed") {
        const needed = scopeNeeded(req.method);
        if (scopeAllows(session.principal.scope, needed)) return session.principal;
        replyProblem(
          res,
          "insufficient_scope",
          `the token "${session.principal.name}" has scope ${session.principal.scope}; ${req.method} needs scope ${needed}: sign in with a token of scope ${needed}`,
          { required_scope: needed },
        );
        return false;
      }
    }
    // Node keeps the first of several Authorization lines; a proxy in front may keep the last.
    // The proxy listener refuses such a request (400), and so does this one: which credential
    // it acts on must not depend on who reads it.
    if (configured.length > 0 && authorizationLines(req.rawHeaders) > 1) {
      replyProblem(
        res,
        "unauthorized",
        "send one Authorization header: this request has several",
        undefined,
        {
          "www-authenticate": REALM,
        },
      );
      return false;
    }
    const access = decideAccess(req.method, req.headers.authorization, configured);
    switch (access.kind) {
      case "allowed":
        return access.principal;
      case "disabled":
        replyProblem(
          res,
          "admin_disabled",
          "the admin API is disabled: set admin.tokens (or admin.token) to enable it",
        );
        return false;
      case "unauthenticated":
        replyProblem(res, "unauthorized", "send Authorization: Bearer <admin.token>", undefined, {
          "www-authenticate": REALM,
        });
        return false;
      case "forbidden": {
        const { principal, needed } = access;
        replyProblem(
          res,
          "insufficient_scope",
          `the token "${principal.name}" has scope ${principal.scope}; ${req.method} needs scope ${needed}: use a token with scope ${needed}`,
          { required_scope: needed },
          { "www-authenticate": `${REALM}, error="insufficient_scope", scope="${needed}"` },
        );
        return false;
      }
    }
  };
}

/** How many Authorization field lines a request carries, in any spelling of the name. */
function authorizationLines(rawHeaders: readonly string[]): number {
  let n = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === "authorization") n++;
  return n;
}
