// Every shipped example config passes `tollgate --check`, with only the defaults its
// ${VAR:-default} placeholders carry (no environment prepared for it).
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { CLI } from "../support/gateway.js";

const dir = new URL("../../config/examples/", import.meta.url).pathname;
const files = readdirSync(dir).filter((f) => f.endsWith(".yaml"));

describe("config/examples", () => {
  it("holds the three documented examples", () => {
    expect(files.sort()).toEqual(["ai-endpoints.yaml", "login-protection.yaml", "multi-tenant-saas.yaml"]);
  });

  it.each([...files, "../gateway.yaml"])("tollgate --check %s", (file) => {
    const r = spawnSync(process.execPath, [CLI, "--check", "--config", dir + file], {
      env: { PATH: process.env.PATH ?? "" },
      encoding: "utf8",
    });
    expect(r.stderr + r.stdout).toMatch(/^config OK: \d+ routes/);
    expect(r.status).toBe(0);
  });
});
