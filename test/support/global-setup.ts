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
  execFileSync("npm", ["run", "-s", "build"], { stdio: "inherit" });
}
