// Whether a stored key's client, plan, tenant and limits fit a config, by the rules the YAML's
// `clients[]` follow: the same schema (client id and tenant spelling, the limits' keys and units)
// and the same cross-checks (checks.ts: the plan exists; `limits` only size limits the plan has
// and only caller-keyed ones; no `by`; no tenant limit; a burst the routes' costs fit). The key
// is checked as a one-client config, so every message is the one --check would print for that
// client. Asked at create time (a 400 naming the fix) and again per running config, since a
// reload may remove a plan or a limit a key was created against.
import { checkConfig } from "../config/checks.js";
import type { PathSegment } from "../config/document.js";
import { type ClientConfig, type Config, clientSchema } from "../config/schema.js";

export interface KeySpecInput {
  client: string;
  plan: string;
  tenant?: string | undefined;
  limits?: unknown;
}

export type KeySpecResult = { ok: true; limits: ClientConfig["limits"] } | { ok: false; problems: string[] };

/** Any valid hash: the check is about the client, not its key. */
const PLACEHOLDER_HASH = "0".repeat(64);

/** `limits.routes.search` for the problem at clients[0].limits.routes.search. */
function where(path: readonly PathSegment[]): string {
  return path.map(String).join(".");
}

export function checkKeySpec(config: Config, input: KeySpecInput): KeySpecResult {
  const parsed = clientSchema.safeParse({
    id: input.client,
    key_sha256: PLACEHOLDER_HASH,
    plan: input.plan,
    ...(input.tenant === undefined ? {} : { tenant: input.tenant }),
    ...(input.limits === undefined ? {} : { limits: input.limits }),
  });
  if (!parsed.success) {
    return {
      ok: false,
      problems: parsed.error.issues.map((issue) => {
        const path = issue.path.map((p) => (p === "id" ? "client" : String(p)));
        return path.length ? `${where(path)}: ${issue.message}` : issue.message;
      }),
    };
  }
  const client = parsed.data;
  const problems = checkConfig({ ...config, clients: [client] })
    .filter((p) => !p.warning && p.path[0] === "clients" && p.path[1] === 0)
    .map((p) => {
      const path = [...p.path.slice(2), ...(p.atKey === undefined ? [] : [p.atKey])];
      return path.length ? `${where(path)}: ${p.message}` : p.message;
    });
  return problems.length ? { ok: false, problems } : { ok: true, limits: client.limits };
}
