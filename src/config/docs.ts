// docs/configuration.md, generated from the same zod schema that validates the YAML (through its
// JSON Schema): types and descriptions from the JSON Schema, defaults from what the schema fills
// in for a missing key, and the Required column from the schema's required keys plus the rules
// checks.ts enforces (EXACTLY_ONE, AT_LEAST_ONE, NOT_EMPTY). test/unit/config-docs.test.ts fails
// when the committed file differs from what this produces: the reference cannot go stale.

import { parse as parseYaml } from "yaml";
import type { LimitKeys } from "../limits/algorithms/algorithm.js";
import { ALGORITHM_KEYS, ALGORITHMS } from "../limits/algorithms/index.js";
import { AT_LEAST_ONE, EXACTLY_ONE, NOT_EMPTY } from "./checks.js";
import { KEYED_LIMITS_DOC } from "./docs-keyed.js";
import { configSchema, limitSchema } from "./schema.js";
import { formatDuration } from "./units.js";

/**
 * The smallest complete config: every key in it is required (a test removes each in turn), and
 * it passes `--check` without a warning. It opens the reference.
 */
export const MINIMAL_CONFIG = `store:
  url: memory:// # one instance; redis://host:6379 shares the limits between instances
upstreams:
  api: http://127.0.0.1:3000
routes:
  - name: default
    match: { path: / }
    upstream: api
`;

type JsonSchema = {
  type?: string;
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  additionalProperties?: JsonSchema | boolean;
  anyOf?: JsonSchema[];
  enum?: unknown[];
  default?: unknown;
  description?: string;
  minimum?: number;
  maximum?: number;
  required?: string[];
};

/** Keys whose value carries a unit, by their last path segment (a limit's: as its algorithm says). */
const UNITS: Record<string, "duration" | "rate" | "size" | "percentage"> = {
  ...Object.fromEntries(
    Object.entries(ALGORITHM_KEYS as LimitKeys).flatMap(([key, d]) => (d.unit ? [[key, d.unit]] : [])),
  ),
  shutdown_grace: "duration",
  sustained_denial: "duration",
  retry_hint_max: "duration",
  idle_timeout: "duration",
  caller_share: "percentage",
  tunnel_idle_timeout: "duration",
  timeout: "duration",
  connect_timeout: "duration",
  window: "duration",
  cooldown: "duration",
  clock_tolerance: "duration",
  interval: "duration",
  retention: "duration",
  audit_retention: "duration",
  max_body: "size",
  error_rate: "percentage",
  alert_at: "percentage",
  thresholds: "percentage",
  first: "duration",
  max_delay: "duration",
  alert_timeout: "duration",
  fetch_timeout: "duration",
  refetch_interval: "duration",
  cache_floor: "duration",
  cache_ceiling: "duration",
};

/** Top-level keys written as a string or a mapping, whose mapping keys are listed too. */
const MAPPING_FORMS = new Set(["listen"]);

