import { MemoryStore } from "../../src/limits/stores/memory.js";
import { storeConformance } from "./suite.js";

storeConformance("MemoryStore", () => {
  let now = 1_700_000_000_000;
  // Several "instances" of the memory store must share state to model one process.
  const shared = new MemoryStore({ now: () => now, sweepIntervalMs: 0 });
  return {
    store: async () => shared,
    pttl: async (key) => shared.ttlMs(key),
    advance: async (ms) => {
      now += ms;
    },
  };
});
