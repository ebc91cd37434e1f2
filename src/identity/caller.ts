// Who is calling: the identity sources asked in their order of precedence, and what they answer.
// Each source is one file (api-key.ts, jwt.ts); a caller no source claims is anonymous by IP
// (anonymous.ts).
import type { IncomingHttpHeaders } from "node:http";
import type { CompiledPlan, Runtime } from "../config/compile.js";
import { identifyAnonymous } from "./anonymous.js";
import { apiKeyBearer, apiKeyHeader, type StoredKeyLookup } from "./api-key.js";
import { jwtBearer, jwtBesideKey } from "./jwt.js";

export type Caller =
  | {
      kind: "client";
      id: string;
      plan: CompiledPlan;
      tenant: string | undefined;
      ipKey: string;
      /** A JWT caller's verified claims, for limits keyed `by: claim:<name>`. */
      claims?: Readonly<Record<string, unknown>>;
    }
  | { kind: "anonymous"; plan: CompiledPlan | undefined; ipKey: string };

export type Identification =
  | {
      ok: true;
      caller: Caller;
      /** The header the caller was identified by (lower case), for `hide_credentials`. */
      credentialHeader: string | undefined;
    }
  | {
      ok: false;
      reason: IdentificationFailure;
      detail: string;
    };

export type IdentificationFailure =
  | "unknown_key"
  | "ambiguous_key"
  | "credential_required"
  | "invalid_jwt"
  | "malformed_credential"
  /** A stored key that is valid but its plan or limits are not in the running config: 403. */
  | "key_unusable"
  /** A stored key the store could not look up, under store.on_failure: closed: 503. */
  | "key_store_unavailable"
  /** Its address is past auth_failures and the credential is none this instance has served: 429. */
  | "throttled";

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
 * One way a caller proves who they are. A source reads only the runtime it is given (its
 * settings and caches hang off `Runtime`), so a reload changes it by swapping the runtime.
 */
export interface IdentitySource {
  /**
   * Whether the request carries this source's credential, readable or not: what the
   * `auth_failures` throttle guards and `hide_credentials` strips. Must not allocate.
   */
  presents(headers: IncomingHttpHeaders, rt: Runtime): boolean;
  /**
   * undefined: not this source's request, ask the next one. Otherwise the answer, final even when
   * it is a failure or (an unknown key under `on_unknown: anonymous`) the anonymous caller. A
   * promise only where the work is asynchronous (a JWT not verified before).
   */
  identify(
    headers: IncomingHttpHeaders,
    ipKey: string,
    rt: Runtime,
    /** Keys issued at runtime, for the API-key sources; undefined: the YAML's keys only. */
    stored?: StoredKeyLookup,
    /**
     * The address is past `auth_failures`: answer only from what is known here (a YAML key, a
     * cached stored key, a JWT verified before), never a store lookup or a signature check;
     * anything else is THROTTLED.
     */
    throttled?: boolean,
  ): Identification | Promise<Identification> | undefined;
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
export function identifyCaller(
  headers: IncomingHttpHeaders,
  ipKey: string,
  rt: Runtime,
  stored?: StoredKeyLookup,
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
export function presentsCredential(headers: IncomingHttpHeaders, rt: Runtime): boolean {
  for (let i = 0; i < PRECEDENCE.length; i++) {
    if (PRECEDENCE[i]!.presents(headers, rt)) return true;
  }
  return false;
}
