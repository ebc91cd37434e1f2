// The whole YAML contract (docs/configuration.md) as one zod schema. Validation, the TypeScript
// types of the validated config, config/gateway.schema.json and docs/configuration.md are all
// derived from this file, so they cannot drift apart. What a schema cannot say (names that refer
// to each other, one of url/cluster/sentinel, …) is checked in checks.ts.
import { z } from "zod";
import {
  ALGORITHM_KEYS,
  ALGORITHM_NAMES,
  type AlgorithmKeys,
  DEFAULT_ALGORITHM,
} from "../limits/algorithms/index.js";
import { isTimeZone } from "../limits/calendar.js";
import { KEY_PART_FORMS, parseKeyBy } from "../limits/key-by.js";
import { hostPatternProblem } from "../routing/host.js";
import { ADMIN_SCOPES, ADMIN_TOKEN_NAME } from "./admin-tokens.js";
import { suggest } from "./problems.js";
import { duration, percent, size } from "./scalars.js";
import { telemetrySchema } from "./telemetry.js";

const hostPort = () =>
  z
    .string({ error: "expected host:port such as 127.0.0.1:8080" })
    .regex(
      /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]]+|):\d{1,5}$/,
      "expected host:port such as 0.0.0.0:8080 or [::]:8080",
    )
    .describe("host:port to listen on");

/**
 * The proxy's listener: `host:port` (cleartext HTTP/1.1), or a mapping whose `tls` serves HTTPS
 * with ALPN offering h2 and http/1.1 (gateway/tls.ts). The files are read, checked against each
 * other and watched by the loader, like the JWT key file.
 */
const listenSchema = z
  .union(
    [
      hostPort(),
      z.strictObject({
        address: hostPort(),
        tls: z
          .strictObject({
            cert_file: z
              .string()
              .min(1)
              .describe(
                "PEM certificate chain, the server's certificate first; relative to the config file; reloaded when it changes",
              ),
            key_file: z
              .string()
              .min(1)
              .describe("PEM private key of that certificate (unencrypted); relative to the config file"),
          })
          .optional()
          .describe("serve HTTPS: ALPN offers h2 and http/1.1, both limited alike"),
      }),
    ],
    {
      error:
        "expected host:port such as 0.0.0.0:8080, or a mapping { address, tls: { cert_file, key_file } }",
    },
  )
  .describe(
    "host:port to listen on (cleartext HTTP/1.1), or { address, tls } to serve HTTPS with HTTP/2 and HTTP/1.1",
  );

/** The longest usage.retention: beyond it an expiry is no longer a time Redis can be given. */
const MAX_USAGE_RETENTION_MS = 3650 * 86_400_000;

/** The longest admin.audit_retention: beyond it an expiry is no longer a time Redis can be given. */
const MAX_AUDIT_RETENTION_MS = 3650 * 86_400_000;

/** A key's error that tells a missing key from a wrong value. */
const missingOr =
  (key: string, wrong: string) =>
  (issue: { input?: unknown }): string =>
    issue.input === undefined ? `${key} is required: ${wrong.replace(/^expected /, "")}` : wrong;

/** One entry of `admin.tokens` (config/admin-tokens.ts compiles and cross-checks them). */
const adminTokenSchema = z.strictObject({
  name: z
    .string({ error: missingOr("name", "expected a token name such as ops or ci-deploy") })
    .regex(
      ADMIN_TOKEN_NAME,
      'a token name starts with a letter or digit and holds only letters, digits, ".", "_" and "-" (1 to 64 of them): the audit log and the logs show it',
    )
    .describe("who the token is: the audit log and the logs show this name, never the token"),
  token: z
    .string({ error: missingOr("token", "expected the token as a string, e.g. ${OPS_TOKEN}") })
    .min(1, "the token is empty: set the variable it comes from, or remove this entry")
    .describe("the bearer token; write it as ${VAR} to keep it out of the file"),
  scope: z
    .enum(ADMIN_SCOPES, { error: missingOr("scope", "expected read or write") })
    .describe("read: GET and HEAD only; write: also DELETE, POST, PUT and PATCH"),
});

/** Where the upstream reports a request's cost (route `charge`). */
export const CHARGE_SOURCES = ["header", "usage"] as const;

/** The APIs an AI route speaks (`routes[].ai.format`): how its requests and usage are read. */
export const AI_FORMATS = ["openai", "anthropic", "responses"] as const;

/** A route that reads its JSON request body to reserve and settle its budgets (src/ai/). */
const aiSchema = z
  .strictObject({
    format: z
      .enum(AI_FORMATS, { error: missingOr("format", "expected openai, anthropic or responses") })
      .describe(
        "the API this route's upstream speaks: openai (chat completions, completions, embeddings: OpenAI, Azure OpenAI, vLLM, Ollama, LiteLLM), anthropic (messages) or responses (OpenAI's Responses API)",
      ),
    max_output: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe(
        "output tokens per completion a request may ask for: one that names no ceiling is forwarded with this one written in, one that names more is lowered to it; required where a token or money budget applies",
      ),
    clamp: z
      .boolean()
      .default(false)
      .describe(
        "a request its budgets cannot hold is forwarded with its output ceiling lowered to what they can, down to min_output, instead of refused (default false)",
      ),
    min_output: z
      .number()
      .int()
      .min(1)
      .default(16)
      .describe(
        "with clamp: the lowest output ceiling a request is lowered to; below it, it is refused (default 16)",
      ),
    output_field: z
      .enum(["max_tokens", "max_completion_tokens"])
      .optional()
      .describe(
        "format openai, chat completions: the one ceiling field the forwarded body carries, whichever the request named (default max_completion_tokens; max_tokens for servers that read only that one)",
      ),
    image_tokens: z
      .number()
      .int()
      .min(0)
      .default(1600)
      .describe(
        "tokens reserved for each image a request attaches, in place of its bytes (an image's tokens follow its size, not its encoding): an estimate, settled to what the upstream reports (default 1600)",
      ),
    referenced_input_tokens: z
      .number()
      .int()
      .min(0)
      .default(128_000)
      .describe(
        "tokens reserved for each input a request only refers to, which its body does not carry (a stored file by file_id or file_url, an item_reference, an earlier answer's audio, Anthropic's url or file documents; the Responses API's previous_response_id, a stored conversation or prompt): an estimate, settled to what the upstream reports (default 128000)",
      ),
  })
  .describe(
    "an AI route: its JSON request body is read (bounded by max_body, default 4mb here) to key limits by body:<field>, to reserve its budgets before forwarding and to settle them to the usage the answer reports",
  );

