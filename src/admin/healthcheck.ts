// The container's health probe (the Dockerfile's HEALTHCHECK, compose's healthcheck):
//   node dist/admin/healthcheck.js [/healthz | /readyz]
// asks the admin listener the config names, so the port is never written twice: the config is
// read as the gateway reads it (TOLLGATE_CONFIG, `${VAR}` substituted from the environment) and
// `admin.listen` taken from it. A wildcard address (0.0.0.0, ::) is asked on loopback. Exits 0
// when the endpoint answers 2xx within the timeout, 1 otherwise, saying why on stderr.
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { substituteEnv } from "../config/env.js";

/** The schema's default for admin.listen. */
export const DEFAULT_ADMIN_LISTEN = "127.0.0.1:9090";
const TIMEOUT_MS = 2000;

/** `admin.listen` of a config text, `${VAR}`s substituted from `env`; the default when unset. */
export function adminListenOf(text: string, env: Readonly<Record<string, string | undefined>>): string {
  const doc = parse(substituteEnv(text, env).text) as { admin?: { listen?: unknown } } | null;
  const listen = doc?.admin?.listen;
  return typeof listen === "string" && listen.includes(":") ? listen : DEFAULT_ADMIN_LISTEN;
}

/** The URL of `path` on the listener `listen` (host:port); wildcard hosts become loopback. */
export function probeUrl(listen: string, path: string): string {
  const colon = listen.lastIndexOf(":");
  let host = listen.slice(0, colon).replace(/^\[|\]$/g, "");
  const port = listen.slice(colon + 1);
  if (host === "" || host === "0.0.0.0") host = "127.0.0.1";
  else if (host === "::") host = "::1";
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}${path}`;
}

/** 0 when `path` on the admin listener of the config answers 2xx, else 1 (reason on `fail`). */
export async function healthcheck(
  env: Readonly<Record<string, string | undefined>>,
  path = "/healthz",
  fail: (why: string) => void = (why) => process.stderr.write(`healthcheck: ${why}\n`),
): Promise<0 | 1> {
  const file = env.TOLLGATE_CONFIG || "config/gateway.yaml";
  let url: string;
  try {
    url = probeUrl(adminListenOf(await readFile(file, "utf8"), env), path);
  } catch (err) {
    fail(`cannot read admin.listen from ${file}: ${(err as Error).message}`);
    return 1;
  }
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS) });
    if (res.ok) return 0;
    fail(`${url} answered ${res.status}: ${(await res.text()).slice(0, 500)}`);
  } catch (err) {
    // fetch says "fetch failed"; the socket's code (ECONNREFUSED, ...) is in its cause.
    const code = ((err as Error).cause as { code?: unknown } | undefined)?.code;
    fail(`${url}: ${(err as Error).message}${typeof code === "string" ? ` (${code})` : ""}`);
  }
  return 1;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = await healthcheck(process.env, process.argv[2]);
}