/** An example for every key that has no default to show. */
const EXAMPLES: Record<string, string> = {
  "listen.address": "0.0.0.0:8443",
  "listen.tls.cert_file": "tls/server.crt",
  "listen.tls.key_file": "tls/server.key",
  workers: "1",
  "store.url": "redis://redis:6379",
  "store.cluster": "[redis://10.0.0.1:7000, redis://10.0.0.2:7000]",
  "store.sentinel.name": "mymaster",
  "store.replicas.wait": "1",
  "store.sentinel.nodes": "[10.0.0.1:26379]",
  "plans.<name>.allow.routes": "[search, chat]",
  "plans.<name>.allow.models": '["gpt-4o-mini*", "claude-3-5-haiku-*"]',
  "plans.<name>.routes.<name>":
    "{ rate: 10/s, burst: 20 }  or  { per-second: { rate: 10/s, burst: 10 }, daily: { algorithm: fixed_window, limit: 10000, window: 1d } }",
  "clients[].limits.routes.<name>":
    "{ rate: 50/s, burst: 100 }  or  { daily: { algorithm: fixed_window, limit: 50000, window: 1d } }",
  "rls.listen": "0.0.0.0:8081",
  "rls.config": "ratelimit/config.yaml  or  [ratelimit/edge.yaml, ratelimit/internal.yaml]",
  "rls.on_failure": "closed",
  "upstreams.<name>": "http://127.0.0.1:3000",
  "upstreams.<name>.url": "http://api.internal:8080",
  "upstreams.<name>.timeout": "30s",
  "upstreams.<name>.connect_timeout": "2s",
  "upstreams.<name>.targets": "[http://10.0.0.1:8080, { url: http://10.0.0.2:8080, weight: 2 }]",
  "upstreams.<name>.health.path": "/healthz",
  "upstreams.<name>.ca_file": "tls/internal-ca.crt",
  "upstreams.<name>.cert_file": "tls/gateway-client.crt",
  "upstreams.<name>.key_file": "tls/gateway-client.key",
  "upstreams.<name>.servername": "api.internal",
  "identity.jwt.clock_tolerance": "5s",
  "identity.jwt.secret": "${JWT_SECRET}",
  "identity.jwt.public_key_file": "keys/jwt.pem",
  "identity.jwt.jwks_file": "keys/jwks.json",
  "identity.jwt.jwks_url": "https://auth.example.com/.well-known/jwks.json",
  "identity.jwt.ca_file": "certs/idp-ca.pem",
  "identity.jwt.issuer": "https://auth.example.com",
  "identity.jwt.audience": "api",
  "identity.jwt.claims.tenant": "org",
  "identity.jwt.claims.plan": "plan",
  "identity.jwt.default_plan": "free",
  "clients[].id": "acme-prod",
  "clients[].key_sha256": "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
  "clients[].key": "dev-key-1",
  "clients[].plan": "pro",
  "clients[].tenant": "acme",
  "<limit>.algorithm": "sliding_window",
  "<limit>.shadow": "true",
  "<limit>.unlimited": "true",
  "<limit>.by": '[caller, "header:x-model"]',
  "<limit>.unit": "tokens",
  ...Object.fromEntries(
    Object.entries(ALGORITHM_KEYS as LimitKeys).map(([key, d]) => [`<limit>.${key}`, d.example]),
  ),
  "routes[].name": "generate-video",
  "routes[].match.path": "/v1/generate/video",
  "routes[].match.host": "api.example.com",
  "routes[].match.methods": "[POST]",
  "routes[].upstream": "llm",
  "routes[].usage_fields": '["usage.total_tokens", "usage.input_tokens + usage.output_tokens"]',
  "routes[].max_cost": "4000",
  "routes[].retries": "2",
  "routes[].by": "ip",
  "routes[].max_body": "1mb",
  "routes[].timeout": "2m",
  "routes[].connect_timeout": "250ms",
  "routes[].rewrite.prefix": "/billing",
  "routes[].on_failure": "closed",
  "upstreams.<name>.request_headers.set.<name>": '"Bearer ${OPENAI_API_KEY}"',
  "upstreams.<name>.request_headers.remove": "[cookie]",
  "upstreams.<name>.response_headers.set.<name>": "nosniff",
  "upstreams.<name>.response_headers.remove": "[server, openai-organization]",
  "routes[].request_headers.set.<name>": '"${ANTHROPIC_API_KEY}"',
  "routes[].request_headers.remove": "[cookie]",
  "routes[].response_headers.set.<name>": "no-store",
  "routes[].response_headers.remove": "[server]",
  "routes[].ai.format": "openai",
  "routes[].ai.max_output": "4096",
  "routes[].ai.output_field": "max_tokens",
  "models.<name>.input": "2.5",
  "models.<name>.output": "10",
  "models.<name>.cached_input": "1.25",
  "models.<name>.cache_write": "3.75",
  "models.<name>.cache_write_1h": "6",
  "models.<name>.audio_input": "40",
  "models.<name>.audio_output": "80",
  "routes[].ai.referenced_input_tokens": "200000",
  "deny.ips": "[192.0.2.0/24]",
  "deny.clients": "[leaked-client]",
  "exempt.ips": "[10.0.0.0/8]",
  "exempt.clients": "[internal-batch]",
  "admin.token": "${ADMIN_TOKEN}",
  "admin.tokens[].name": "ops",
  "admin.tokens[].token": "${OPS_TOKEN}",
  "admin.tokens[].scope": "read",
  "identity.trusted_proxies": '[127.0.0.1/32, "::1/128", 10.0.0.0/8]',
  "alerts.thresholds": "[50%, 80%, 100%]",
  "alerts.webhooks[].name": "billing",
  "alerts.webhooks[].url": "https://hooks.example.com/tollgate",
  "alerts.webhooks[].secret": "${ALERT_SECRET}",
  "alerts.webhooks[].events": "[budget.threshold, budget.exhausted, budget.reset]",
  "tenants.<name>.alert_url": "https://acme.example.com/tollgate-alerts",
  "tenants.<name>.alert_secret": "${ACME_ALERT_SECRET}",
  "tenants.<name>.alert_events": "[budget.exhausted]",
  "telemetry.traces.endpoint": "http://otel-collector:4318/v1/traces",
  "telemetry.traces.headers.<name>": '"Bearer ${OTLP_TOKEN}"',
};