/** One model's prices (`models.<name>`), in US dollars per million tokens. */
const priceSchema = z.strictObject({
  input: z
    .number({
      error: missingOr("input", "expected the price of a million input tokens in dollars, e.g. 2.5"),
    })
    .min(0)
    .describe("dollars per million input (prompt) tokens"),
  output: z
    .number({
      error: missingOr("output", "expected the price of a million output tokens in dollars, e.g. 10"),
    })
    .min(0)
    .describe("dollars per million output (completion) tokens, reasoning included"),
  cached_input: z
    .number()
    .min(0)
    .optional()
    .describe(
      "dollars per million input tokens read from the provider's prompt cache (OpenAI cached_tokens, Anthropic cache_read_input_tokens); default input",
    ),
  cache_write: z
    .number()
    .min(0)
    .optional()
    .describe(
      "dollars per million input tokens written to Anthropic's prompt cache for five minutes (cache_creation_input_tokens); default 1.25 × input",
    ),
  cache_write_1h: z
    .number()
    .min(0)
    .optional()
    .describe(
      "dollars per million input tokens written to Anthropic's prompt cache for an hour; default 2 × input",
    ),
  audio_input: z
    .number()
    .min(0)
    .optional()
    .describe("dollars per million audio input tokens; without it a request that sends audio is refused"),
  audio_output: z
    .number()
    .min(0)
    .optional()
    .describe("dollars per million audio output tokens; without it a request that asks for audio is refused"),
});

const failurePolicy = z
  .enum(["open", "closed", "local"])
  .describe(
    "what to do when the store cannot answer: open forwards, closed answers 503, local decides in-process",
  );

/**
 * The order a limit's keys are listed in (the reference, "expected one of" hints), as it has
 * always been; keys of algorithms added later follow it, in registry order.
 */
const LIMIT_KEY_ORDER = [
  "algorithm",
  "rate",
  "burst",
  "limit",
  "window",
  "shadow",
  "unlimited",
  "max_in_flight",
  "lease",
  "queue",
  "batch",
  "by",
  "unit",
];

/** Each key some algorithm takes, by its schema (limits/algorithms/ says which algorithm takes which). */
const algorithmKeys = Object.fromEntries(
  Object.entries(ALGORITHM_KEYS).map(([key, definition]) => [key, definition.schema]),
) as { [K in keyof AlgorithmKeys]: AlgorithmKeys[K]["schema"] };

/** `by`: one key part or a list of them (limits/key-by.ts reads and explains them). */
const keyBySchema = z
  .union([z.string(), z.array(z.string()).min(1, `list at least one key part: ${KEY_PART_FORMS}`)], {
    error: `expected a key part or a list of them: ${KEY_PART_FORMS}`,
  })
  .superRefine((written, ctx) => {
    const parsed = parseKeyBy(written);
    if ("error" in parsed) {
      ctx.addIssue({
        code: "custom",
        message: parsed.error,
        ...(parsed.at === undefined ? {} : { path: [parsed.at] }),
      });
    }
  });

const limitKeys = {
  algorithm: z.enum(ALGORITHM_NAMES).optional().describe(`default ${DEFAULT_ALGORITHM}`),
  ...algorithmKeys,
  shadow: z.boolean().optional().describe("evaluate and count, never deny"),
  unlimited: z.boolean().optional().describe("exempt this scope from limiting"),
  by: keyBySchema
    .optional()
    .describe(
      "what one budget is kept per: caller, tenant, ip, route, header:<name>, query:<name>, claim:<name>, segment:<n>, or a list of these (one budget per combination); default caller for plan limits, route for route limits",
    ),
  unit: z
    .enum(["requests", "tokens", "usd"])
    .optional()
    .describe(
      "tokens: a token budget, charged the tokens upstreams report (an AI route reserves its estimate up front and settles to the reported usage; other routes take their cost up front and are charged what their charge reads beyond it); usd: a money budget, its limit (or burst and rate) in dollars, charged what an AI route's usage costs at the models price table; requests (default): each request takes the route's cost",
    ),
};

/** Where a key is listed: its place in LIMIT_KEY_ORDER, or after all of them. */
const listed = (key: string) => {
  const at = LIMIT_KEY_ORDER.indexOf(key);
  return at === -1 ? LIMIT_KEY_ORDER.length : at;
};

export const limitSchema = z
  .strictObject(
    Object.fromEntries(
      Object.entries(limitKeys).sort(([a], [b]) => listed(a) - listed(b)),
    ) as typeof limitKeys,
  )
  .describe("one limit");

const upstreamUrl = () => z.url({ protocol: /^https?$/, error: "expected an http:// or https:// URL" });

