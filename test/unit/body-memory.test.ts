// What AI bodies being read may hold: in all, per caller, and a reserve kept for callers within
// their sure share (proxy/body-memory.ts).
import { describe, expect, it } from "vitest";
import { BodyMemory } from "../../src/proxy/body-memory.js";

const MiB = 1024 * 1024;

describe("BodyMemory", () => {
  it("bounds one caller, and all callers together", () => {
    const memory = new BodyMemory(256 * MiB, 64 * MiB);
    expect(memory.take("a", 64 * MiB)).toBeUndefined();
    expect(memory.take("a", 1)).toBe("caller");
    memory.give("a", 64 * MiB);
    expect(memory.size).toBe(0);
  });

  it("keeps a reserve free: four callers at their 64 MiB no longer hold every byte", () => {
    const memory = new BodyMemory(256 * MiB, 64 * MiB);
    // Each of four floods takes 4 MB bodies until it is refused.
    const held = ["a", "b", "c", "d"].map((caller) => {
      let n = 0;
      while (memory.take(caller, 8 * MiB) === undefined) n++;
      return n * 8 * MiB;
    });
    // Past their sure 16 MiB they grew only while 64 MiB stayed free: what is left is more than a
    // bystander's sure share (before, the four held all 256 MiB).
    expect(256 * MiB - held.reduce((x, y) => x + y, 0)).toBeGreaterThanOrEqual(16 * MiB);
    // A caller within its sure share still gets its body.
    expect(memory.take("bystander", 8 * MiB)).toBeUndefined();
    expect(memory.take("bystander", 8 * MiB)).toBeUndefined();
    // Past its sure share while the reserve is short, it is the caller's refusal, not the gateway's.
    expect(memory.take("bystander", 8 * MiB)).toBe("caller");
  });

  it("lets a lone caller use its whole bound while the pool is free", () => {
    const memory = new BodyMemory(256 * MiB, 64 * MiB);
    let n = 0;
    while (memory.take("alone", 8 * MiB) === undefined) n++;
    expect(n * 8 * MiB).toBe(64 * MiB);
  });
});
