// The operator API's credentials: `admin.tokens` (each a name, a bearer token and a scope), or the
// older single `admin.token`, which stands for one write token named `admin`. Compiled here into
// what the admin guard compares (admin/auth.ts): each token's SHA-256, never the token itself,
// so the compiled runtime holds nothing a log or a heap dump could leak beyond the config text.
// The checks a schema cannot say (both forms given, a name or a token given twice) are here too,
// reported at the entry to fix and never with a token's value in the message.
import { createHash } from "node:crypto";
import type { AdminScope, AdminToken } from "../model/admin.js";
import type { PathSegment } from "./document.js";

export { ADMIN_SCOPES, type AdminScope, type AdminToken } from "../model/admin.js";

/** The name the single `admin.token` is known by in the audit log. */
export const LEGACY_TOKEN_NAME = "admin";

/**
 * A token's name: what the audit log and the logs show instead of the token, so it carries no
 * character a log line, a header or a terminal could misread.
 */
export const ADMIN_TOKEN_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** The `admin` section as the schema leaves it (either form may be absent). */
export interface AdminSection {
  token?: string | undefined;
  tokens?: readonly { name: string; token: string; scope: AdminScope }[] | undefined;
}

export function tokenDigest(token: string): Buffer {
  return createHash("sha256").update(token).digest();
}

/**
 * The tokens the guard accepts: `admin.tokens`, else `admin.token` as one write token named
 * `admin`, else none (the operator API answers 404). An empty `admin.token` is none, as it
 * always was.
 */
export function compileAdminTokens(admin: AdminSection): readonly AdminToken[] {
  if (admin.tokens !== undefined) {
    return Object.freeze(
      admin.tokens.map((t) => Object.freeze({ name: t.name, scope: t.scope, digest: tokenDigest(t.token) })),
    );
  }
  if (admin.token === undefined || admin.token === "") return Object.freeze([]);
  return Object.freeze([
    Object.freeze({ name: LEGACY_TOKEN_NAME, scope: "write" as const, digest: tokenDigest(admin.token) }),
  ]);
}

type Add = (path: PathSegment[], message: string, atKey?: string) => void;

/**
 * Both forms at once, and names or tokens given twice. A token given twice would be audited
 * under whichever name the guard met first; the message names the other entry, not the token.
 */
export function checkAdminTokens(admin: AdminSection, add: Add): void {
  if (admin.token !== undefined && admin.tokens !== undefined) {
    add(
      ["admin"],
      `admin.token and admin.tokens are both given: move the token into admin.tokens as { name: ${LEGACY_TOKEN_NAME}, token: …, scope: write } and remove admin.token`,
      "token",
    );
  }
  const names = new Map<string, number>();
  const tokens = new Map<string, number>();
  (admin.tokens ?? []).forEach((t, i) => {
    const sameName = names.get(t.name);
    if (sameName !== undefined) {
      add(
        ["admin", "tokens", i, "name"],
        `duplicate token name "${t.name}" (also admin.tokens[${sameName}]): the audit log would not tell them apart`,
      );
    } else names.set(t.name, i);
    const sameToken = tokens.get(t.token);
    if (sameToken !== undefined) {
      const other = admin.tokens![sameToken]!.name;
      add(
        ["admin", "tokens", i, "token"],
        `the same token as admin.tokens[${sameToken}] ("${other}"): give each name its own token, so the audit log can tell who acted`,
      );
    } else tokens.set(t.token, i);
  });
}
