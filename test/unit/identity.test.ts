// The identity precedence, rule by rule, through identifyCaller on compiled runtimes: no sockets.
// Each row names the rule it pins; a source moved in the list or a rule changed fails one here.
import { createHmac } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { describe, expect, it } from "vitest";
import { compileRuntime, type Runtime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { presentedKey } from "../../src/identity/api-key.js";
import {
  type Identification,
  type IdentificationFailure,
  identifyCaller,
  isBadCredential,
  presentsCredential,
} from "../../src/identity/caller.js";
import { JWT_CLIENT_PREFIX } from "../../src/identity/jwt.js";

const SECRET = "an-hs256-secret-of-at-least-32-characters!";
const IP = "203.0.113.7";

interface Shape {
  header?: string;
  bearer?: boolean;
  onUnknown?: "reject" | "anonymous";
  jwt?: boolean;
  anonymousPlan?: boolean;
  clients?: boolean;
  /** false: no plans at all (a plan other than anonymous is a credential's: a stored key's). */
  plans?: boolean;
}

function runtime(shape: Shape): Runtime {
  const apiKey = `{ header: ${shape.header ?? "x-api-key"}, bearer: ${shape.bearer ?? false}, on_unknown: ${shape.onUnknown ?? "reject"} }`;
  const jwt = shape.jwt ? `\n  jwt: { secret: "${SECRET}", default_plan: p, claims: { plan: plan } }` : "";
  const loaded = loadConfigText(
    `store: { url: "memory://" }
upstreams: { api: http://127.0.0.1:1 }
identity:
  api_key: ${apiKey}${jwt}
clients: ${shape.clients === false ? "[]" : "[{ id: alice, key: key-alice, plan: p }]"}
plans: { ${shape.anonymousPlan ? "anonymous: {}, " : ""}${shape.plans === false ? "" : "p: {}, q: {}"} }
routes: [{ name: default, match: { path: / }, upstream: api }]
`,
    "gw.yaml",
    {},
  );
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
  return compileRuntime(loaded.config, { file: "gw.yaml", version: "1", jwt: loaded.jwt });
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
function token(claims: Record<string, unknown>, secret = SECRET): string {
  const body = `${b64({ alg: "HS256", typ: "JWT" })}.${b64({ exp: Math.floor(Date.now() / 1000) + 600, ...claims })}`;
  return `${body}.${createHmac("sha256", secret).update(body).digest("base64url")}`;
}
const BOB = `Bearer ${token({ sub: "bob" })}`;
/** Unsigned (alg none), claiming to be an admin: never the gateway's to forward unread. */
const FORGED = `Bearer ${Buffer.from('{"alg":"none","typ":"JWT"}').toString("base64url")}.${Buffer.from('{"sub":"admin","role":"superuser"}').toString("base64url")}.`;

const KEYS = runtime({});
const BEARER_KEYS = runtime({ bearer: true });
const JWT_ONLY = runtime({ jwt: true, clients: false });
const JWT_AND_KEYS = runtime({ jwt: true });
const JWT_AND_BEARER_KEYS = runtime({ jwt: true, bearer: true });
const UNKNOWN_ANONYMOUS = runtime({ jwt: true, onUnknown: "anonymous", anonymousPlan: true });
const UNKNOWN_ANONYMOUS_NO_PLAN = runtime({ onUnknown: "anonymous" });
const ANONYMOUS_PLAN = runtime({ bearer: true, jwt: true, anonymousPlan: true });
const OPEN = runtime({ clients: false, plans: false });
/** Plans but no clients: the plans are for keys issued at runtime (POST /admin/keys). */
const STORED_KEYS_ONLY = runtime({ clients: false });
const CUSTOM_HEADER = runtime({ header: "X-Key" });

type Expected =
  | { client: string; via: string; plan?: string }
  | { anonymous: true; plan: "anonymous" | undefined }
  | { failure: IdentificationFailure; detail?: string };

const alice = (via = "x-api-key"): Expected => ({ client: "alice", via });
const jwtCaller = (sub: string, plan = "p"): Expected => ({
  client: JWT_CLIENT_PREFIX + sub,
  via: "authorization",
  plan,
});
const anonymous = (plan: "anonymous" | undefined): Expected => ({ anonymous: true, plan });
const failure = (reason: IdentificationFailure, detail?: string): Expected => ({ failure: reason, detail });

// [rule, runtime, headers, expected caller or failure, answered by a promise (the JWT source only)]
const RULES: [string, Runtime, IncomingHttpHeaders, Expected, boolean][] = [
  // The API key header wins over Authorization.
  ["key header alone", KEYS, { "x-api-key": "key-alice" }, alice(), false],
  // A JWT beside the key is verified all the same (a promise): the request stays the key's.
  [
    "key header over a valid JWT",
    JWT_AND_KEYS,
    { "x-api-key": "key-alice", authorization: BOB },
    alice(),
    true,
  ],
  [
    "key header beside a forged JWT: refused as the JWT alone would be",
    JWT_AND_KEYS,
    { "x-api-key": "key-alice", authorization: FORGED },
    failure("invalid_jwt"),
    true,
  ],
  [
    "unknown key header under on_unknown: anonymous, beside a forged JWT: refused",
    UNKNOWN_ANONYMOUS,
    { "x-api-key": "nope", authorization: FORGED },
    failure("invalid_jwt"),
    true,
  ],
  [
    "key header beside an upstream's own opaque bearer token: not the gateway's to read",
    JWT_AND_KEYS,
    { "x-api-key": "key-alice", authorization: "Bearer sk-upstream-0123456789" },
    alice(),
    false,
  ],
  [
    "key header over a bearer key",
    JWT_AND_BEARER_KEYS,
    { "x-api-key": "key-alice", authorization: "Bearer other" },
    alice(),
    false,
  ],
  // With identity.jwt, an unreadable Bearer beside the key is refused as it would be alone:
  // upstream parsers still find a token in `Bearer <jwt> junk` or `Basic x, Bearer <jwt>`.
  [
    "key header beside a malformed Bearer",
    JWT_AND_BEARER_KEYS,
    { "x-api-key": "key-alice", authorization: "Bearer a b" },
    failure("malformed_credential"),
    false,
  ],
  [
    "key header beside a forged JWT followed by junk",
    JWT_AND_KEYS,
    { "x-api-key": "key-alice", authorization: `${FORGED} x` },
    failure("malformed_credential"),
    false,
  ],
  [
    "key header beside a Bearer behind another credential in a list",
    JWT_AND_KEYS,
    { "x-api-key": "key-alice", authorization: `Basic Zm9vOmJhcg==, ${FORGED}` },
    failure("malformed_credential"),
    false,
  ],
  [
    "key header beside a forged JWT in padded base64",
    JWT_AND_KEYS,
    { "x-api-key": "key-alice", authorization: "Bearer eyJhbGciOiJub25lIn0=.eyJzdWIiOiJhZG1pbiJ9=." },
    failure("invalid_jwt"),
    true,
  ],
  [
    "no key, a Bearer behind another credential in a list",
    JWT_ONLY,
    { authorization: `Basic Zm9vOmJhcg==, ${FORGED}` },
    failure("malformed_credential"),
    false,
  ],
  [
    "unknown key header, the JWT beside it unread",
    JWT_AND_KEYS,
    { "x-api-key": "nope", authorization: BOB },
    failure("unknown_key", "the API key is not valid"),
    false,
  ],
  [
    "unknown key header under on_unknown: anonymous, the valid JWT beside it verified",
    UNKNOWN_ANONYMOUS,
    { "x-api-key": "nope", authorization: BOB },
    anonymous("anonymous"),
    true,
  ],
  [
    "key header sent twice",
    KEYS,
    { "x-api-key": ["key-alice", "key-alice"] },
    failure("ambiguous_key", "send the x-api-key header once"),
    false,
  ],
  ["the configured header, not x-api-key", CUSTOM_HEADER, { "x-key": "key-alice" }, alice("x-key"), false],
  [
    "x-api-key is nobody's header when another is configured",
    CUSTOM_HEADER,
    { "x-api-key": "key-alice" },
    failure("credential_required", "an API key is required (header x-key)"),
    false,
  ],

  // A Bearer that looks like a JWT goes to the JWT source when identity.jwt is configured.
  ["JWT alone", JWT_ONLY, { authorization: BOB }, jwtCaller("bob"), true],
  ["JWT beside bearer keys", JWT_AND_BEARER_KEYS, { authorization: BOB }, jwtCaller("bob"), true],
  [
    "JWT naming its plan",
    JWT_ONLY,
    { authorization: `Bearer ${token({ sub: "carol", plan: "q" })}` },
    jwtCaller("carol", "q"),
    true,
  ],
  [
    "JWT naming a plan this gateway lacks",
    JWT_ONLY,
    { authorization: `Bearer ${token({ sub: "carol", plan: "gold" })}` },
    failure("invalid_jwt", 'the JWT names plan "gold", which this gateway does not have'),
    true,
  ],
  [
    "JWT signed with another secret",
    JWT_ONLY,
    { authorization: `Bearer ${token({ sub: "bob" }, `${SECRET}-other`)}` },
    failure("invalid_jwt", "the JWT's signature does not verify"),
    true,
  ],
  [
    "an opaque token is a JWT when keys cannot come as Bearer",
    JWT_AND_KEYS,
    { authorization: "Bearer key-alice" },
    failure("invalid_jwt", "the bearer token is not a well-formed JWT"),
    true,
  ],
  [
    "a JWT-shaped key goes to the JWT source even with bearer keys",
    JWT_AND_BEARER_KEYS,
    { authorization: "Bearer a.b.c" },
    failure("invalid_jwt"),
    true,
  ],

  // Else a Bearer is an API key when `bearer: true`.
  ["bearer key", BEARER_KEYS, { authorization: "Bearer key-alice" }, alice("authorization"), false],
  [
    "bearer key, scheme in any case, blanks around",
    BEARER_KEYS,
    { authorization: "bEaReR \tkey-alice \t" },
    alice("authorization"),
    false,
  ],
  [
    "an opaque token beside JWTs is a bearer key",
    JWT_AND_BEARER_KEYS,
    { authorization: "Bearer key-alice" },
    alice("authorization"),
    false,
  ],
  [
    "a JWT-shaped key without identity.jwt is a bearer key",
    BEARER_KEYS,
    { authorization: "Bearer a.b.c" },
    failure("unknown_key"),
    false,
  ],
  [
    "unknown bearer key",
    JWT_AND_BEARER_KEYS,
    { authorization: "Bearer nope" },
    failure("unknown_key", "the API key is not valid"),
    false,
  ],
  [
    "Bearer unread when neither JWTs nor bearer keys are configured",
    KEYS,
    { authorization: "Bearer key-alice" },
    failure("credential_required", "an API key is required (header x-api-key)"),
    false,
  ],

  // A malformed Bearer is a 401 from whichever configured source reads Bearer credentials.
  ...(["Bearer a b", "Bearer", "Bearer ", "bearer\t"] as const).flatMap(
    (auth): [string, Runtime, IncomingHttpHeaders, Expected, boolean][] => [
      [`"${auth}" with JWTs`, JWT_ONLY, { authorization: auth }, failure("malformed_credential"), false],
      [
        `"${auth}" with bearer keys`,
        BEARER_KEYS,
        { authorization: auth },
        failure("malformed_credential"),
        false,
      ],
      [
        `"${auth}" with both`,
        JWT_AND_BEARER_KEYS,
        { authorization: auth },
        failure("malformed_credential"),
        false,
      ],
      [`"${auth}" with neither, unread`, OPEN, { authorization: auth }, anonymous(undefined), false],
    ],
  ),
  [
    "another scheme passes unread",
    ANONYMOUS_PLAN,
    { authorization: "Basic YWxpY2U6c2VjcmV0" },
    anonymous("anonymous"),
    false,
  ],
  [
    "Bearerx is another scheme",
    ANONYMOUS_PLAN,
    { authorization: "Bearerx key-alice" },
    anonymous("anonymous"),
    false,
  ],
  [
    "an empty Authorization passes unread",
    ANONYMOUS_PLAN,
    { authorization: "" },
    anonymous("anonymous"),
    false,
  ],

  // Unknown key: 401 or anonymous per on_unknown.
  [
    "unknown key, reject",
    KEYS,
    { "x-api-key": "nope" },
    failure("unknown_key", "the API key is not valid"),
    false,
  ],
  ["unknown key, anonymous", UNKNOWN_ANONYMOUS, { "x-api-key": "nope" }, anonymous("anonymous"), false],
  [
    "unknown key, anonymous, but no anonymous plan",
    UNKNOWN_ANONYMOUS_NO_PLAN,
    { "x-api-key": "nope" },
    failure("credential_required", "an API key is required (header x-api-key)"),
    false,
  ],

  // No credential: anonymous by IP, or a credential is required.
  ["nothing presented, anonymous plan", ANONYMOUS_PLAN, {}, anonymous("anonymous"), false],
  [
    "nothing presented, keys and no anonymous plan",
    BEARER_KEYS,
    {},
    failure("credential_required", "an API key is required (header x-api-key or Authorization: Bearer)"),
    false,
  ],
  [
    "nothing presented, JWTs and no anonymous plan",
    JWT_ONLY,
    {},
    failure(
      "credential_required",
      "a credential is required (header x-api-key, or a JWT as Authorization: Bearer)",
    ),
    false,
  ],
  ["nothing presented, no credentials configured at all", OPEN, {}, anonymous(undefined), false],
  [
    "nothing presented, plans for stored keys only: a credential is required",
    STORED_KEYS_ONLY,
    {},
    failure("credential_required", "an API key is required (header x-api-key)"),
    false,
  ],
];

describe("identifyCaller: the precedence", () => {
  it.each(RULES)("%s", async (_rule, rt, headers, expected, async) => {
    const answer = identifyCaller(headers, IP, rt);
    // The API-key path stays synchronous: no promise on the hot path.
    expect(answer instanceof Promise).toBe(async);
    expect(describeAnswer(await answer)).toEqual(normalise(expected));
  });

  it("keys anonymous callers and clients by the address it is given", () => {
    const anon = identifyCaller({}, "ip:2001:db8::/64", ANONYMOUS_PLAN) as Identification;
    expect(anon).toMatchObject({ ok: true, caller: { kind: "anonymous", ipKey: "ip:2001:db8::/64" } });
    const client = identifyCaller({ "x-api-key": "key-alice" }, "ip:2001:db8::/64", KEYS) as Identification;
    expect(client).toMatchObject({ ok: true, caller: { kind: "client", ipKey: "ip:2001:db8::/64" } });
  });

  it("forgets a key with the runtime that held it: a reload that revokes a key revokes it at once", () => {
    expect(describeAnswer(identifyCaller({ "x-api-key": "key-alice" }, IP, KEYS) as Identification)).toEqual(
      normalise(alice()),
    );
    expect(describeAnswer(identifyCaller({ "x-api-key": "key-alice" }, IP, OPEN) as Identification)).toEqual(
      normalise(failure("unknown_key")),
    );
  });
});

describe("presentsCredential: what the auth_failures throttle guards", () => {
  it.each<[string, Runtime, IncomingHttpHeaders, boolean]>([
    ["key header", KEYS, { "x-api-key": "anything" }, true],
    ["key header, even empty", KEYS, { "x-api-key": "" }, true],
    ["configured header only", CUSTOM_HEADER, { "x-api-key": "key-alice" }, false],
    ["Bearer with JWTs", JWT_ONLY, { authorization: "Bearer x" }, true],
    ["Bearer with bearer keys", BEARER_KEYS, { authorization: "Bearer x" }, true],
    ["unreadable Bearer with JWTs", JWT_ONLY, { authorization: "Bearer a b" }, true],
    ["Bearer with neither", KEYS, { authorization: "Bearer key-alice" }, false],
    ["another scheme", JWT_AND_BEARER_KEYS, { authorization: "Basic YWxpY2U6c2VjcmV0" }, false],
    ["nothing", JWT_AND_BEARER_KEYS, {}, false],
  ])("%s", (_case, rt, headers, presents) => {
    expect(presentsCredential(headers, rt)).toBe(presents);
  });
});

describe("isBadCredential: what auth_failures counts", () => {
  it.each<[IdentificationFailure, boolean]>([
    ["unknown_key", true],
    ["ambiguous_key", true],
    ["invalid_jwt", true],
    ["malformed_credential", true],
    ["credential_required", false],
  ])("%s", (reason, bad) => {
    expect(isBadCredential(reason)).toBe(bad);
  });
});

describe("presentedKey", () => {
  it.each<[string, Runtime, IncomingHttpHeaders, string | string[] | undefined]>([
    ["the header", BEARER_KEYS, { "x-api-key": "k", authorization: "Bearer b" }, "k"],
    ["the header twice", KEYS, { "x-api-key": ["k", "l"] }, ["k", "l"]],
    ["a bearer key", BEARER_KEYS, { authorization: "Bearer b" }, "b"],
    ["no bearer keys", KEYS, { authorization: "Bearer b" }, undefined],
    ["an unreadable Bearer", BEARER_KEYS, { authorization: "Bearer a b" }, undefined],
  ])("%s", (_case, rt, headers, key) => {
    expect(presentedKey(headers, rt)).toEqual(key);
  });
});

function describeAnswer(answer: Identification): unknown {
  if (!answer.ok) return { failure: answer.reason, detail: answer.detail };
  const { caller } = answer;
  expect(caller.ipKey).toBe(IP);
  if (caller.kind === "anonymous") {
    expect(answer.credentialHeader).toBeUndefined();
    return { anonymous: true, plan: caller.plan?.name };
  }
  return { client: caller.id, via: answer.credentialHeader, plan: caller.plan.name };
}

function normalise(expected: Expected): unknown {
  if ("failure" in expected)
    return { failure: expected.failure, detail: expected.detail ?? expect.any(String) };
  if ("client" in expected) return { client: expected.client, via: expected.via, plan: expected.plan ?? "p" };
  return expected;
}
