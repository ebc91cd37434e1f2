#!/usr/bin/env node
// The command line: flags, --check, signals. The gateway itself lives in gateway/.
import { readFileSync } from "node:fs";
import { compileRuntime } from "./config/compile.js";
import { loadConfigFile } from "./config/load.js";
import { formatProblem } from "./config/problems.js";
import { Gateway } from "./gateway/gateway.js";
import { exitOnStartError, isWorker, runPrimary, runWorker, workerCount } from "./gateway/workers.js";

const USAGE = `usage: tollgate [--config PATH] [--check]

  --config PATH   the YAML config (default: $TOLLGATE_CONFIG, else config/gateway.yaml)
  --check         validate the config and exit: 0 when valid (warnings printed, and counted
                  in the summary), 2 when not, with one FILE:LINE:COLUMN line per problem
  --version       print the version
  --help          this text
`;

interface Args {
  config: string;
  check: boolean;
}

function parseArgs(argv: readonly string[]): Args | { exit: number; message: string } {
  let config = process.env.TOLLGATE_CONFIG || "config/gateway.yaml";
  let check = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--check") check = true;
    else if (arg === "--config" || arg === "-c") {
      const value = argv[++i];
      if (!value) return { exit: 64, message: `--config needs a path\n\n${USAGE}` };
      config = value;
    } else if (arg.startsWith("--config=")) config = arg.slice("--config=".length);
    else if (arg === "--help" || arg === "-h") return { exit: 0, message: USAGE };
    else if (arg === "--version") {
      const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
        version: string;
      };
      return { exit: 0, message: `tollgate ${pkg.version}\n` };
    } else return { exit: 64, message: `unknown argument "${arg}"\n\n${USAGE}` };
  }
  return { config, check };
}

async function check(file: string): Promise<number> {
  const loaded = await loadConfigFile(file, process.env);
  // Errors and warnings together, in file order: every problem in one pass.
  const all = [...(loaded.ok ? [] : loaded.problems), ...loaded.warnings].sort(
    (a, b) => a.line - b.line || a.column - b.column,
  );
  for (const p of all) process.stderr.write(`${formatProblem(p)}\n`);
  if (!loaded.ok) return 2;
  const rt = compileRuntime(loaded.config, {
    file,
    version: loaded.version,
    jwt: loaded.jwt,
    upstreamTls: loaded.upstreamTls,
  });
  const n = (count: number, word: string) => `${count} ${word}${count === 1 ? "" : "s"}`;
  const warned = loaded.warnings.length ? ` (${n(loaded.warnings.length, "warning")})` : "";
  process.stdout.write(
    `config OK: ${n(rt.routeList.length, "route")}, ${n(rt.plans.size, "plan")}, ${n(loaded.config.clients.length, "client")}${warned}\n`,
  );
  return 0;
}

async function run(file: string): Promise<void> {
  let gateway: Gateway;
  try {
    gateway = await Gateway.start({ configFile: file });
  } catch (err) {
    exitOnStartError(err);
  }
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    gateway.logger.info({ signal }, "stopping: no new connections, finishing requests in flight");
    gateway.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        gateway.logger.error({ err }, "error while stopping");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGHUP", () => void gateway.reload("signal"));
}

const args = parseArgs(process.argv.slice(2));
if ("exit" in args) {
  (args.exit === 0 ? process.stdout : process.stderr).write(args.message);
  process.exit(args.exit);
} else if (args.check) {
  process.exitCode = await check(args.config);
} else if (isWorker) {
  await runWorker(args.config);
} else {
  // workers > 1: this process becomes the primary of a node:cluster.
  const loaded = await loadConfigFile(args.config, process.env);
  const count = loaded.ok ? workerCount(loaded.config.workers) : 1;
  if (count > 1) await runPrimary(args.config, count);
  else await run(args.config);
}
