// The image's refusal to serve published keys: run by docker-entrypoint.sh before the gateway
// starts (`node deploy/demo-keys.mjs CONFIG`), it exits 2 naming the clients of CONFIG whose API
// key is one printed in tollgate's repository (config/gateway.yaml's demo keys, the examples'
// defaults), as `key` or as the `key_sha256` of one: anyone who has read the README can use
// them. The config is read as the gateway reads it (`${VAR}` substituted from the environment by
// dist/config/env.js, then YAML); one that cannot be read or parsed passes here, for the gateway
// to refuse with its FILE:LINE:COLUMN. The check is at start only: a key added by a hot reload
// later is not refused. No key is ever printed, only the clients' ids.
// TOLLGATE_ALLOW_DEMO_KEYS=1 (a demo reachable by its operator only, like deploy/docker-compose.yaml)
// is checked by the entrypoint, which then does not run this.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";

/** Every plain API key the repository publishes; test/integration/deploy.test.ts checks that
 * config/gateway.yaml and config/examples/ hold no other. */
export const PUBLISHED_KEYS = ["demo-free-key", "demo-pro-key", "dev-key"];

const sha256 = (text) => createHash("sha256").update(text).digest("hex");
const PUBLISHED_HASHES = new Set(PUBLISHED_KEYS.map(sha256));

/** The ids of the clients of a parsed config whose key (or key_sha256) is a published one. */
export function clientsWithPublishedKeys(doc) {
  const clients = Array.isArray(doc?.clients) ? doc.clients : [];
  return clients
    .filter(
      (c) =>
        (typeof c?.key === "string" && PUBLISHED_HASHES.has(sha256(c.key))) ||
        (typeof c?.key_sha256 === "string" && PUBLISHED_HASHES.has(c.key_sha256.toLowerCase())),
    )
    .map((c) => String(c.id ?? "(no id)"));
}

async function main(file) {
  // Imported here, not above, so that tests can import this module without a build. Missing,
  // it throws: exit 1, and the entrypoint does not start the gateway (the check fails closed).
  const { substituteEnv } = await import("../dist/config/env.js");
  let doc;
  try {
    doc = parse(substituteEnv(readFileSync(file, "utf8"), process.env).text);
  } catch {
    return 0; // unreadable or not YAML: the gateway reads it again and says what is wrong, where
  }
  const ids = clientsWithPublishedKeys(doc);
  if (ids.length === 0) return 0;
  process.stderr.write(
    `tollgate: refusing to start: in ${file}, client${ids.length > 1 ? "s" : ""} ${ids.join(", ")} ` +
      `${ids.length > 1 ? "have" : "has"} a demo API key published in tollgate's repository, which anyone can use.
Give each client a key of your own, as key_sha256 (echo -n "$KEY" | sha256sum), or issue keys at run time
with "tollgate keys create" (the admin API). For a demo that only you can reach, set TOLLGATE_ALLOW_DEMO_KEYS=1.
`,
  );
  return 2;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = await main(process.argv[2] ?? "");
}
