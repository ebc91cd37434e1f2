// JWT callers: the source that turns a verified bearer token into a caller. The verifier (jose,
// the key material, the cache of verified tokens) is jwt-verifier.ts.
import type { IncomingHttpHeaders } from "node:http";
import type { Identification } from "../model/caller.js";
import type { IdentityView } from "../model/identity.js";
import { bearerToken, isBearerScheme, malformedBearer } from "./bearer.js";
import type { JwtResult, JwtVerifier } from "./jwt-verifier.js";
import type { IdentitySource } from "./source.js";
import { THROTTLED } from "./throttled.js";

export {
  algorithmsFor,
  HMAC_ALGORITHMS,
  type JwtIdentity,
  type JwtKeySource,
  type JwtOptions,
  type JwtResult,
  JwtVerifier,
} from "./jwt-verifier.js";

/**
 * JWT callers are a namespace of their own: `sub: bob` is `jwt:bob`, never the API-key client
 * `bob`, so a token cannot inherit a key client's exemption, deny entry, limits or name. Config
 * client ids cannot start with it (the schema refuses them).
 */
export const JWT_CLIENT_PREFIX = "jwt:";

/** Three base64url segments: what a compact JWS looks like, as opposed to an opaque API key. */
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/**
 * A JWT as `Authorization: Bearer`, when the config has identity.jwt. Every bearer token is
 * taken for a JWT, unless API keys may also come as bearer tokens (`bearer: true`) and this one
 * does not look like a JWT: that one is left to the API-key source after it. The only source
 * that answers with a promise, and only for a token not verified before.
 */
export const jwtBearer: IdentitySource = {
  presents: (headers, rt) =>
    rt.identity.jwt !== undefined &&
    headers.authorization !== undefined &&
    isBearerScheme(headers.authorization),
  identify(headers, ipKey, rt, _stored, throttled) {
    const jwt = rt.identity.jwt;
    const auth = headers.authorization;
    if (jwt === undefined || auth === undefined) return undefined;
    const token = bearerToken(auth);
    if (token === undefined) return isBearerScheme(auth) ? malformedBearer() : undefined;
    if (rt.identity.bearer && !JWT_SHAPE.test(token)) return undefined;
    return verified(jwt, token, ipKey, rt, throttled);
  },
};

/**
 * The bearer token beside the API key that names the caller, verified as a JWT as if it stood
 * alone (undefined: no identity.jwt, no Bearer, or a value without a dot). The request stays the key's, and its
 * Authorization goes upstream (unless the route hides credentials): unread, a forged token (alg
 * none, sub admin) would reach an upstream that trusts the gateway to verify its JWTs, beside
 * the cheapest API key. A bearer value without a dot (an upstream's own opaque token) is not the
 * gateway's to read; one with a dot is verified, and an unreadable Bearer is a 401.
 */
export function jwtBesideKey(
  headers: IncomingHttpHeaders,
  ipKey: string,
  rt: IdentityView,
  throttled?: boolean,
): Identification | Promise<Identification> | undefined {
  const jwt = rt.identity.jwt;
  const auth = headers.authorization;
  if (jwt === undefined || auth === undefined) return undefined;
  const token = bearerToken(auth);
  // `Bearer <jwt> junk`, `Bearer x, Bearer <jwt>`: some upstream parsers still find the token.
  if (token === undefined) return isBearerScheme(auth) ? malformedBearer() : undefined;
  // Any dotted value is taken for a token: decoders read padded, standard-alphabet and quoted
  // forms that JWT_SHAPE does not match.
  if (!token.includes(".")) return undefined;
  return verified(jwt, token, ipKey, rt, throttled);
}

/**
 * The token's caller. From an address past auth_failures only a token verified before (and not
 * expired since) is answered: no signature is checked for it.
 */
function verified(
  jwt: JwtVerifier,
  token: string,
  ipKey: string,
  rt: IdentityView,
  throttled: boolean | undefined,
): Identification | Promise<Identification> {
  if (!throttled) return jwt.verify(token).then((result) => jwtCaller(result, ipKey, rt));
  const known = jwt.cached(token);
  return known ? jwtCaller(known, ipKey, rt) : THROTTLED;
}

/** A verified token's caller on its plan (the token's, else identity.jwt.default_plan). */
function jwtCaller(result: JwtResult, ipKey: string, rt: IdentityView): Identification {
  if (!result.ok) return { ok: false, reason: "invalid_jwt", detail: result.detail };
  const { client, tenant, plan: planName, claims } = result.identity;
  const name = planName ?? rt.identity.jwtDefaultPlan;
  const plan = name === undefined ? undefined : rt.plans.get(name);
  if (!plan) {
    return {
      ok: false,
      reason: "invalid_jwt",
      detail:
        name === undefined
          ? "the JWT names no plan and this gateway has no default plan for tokens"
          : `the JWT names plan "${name}", which this gateway does not have`,
    };
  }
  return {
    ok: true,
    caller: { kind: "client", id: JWT_CLIENT_PREFIX + client, plan, tenant, ipKey, claims },
    credentialHeader: "authorization",
  };
}
