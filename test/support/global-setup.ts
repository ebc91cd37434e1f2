// Builds dist/ once before the suite: e2e tests run the real CLI as a child process, exactly
// as operators do. Also fails early, with the fix, when redis-server is missing.
import { execFileSync, spawnSync } from "node:child_process";

export default function setup(): void {
  const redis = spawnSync("redis-server", ["--version"], { encoding: "utf8" });
  if (redis.error) {
    throw new Error(
      "redis-server is not on PATH: the tests start their own Redis servers (apt-get install redis-server)",
    );
  }
  // TOLLGATE_SKIP_BUILD=1: running tests that never start the CLI while the tree is mid-change.
  if (process.env.TOLLGATE_SKIP_BUILD !== "1")
    execFileSync("npm", ["run", "-s", "build"], { stdio: "inherit" });
}