interface Row {
  key: string;
  type: string;
  required: string;
  default: string;
  description: string;
  example: string;
}

/** A value as it would be written in the YAML (flow style), with its unit. */
function show(value: unknown, unit: string | undefined): string {
  if (value === undefined) return "";
  if (unit === "duration" && typeof value === "number") return formatDuration(value);
  if (unit === "percentage" && typeof value === "number") return `${Math.round(value * 100)}%`;
  if (typeof value === "string") return plainScalar(value) ? value : JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map((v) => show(v, unit)).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value).map(([k, v]) => `${k}: ${show(v, UNITS[k])}`);
    return entries.length ? `{ ${entries.join(", ")} }` : "{}";
  }
  return JSON.stringify(value);
}

/** Whether `text` written unquoted in YAML reads back as the same string (`tollgate:` does not). */
function plainScalar(text: string): boolean {
  try {
    return text !== "" && parseYaml(text) === text;
  } catch {
    return false;
  }
}

function typeOf(s: JsonSchema, unit: string | undefined): string {
  if (unit) return unit;
  if (s.enum) return s.enum.map((e) => String(e)).join(" \\| ");
  if (s.anyOf) return s.anyOf.map((a) => typeOf(a, undefined)).join(" or ");
  if (s.type === "array") return `list of ${s.items ? typeOf(s.items, undefined) : "values"}`;
  return s.type ?? "value";
}

interface ZodLike {
  def: {
    type: string;
    shape?: Record<string, ZodLike>;
    valueType?: ZodLike;
    element?: ZodLike;
    options?: ZodLike[];
    innerType?: ZodLike;
    in?: ZodLike;
  };
  safeParse(value: unknown): { success: boolean; data?: unknown };
}

function unwrap(s: ZodLike): ZodLike {
  let cur = s;
  while (["optional", "default", "prefault", "nullable", "pipe"].includes(cur.def.type)) {
    cur = (cur.def.innerType ?? cur.def.in)!;
  }
  return cur;
}

/**
 * What the schema fills in for the key at `key` (`a.b`, `list[].c`, `map.<name>.d`) when the
 * file leaves it out: the parse of a missing value. Nothing when it is optional without one.
 */
function defaultOf(root: ZodLike, key: string): unknown {
  let node: ZodLike | undefined = root;
  for (const part of key.split(".")) {
    if (!node) return undefined;
    const s = unwrap(node);
    if (part === "<name>") node = s.def.valueType;
    else if (s.def.type === "union") {
      // upstreams.<name>.url: the mapping form of a "string or mapping" value.
      const object = s.def.options?.map(unwrap).find((o) => o.def.type === "object");
      node = object?.def.shape?.[part];
    } else node = s.def.shape?.[part.replace("[]", "")];
    if (node && part.endsWith("[]")) node = unwrap(node).def.element;
  }
  if (!node) return undefined;
  const parsed = node.safeParse(undefined);
  return parsed.success ? parsed.data : undefined;
}

/**
 * Whether a key must be given. `condition` is where the walk is: null when every object above the
 * key (up to the top, or to the list item or map entry it belongs to) must be given; a text when
 * the innermost optional object above it must be given for this key to be needed ("with
 * `identity.jwt`"); false when the key's own object is optional and the key is too.
 */
type Condition = string | null | false;

/**
 * The required cell of `key`. `objects` holds the condition of each object walked so far: a rule
 * of checks.ts about an object's keys (one of them, at least one) applies when that object is
 * given.
 */
function requiredText(key: string, condition: Condition, objects: ReadonlyMap<string, Condition>): string {
  const listOf = (keys: readonly string[], word: string) => keys.map((k) => `\`${k}\``).join(word);
  const within = (group: string, text: string) => {
    const c = objects.get(group);
    return typeof c === "string" ? `${c}: ${text}` : text;
  };
  for (const [group, keys] of Object.entries(EXACTLY_ONE)) {
    if ((keys as readonly string[]).some((k) => `${group}.${k}` === key))
      return within(group, `one of ${listOf(keys, ", ")}`);
  }
  for (const [group, keys] of Object.entries(AT_LEAST_ONE)) {
    if ((keys as readonly string[]).some((k) => `${group}.${k}` === key))
      return within(group, `${listOf(keys, " or ")} (or both)`);
  }
  if ((NOT_EMPTY as readonly string[]).some((k) => `${k}.<name>` === key)) return "yes: at least one";
  if (condition === null) return "yes";
  if (condition === false) return "no";
  return condition;
}