/** A header name, as RFC 9110 spells a token. */
const headerName = () =>
  z
    .string({ error: "expected a header name such as authorization" })
    .regex(
      /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/,
      "expected a header name (letters, digits and ! # $ % & ' * + . ^ _ ` | ~ -)",
    );

/** `request_headers` / `response_headers`: headers set on or removed from one direction. */
const headerRulesSchema = (direction: "request" | "response") =>
  z
    .strictObject({
      set: z
        .record(headerName(), z.string({ error: "expected the header's value as a string" }))
        .optional()
        .describe(
          direction === "request"
            ? 'headers set on the upstream request, replacing any the client sent (e.g. authorization: "Bearer ${OPENAI_API_KEY}"); values are secrets: never logged, shown as set in /admin/config'
            : "headers set on the answer the client gets, replacing the upstream's",
        ),
      remove: z
        .array(headerName())
        .optional()
        .describe(
          direction === "request"
            ? "headers the upstream never gets from the client"
            : "headers of the upstream's answer the client never gets",
        ),
    })
    .optional()
    .describe(
      direction === "request"
        ? "headers set on or removed from the upstream request; a route's rule for a name wins over its upstream's"
        : "headers set on or removed from the upstream's answer before the client; a route's rule for a name wins over its upstream's",
    );

const upstreamTarget = z.union([
  upstreamUrl(),
  z.strictObject({
    url: upstreamUrl(),
    weight: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(1)
      .describe("this target's share of the requests, against the others' weights (default 1)"),
  }),
]);

const upstreamLong = z.strictObject({
  url: upstreamUrl().optional().describe("the upstream's address; give targets instead for several"),
  targets: z
    .array(upstreamTarget)
    .min(1, "list at least one target")
    .optional()
    .describe(
      "several addresses of one upstream, each a URL or { url, weight } (weight 1 to 1000, default 1), balanced per request by weight; all share scheme and path",
    ),
  health: z
    .strictObject({
      path: z
        .string({ error: "expected a path such as /healthz" })
        .startsWith("/", "a health check path starts with /")
        .describe(
          "active health checks: GET of this path on each target every interval, passing on a 2xx within timeout; two failed in a row take the target out of rotation until one passes",
        ),
      interval: duration().default(5000).describe("time between two checks of a target (default 5s)"),
      timeout: duration().default(1000).describe("a check with no answer within this fails (default 1s)"),
    })
    .optional()
    .describe("active health checks (default: none; requests that fail to reach a target eject it anyway)"),
  retries: z
    .number()
    .int()
    .min(0)
    .max(10)
    .default(0)
    .describe(
      "attempts on other targets after a failure, for requests safe to repeat (idempotent, or never sent); a route's retries overrides it (default 0)",
    ),
  timeout: duration()
    .default(30_000)
    .describe(
      "deadline for the whole response, head and body, counted from when the request is sent on (default 30s; 0: none); a route's timeout overrides it",
    ),
  connect_timeout: duration()
    .default(2000)
    .describe("TCP/TLS connect timeout (default 2s; 0: none); a route's connect_timeout overrides it"),
  connections: z
    .number()
    .int()
    .min(1)
    .default(128)
    .describe("pooled connections to this upstream (default 128)"),
  caller_share: percent()
    .refine(
      (share) => share > 0 && share <= 1,
      "caller_share is a share of the pool: above 0% and at most 100%",
    )
    .default(0.25)
    .describe(
      "the share of this upstream's connections (connections × targets) one caller is sure of on one instance; past it, while less than a share of the pool is free, its requests are a 429 as they would be sent on, a concurrency lease and AI reservation given back (default 25%; 100%: no bound, requests queue for a connection)",
    ),
  // TLS to https:// targets (config/upstream-tls.ts reads the files; checks.ts refuses them on
  // an upstream with no https target, where they would silently do nothing).
  ca_file: z
    .string()
    .min(1)
    .optional()
    .describe(
      "PEM CA certificate(s) that https targets' certificates must chain to, instead of the system's; relative to the config file",
    ),
  cert_file: z
    .string()
    .min(1)
    .optional()
    .describe("PEM client certificate sent to https targets that ask for one (mTLS); give key_file with it"),
  key_file: z
    .string()
    .min(1)
    .optional()
    .describe("PEM private key of cert_file (unencrypted); relative to the config file"),
  servername: z
    .string()
    .min(1)
    .optional()
    .describe(
      "name sent in SNI and that the target's certificate must carry (default: the target URL's host)",
    ),
  insecure: z
    .boolean()
    .default(false)
    .describe("accept any certificate from https targets, unverified (default false; --check warns)"),
  request_headers: headerRulesSchema("request"),
  response_headers: headerRulesSchema("response"),
});

export const upstreamSchema = z.union([upstreamUrl(), upstreamLong]);

const cidr = z.string({ error: "expected an address or CIDR such as 10.0.0.0/8" });

const callerList = z.strictObject({
  ips: z.array(cidr).default([]).describe("CIDRs of caller IPs"),
  clients: z.array(z.string()).default([]).describe("client ids"),
});

/**
 * Route and plan names become limit names (`<plan>.<route>`), which are sent to clients as RFC
 * 8941 strings in RateLimit / RateLimit-Policy (`"free.search"`), to the upstream in
 * Tollgate-Plan, and written into Redis keys. A quote or backslash would break every RateLimit
 * header, and a character outside Latin-1 cannot be sent in a header at all, so both are
 * refused here, where the operator can fix them. A plan name holds no `.`: it separates the plan
 * from the route in a limit name.
 */
