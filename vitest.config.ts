import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // e2e tests spawn the built CLI and real redis-servers; they are slow by nature, not flaky.
    testTimeout: 30_000,
    hookTimeout: 60_000,
    globalSetup: ["test/support/global-setup.ts"],
    pool: "forks",
  },
});
