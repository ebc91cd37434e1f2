// The incident commands as an operator runs them: the built `tollgate callers`, `denials`,
// `usage`, `reset`, `reload`, `config` and `keys list` in child processes, against a spawned
// gateway on a real redis-server, with TOLLGATE_ADMIN_URL and TOLLGATE_ADMIN_TOKEN. A caller is
// flooded, then seen (its limits at 0, its denials newest first, its usage), reset (served
// again), and the config read and reloaded (a broken file refused with FILE:LINE:COLUMN, exit 1).
// Every key is listed across pages without naming a client. A body past the admin limit comes
// back as its 413, not as "cannot reach the admin API".
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI, type GatewayProcess, spawnGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const OPS_TOKEN = "ops-token-for-the-operator-cli-0123456789";
const VIEWER_TOKEN = "viewer-token-for-the-operator-cli-0123456789";

const yaml = (redisUrl: string, upstreamUrl: string) => `
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  tokens:
    - { name: ops, token: "\${OPS_TOKEN}", scope: write }
    - { name: viewer, token: "\${VIEWER_TOKEN}", scope: read }
store: { url: "${redisUrl}", prefix: "ops-cli:" }
identity: { api_key: { header: x-api-key } }
upstreams: { api: ${upstreamUrl} }
clients:
  - { id: acme, key: acme-secret-key-0123456789, plan: pro, tenant: acme-inc }
plans:
  pro:
    global: { rate: 1/h, burst: 3 }
    tenant: { algorithm: fixed_window, limit: 1000, window: 1 month }
routes: [{ name: api, match: { path: / }, upstream: api }]
`;

let redis: RedisProcess;
let upstream: TestUpstream;
let gw: GatewayProcess;

beforeAll(async () => {
  redis = await startRedis();
  upstream = await startUpstream();
  gw = await spawnGateway(yaml(redis.url, upstream.url), { OPS_TOKEN, VIEWER_TOKEN });
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

function tollgate(args: string[], token = OPS_TOKEN): Promise<Run> {
  const env = { ...process.env, TOLLGATE_ADMIN_URL: gw.adminUrl, TOLLGATE_ADMIN_TOKEN: token };
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { env, timeout: 15_000, maxBuffer: 8 << 20 },
      (err, stdout, stderr) => {
        const code = err ? ((err as { code?: unknown }).code as number | null) : 0;
        resolve({ code: typeof code === "number" ? code : null, stdout, stderr });
      },
    );
  });
}

const proxied = () => send(gw.url, { path: "/x", headers: { "x-api-key": "acme-secret-key-0123456789" } });