export const ROUTE_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
export const PLAN_NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** A route limit's own name (`total` of `search.total`): like a plan's, no `.` in it. */
export const LIMIT_NAME = PLAN_NAME;
/**
 * Client ids and tenants are sent to the upstream in Tollgate-Client and Tollgate-Tenant and
 * become Redis key parts: the characters a JWT's claims may hold (identity/jwt.ts), so that a
 * caller's identity has the same shape whether it comes from the config or a token.
 */
export const CALLER_ID = /^[A-Za-z0-9._~@+=:\-/]{1,256}$/;

const namePattern = (pattern: RegExp, message: string) =>
  z.string({ error: message }).regex(pattern, message);

const routeName = () =>
  namePattern(
    ROUTE_NAME,
    'a route name may only hold letters, digits, "_", "-" and "." (1 to 64 of them): it is sent to clients in the RateLimit headers',
  );
const planName = () =>
  namePattern(
    PLAN_NAME,
    'a plan name may only hold letters, digits, "_" and "-" (1 to 64 of them): it is sent to clients in the RateLimit headers and to the upstream in Tollgate-Plan',
  );
/** Names that travel in headers (Tollgate-Client, -Tenant) and Redis keys. */
export const headerSafeName = (what: string, header: string) =>
  namePattern(
    CALLER_ID,
    `${what} may only hold letters, digits and . _ ~ @ + = : - / (1 to 256 of them): it is sent to the upstream in ${header}`,
  );

export const ALERT_EVENT_NAMES = ["budget.threshold", "budget.exhausted", "budget.reset"] as const;
/** What a webhook gets unless it names its events. */
export const DEFAULT_ALERT_EVENTS = ["budget.threshold", "budget.exhausted"] as const;

const alertEvents = z
  .array(z.enum(ALERT_EVENT_NAMES, { error: `expected one of ${ALERT_EVENT_NAMES.join(", ")}` }))
  .min(1, "name at least one event, or remove the webhook")
  .optional();

/** A receiver's deadline: below the queue's lease, so a slow one is never sent twice at once. */
const alertTimeout = () =>
  duration()
    .refine((ms) => ms >= 100 && ms <= 20_000, "a webhook's timeout is between 100ms and 20s")
    .default(5000);

const alertUrl = () =>
  z.url({ protocol: /^https?$/, error: "expected the receiver's http:// or https:// URL" });

const alertSecret = () =>
  z
    .string({ error: "expected the secret deliveries are signed with (HMAC-SHA256), e.g. ${ALERT_SECRET}" })
    .min(1, "the secret is empty: the variable it comes from is probably unset");

const webhookSchema = z.strictObject({
  name: z
    .string({ error: "expected the webhook's name" })
    .regex(/^[A-Za-z0-9_-]{1,64}$/, "a webhook's name is letters, digits, _ and - (1 to 64)")
    .describe("the webhook's name in metrics and logs (its URL is never shown)"),
  url: alertUrl().describe("where deliveries are POSTed; treated as a secret (never logged or shown)"),
  secret: alertSecret().describe(
    'signs each delivery: Tollgate-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">',
  ),
  events: alertEvents.describe(
    "which events it gets: budget.threshold, budget.exhausted, budget.reset (default the first two)",
  ),
  timeout: alertTimeout().describe(
    "how long one delivery waits for the receiver's answer (default 5s, at most 20s)",
  ),
});

const alertsSchema = z
  .strictObject({
    thresholds: z
      .array(percent())
      .min(1, "name at least one threshold, or leave thresholds out")
      .max(20, "at most 20 thresholds")
      .refine((t) => t.every((share) => share > 0 && share <= 1), "a threshold is above 0% and at most 100%")
      .optional()
      .describe(
        "shares of a calendar budget whose crossing is an alert (budget.threshold), once per caller, budget, period and threshold (default [calendar.alert_at])",
      ),
    webhooks: z.array(webhookSchema).default([]).describe("receivers of every caller's alerts"),
    retry: z
      .strictObject({
        first: duration()
          .refine((ms) => ms >= 100, "wait at least 100ms before the first retry")
          .default(1000)
          .describe("the wait before a failed delivery's first retry, doubling each time (default 1s)"),
        max_delay: duration()
          .refine((ms) => ms >= 1000, "a retry's wait is at least 1s")
          .default(300_000)
          .describe("the longest wait between two tries (default 5m)"),
        max_attempts: z
          .number()
          .int()
          .min(1)
          .max(100)
          .default(20)
          .describe("tries of one delivery before it is dropped and counted (default 20: about an hour)"),
      })
      .prefault({})
      .describe("how failed deliveries are tried again (any answer but 2xx, or none in time)"),
    queue: z
      .number()
      .int()
      .min(100)
      .max(1_000_000)
      .default(10_000)
      .describe(
        "deliveries waiting at most, in the store's Redis; past it a new one is dropped and counted (default 10000)",
      ),
  })
  .prefault({})
  .describe("budget alerts: which shares of a calendar budget alert, and where alerts are delivered");

const tenantSchema = z
  .strictObject({
    alert_url: alertUrl()
      .optional()
      .describe(
        "where this tenant's own alerts are POSTed, beside the webhooks; a secret like a webhook's URL",
      ),
    alert_secret: alertSecret().optional().describe("signs this tenant's deliveries (needed with alert_url)"),
    alert_events: alertEvents.describe(
      "which events the tenant gets (default budget.threshold, budget.exhausted)",
    ),
    alert_timeout: alertTimeout().describe("how long one delivery waits for the receiver (default 5s)"),
  })
  .superRefine((t, ctx) => {
    if (t.alert_url !== undefined && t.alert_secret === undefined)
      ctx.addIssue({
        code: "custom",
        path: ["alert_url"],
        message: "alert_url needs alert_secret, the secret its deliveries are signed with",
      });
  });

