// What an identity source is (api-key.ts, jwt.ts), and the lookup of keys issued at runtime the
// API-key sources ask: apart from caller.ts, which runs the sources, so that no source imports
// the code that calls it.
import type { IncomingHttpHeaders } from "node:http";
import type { Identification } from "../model/caller.js";
import type { IdentityView } from "../model/identity.js";
import type { CompiledClient } from "../model/plan.js";

/**
 * One way a caller proves who they are. A source reads only the runtime it is given (its
 * settings and caches hang off the runtime's IdentityView), so a reload changes it by swapping the runtime.
 */
export interface IdentitySource {
  /**
   * Whether the request carries this source's credential, readable or not: what the
   * `auth_failures` throttle guards and `hide_credentials` strips. Must not allocate.
   */
  presents(headers: IncomingHttpHeaders, rt: IdentityView): boolean;
  /**
   * undefined: not this source's request, ask the next one. Otherwise the answer, final even when
   * it is a failure or (an unknown key under `on_unknown: anonymous`) the anonymous caller. A
   * promise only where the work is asynchronous (a JWT not verified before).
   */
  identify<R extends IdentityView>(
    headers: IncomingHttpHeaders,
    ipKey: string,
    rt: R,
    /** Keys issued at runtime, for the API-key sources; undefined: the YAML's keys only. */
    stored?: StoredKeyLookup<R>,
    /**
     * The address is past `auth_failures`: answer only from what is known here (a YAML key, a
     * cached stored key, a JWT verified before), never a store lookup or a signature check;
     * anything else is THROTTLED.
     */
    throttled?: boolean,
  ): Identification | Promise<Identification> | undefined;
}

/**
 * Keys issued at runtime (operator-state/api-key-lookup.ts): asked with the key's sha256 once it is none of
 * the YAML's. Synchronous when the answer is cached (or the address's lookups are used up).
 */
export interface StoredKeyLookup<R extends IdentityView = IdentityView> {
  find(hash: string, ipKey: string, rt: R): StoredKeyAnswer | Promise<StoredKeyAnswer>;
  /** What is known of `hash` without asking the store (a throttled address gets only this). */
  cached(hash: string, rt: R): StoredKeyAnswer | undefined;
}

export type StoredKeyAnswer =
  | { kind: "client"; client: CompiledClient }
  /** Not a stored key; `throttled`: not asked, this address has used its lookups. */
  | { kind: "unknown"; throttled: boolean }
  /** A valid key the running config cannot serve (its plan is gone): a 403 with `detail`. */
  | { kind: "unusable"; detail: string }
  /** The store could not answer; `closed`: store.on_failure is closed (503), else as unknown. */
  | { kind: "unavailable"; closed: boolean };
