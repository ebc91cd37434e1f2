// Config warnings (a plan nothing reaches) do not stop the gateway: it logs them, at warn level,
// when it starts and when a reload applies a file that has them.
import { writeFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";

const YAML = `listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
store: { url: "memory://" }
upstreams: { api: http://127.0.0.1:9 }
plans:
  anonymus: { global: { rate: 1/s, burst: 5 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`;

describe("config warnings in the gateway's log", () => {
  let gw: InProcessGateway | undefined;
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });

  it("are logged at warn level at start and on a reload that applies them", async () => {
    gw = await startGateway(YAML);
    const file = gw.gateway.currentRuntime.file;
    const warned = () => gw!.logs.lines.filter((l) => l.level === 40 && Array.isArray(l.warnings));
    expect(warned().map((l) => [l.msg, l.warnings])).toEqual([
      [
        "config loaded with warnings",
        [
          `${file}:6:3: warning: plans: plan "anonymus" is never used: no client has it (did you mean "anonymous", the plan of callers without a credential?)`,
        ],
      ],
    ]);
    writeFileSync(file, YAML.replace("anonymus:", "partner:"));
    const result = await gw.gateway.reload("signal");
    expect(result.ok).toBe(true);
    expect(warned().map((l) => [l.msg, l.trigger, l.warnings])).toEqual([
      ["config loaded with warnings", undefined, expect.any(Array)],
      [
        "config reloaded with warnings",
        "signal",
        [`${file}:6:3: warning: plans: plan "partner" is never used: no client has it`],
      ],
    ]);
  });
});
