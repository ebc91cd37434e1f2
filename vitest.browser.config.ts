import { defineConfig } from "vitest/config";

// `npm run test:console`: the console driven by a real headless Chromium (Debian's chromium,
// through puppeteer-core: nothing downloads a browser). Apart from `npm test`, as browser runs
// are: it needs the chromium package, and CONSOLE_SCREENSHOTS=1 makes it write docs/console/.
export default defineConfig({
  test: {
    include: ["test/browser/**/*.test.ts"],
    globalSetup: ["test/support/redis-server-setup.ts", "test/support/build-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    fileParallelism: false,
  },
});