/**
 * A plan's entry for a route: one limit, or a map of named limits (config/plan-routes.ts). A
 * value that is neither is reported from the branch that got further into it (load.ts).
 */
const planRouteEntry = z.union([
  limitSchema,
  // Any key, so that a misspelt name is reported as one (checks.ts) rather than as a limit
  // with an unknown key.
  z
    .record(z.string(), limitSchema)
    .refine((named) => Object.keys(named).length > 0, "expected a limit, or a map of named limits"),
]);

export const clientSchema = z.strictObject({
  id: headerSafeName("a client id", "Tollgate-Client")
    .refine((id) => !id.toLowerCase().startsWith("jwt:"), {
      message:
        'client ids starting with "jwt:" are reserved for JWT subjects (sub: bob is the caller jwt:bob)',
    })
    .describe("the client's name in logs, headers and the admin API"),
  key_sha256: z
    .string()
    .regex(/^[0-9a-fA-F]{64}$/, "key_sha256 must be the 64 hex digits of the SHA-256 of the key")
    .optional()
    .describe('hex SHA-256 of the API key: printf %s "$KEY" | sha256sum'),
  key: z.string().min(1).optional().describe("plain key, for local use only; prefer key_sha256"),
  plan: z.string().min(1).describe("one of plans"),
  tenant: headerSafeName("a tenant", "Tollgate-Tenant")
    .optional()
    .describe("clients of one tenant share its tenant limit"),
  limits: z
    .strictObject({
      global: limitSchema.optional().describe("replaces the plan's global limit for this client"),
      // Listed so that --check can say why (checks.ts) rather than "unknown key".
      tenant: limitSchema
        .optional()
        .describe(
          "refused by --check: the tenant limit is one budget shared by every client of the tenant; size it in the plan",
        ),
      routes: z
        .record(z.string(), planRouteEntry)
        .default({})
        .describe(
          "per route name: replaces the plan's limit of that route for this client (a map of named limits: each replaces the plan's limit of that name)",
        ),
    })
    .optional()
    .describe(
      "this client's own sizes of its plan's limits: each replaces the plan's limit of the same key, keeps its name, and must exist in the plan",
    ),
});

export const routeSchema = z.strictObject({
  name: routeName().describe("the route's name in plans, metrics, logs and limit names"),
  match: z.strictObject({
    path: z
      .string()
      .startsWith("/", "a route path starts with /")
      .describe("path prefix, matched on segment boundaries; the longest wins"),
    host: z
      .string({ error: "expected a host such as api.example.com or *.example.com" })
      .superRefine((written, ctx) => {
        const problem = hostPatternProblem(written);
        if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
      })
      .optional()
      .describe(
        "only requests whose Host is this name (api.example.com) or below it (*.example.com); port ignored, case-insensitive; on one path prefix a route with a host wins over one without (default: every host)",
      ),
    methods: z
      .array(z.string().regex(/^[A-Za-z]+$/, "expected an HTTP method such as GET"))
      // An empty list would read as "no method" but match every one, as if it were left out.
      .min(1, "list at least one method, or leave methods out to match every method")
      .optional()
      .describe("only these methods (default: all)"),
  }),
  upstream: z.string().min(1).describe("one of upstreams"),
  retries: z
    .number()
    .int()
    .min(0)
    .max(10)
    .optional()
    .describe("overrides the upstream's retries for this route's requests"),
  by: z
    .enum(["ip", "tenant"])
    .optional()
    .describe("key the plans' limits of this route by client IP or by tenant (a limit's own by wins)"),
  trusted_headers: z
    .array(headerName())
    .default([])
    .describe(
      "headers a trusted proxy in front sets on this route's requests (e.g. x-org from an auth service): from a peer outside identity.trusted_proxies a request carrying one is a 400, so a limit keyed by it alone cannot be chosen by a client",
    ),
  limits: z
    .record(
      namePattern(
        LIMIT_NAME,
        'a route limit\'s name may only hold letters, digits, "_" and "-" (1 to 64 of them): the limit is named <route>.<name>',
      ),
      limitSchema,
    )
    .default({})
    .describe(
      "limits for every caller of this route, whatever its plan, named <route>.<name>; each keyed by route (one budget shared by all callers) unless its by says otherwise",
    ),
  cost: z.number().int().min(1).default(1).describe("tokens one request takes from rate limits (default 1)"),
  charge: z
    .union([z.enum(CHARGE_SOURCES), z.array(z.enum(CHARGE_SOURCES)).min(1, "list header, usage or both")])
    .default("header")
    .describe(
      "where the upstream says what a request cost, charged beyond cost: header (Tollgate-Cost in the response head or trailers), usage (token counts in a JSON body or an event-stream's events, read as they pass), or both (default header)",
    ),
  usage_fields: z
    .union([z.string(), z.array(z.string()).min(1, "list at least one usage field")])
    .optional()
    .describe(
      "where charge: usage finds the tokens, tried in order: dotted paths, or sums of them (usage.prompt_tokens + usage.completion_tokens); default the OpenAI and Anthropic fields",
    ),
  max_cost: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe(
      "what one request may cost, as the route declares it: a token budget with less than this left refuses the request up front (it takes only cost up front, and is charged what the upstream reports, even above max_cost); an answer whose usage cannot be read is charged max_cost",
    ),
  max_body: size()
    .optional()
    .describe(
      "largest request body accepted (default: none; 4mb on an AI route, which holds the body in memory)",
    ),
  ai: aiSchema.optional(),
  request_headers: headerRulesSchema("request"),
  response_headers: headerRulesSchema("response"),
  on_failure: failurePolicy.optional().describe("overrides store.on_failure for this route"),
  hide_credentials: z
    .boolean()
    .default(false)
    .describe(
      "remove the credential the caller was identified by (API key header, Authorization: Bearer) before the upstream (default false)",
    ),
  timeout: duration()
    .optional()
    .describe(
      "this route's deadline for the whole upstream response, head and body (0: none); overrides the upstream's timeout for this route only",
    ),
  connect_timeout: duration()
    .optional()
    .describe(
      "how long this route's requests wait for a connection to the upstream (0: no limit); overrides the upstream's connect_timeout for this route only",
    ),
  strip_prefix: z
    .boolean()
    .default(false)
    .describe(
      "drop the matched match.path prefix before the upstream (/v1/billing/x is sent as /x); the query string is kept (default false)",
    ),
  rewrite: z
    .strictObject({
      prefix: z
        .string({ error: "expected a path such as /billing" })
        .startsWith("/", "rewrite.prefix is a path: it starts with /")
        .describe("sent in place of the matched match.path prefix (/v1/billing/x is sent as /billing/x)"),
    })
    .optional()
    .describe(
      "replace the matched path prefix before the upstream; the query string is kept, the route and its limits are unchanged",
    ),
});

