// The operator API's credentials as the compiled model holds them (config/admin-tokens.ts builds
// them from admin.tokens or admin.token): a name, a scope, and the token's SHA-256, never the token.

/** What a token may do: `read` the operator API, or also `write` (DELETE, POST, PUT, PATCH). */
export const ADMIN_SCOPES = ["read", "write"] as const;
export type AdminScope = (typeof ADMIN_SCOPES)[number];

/** One configured token, as the guard compares it. */
export interface AdminToken {
  readonly name: string;
  readonly scope: AdminScope;
  /** SHA-256 of the token: compared in constant time with the SHA-256 of what a request presents. */
  readonly digest: Buffer;
}