/** For an object that is one of EXACTLY_ONE's keys (store.sentinel): which others it replaces. */
function alternativeTo(owner: string, name: string): string {
  const keys = (EXACTLY_ONE as Record<string, readonly string[]>)[owner];
  return keys?.includes(name) ? ` (one of ${keys.map((k) => `\`${k}\``).join(", ")})` : "";
}

export function configReference(schema: JsonSchema): string {
  const rows: Row[] = [];
  const limitRows: Row[] = [];
  const missing: string[] = [];
  const root = configSchema as unknown as ZodLike;
  const objects = new Map<string, Condition>();

  const leaf = (out: Row[], key: string, s: JsonSchema, condition: Condition, defaults: ZodLike) => {
    const last = key.split(".").at(-1)!.replace("[]", "");
    const unit = UNITS[last];
    const dflt = show(defaultOf(defaults, key.startsWith("<limit>.") ? key.slice(8) : key), unit);
    const example = EXAMPLES[key] ?? (dflt || undefined);
    if (example === undefined) missing.push(key);
    out.push({
      key,
      type: typeOf(s, unit),
      required: key.startsWith("<limit>.")
        ? LIMIT_KEYS_BY_ALGORITHM.includes(last)
          ? "by algorithm"
          : "no"
        : requiredText(key, condition, objects),
      default: dflt,
      description: (s.description ?? "").replace(/\|/g, "\\|"),
      example: example ?? "",
    });
  };

  const walk = (out: Row[], s: JsonSchema, key: string, condition: Condition, defaults: ZodLike) => {
    const isLimit = s.properties?.algorithm !== undefined && s.properties?.unlimited !== undefined;
    if (isLimit && !key.startsWith("<limit>")) {
      out.push({
        key,
        type: "a limit (below)",
        required: "no",
        default: "",
        description: (s.description ?? "").replace(/\|/g, "\\|"),
        example: "{ rate: 5/s, burst: 10 }",
      });
      if (limitRows.length === 0)
        walk(
          limitRows,
          { ...s, description: undefined },
          "<limit>",
          false,
          limitSchema as unknown as ZodLike,
        );
      return;
    }
    if (s.properties) {
      objects.set(key, condition);
      for (const [name, child] of Object.entries(s.properties)) {
        const childKey = key ? `${key}.${name}` : name;
        const needed = s.required?.includes(name) ?? false;
        // A required key keeps its object's condition; an optional object sets its own.
        const childCondition: Condition = needed
          ? condition
          : child.properties
            ? `with \`${childKey}\`${alternativeTo(key, name)}`
            : false;
        walk(out, child, childKey, childCondition, defaults);
      }
      return;
    }
    if (s.type === "array" && s.items?.properties) {
      // Each item of a list stands on its own: its keys are required in every item.
      walk(out, s.items, `${key}[]`, null, defaults);
      return;
    }
    if (s.type === "object" && typeof s.additionalProperties === "object") {
      const child = s.additionalProperties;
      if (child.anyOf) {
        leaf(out, `${key}.<name>`, child, condition, defaults);
        for (const option of child.anyOf)
          if (option.properties) walk(out, option, `${key}.<name>`, "yes, in the mapping form", defaults);
        return;
      }
      walk(out, child, `${key}.<name>`, null, defaults);
      return;
    }
    leaf(out, key, s, condition, defaults);
    // `listen`: a string or a mapping, whose keys get rows of their own.
    if (MAPPING_FORMS.has(key) && s.anyOf) {
      for (const option of s.anyOf)
        if (option.properties) walk(out, option, key, "yes, in the mapping form", defaults);
    }
  };
  walk(rows, schema, "", null, root);
  if (missing.length) throw new Error(`config reference: give an example for ${missing.join(", ")}`);

  const table = (list: Row[]) =>
    [
      "| key | type | required | default | description | example |",
      "| --- | --- | --- | --- | --- | --- |",
      ...list.map(
        (r) =>
          `| \`${r.key}\` | ${r.type} | ${r.required} | ${r.default ? `\`${r.default}\`` : ""} | ${r.description} | \`${r.example}\` |`,
      ),
    ].join("\n");

  return `# Configuration reference

Generated from the schema that validates the file (\`src/config/schema.ts\`) and the checks that
follow it (\`src/config/checks.ts\`) by \`npm run docs\`; a test fails when this page is stale.
Every key the gateway accepts is here; any other key is an error that names the file, line and
column. \`\${VAR}\` and \`\${VAR:-default}\` are replaced from the environment before parsing.

## A minimal complete file

\`store\`, \`upstreams\` and \`routes\` are required; everything else has a default or is optional.
This file passes \`tollgate --check\` (a test checks the copy on this page):

\`\`\`yaml
${MINIMAL_CONFIG}\`\`\`

It forwards every request to \`api\` without a limit. Limits come from \`plans\`: a client
(\`clients\`) gets its plan's limits, callers without a key get the plan named \`anonymous\`, and
JWT callers the plan of their token (\`identity.jwt\`). \`config/gateway.yaml\` and
\`config/examples/\` are complete files with limits.

## Every key

Units: a **duration** is \`250ms\`, \`5s\`, \`15m\`, \`1h\` or \`1d\`; a **rate** is \`N/s\`,
\`N/m\`, \`N/h\` or \`N/d\`; a **size** is bytes or \`64kb\`, \`1mb\`, \`2gb\`; a **percentage** is
\`50%\`. \`<name>\` stands for a name you choose; \`[]\` for each item of a list.

**required**: \`yes\`: the file (for a key under \`[]\` or \`<name>\`: each item) must give it;
\`with X\`: it must be given when \`X\` is; \`one of …\`: exactly one of those keys; \`no\`: it
may be left out, and then the **default** applies (no default: the feature is off). A default is
what the gateway uses when the key is missing.

${table(rows)}

## A limit

\`plans.<name>.global\`, \`plans.<name>.tenant\`, \`plans.<name>.routes.<route>\` and
\`routes[].limits.<name>\` each take a limit, and so do a client's overrides of a plan's
(\`clients[].limits.global\`, \`clients[].limits.routes.<route>\`; no \`by\` there). ${wrap(`Which keys apply depends on \`algorithm\`: ${whatEachTakes()}. \`unlimited: true\` stands alone; \`limit: 0\` denies every request. A \`fixed_window\` may count per calendar period: \`window: 1 day\`, \`1 week\` (from Monday) or \`1 month\`, each from 00:00 in \`calendar.tz\` (default UTC), daylight-saving days included (\`24h\` and \`1d\` stay durations).`, 80)}

