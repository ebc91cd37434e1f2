// Who is calling: the identity sources asked in their order of precedence, and what they answer.
// Each source is one file (api-key.ts, jwt.ts); a caller no source claims is anonymous by IP
// (anonymous.ts).
import type { IncomingHttpHeaders } from "node:http";
import type { Caller, Identification, IdentificationFailure } from "../model/caller.js";
import type { IdentityView } from "../model/identity.js";
import { identifyAnonymous } from "./anonymous.js";
import { apiKeyBearer, apiKeyHeader } from "./api-key.js";
import { jwtBearer, jwtBesideKey } from "./jwt.js";
import type { IdentitySource, StoredKeyLookup } from "./source.js";

export type { Caller, Identification, IdentificationFailure, IdentitySource, StoredKeyLookup };

/** Failures that presented a credential which turned out bad: what `auth_failures` counts. */
export function isBadCredential(reason: IdentificationFailure): boolean {
  return (
    reason !== "credential_required" &&
    reason !== "key_unusable" &&
    reason !== "key_store_unavailable" &&
    reason !== "throttled"
  );
}

/**
 * The first source that claims the request answers it:
 * - the API key header wins over Authorization: a request that carries both is the key's
 *   client, and its Authorization header goes upstream; a JWT there is verified all the same
 *   (jwtBesideKey), and one that fails fails the request as it would alone;
 * - a Bearer token is a JWT when the config has identity.jwt, unless API keys may also come as
 *   bearer tokens and this one does not look like a JWT: then, and whenever there is no
 *   identity.jwt, it is an API key if `bearer: true`;
 * - an `Authorization: Bearer` that a configured Bearer source cannot parse is a 401 from it;
 *   other schemes (Basic, Digest, …) are the upstream's and no source claims them.
 */
const PRECEDENCE: readonly IdentitySource[] = [apiKeyHeader, jwtBearer, apiKeyBearer];

/**
 * Who is calling: the precedence's answer, or the anonymous caller keyed by IP when no source
 * claims the request. Synchronous except for a JWT not verified before and a stored key not
 * cached yet.
 */
export function identifyCaller<R extends IdentityView>(
  headers: IncomingHttpHeaders,
  ipKey: string,
  rt: R,
  stored?: StoredKeyLookup<R>,
  throttled?: boolean,
): Identification | Promise<Identification> {
  // Indexed loops here and below: on the hot path, and nothing to allocate even before V8
  // optimises the function (for…of asks the array for an iterator).
  for (let i = 0; i < PRECEDENCE.length; i++) {
    const answer = PRECEDENCE[i]!.identify(headers, ipKey, rt, stored, throttled);
    if (answer === undefined) continue;
    if (PRECEDENCE[i] !== apiKeyHeader || headers.authorization === undefined) return answer;
    // A key that fails refuses the request whatever the token says.
    if (!(answer instanceof Promise) && !answer.ok) return answer;
    const token = jwtBesideKey(headers, ipKey, rt, throttled);
    if (token === undefined) return answer;
    if (!(token instanceof Promise) && !(answer instanceof Promise))
      return answer.ok && !token.ok ? token : answer;
    return Promise.all([answer, token]).then(([byKey, byToken]) =>
      byKey.ok && !byToken.ok ? byToken : byKey,
    );
  }
  return identifyAnonymous(ipKey, rt);
}

/** Whether the request presents a credential this gateway reads (what `auth_failures` guards). */
export function presentsCredential(headers: IncomingHttpHeaders, rt: IdentityView): boolean {
  for (let i = 0; i < PRECEDENCE.length; i++) {
    if (PRECEDENCE[i]!.presents(headers, rt)) return true;
  }
  return false;
}
