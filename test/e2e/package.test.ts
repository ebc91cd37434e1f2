// What `npm install` of tollgate gives a newcomer: scripts/check-package.mjs packs a fresh copy
// of the project and installs the tarball in an empty project (the bin, an ESM import, a
// CommonJS require, the types, the three entries, and "tollgate" loading none of the gateway's
// dependencies). The quick variant runs here (about 15 s: this checkout's node_modules instead of
// `npm ci`, its dist/ just built by the test setup instead of the prepack build, no git install,
// npm's cache first and the registry only for what the cache lacks).
// `npm run check:package` runs the whole of it.
import { execFile } from "node:child_process";
import { describe, expect, it } from "vitest";

interface Figures {
  tarballBytes: number;
  fileCount: number;
  dependencyPackages: number;
  requireWarning: boolean;
  tscMisspelling: string;
  libraryPackages: string[];
}

function checkPackage(): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["scripts/check-package.mjs", "--reuse-node-modules", "--reuse-dist", "--skip-git", "--json"],
      { timeout: 110_000, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

describe("the npm package", () => {
  it("packs with dist/, installs from the tarball, and works as bin, ESM, CommonJS and types", async () => {
    const { code, stdout, stderr } = await checkPackage();
    expect(code, stderr).toBe(0);
    const figures = JSON.parse(stdout.trim().split("\n").at(-1)!) as Figures;
    expect(figures.fileCount).toBeGreaterThan(50);
    expect(figures.tarballBytes).toBeLessThan(1024 * 1024);
    expect(figures.requireWarning).toBe(false);
    expect(figures.tscMisspelling).toContain("'burts' does not exist in type 'LimitDefinition'");
    expect(figures.libraryPackages).toContain("ioredis");
    const gatewayOnly = ["pino", "prom-client", "undici"];
    expect(figures.libraryPackages.filter((name) => gatewayOnly.includes(name))).toEqual([]);
  }, 120_000);
});

describe("the package's entries, by name (dist, built by the test setup)", () => {
  it('"tollgate" is the limiter, "tollgate/gateway" the gateway, "tollgate/client" the client', async () => {
    // Resolved by name through package.json's exports at run time; typed loosely, so that type
    // checking the tests never depends on a built dist/.
    const byName = (name: string): Promise<Record<string, unknown>> => import(name);
    const client = await byName("tollgate/client");
    expect(typeof client.fetchWithRetry).toBe("function");
    const root = await byName("tollgate");
    expect(typeof root.createLimiter).toBe("function");
    expect("Gateway" in root).toBe(false);
    const gateway = await byName("tollgate/gateway");
    expect(typeof (gateway.Gateway as { start?: unknown }).start).toBe("function");
  });
});
