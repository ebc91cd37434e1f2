// The operators' CLI as they run it: the built `tollgate keys …` and `tollgate overrides …` in
// child processes, against a spawned gateway on a real redis-server (never 6379), with
// TOLLGATE_ADMIN_URL and TOLLGATE_ADMIN_TOKEN. A key created with the CLI serves a proxied
// request, is listed by fingerprint (never the key), rotated (both keys work for the grace, then
// only the new one) and revoked (401 after); an override set with the CLI shows in the RateLimit
// headers, is listed, and ends when deleted. Refusals come back as the API's detail with exit 1,
// and neither a key nor the token shows up anywhere but the one stdout that created the key.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI, type GatewayProcess, spawnGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { freePort } from "../support/ports.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const OPS_TOKEN = "ops-token-for-the-cli-e2e-0123456789";
const VIEWER_TOKEN = "viewer-token-for-the-cli-e2e-0123456789";

const yaml = (redisUrl: string) => `
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  tokens:
    - { name: ops, token: "\${OPS_TOKEN}", scope: write }
    - { name: viewer, token: "\${VIEWER_TOKEN}", scope: read }
store: { url: "${redisUrl}", prefix: "cli-e2e:" }
identity:
  api_key: { header: x-api-key, on_unknown: reject }
  auth_failures: false
upstreams: { api: \${UPSTREAM_URL} }
plans:
  pro: { global: { rate: 100/s, burst: 100 } }
routes: [{ name: api, match: { path: / }, upstream: api }]
`;

let redis: RedisProcess;
let upstream: TestUpstream;
let gw: GatewayProcess;
/** Every key the CLI printed, to look for in the gateway's output at the end. */
const printedKeys: string[] = [];

beforeAll(async () => {
  redis = await startRedis();
  upstream = await startUpstream();
  gw = await spawnGateway(yaml(redis.url), {
    UPSTREAM_URL: upstream.url,
    OPS_TOKEN,
    VIEWER_TOKEN,
  });
});
afterAll(async () => {
  await gw?.stop();
  await upstream?.close();
  await redis?.stop();
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `tollgate ARGS` with the admin API's address and a token in the environment. */
function tollgate(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  const childEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries({
    ...process.env,
    TOLLGATE_ADMIN_URL: gw.adminUrl,
    TOLLGATE_ADMIN_TOKEN: OPS_TOKEN,
    ...env,
  }))
    if (v !== undefined) childEnv[k] = v;
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: childEnv, timeout: 15_000 }, (err, stdout, stderr) => {
      const code = err ? ((err as { code?: unknown }).code as number | null) : 0;
      resolve({ code: typeof code === "number" ? code : null, stdout, stderr });
    });
  });
}

const call = (key: string) => send(gw.url, { path: "/x", headers: { "x-api-key": key } });

/** The key and its id from the human output of `keys create` / `keys rotate`. */
function issuedFrom(run: Run): { key: string; id: string } {
  const key = /^ {2}(tg_[A-Za-z0-9_-]{43})$/m.exec(run.stdout)?.[1];
  const id = /^(key_[a-z2-7]{12}) for client /.exec(run.stdout)?.[1];
  if (!key || !id) throw new Error(`no key in: ${run.stdout}`);
  printedKeys.push(key);
  return { key, id };
}

const fingerprint = (key: string) => createHash("sha256").update(key).digest("hex").slice(0, 12);