describe("the operator's incident commands against a running gateway", () => {
  it("a flooded caller: the top list names it, its limits read 0 and its denials come newest first", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await proxied()).status);
    expect(statuses).toEqual([200, 200, 200, 429, 429, 429]);

    const top = await tollgate(["denials", "--top", "5"]);
    expect(top).toMatchObject({ code: 0, stderr: "" });
    expect(top.stdout).toMatch(/^CALLER +DENIALS \(LAST HOUR\)\nclient:acme +3\n$/);

    const caller = await tollgate(["callers", "client:acme"]);
    expect(caller.code, caller.stderr).toBe(0);
    expect(caller.stdout).toMatch(/^client:acme \(plan pro, tenant acme-inc\)\n/);
    expect(caller.stdout).toMatch(/\npro\.global +3 +0 +\d+s +-\n/);
    expect(caller.stdout).toMatch(/\npro\.tenant +1000 +997 +\d+s +-\n/);
    expect(caller.stdout.match(/^\d{4}-\d\d-\d\dT\S+ +api +pro\.global$/gm)).toHaveLength(3);

    const json = JSON.parse((await tollgate(["callers", "client:acme", "--json"])).stdout);
    const times = json.recent_denials.map((d: { time: string }) => d.time);
    expect(times).toEqual([...times].sort().reverse());
    const one = JSON.parse((await tollgate(["callers", "client:acme", "--denials", "1", "--json"])).stdout);
    expect(one.recent_denials).toEqual([json.recent_denials[0]]);
  });

  it("usage of the period, and a period the API refuses with its reason (exit 1)", async () => {
    const usage = await tollgate(["usage", "client:acme"]);
    expect(usage.code, usage.stderr).toBe(0);
    expect(usage.stdout).toMatch(
      /^client:acme, \d{4}-\d\d, tenant acme-inc\n\nBUDGET +REQUESTS +TOKENS +USD\npro\.tenant +3 +0 +-\n$/,
    );
    const bad = await tollgate(["usage", "client:acme", "--period", "December"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(
      /^tollgate usage: the admin API refused \(400 bad-usage-query\): period "December"/,
    );
  });

  it("a read token may look but not reset: 403, exit 1; a write token resets and the caller is served", async () => {
    const refused = await tollgate(["reset", "client:acme"], VIEWER_TOKEN);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^tollgate reset: the admin API refused \(403 /);
    expect((await proxied()).status).toBe(429);
    const reset = await tollgate(["reset", "client:acme"]);
    expect(reset.code, reset.stderr).toBe(0);
    expect(reset.stdout).toMatch(/^reset client:acme: \d+ stored states? forgotten\n$/);
    // The deny cache of this instance forgets it too, within a second.
    let status = 0;
    for (let i = 0; i < 20 && status !== 200; i++) {
      status = (await proxied()).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    expect(status).toBe(200);
  });

  it("every key, across pages, without naming a client; --plan keeps a plan's", async () => {
    const ids: string[] = [];
    for (const client of ["k1", "k2", "k3", "k4", "k5"]) {
      const made = await tollgate(["keys", "create", "--client", client, "--plan", "pro", "--json"]);
      expect(made.code, made.stderr).toBe(0);
      ids.push(JSON.parse(made.stdout).id);
    }
    const listed: string[] = [];
    let cursor: string | null = "0";
    for (let pages = 0; cursor !== null && pages < 20; pages++) {
      const page = JSON.parse(
        (await tollgate(["keys", "list", "--limit", "2", "--cursor", cursor, "--json"])).stdout,
      );
      listed.push(...page.keys.map((k: { id: string }) => k.id));
      cursor = page.next_cursor;
    }
    expect(cursor).toBeNull();
    expect([...new Set(listed)].sort()).toEqual([...ids].sort());
    const table = await tollgate(["keys", "list"]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout.split("\n")[0]).toMatch(/^ID +FINGERPRINT +CLIENT +PLAN/);
    for (const id of ids) expect(table.stdout).toContain(id);
    expect((await tollgate(["keys", "list", "--plan", "free", "--json"])).stdout).toBe(
      '{"keys":[],"next_cursor":null}\n',
    );
  });

  it("the running config, secrets shown as set; a reload, and a broken file refused with FILE:LINE:COLUMN", async () => {
    const config = await tollgate(["config"]);
    expect(config.code, config.stderr).toBe(0);
    expect(config.stdout).toContain('"routes"');
    expect(config.stdout).not.toContain("acme-secret-key");
    expect(config.stdout).not.toContain(OPS_TOKEN);

    const reloaded = await tollgate(["reload"]);
    expect(reloaded.code, reloaded.stderr).toBe(0);
    expect(reloaded.stdout).toMatch(/^reloaded: version \S+/);

    const good = readFileSync(gw.configFile, "utf8");
    writeFileSync(gw.configFile, good.replace("rate: 1/h, burst: 3", "rate: fast, burst: 3"));
    try {
      const refused = await tollgate(["reload"]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(
        /^tollgate reload: the admin API refused \(400 config-refused\): the config file was refused; the previous config keeps serving\n {2}\S*gateway\.yaml:\d+:\d+: plans\.pro\.global\.rate: /,
      );
      // The previous config still serves.
      expect((await proxied()).status).toBe(200);
    } finally {
      writeFileSync(gw.configFile, good);
    }
  });

  it("a body past the admin limit is its 413, printed, exit 1 (it was a reset: 'cannot reach the admin API')", async () => {
    // One argument can be 128 KiB at most (Linux): past the 64 KiB an admin body may be.
    const reason = "x".repeat(100 * 1024);
    const run = await tollgate([
      "overrides",
      "set",
      "client:acme",
      "pro.global",
      "--burst",
      "10",
      "--expires-in",
      "1h",
      "--reason",
      reason,
    ]);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      "tollgate overrides set: the admin API refused (413 body-too-large): the request body is larger than 65536 bytes (an admin request is a small JSON object); send less\n",
    );
  });
});
