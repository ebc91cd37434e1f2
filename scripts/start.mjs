// `npm start`: build when dist/ is missing or older than src/, start the bundled demo upstream
// when UPSTREAM_URL is unset, then run the gateway on config/gateway.yaml.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { startDemoUpstream } from "./demo-upstream.mjs";

const root = new URL("..", import.meta.url).pathname;

function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

const cli = join(root, "dist/cli.js");
if (!existsSync(cli) || newestMtime(join(root, "src")) > statSync(cli).mtimeMs) {
  console.log("building tollgate (npm run build)...");
  const built = spawnSync("npm", ["run", "build"], { cwd: root, stdio: "inherit" });
  if (built.status !== 0) process.exit(built.status ?? 1);
}

const env = { ...process.env };
let upstream;
if (!env.UPSTREAM_URL) {
  const port = Number(env.DEMO_UPSTREAM_PORT || 3000);
  try {
    upstream = await startDemoUpstream(port);
    env.UPSTREAM_URL = `http://127.0.0.1:${port}`;
    console.log(`demo upstream listening on ${env.UPSTREAM_URL} (set UPSTREAM_URL to use your own API)`);
  } catch (err) {
    console.error(
      `cannot start the demo upstream on 127.0.0.1:${port} (${err.message}); set UPSTREAM_URL to your API`,
    );
    process.exit(1);
  }
}

const listen = env.TOLLGATE_LISTEN ?? "127.0.0.1:8080";
const adminListen = env.TOLLGATE_ADMIN_LISTEN ?? "127.0.0.1:9090";
const child = spawn(
  process.execPath,
  [cli, "--config", env.TOLLGATE_CONFIG ?? join(root, "config/gateway.yaml")],
  {
    cwd: root,
    env,
    stdio: ["ignore", "pipe", "inherit"],
  },
);

// Pass the gateway's log lines through; once it says it listens, show how to try it.
let hinted = false;
createInterface({ input: child.stdout }).on("line", (line) => {
  process.stdout.write(`${line}\n`);
  if (!hinted && line.includes('"msg":"tollgate listening"')) {
    hinted = true;
    console.log(`
tollgate is listening on http://${listen} (admin: http://${adminListen})
Try it: the demo free plan has a burst of 10 (refilled at 1/s), so the 11th request in a row gets a 429:

  for i in $(seq 1 12); do curl -s -o /dev/null -D - -H 'x-api-key: demo-free-key' http://${listen}/v1/hello | grep -iE '^(HTTP|ratelimit|retry-after)'; echo; done

Metrics: curl http://${adminListen}/metrics    Stop: Ctrl-C
`);
  }
});

const forward = (signal) => child.kill(signal);
process.on("SIGINT", forward);
process.on("SIGTERM", forward);
child.on("exit", (code) => {
  upstream?.close();
  process.exit(code ?? 0);
});

// Under a process manager `npm start` is stopped by signalling npm, which signals the shell it
// ran this script in; Debian's sh does not pass the signal on, and this process, the gateway and
// the demo upstream would be left holding their ports. So the parent going away stops all three,
// as SIGTERM does.
const parent = process.ppid;
const parentWatch = setInterval(() => {
  let gone = process.ppid !== parent;
  if (!gone) {
    try {
      process.kill(parent, 0);
    } catch {
      gone = true;
    }
  }
  if (gone) {
    clearInterval(parentWatch);
    forward("SIGTERM");
  }
}, 250);
parentWatch.unref();
