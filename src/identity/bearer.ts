// `Authorization: Bearer <token>`: the carrier two sources share (a JWT, or an API key with
// `bearer: true`). Each source that reads it parses it itself; neither allocates more than the one
// match the old single parse did on its path.
import type { Identification } from "../model/caller.js";

const BEARER = /^Bearer[ \t]+([^\s]+)[ \t]*$/i;
/**
 * Any Authorization holding a Bearer credential, readable or not: first, or after a comma in a
 * list of credentials (`Basic …, Bearer <jwt>`), where Laravel's bearerToken() and others find
 * one. Such a header is readable only as exactly `Bearer <token>`.
 */
const BEARER_SCHEME = /(?:^|,)[ \t]*Bearer(?:[ \t]|$)/i;

/** The token of a readable Bearer credential; undefined for other schemes and unreadable ones. */
export function bearerToken(authorization: string): string | undefined {
  return BEARER.exec(authorization)?.[1];
}

/** Whether the Authorization holds a Bearer credential at all (`Bearer a b`, `Bearer` alone, `Basic x, Bearer y`). */
export function isBearerScheme(authorization: string): boolean {
  return BEARER_SCHEME.test(authorization);
}

/**
 * What a source that reads Bearer credentials answers for one it cannot parse (`Bearer a b`,
 * `Bearer` alone): a 401, because falling through to anonymous would forward a credential nobody
 * checked. Other schemes (Basic, Digest, …) are the upstream's: no source claims them.
 */
export function malformedBearer(): Identification {
  return {
    ok: false,
    reason: "malformed_credential",
    detail: "the Authorization header is not a readable Bearer credential (expected: Bearer <token>)",
  };
}
