// Conformance, integration and e2e tests start their own Redis servers: fail early, with the fix,
// when redis-server is missing, rather than once per file with a spawn error.
import { spawnSync } from "node:child_process";

export default function setup(): void {
  const redis = spawnSync("redis-server", ["--version"], { encoding: "utf8" });
  if (redis.error) {
    throw new Error(
      "redis-server is not on PATH: the tests start their own Redis servers (apt-get install redis-server)",
    );
  }
}
