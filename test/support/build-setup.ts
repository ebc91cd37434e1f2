// Builds dist/ once before the e2e tests: they run the real CLI as a child process, exactly as
// operators do. (Unit, conformance and integration tests run src/ and need no build.)
import { execFileSync } from "node:child_process";

export default function setup(): void {
  // TOLLGATE_SKIP_BUILD=1: running e2e tests against the dist/ there is while the tree is mid-change.
  if (process.env.TOLLGATE_SKIP_BUILD !== "1")
    execFileSync("npm", ["run", "-s", "build"], { stdio: "inherit" });
}
