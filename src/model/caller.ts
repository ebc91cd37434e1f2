// Who is calling, as identity answers it: a client on its plan, or an anonymous address. Part of
// the compiled model (model/), so the limiter, the admin API and identity share one meaning
// without importing each other.
import type { CompiledPlan } from "./plan.js";

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
