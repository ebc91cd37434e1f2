// docs/configuration.md, generated from the same zod schema that validates the YAML (through its
// JSON Schema) plus the defaults a minimal config compiles to. test/unit/config-docs.test.ts fails
// when the committed file differs from what this produces: the reference cannot go stale.
import { formatDuration } from "./units.js";

/** The smallest valid config: its compiled form gives the defaults column. */
export const MINIMAL_CONFIG = `store: { url: "memory://" }
upstreams: { api: http://127.0.0.1:3000 }
routes: [{ name: default, match: { path: / }, upstream: api }]
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
};

/** Keys whose value carries a unit, by their last path segment. */
const UNITS: Record<string, "duration" | "rate" | "size" | "percentage"> = {
  shutdown_grace: "duration",
  sustained_denial: "duration",
  tunnel_idle_timeout: "duration",
  timeout: "duration",
  connect_timeout: "duration",
  window: "duration",
  cooldown: "duration",
  lease: "duration",
  clock_tolerance: "duration",
  rate: "rate",
  max_body: "size",
  error_rate: "percentage",
};

/** An example for every key that has no default to show. */
const EXAMPLES: Record<string, string> = {
  workers: "1",
  "store.url": "redis://redis:6379",
  "store.cluster": "[redis://10.0.0.1:7000, redis://10.0.0.2:7000]",
  "store.sentinel.name": "mymaster",
  "store.sentinel.nodes": "[10.0.0.1:26379]",
  "upstreams.<name>": "http://127.0.0.1:3000",
  "upstreams.<name>.url": "http://api.internal:8080",
  "upstreams.<name>.timeout": "30s",
  "upstreams.<name>.connect_timeout": "2s",
  "identity.jwt.clock_tolerance": "5s",
  "identity.jwt.secret": "${JWT_SECRET}",
  "identity.jwt.public_key_file": "keys/jwt.pem",
  "identity.jwt.jwks_file": "keys/jwks.json",
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
  "<limit>.rate": "5/s",
  "<limit>.burst": "10",
  "<limit>.limit": "100",
  "<limit>.window": "1h",
  "<limit>.shadow": "true",
  "<limit>.unlimited": "true",
  "<limit>.max_in_flight": "2",
  "<limit>.lease": "60s",
  "<limit>.queue": "50",
  "<limit>.batch": "20",
  "routes[].name": "generate-video",
  "routes[].match.path": "/v1/generate/video",
  "routes[].match.methods": "[POST]",
  "routes[].upstream": "llm",
  "routes[].by": "ip",
  "routes[].max_body": "1mb",
  "routes[].on_failure": "closed",
  "deny.ips": "[192.0.2.0/24]",
  "deny.clients": "[leaked-client]",
  "exempt.ips": "[10.0.0.0/8]",
  "exempt.clients": "[internal-batch]",
  "admin.token": "${ADMIN_TOKEN}",
  "identity.trusted_proxies": '[127.0.0.1/32, "::1/128", 10.0.0.0/8]',
};

interface Row {
  key: string;
  type: string;
  default: string;
  description: string;
  example: string;
}

/** A value from the parsed minimal config, shown as it would be written in the YAML. */
function show(value: unknown, unit: string | undefined): string {
  if (value === undefined) return "";
  if (unit === "duration" && typeof value === "number") return formatDuration(value);
  if (unit === "percentage" && typeof value === "number") return `${Math.round(value * 100)}%`;
  if (typeof value === "string") return value === "" ? '""' : value;
  return JSON.stringify(value);
}

function typeOf(s: JsonSchema, unit: string | undefined): string {
  if (unit) return unit;
  if (s.enum) return s.enum.map((e) => String(e)).join(" \\| ");
  if (s.anyOf) return s.anyOf.map((a) => typeOf(a, undefined)).join(" or ");
  if (s.type === "array") return `list of ${s.items ? typeOf(s.items, undefined) : "values"}`;
  return s.type ?? "value";
}

function at(obj: unknown, path: readonly string[]): unknown {
  let cur = obj;
  for (const seg of path) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = (cur as Record<string, unknown>)[seg];
  }
  return cur;
}

export function configReference(schema: JsonSchema, defaults: unknown): string {
  const rows: Row[] = [];
  const limitRows: Row[] = [];
  const missing: string[] = [];

  const leaf = (out: Row[], key: string, s: JsonSchema, concrete: string[] | null) => {
    const last = key.split(".").at(-1)!.replace("[]", "");
    const unit = UNITS[last];
    const fromConfig = concrete ? at(defaults, concrete) : undefined;
    const dflt = s.default !== undefined ? show(s.default, undefined) : show(fromConfig, unit);
    const example = EXAMPLES[key] ?? (dflt || undefined);
    if (example === undefined) missing.push(key);
    out.push({
      key,
      type: typeOf(s, unit),
      default: dflt,
      description: (s.description ?? "").replace(/\|/g, "\\|"),
      example: example ?? "",
    });
  };

  const walk = (out: Row[], s: JsonSchema, key: string, concrete: string[] | null) => {
    const isLimit = s.properties?.algorithm !== undefined && s.properties?.max_in_flight !== undefined;
    if (isLimit && !key.startsWith("<limit>")) {
      out.push({
        key,
        type: "a limit (below)",
        default: "",
        description: (s.description ?? "").replace(/\|/g, "\\|"),
        example: "{ rate: 5/s, burst: 10 }",
      });
      if (limitRows.length === 0) walk(limitRows, { ...s, description: undefined }, "<limit>", null);
      return;
    }
    if (s.properties) {
      for (const [name, child] of Object.entries(s.properties)) {
        walk(out, child, key ? `${key}.${name}` : name, concrete ? [...concrete, name] : null);
      }
      return;
    }
    if (s.type === "array" && s.items?.properties) {
      walk(out, s.items, `${key}[]`, null);
      return;
    }
    if (s.type === "object" && typeof s.additionalProperties === "object") {
      const child = s.additionalProperties;
      if (child.anyOf) {
        leaf(out, `${key}.<name>`, child, null);
        for (const option of child.anyOf) if (option.properties) walk(out, option, `${key}.<name>`, null);
        return;
      }
      walk(out, child, `${key}.<name>`, null);
      return;
    }
    leaf(out, key, s, concrete);
  };
  walk(rows, schema, "", []);
  if (missing.length) throw new Error(`config reference: give an example for ${missing.join(", ")}`);

  const table = (list: Row[]) =>
    [
      "| key | type | default | description | example |",
      "| --- | --- | --- | --- | --- |",
      ...list.map(
        (r) =>
          `| \`${r.key}\` | ${r.type} | ${r.default ? `\`${r.default}\`` : ""} | ${r.description} | \`${r.example}\` |`,
      ),
    ].join("\n");

  return `# Configuration reference

Generated from the schema that validates the file (\`src/config/schema.ts\`) by
\`npm run docs\`; a test fails when this page is stale. Every key the gateway accepts is here;
any other key is an error that names the file, line and column. \`\${VAR}\` and
\`\${VAR:-default}\` are replaced from the environment before parsing.

Units: a **duration** is \`250ms\`, \`5s\`, \`15m\`, \`1h\` or \`1d\`; a **rate** is \`N/s\`,
\`N/m\`, \`N/h\` or \`N/d\`; a **size** is bytes or \`64kb\`, \`1mb\`, \`2gb\`; a **percentage** is
\`50%\`. \`<name>\` stands for a name you choose; \`[]\` for each item of a list.

${table(rows)}

## A limit

\`plans.<name>.global\`, \`plans.<name>.tenant\` and \`plans.<name>.routes.<route>\` each take a
limit. Which keys apply depends on \`algorithm\`: \`token_bucket\` takes \`rate\` + \`burst\` or
\`limit\` + \`window\`; \`sliding_window\`, \`sliding_window_counter\` and \`fixed_window\` take
\`limit\` + \`window\`; \`leaky_bucket\` takes \`rate\` + \`queue\`; \`concurrency\` takes
\`max_in_flight\` and \`lease\`. \`unlimited: true\` stands alone; \`limit: 0\` denies every request.

${table(limitRows)}
`;
}
