// The README's first minutes: `npm start` (scripts/start.mjs) runs the gateway on
// config/gateway.yaml with the memory store in front of the demo upstream, and the curl loop
// it prints shows ten 200s and then a 429.
import { spawn } from "node:child_process";
import { connect } from "node:net";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { send } from "../support/http.js";
import { freePort } from "../support/ports.js";

describe("npm start", () => {
  it("serves the demo with limit headers, then a 429, and stops on SIGTERM", async () => {
    const [listen, admin, demo] = [await freePort(), await freePort(), await freePort()];
    const child = spawn(process.execPath, ["scripts/start.mjs"], {
      env: {
        ...process.env,
        UPSTREAM_URL: "",
        REDIS_URL: "",
        TOLLGATE_LISTEN: `127.0.0.1:${listen}`,
        TOLLGATE_ADMIN_LISTEN: `127.0.0.1:${admin}`,
        DEMO_UPSTREAM_PORT: String(demo),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    const output: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no "tollgate is listening" within 20 s:\n${output.join("\n")}`)),
        20_000,
      );
      createInterface({ input: child.stdout! }).on("line", (line) => {
        output.push(line);
        if (line.startsWith("tollgate is listening")) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    expect(output.join("\n")).toContain(`http://127.0.0.1:${listen}/v1/hello`);

    const statuses: number[] = [];
    let first: Awaited<ReturnType<typeof send>> | undefined;
    for (let i = 0; i < 11; i++) {
      const r = await send(`http://127.0.0.1:${listen}`, {
        path: "/v1/hello",
        headers: { "x-api-key": "demo-free-key" },
      });
      first ??= r;
      statuses.push(r.status);
    }
    expect(statuses).toEqual([...Array(10).fill(200), 429]);
    expect(first!.headers["ratelimit-remaining"]).toBe("9");
    expect(first!.json<{ path: string }>().path).toBe("/v1/hello");

    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  });

  // Issue 20.8: SIGTERM to the npm process (what a process manager sends) left start.mjs, the
  // gateway and the demo upstream running and holding their ports.
  it("under npm, SIGTERM to npm frees every port it opened", async () => {
    const ports = [await freePort(), await freePort(), await freePort()];
    const [listen, admin, demo] = ports;
    const npm = spawn("npm", ["start", "--silent"], {
      env: {
        ...process.env,
        UPSTREAM_URL: "",
        REDIS_URL: "",
        TOLLGATE_LISTEN: `127.0.0.1:${listen}`,
        TOLLGATE_ADMIN_LISTEN: `127.0.0.1:${admin}`,
        DEMO_UPSTREAM_PORT: String(demo),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("npm start did not listen within 30 s")), 30_000);
      createInterface({ input: npm.stdout! }).on("line", (line) => {
        if (line.startsWith("tollgate is listening")) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    const open = (port: number) =>
      new Promise<boolean>((resolve) => {
        const socket = connect(port, "127.0.0.1");
        socket.once("connect", () => {
          socket.destroy();
          resolve(true);
        });
        socket.once("error", () => resolve(false));
      });
    for (const port of ports) expect(await open(port!)).toBe(true);
    npm.kill("SIGTERM");
    const until = Date.now() + 10_000;
    let stillOpen = ports;
    while (stillOpen.length && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 200));
      const checks = await Promise.all(stillOpen.map((p) => open(p!)));
      stillOpen = stillOpen.filter((_, i) => checks[i]);
    }
    expect(stillOpen).toEqual([]);
  }, 60_000);
});
