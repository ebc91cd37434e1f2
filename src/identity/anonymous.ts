// The caller no source claims: anonymous, known by its address (the ipKey that ip.ts and
// forwarded.ts derive from the peer behind trusted proxies), on the anonymous plan if the config
// has one. Also what an unknown API key becomes under `on_unknown: anonymous`.
import type { Identification } from "../model/caller.js";
import type { IdentityView } from "../model/identity.js";

/**
 * Anonymous by IP, unless the config has credentials and no anonymous plan: then a credential
 * is required (401). Credentials are YAML clients, a JWT source, or a plan other than
 * `anonymous`, which only a credential can give: a key issued at runtime (POST /admin/keys),
 * which the file cannot list. A config with none of them lets everyone through anonymously,
 * plan or not.
 */
export function identifyAnonymous(ipKey: string, rt: IdentityView): Identification {
  if (!rt.anonymousPlan && (rt.clientsByKeyHash.size > 0 || rt.identity.jwt || rt.plans.size > 0)) {
    return {
      ok: false,
      reason: "credential_required",
      detail: rt.identity.jwt
        ? `a credential is required (header ${rt.identity.header}, or a JWT as Authorization: Bearer)`
        : `an API key is required (header ${rt.identity.header}${rt.identity.bearer ? " or Authorization: Bearer" : ""})`,
    };
  }
  return {
    ok: true,
    caller: { kind: "anonymous", plan: rt.anonymousPlan, ipKey },
    credentialHeader: undefined,
  };
}
