// The CLI as operators use it: --check, environment substitution, signals.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI, spawnGateway, writeConfig } from "../support/gateway.js";
import { send } from "../support/http.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const VALID = `
listen: \${LISTEN:-127.0.0.1:0}
admin: { listen: 127.0.0.1:0 }
shutdown_grace: 3s
store: { url: memory:// }
upstreams: { api: \${UPSTREAM_URL} }
clients: [{ id: c1, key: k1, plan: p }, { id: c2, key: k2, plan: p }]
plans: { p: { global: { rate: 5/s, burst: 10 } } }
routes:
  - { name: slow, match: { path: /slow }, upstream: api }
  - { name: default, match: { path: / }, upstream: api }
`;

function check(yaml: string, env: Record<string, string> = {}) {
  const file = writeConfig(yaml);
  const r = spawnSync(process.execPath, [CLI, "--check", "--config", file], {
    env: { ...process.env, ...env },
    encoding: "utf8",
  });
  return { file, status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("tollgate --check", () => {
  it("exits 0 with a one-line summary", () => {
    const r = check(VALID, { UPSTREAM_URL: "http://127.0.0.1:3000" });
    expect(r.stdout).toBe("config OK: 2 routes, 1 plan, 2 clients\n");
    expect(r.status).toBe(0);
  });

  it("exits 2 with one PATH:LINE:COLUMN line per problem", () => {
    const broken = VALID.replace("rate: 5/s", "rat: 5/s").replace(
      "upstream: api }\n  - { name: default",
      "upstream: apx }\n  - { name: default",
    );
    const r = check(broken, { UPSTREAM_URL: "http://127.0.0.1:3000" });
    expect(r.status).toBe(2);
    // A schema problem does not hide the cross-reference one: both in one pass, in file order.
    expect(r.stderr).toBe(
      `${r.file}:8:25: plans.p.global: unknown key "rat"; did you mean "rate"?\n` +
        `${r.file}:10:53: routes[0].upstream: unknown upstream "apx" (did you mean "api"?)\n`,
    );
    expect(r.stdout).toBe("");
  });

  it("prints warnings as FILE:LINE:COLUMN: warning: and still exits 0, counting them", () => {
    const yaml = VALID.replace(
      "plans: { p: { global: { rate: 5/s, burst: 10 } } }",
      "plans: { p: { global: { rate: 5/s, burst: 10 } }, anonymus: {} }",
    );
    const r = check(yaml, { UPSTREAM_URL: "http://127.0.0.1:3000" });
    expect(r.stderr).toBe(
      `${r.file}:8:51: warning: plans: plan "anonymus" is never used: no client has it (did you mean "anonymous", the plan of callers without a credential?)\n`,
    );
    expect(r.stdout).toBe("config OK: 2 routes, 2 plans, 2 clients (1 warning)\n");
    expect(r.status).toBe(0);
    // Beside an error, a warning is printed too, in file order, and the exit is 2.
    const both = check(yaml.replace("match: { path: /slow }", "match: { path: /slow, methods: [GTE] }"), {
      UPSTREAM_URL: "http://127.0.0.1:3000",
    });
    expect(both.stderr).toBe(
      `${both.file}:8:51: warning: plans: plan "anonymus" is never used: no client has it (did you mean "anonymous", the plan of callers without a credential?)\n` +
        `${both.file}:10:51: routes[0].match.methods[0]: unknown method "GTE" (did you mean "GET"?)\n`,
    );
    expect(both.status).toBe(2);
  });

  it("passes the minimal file docs/configuration.md opens with", () => {
    const page = readFileSync(new URL("../../docs/configuration.md", import.meta.url), "utf8");
    const example = /```yaml\n([\s\S]*?)```/.exec(page)![1]!;
    const r = check(example);
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("config OK: 1 route, 0 plans, 0 clients\n");
    expect(r.status).toBe(0);
  });

  it("names a missing environment variable", () => {
    const r = check(VALID);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(":6:19: environment variable UPSTREAM_URL is not set");
  });

  it("reports a missing file and a bad flag", () => {
    const missing = spawnSync(process.execPath, [CLI, "--check", "--config", "/nonexistent/gw.yaml"], {
      encoding: "utf8",
    });
    expect(missing.status).toBe(2);
    expect(missing.stderr).toBe("/nonexistent/gw.yaml:1:1: cannot read the config: no such file\n");
    const bad = spawnSync(process.execPath, [CLI, "--bogus"], { encoding: "utf8" });
    expect(bad.status).toBe(64);
    expect(bad.stderr).toContain("usage: tollgate");
  });

  it("checks the shipped config/gateway.yaml", () => {
    const r = spawnSync(process.execPath, [CLI, "--check", "--config", "config/gateway.yaml"], {
      encoding: "utf8",
    });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
  });
});

describe("signals", () => {
  let upstream: TestUpstream;
  beforeAll(async () => {
    upstream = await startUpstream();
    upstream.handle = (req, res) => {
      const delay = req.url === "/slow" ? 1500 : 0;
      setTimeout(() => res.end("done"), delay);
    };
  });
  afterAll(async () => {
    await upstream.close();
  });

  it("SIGTERM lets a 1.5 s request finish, refuses new connections, exits 0 within the grace", async () => {
    const gw = await spawnGateway(VALID, { UPSTREAM_URL: upstream.url });
    const inFlight = send(gw.url, { path: "/slow", headers: { "x-api-key": "k1" } });
    await new Promise((r) => setTimeout(r, 200));
    const signalled = performance.now();
    gw.child.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 200));
    const refused = await new Promise<string>((resolve) => {
      const port = new URL(gw.url).port;
      const req = request(
        { host: "127.0.0.1", port, path: "/", agent: false, headers: { "x-api-key": "k1" } },
        () => resolve("answered"),
      );
      req.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "error"));
      req.end();
    });
    expect(refused).toBe("ECONNREFUSED");
    const reply = await inFlight;
    expect(reply.status).toBe(200);
    expect(reply.body).toBe("done");
    const code = await gw.exited;
    expect(code).toBe(0);
    expect(performance.now() - signalled).toBeLessThan(3000);
  });
});