export const planSchema = z.strictObject({
  allow: z
    .strictObject({
      routes: z
        .array(z.string().min(1))
        .optional()
        .describe("the route names this plan may use (default: every route)"),
      models: z
        .array(z.string().min(1))
        .optional()
        .describe(
          "the models this plan may ask AI routes for, matched against the request's model with * wildcards (gpt-4o-mini*, claude-*); default: every model",
        ),
    })
    .optional()
    .describe(
      "what the plan includes: a request outside it is a 403 not-entitled naming what the plan allows, decided before any limit is charged",
    ),
  global: limitSchema.optional().describe("per caller, across all routes"),
  tenant: limitSchema.optional().describe("shared by every client of a tenant"),
  routes: z
    .record(z.string(), planRouteEntry)
    .default({})
    .describe(
      "per route name: that route's limit (named <plan>.<route>), or a map of named limits all decided together (each named <plan>.<route>.<name>)",
    ),
});

export const configSchema = z
  .strictObject({
    listen: listenSchema.default("0.0.0.0:8080"),
    workers: z
      .union([z.number().int().min(1), z.literal("auto")])
      .default(1)
      .describe("processes serving the proxy listener; auto: one per core"),
    shutdown_grace: duration().default(10_000).describe("on SIGTERM, how long requests in flight may finish"),
    idle_timeout: duration()
      .refine(
        (ms) => ms >= 1000,
        "idle_timeout is at least 1s: shorter closes connections between a client's requests, and 0 would keep idle ones forever",
      )
      .default(75_000)
      .describe(
        "a client connection with nothing in flight (HTTP/1.1 keep-alive, or HTTP/2 with no stream open) is closed after this; HTTP/2 with a GOAWAY first (default 75s)",
      ),
    tunnel_idle_timeout: duration()
      .default(300_000)
      .describe("a WebSocket tunnel with no bytes either way for this long is closed (default 5m)"),
    retry_hint_max: duration()
      .default(60_000)
      .describe(
        "a 429 or 503 whose wait is longer than this carries x-should-retry: false, which the OpenAI and Anthropic SDKs read as do not retry (they would sleep the whole wait); every one carries retry-after-ms (default 60s)",
      ),
    sustained_denial: duration()
      .default(60_000)
      .describe("a caller denied without pause for this long is logged once and counted (default 60s)"),
    log: z
      .strictObject({
        level: z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]).default("info"),
        requests: z.boolean().default(true).describe("one JSON line per request"),
      })
      .default({ level: "info", requests: true }),
    admin: z
      .strictObject({
        listen: hostPort().default("127.0.0.1:9090"),
        token: z
          .string()
          .optional()
          .describe(
            "one bearer token for /admin/*, allowed to read and write (audited as admin); empty or absent with no tokens: /admin/* answers 404",
          ),
        tokens: z
          .array(adminTokenSchema)
          .optional()
          .describe("named bearer tokens for /admin/*, each read or write; give this or token, not both"),
        audit_retention: duration()
          .refine((ms) => ms >= 1000, "keep the audit log at least 1s")
          .refine((ms) => ms <= MAX_AUDIT_RETENTION_MS, "keep the audit log at most 3650d (ten years)")
          .default(30 * 86_400_000)
          .describe("how long each entry of the audit log (GET /admin/audit) is kept (default 30d)"),
      })
      .prefault({})
      .describe("the admin listener: probes, metrics and the operator API under /admin"),
    store: z.strictObject({
      url: z
        .string()
        .regex(/^(memory:\/\/|rediss?:\/\/)/, "expected memory://, redis://host:port or rediss://host:port")
        .optional()
        .describe("memory:// (one instance), redis://[:password@]host:port[/db] or rediss://"),
      cluster: z
        .array(z.string().regex(/^rediss?:\/\/[^/]+$/, "expected redis://host:port"))
        .min(1)
        .optional()
        .describe("Redis Cluster seed nodes; give this instead of url"),
      sentinel: z
        .strictObject({
          name: z.string().min(1).describe("the monitored master's name"),
          nodes: z
            .array(z.string().regex(/^[^:/\s]+:\d+$/, "expected host:port"))
            .min(1)
            .describe("sentinel addresses"),
        })
        .optional()
        .describe("Redis Sentinel; give this instead of url"),
      prefix: z.string().default("tollgate:").describe("prefix of every key tollgate writes"),
      timeout: duration().default(100),
      replicas: z
        .strictObject({
          wait: z
            .number()
            .int()
            .min(1)
            .describe(
              "replicas that must hold a check's writes before it is answered (Redis WAIT after the check script, in the same round trip)",
            ),
          timeout: duration()
            .refine((ms) => ms >= 1, "wait at least 1ms")
            .default(50)
            .describe(
              "how long a check waits for them; past it the check is a store failure (reason replication), answered by on_failure (default 50ms)",
            ),
        })
        .optional()
        .describe(
          "answer a decision only once replicas hold it, so a failover cannot lose it; off when absent (docs/scaling.md, Surviving a failover)",
        ),
      on_failure: failurePolicy.default("open"),
      local_fraction: z
        .number()
        .gt(0)
        .max(1)
        .default(0.25)
        .describe("with on_failure: local, the share of each limit one instance grants alone"),
      breaker: z
        .strictObject({
          error_rate: percent().default(0.5).describe("share of failed checks in the window that opens it"),
          min_requests: z
            .number()
            .int()
            .min(1)
            .default(20)
            .describe("checks in the window before it may open"),
          window: duration().default(10_000).describe("the rolling window failures are counted in"),
          cooldown: duration().default(5000).describe("how long it stays open before one trial check"),
        })
        .prefault({})
        .describe("the circuit breaker around the store (one per master in a Redis Cluster)"),
    }),
    upstreams: z.record(z.string(), upstreamSchema),
    rls: z
      .strictObject({
        listen: hostPort().describe(
          "host:port of the gRPC listener serving envoy.service.ratelimit.v3.RateLimitService (cleartext HTTP/2)",
        ),
        config: z
          .union([z.string().min(1), z.array(z.string().min(1)).min(1)], {
            error: "expected the envoyproxy/ratelimit YAML file (or a list of them), relative to this file",
          })
          .describe(
            "envoyproxy/ratelimit YAML file(s) of descriptors, relative to this file; each domain in one file; re-read on reload",
          ),
        response_headers: z
          .boolean()
          .default(false)
          .describe(
            "add RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset to Envoy's answer (response_headers_to_add)",
          ),
        on_failure: z
          .enum(["open", "closed", "local"])
          .optional()
          .describe(
            "when the store cannot answer: open answers OK, closed OVER_LIMIT, local decides in-process with store.local_fraction of each limit (default: store.on_failure)",
          ),
      })
      .optional()
      .describe(
        "Envoy's global rate-limit service (gRPC), served from tollgate's limiter; off when absent (docs/envoy.md)",
      ),
    identity: z
      .strictObject({
        api_key: z
          .strictObject({
            header: z
              .string()
              .regex(
                /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/,
                "expected a header name such as x-api-key (letters, digits and ! # $ % & ' * + . ^ _ ` | ~ -)",
              )
              .default("x-api-key")
              .describe("header carrying the API key"),
            bearer: z.boolean().default(false).describe("also accept Authorization: Bearer <key>"),
            on_unknown: z
              .enum(["reject", "anonymous"])
              .default("reject")
              .describe("an unknown key: 401, or treated as anonymous"),
          })
          .default({ header: "x-api-key", bearer: false, on_unknown: "reject" }),
        jwt: z
          .strictObject({
            secret: z.string().optional().describe("HS256/384/512 shared secret (at least 32 characters)"),
            public_key_file: z
              .string()
              .optional()
              .describe("PEM public key (RSA, EC or Ed25519); relative to the config file"),
            jwks_file: z.string().optional().describe("a JWKS file; the token's kid selects the key"),
            jwks_url: z
              .string()
              .optional()
              .describe(
                "an identity provider's JWKS, fetched and cached by its cache headers (https://; http:// on loopback only)",
              ),
            issuer: z
              .string()
              .optional()
              .describe(
                "required iss; alone (no secret, public_key_file, jwks_file or jwks_url) also the OIDC issuer whose keys are found through <issuer>/.well-known/openid-configuration",
              ),
            audience: z.string().optional().describe("required aud"),
            clock_tolerance: duration().default(5000).describe("leeway for exp and nbf (default 5s)"),
            ca_file: z
              .string()
              .optional()
              .describe(
                "PEM CA certificates the identity provider's certificate must chain to (issuer or jwks_url), instead of the system's",
              ),
            fetch_timeout: duration()
              .default(5000)
              .describe(
                "deadline of one fetch from the identity provider: connect, TLS and the whole answer (default 5s)",
              ),
            refetch_interval: duration()
              .default(30_000)
              .describe(
                "a token with a kid the cached keys lack fetches them again at most once per this (and a failed fetch is retried after it) (default 30s, 1s to 1d)",
              ),
            cache_floor: duration()
              .default(60_000)
              .describe(
                "the identity provider's keys are kept at least this long, whatever its cache headers say (default 1m)",
              ),
            cache_ceiling: duration()
              .default(86_400_000)
              .describe("and at most this long before they are fetched again (default 24h, at most 7d)"),
            claims: z
              .strictObject({
                client: z.string().default("sub").describe("claim naming the client (default sub)"),
                tenant: z.string().optional().describe("claim naming the tenant"),
                plan: z.string().optional().describe("claim naming the plan"),
              })
              .default({ client: "sub" }),
            default_plan: z
              .string()
              .optional()
              .describe("plan for tokens without a plan claim (else they are refused)"),
          })
          .optional(),
        trusted_proxies: z
          .array(cidr)
          .default([])
          .describe("CIDRs of proxies whose forwarding header is read; empty: the socket peer is the caller"),
        client_ip_header: z
          .enum(["x-forwarded-for", "forwarded"])
          .default("x-forwarded-for")
          .describe("the one forwarding header your trusted proxies set; the other is ignored"),
        ipv6_prefix: z
          .number()
          .int()
          .min(1)
          .max(128)
          .default(64)
          .describe("anonymous IPv6 callers are limited per prefix of this length"),
        auth_failures: z
          .union([
            z.literal(false),
            z.strictObject({
              limit: z.number().int().min(1).default(20).describe("failed credentials per client IP"),
              window: duration().default(60_000).describe("the window they are counted in"),
            }),
          ])
          .default({ limit: 20, window: 60_000 })
          .describe(
            "after this many invalid credentials from one client IP within window, its credentials are refused with 429 unchecked, but for those this instance can tell valid without a lookup (keys of this file, stored keys it has served, JWTs it verified before); per instance; false turns it off",
          ),
      })
      .default({
        api_key: { header: "x-api-key", bearer: false, on_unknown: "reject" },
        trusted_proxies: [],
        client_ip_header: "x-forwarded-for",
        ipv6_prefix: 64,
        auth_failures: { limit: 20, window: 60_000 },
      }),
    clients: z.array(clientSchema).default([]),
    plans: z.record(planName(), planSchema).default({}),
    routes: z.array(routeSchema).min(1, "at least one route is needed"),
    headers: z
      .array(z.enum(["draft", "ietf", "legacy"]))
      .default(["draft", "ietf"])
      .describe("rate-limit header styles on every response; [] sends none"),
    deny: callerList.default({ ips: [], clients: [] }),
    exempt: callerList.default({ ips: [], clients: [] }),
    calendar: z
      .strictObject({
        tz: z
          .string({ error: "expected an IANA time zone name such as UTC or Europe/Berlin" })
          .default("UTC")
          .superRefine((tz, ctx) => {
            if (!isTimeZone(tz)) ctx.addIssue({ code: "custom", message: unknownTimeZone(tz) });
          })
          .describe(
            "the IANA time zone calendar windows (window: 1 day, 1 week, 1 month) and usage periods start at 00:00 in, daylight-saving days included (default UTC)",
          ),
        alert_at: z
          .union([percent(), z.literal(false)], {
            error: "expected a share of the budget such as 80%, or false for no alerts",
          })
          .default(0.8)
          .refine(
            (share) => share === false || (share > 0 && share <= 1),
            "alert_at is a share of the budget: above 0% and at most 100%",
          )
          .describe(
            "share of a calendar budget whose crossing is a budget alert (logged, counted in tollgate_budget_alerts_total, delivered to alerts.webhooks), once per caller, budget and period, when alerts.thresholds is not set (default 80%; false: no alerts)",
          ),
      })
      .prefault({})
      .describe("how calendar periods are aligned, and when a calendar budget alerts"),
    models: z
      .record(
        z
          .string()
          .regex(
            /^[\x21-\x7e]{1,128}$/,
            "a model name is printable ASCII without spaces (1 to 128 characters); * matches any run of characters",
          ),
        priceSchema,
      )
      .optional()
      .describe(
        "the price table of money budgets (unit: usd): per model name as requests write it (* matches any run of characters; the most specific pattern wins; <model>@<tier> for a service_tier such as priority, without which a request asking for a dearer tier is refused), and default for the rest; dollars per million tokens",
      ),
    alerts: alertsSchema,
    tenants: z
      .record(headerSafeName("a tenant", "Tollgate-Tenant"), tenantSchema)
      .optional()
      .describe("per tenant (the clients' tenant): where its own budget alerts are delivered"),
    usage: z
      .strictObject({
        retention: duration()
          .refine((ms) => ms <= MAX_USAGE_RETENTION_MS, "keep usage at most 3650d (ten years)")
          .default(90 * 86_400_000)
          .describe(
            "how long the usage of a month or a day (GET /admin/usage) is kept after it ends (default 90d)",
          ),
      })
      .prefault({})
      .describe("the usage ledger: tokens and requests per caller, budget limit, calendar month and day"),
    keys: z
      .strictObject({
        cache: z
          .number()
          .int()
          .min(100)
          .max(10_000_000)
          .default(100_000)
          .describe(
            "stored API keys (POST /admin/keys) each instance keeps in memory, the least recently used let go first; a cached key costs no Redis command (default 100000, 0.7 to 2 KB each)",
          ),
      })
      .prefault({})
      .describe("API keys issued at runtime through the admin API (the YAML's clients are always known)"),
    telemetry: telemetrySchema,
  })
  .describe("tollgate gateway configuration");

/** Why a `calendar.tz` is refused, with the fix. */
function unknownTimeZone(tz: string): string {
  const hint = suggest(tz, Intl.supportedValuesOf("timeZone"));
  return `unknown time zone "${tz}"${hint ? ` (did you mean "${hint}"?)` : ""}: write an IANA name such as UTC, Europe/Berlin or America/New_York`;
}

export type RawConfig = z.input<typeof configSchema>;
export type Config = z.output<typeof configSchema>;
export type LimitConfig = z.output<typeof limitSchema>;
export type AiConfig = z.output<typeof aiSchema>;
export type PriceConfig = z.output<typeof priceSchema>;
export type RouteConfig = z.output<typeof routeSchema>;
export type ClientConfig = z.output<typeof clientSchema>;
export type FailurePolicy = z.output<typeof failurePolicy>;

/** The JSON Schema editors use to complete and check the YAML (config/gateway.schema.json). */
export function jsonSchema(): Record<string, unknown> {
  return {
    ...z.toJSONSchema(configSchema, { io: "input", unrepresentable: "any", target: "draft-2020-12" }),
    title: "tollgate gateway configuration",
  };
}
