import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // e2e tests spawn the built CLI and real redis-servers; they are slow by nature, not flaky.
    testTimeout: 30_000,
    hookTimeout: 60_000,
    globalSetup: ["test/support/global-setup.ts"],
    pool: "forks",
    // Files run one at a time: several tests bound latencies (a paused Redis answered within the
    // timeout, a burst decided within one refill interval) and must not share the 2 cores with
    // a 1000-request load test that happens to run alongside.
    fileParallelism: false,
  },
});