describe("tollgate keys and tollgate overrides against a running gateway", () => {
  it("--help lists the commands", async () => {
    const top = await tollgate(["--help"]);
    expect(top.code).toBe(0);
    expect(top.stdout).toContain("tollgate keys create|list|revoke|rotate");
    expect(top.stdout).toContain("tollgate overrides set|list|delete");
    const keys = await tollgate(["keys", "--help"]);
    expect(keys.code).toBe(0);
    for (const command of ["create", "list", "revoke", "rotate"])
      expect(keys.stdout).toContain(`tollgate keys ${command}`);
  });

  it("creates a key that serves, lists it by fingerprint, rotates it with a grace, revokes it", async () => {
    const created = await tollgate([
      "keys",
      "create",
      "--client",
      "acme",
      "--plan",
      "pro",
      "--expires-in",
      "30d",
    ]);
    expect(created.stderr).toBe("");
    expect(created.code).toBe(0);
    const first = issuedFrom(created);
    expect(created.stdout).toContain("This is the only time the key is shown");
    expect(created.stdout.split(first.key)).toHaveLength(2);

    const served = await call(first.key);
    expect(served.status).toBe(200);
    expect(served.headers["ratelimit-policy"]).toBe('"pro.global";q=100;w=1');
    expect(upstream.received.at(-1)?.headers["tollgate-client"]).toBe("acme");

    const listed = await tollgate(["keys", "list", "--client", "acme"]);
    expect(listed.code).toBe(0);
    const [header, row, ...rest] = listed.stdout.trimEnd().split("\n");
    expect(header).toMatch(/^ID\s+FINGERPRINT\s+CLIENT\s+PLAN\s+TENANT\s+CREATED\s+EXPIRES$/);
    expect(row).toMatch(
      new RegExp(`^${first.id}\\s+${fingerprint(first.key)}\\s+acme\\s+pro\\s+-\\s+\\S+Z\\s+\\S+Z$`),
    );
    expect(rest).toEqual([]);
    expect(listed.stdout).not.toContain(first.key);
    const json = await tollgate(["keys", "list", "--client", "acme", "--json"]);
    const keys = JSON.parse(json.stdout) as Record<string, unknown>[];
    expect(keys).toEqual([
      expect.objectContaining({
        id: first.id,
        fingerprint: fingerprint(first.key),
        client: "acme",
        plan: "pro",
      }),
    ]);
    expect(json.stdout).not.toContain(first.key);

    const rotated = await tollgate(["keys", "rotate", first.id, "--grace", "2s", "--json"]);
    expect(rotated.code).toBe(0);
    const answer = JSON.parse(rotated.stdout) as {
      id: string;
      key: string;
      previous: { expires_at: string };
    };
    printedKeys.push(answer.key);
    expect(answer.id).not.toBe(first.id);
    // Both keys during the grace…
    expect((await call(first.key)).status).toBe(200);
    expect((await call(answer.key)).status).toBe(200);
    // …then only the successor, from the expiry the answer stated (within 1 s of it).
    const ends = Date.parse(answer.previous.expires_at);
    await new Promise((r) => setTimeout(r, Math.max(0, ends - Date.now())));
    for (;;) {
      const status = (await call(first.key)).status;
      if (status === 401) break;
      expect(status).toBe(200);
      expect(Date.now()).toBeLessThan(ends + 1000);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect((await call(answer.key)).status).toBe(200);
    const afterRotation = await tollgate(["keys", "list", "--client", "acme"]);
    expect(afterRotation.stdout).toContain(answer.id);
    expect(afterRotation.stdout).not.toContain(first.id);

    const revoked = await tollgate(["keys", "revoke", answer.id]);
    expect(revoked).toEqual({ code: 0, stdout: `revoked ${answer.id} of client acme\n`, stderr: "" });
    // The instance that revoked it applies the revocation before it answers.
    expect((await call(answer.key)).status).toBe(401);
    const none = await tollgate(["keys", "list", "--client", "acme"]);
    expect(none.stdout).toBe("no keys (none issued, or all revoked or expired)\n");

    const again = await tollgate(["keys", "revoke", answer.id]);
    expect(again.code).toBe(1);
    expect(again.stdout).toBe("");
    expect(again.stderr).toMatch(
      new RegExp(
        `^tollgate keys revoke: the admin API refused \\(404 unknown-key-id\\): no key has the id "${answer.id}"`,
      ),
    );
  });

  it("sets, lists and deletes an override, seen in the RateLimit headers", async () => {
    const { key } = issuedFrom(await tollgate(["keys", "create", "--client", "launch", "--plan", "pro"]));
    expect((await call(key)).headers["ratelimit-policy"]).toBe('"pro.global";q=100;w=1');

    const set = await tollgate([
      "overrides",
      "set",
      "client:launch",
      "pro.global",
      "--burst",
      "500",
      "--rate",
      "100/s",
      "--expires-in",
      "1h",
      "--reason",
      "launch week",
    ]);
    expect(set.stderr).toBe("");
    expect(set.code).toBe(0);
    expect(set.stdout).toMatch(/^set: client:launch pro.global at burst 500, rate 100\/s, expires \S+Z\n/);
    expect(set.stdout).toContain("  reason   launch week\n");
    // In force on this instance once the PUT is answered.
    const raised = await call(key);
    expect(raised.headers["ratelimit-policy"]).toBe('"pro.global";q=500;w=5');
    expect(raised.headers["ratelimit-limit"]).toBe("500");

    const listed = await tollgate(["overrides", "list", "client:launch"]);
    expect(listed.code).toBe(0);
    const lines = listed.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^LIMIT\s+SIZE\s+EXPIRES\s+APPLIES\s+REASON$/);
    expect(lines[1]).toMatch(/^pro\.global\s+burst 500, rate 100\/s\s+\S+Z\s+yes\s+launch week$/);
    expect(lines).toHaveLength(2);
    const json = JSON.parse((await tollgate(["overrides", "list", "client:launch", "--json"])).stdout);
    expect(json).toMatchObject({ caller: "client:launch", overrides: [{ name: "pro.global", burst: 500 }] });

    // A size the limit cannot take: the API's detail, exit 1.
    const bad = await tollgate([
      "overrides",
      "set",
      "client:launch",
      "pro.global",
      "--queue",
      "5",
      "--expires-in",
      "1h",
      "--reason",
      "x",
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(
      /^tollgate overrides set: the admin API refused \(400 bad-override\): .*queue/,
    );

    const deleted = await tollgate(["overrides", "delete", "client:launch", "pro.global"]);
    expect(deleted).toEqual({
      code: 0,
      stdout: "removed the override of pro.global for client:launch\n",
      stderr: "",
    });
    expect((await call(key)).headers["ratelimit-policy"]).toBe('"pro.global";q=100;w=1');
    expect((await tollgate(["overrides", "list", "client:launch"])).stdout).toBe(
      "no overrides for client:launch\n",
    );
  });

  it("refusals and a missing setting: the reason on stderr, never the token", async () => {
    const viewer = await tollgate(["keys", "create", "--client", "acme", "--plan", "pro"], {
      TOLLGATE_ADMIN_TOKEN: VIEWER_TOKEN,
    });
    expect(viewer.code).toBe(1);
    expect(viewer.stdout).toBe("");
    expect(viewer.stderr).toBe(
      'tollgate keys create: the admin API refused (403 insufficient-scope): the token "viewer" has scope read; POST needs scope write: use a token with scope write\n',
    );
    // A read token lists.
    expect(
      (await tollgate(["keys", "list", "--client", "acme"], { TOLLGATE_ADMIN_TOKEN: VIEWER_TOKEN })).code,
    ).toBe(0);

    const wrong = await tollgate(["keys", "list", "--client", "acme"], {
      TOLLGATE_ADMIN_TOKEN: "not-a-token",
    });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain("(401 unauthorized)");
    expect(wrong.stderr).not.toContain("not-a-token");

    const unknownPlan = await tollgate(["keys", "create", "--client", "acme", "--plan", "gold"]);
    expect(unknownPlan.code).toBe(1);
    expect(unknownPlan.stderr).toMatch(
      /^tollgate keys create: the admin API refused \(400 bad-key-request\): .*gold/,
    );

    const unset = await tollgate(["keys", "list", "--client", "acme"], {
      TOLLGATE_ADMIN_URL: undefined,
      TOLLGATE_ADMIN_TOKEN: undefined,
    });
    expect(unset).toEqual({
      code: 2,
      stdout: "",
      stderr:
        "tollgate keys list: TOLLGATE_ADMIN_URL is not set: the admin API's address, e.g. http://127.0.0.1:9090\n" +
        "tollgate keys list: TOLLGATE_ADMIN_TOKEN is not set: one of the gateway's admin tokens (admin.tokens, or admin.token)\n",
    });

    // A port nothing listens on (undici, unlike fetch, refuses no port as "bad").
    const closed = `http://127.0.0.1:${await freePort()}`;
    const unreachable = await tollgate(["keys", "list", "--client", "acme"], { TOLLGATE_ADMIN_URL: closed });
    expect(unreachable).toEqual({
      code: 1,
      stdout: "",
      stderr: `tollgate keys list: cannot reach the admin API at ${closed}: connection refused (is the gateway running, and is this its admin listener?) (ECONNREFUSED)\n`,
    });

    const usage = await tollgate(["overrides", "set", "client:acme", "pro.global", "--burst", "many"]);
    expect(usage.code).toBe(64);
    expect(usage.stderr).toMatch(/^overrides set: --burst takes a whole number/);
  });

  it("no key and no admin token in the gateway's logs", () => {
    expect(printedKeys.length).toBeGreaterThanOrEqual(3);
    const logs = JSON.stringify(gw.lines) + gw.stderr.join("");
    expect(logs.length).toBeGreaterThan(0);
    for (const secret of [...printedKeys, OPS_TOKEN, VIEWER_TOKEN]) expect(logs).not.toContain(secret);
  });
});
