// Every shipped example config passes `tollgate --check`, with only the defaults its
// ${VAR:-default} placeholders carry (no environment prepared for it).
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { CLI } from "../support/gateway.js";

const dir = new URL("../../config/examples/", import.meta.url).pathname;
const files = readdirSync(dir).filter((f) => f.endsWith(".yaml"));

/** The provider recipes (docs/providers.md) need their secrets: no default stands in for a key. */
const SECRETS: Record<string, string[]> = {
  "openai.yaml": ["ADMIN_TOKEN", "OPENAI_API_KEY"],
  "anthropic.yaml": ["ADMIN_TOKEN", "ANTHROPIC_API_KEY"],
  "self-hosted.yaml": ["ADMIN_TOKEN"],
};

function check(file: string, env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [CLI, "--check", "--config", dir + file], {
    env: { PATH: process.env.PATH ?? "", ...env },
    encoding: "utf8",
  });
}

describe("config/examples", () => {
  it("holds the documented examples and the provider recipes", () => {
    expect(files.sort()).toEqual([
      "ai-endpoints.yaml",
      "anthropic.yaml",
      "login-protection.yaml",
      "multi-tenant-saas.yaml",
      "openai.yaml",
      "self-hosted.yaml",
    ]);
  });

  it.each([...files, "../gateway.yaml"])("tollgate --check %s", (file) => {
    const secrets = SECRETS[file] ?? [];
    const r = check(file, Object.fromEntries(secrets.map((name) => [name, `test-${name.toLowerCase()}`])));
    expect(r.stderr + r.stdout).toMatch(/^config OK: \d+ routes?/);
    expect(r.status).toBe(0);
    if (secrets.length === 0) return;
    // Without them, --check names each one at its place and refuses the file.
    const bare = check(file);
    expect(bare.status).toBe(2);
    for (const name of secrets) expect(bare.stderr).toContain(`environment variable ${name} is not set`);
  });
});