${table(limitRows)}

${KEYED_LIMITS_DOC}`;
}

/** Limit keys that one algorithm or another requires (their checks ask for them when missing). */
const LIMIT_KEYS_BY_ALGORITHM = Object.values(ALGORITHMS).flatMap((a) => a.config.needs);

/**
 * What each algorithm takes, in registry order; algorithms that take the same keys are named
 * together: "`token_bucket` takes `rate` + `burst` or …; `sliding_window`, … and `fixed_window`
 * take `limit` + `window`; …".
 */
function whatEachTakes(): string {
  const groups: { names: string[]; takes: string }[] = [];
  for (const [name, { config }] of Object.entries(ALGORITHMS)) {
    const last = groups.at(-1);
    if (last?.takes === config.takes) last.names.push(name);
    else groups.push({ names: [name], takes: config.takes });
  }
  return groups
    .map(({ names, takes }) => {
      const quoted = names.map((n) => `\`${n}\``);
      const list = quoted.length > 1 ? `${quoted.slice(0, -1).join(", ")} and ${quoted.at(-1)}` : quoted[0];
      return `${list} ${names.length > 1 ? "take" : "takes"} ${takes}`;
    })
    .join("; ");
}

/**
 * Text as lines of at most 100 characters, the first one `first` characters shorter. A code span
 * is never split, nor an operand from its `+`.
 */
function wrap(text: string, first = 7): string {
  const words = text.split(" ");
  const units: string[] = [];
  let inCode = false;
  for (const word of words) {
    const last = units.length - 1;
    if (last >= 0 && (inCode || word === "+" || units[last]!.endsWith(" +"))) units[last] += ` ${word}`;
    else units.push(word);
    if ((word.match(/`/g)?.length ?? 0) % 2 === 1) inCode = !inCode;
  }
  const lines: string[] = [];
  let line = "";
  let width = 100 - first;
  for (const unit of units) {
    if (line && line.length + 1 + unit.length > width) {
      lines.push(line);
      line = unit;
      width = 100;
    } else line = line ? `${line} ${unit}` : unit;
  }
  lines.push(line);
  return lines.join("\n");
}
