import { defineConfig, type TestProjectInlineConfiguration } from "vitest/config";

// The slow projects: conformance and integration tests start their own redis-servers, e2e tests
// spawn the built CLI and real redis-servers. They are slow by nature, not flaky.
function slow(
  name: string,
  groupOrder: number,
  globalSetup: string[],
  filesAtOnce = 1,
): TestProjectInlineConfiguration {
  return {
    extends: true,
    test: {
      name,
      include: [`test/${name}/**/*.test.ts`],
      globalSetup,
      // After the unit tests, and each in a group of its own: projects of one group run at the
      // same time. The conformance files run one at a time: they bound latencies against a
      // paused Redis (answered within the timeout) and must not share the 2 cores with anything.
      // Integration and e2e files run two at a time: most of their time is waiting (a keep-alive
      // outliving 5 s, a breaker's cooldown, a spawned gateway starting), and the latencies they
      // bound are loose enough to hold beside one other file (checked by running the suite
      // repeatedly, beside a CPU burner too). The suite took 5 minutes one file at a time.
      sequence: { groupOrder },
      fileParallelism: filesAtOnce > 1,
      maxWorkers: filesAtOnce,
      // One worker runs the project's files in turn with its modules loaded once, instead of a
      // fresh process importing src/ and the test helpers again for every file (about 30 s of the
      // suite). Each file closes what it started in its own hooks. One that leaked a server, a
      // timer or a redis-server would now run on into the files after it: a failure that follows
      // a file around when the order changes is where to look.
      isolate: false,
    },
  };
}

const redisServer = "test/support/redis-server-setup.ts";

// Unit files that watch what a process loads (a resolve hook sees each package the first time it
// is imported): each runs in a process of its own, where nothing was imported before it.
const FRESH_PROCESS = ["test/unit/library-entry.test.ts"];

// `npm test` (`vitest run`) runs every project, `--project unit` one of them. The groups run one
// after the other: all the global setups first (the build included), then the unit tests, then
// conformance, integration and e2e.
export default defineConfig({
  test: {
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          exclude: [...FRESH_PROCESS],
          // Pure functions: no build, no redis-server, no wall clock, so the files run in parallel,
          // two workers each importing the modules once for all their files (no vi.mock; fake
          // timers and spies are restored after each test): 15 s instead of 60.
          sequence: { groupOrder: 0 },
          isolate: false,
        },
      },
      {
        extends: true,
        test: { name: "unit-fresh", include: [...FRESH_PROCESS], sequence: { groupOrder: 0 } },
      },
      slow("conformance", 1, [redisServer]),
      slow("integration", 2, [redisServer], 2),
      slow("e2e", 3, [redisServer, "test/support/build-setup.ts"], 2),
    ],
  },
});
